"""Poll messages yourself with a lite pull consumer, committing after each processed batch.

python examples/lite_pull_consumer.py -n 127.0.0.1:9876 -t TopicTest -c 10
"""

import argparse
import asyncio

from rocketpy import ConsumeFromWhere, LitePullConsumer


async def main(args: argparse.Namespace) -> None:
    consumer = LitePullConsumer(
        args.group,
        namesrv_addr=args.namesrv,
        auto_commit=False,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(args.topic, "*")
    await consumer.start()
    received = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.timeout
    try:
        while received < args.count and loop.time() < deadline:
            msgs = await consumer.poll(timeout=1.0)
            for msg in msgs:
                print(
                    f"polled: queue={msg.queue_id} offset={msg.queue_offset} "
                    f"body={msg.body.decode(errors='replace')}",
                    flush=True,
                )
            received += len(msgs)
            if msgs:
                await consumer.commit()
    finally:
        await consumer.shutdown()
    print(f"done: polled {received} messages")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_lite_pull_group")
    parser.add_argument("-c", "--count", type=int, default=10, help="stop after this many messages")
    parser.add_argument("--timeout", type=float, default=30.0, help="stop after this many seconds")
    asyncio.run(main(parser.parse_args()))
