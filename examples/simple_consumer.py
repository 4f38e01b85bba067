"""Receive messages by POP with a SimpleConsumer, ack each batch, and keep one invisible longer.

python examples/simple_consumer.py -n 127.0.0.1:9876 -t TopicTest -c 10

No client-side rebalance: the broker hands each receive what the group has not been given yet, so
you may run more of these than the topic has queues. A message not acked within its invisible
duration (``-i`` seconds) is delivered again, with ``reconsume_times`` + 1.
"""

import argparse
import asyncio

from rocketpy import ConsumeFromWhere, SimpleConsumer


async def main(args: argparse.Namespace) -> None:
    consumer = SimpleConsumer(
        args.group,
        namesrv_addr=args.namesrv,
        subscriptions={args.topic: "*"},
        await_duration=2,  # a receive waits up to 2 s when there is nothing (long polling)
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,  # a new group reads the backlog
    )
    await consumer.start()
    acked = extended = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.timeout
    try:
        while acked < args.count and loop.time() < deadline:
            msgs = await consumer.receive(
                max_message_num=min(32, args.count - acked), invisible_duration=args.invisible
            )
            for msg in msgs:
                print(
                    f"received: queue={msg.queue_id} offset={msg.queue_offset} "
                    f"reconsume_times={msg.reconsume_times} body={msg.body.decode(errors='replace')}",
                    flush=True,
                )
            if msgs and not extended:  # the first message needs longer: push its invisible time out
                await consumer.change_invisible_duration(msgs[0], args.invisible * 2)
                extended += 1
                print(f"extended: offset={msgs[0].queue_offset} invisible for {args.invisible * 2} s more")
            if msgs:
                await consumer.ack(msgs)  # one BATCH_ACK_MESSAGE for the batch
                acked += len(msgs)
                print(f"acked {len(msgs)}", flush=True)
    finally:
        await consumer.shutdown()
    print(f"done: received and acked {acked} messages")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_simple_group")
    parser.add_argument("-c", "--count", type=int, default=10, help="stop after this many messages")
    parser.add_argument("-i", "--invisible", type=float, default=30.0, help="invisible duration (s)")
    parser.add_argument("--timeout", type=float, default=30.0, help="stop after this many seconds")
    asyncio.run(main(parser.parse_args()))
