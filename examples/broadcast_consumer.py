"""A broadcasting consumer: every consumer of the group receives every message.

Offsets are kept in a local file (~/.rocketpy_offsets/{ip}@{instance_name}/{group}/offsets.json), so a
restart resumes where this instance stopped. Run two of them with different -i to see both get all.

    python examples/broadcast_consumer.py -n 127.0.0.1:9876 -t TopicTest -i first -c 10
"""

import argparse
import asyncio

from rocketpy import ConsumeFromWhere, ConsumeStatus, MessageModel, PushConsumer


async def main(args: argparse.Namespace) -> None:
    received = 0
    done = asyncio.Event()

    async def on_messages(msgs, context):
        nonlocal received
        for msg in msgs:
            print(
                f"[{args.instance}] received queue={msg.queue_id} offset={msg.queue_offset} "
                f"body={msg.body.decode(errors='replace')}",
                flush=True,
            )
        received += len(msgs)
        if received >= args.count:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        args.group,
        namesrv_addr=args.namesrv,
        message_model=MessageModel.BROADCASTING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        instance_name=args.instance,
    )
    consumer.subscribe(args.topic, "*")
    consumer.register_listener(on_messages)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), args.timeout)
    except TimeoutError:
        print(f"timeout after {args.timeout} s")
    finally:
        await consumer.shutdown()
    print(f"done: [{args.instance}] received {received} messages")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_broadcast_group")
    parser.add_argument("-i", "--instance", default="DEFAULT", help="instance name (one offsets file each)")
    parser.add_argument("-c", "--count", type=int, default=10, help="stop after this many messages")
    parser.add_argument("--timeout", type=float, default=30.0, help="stop after this many seconds")
    asyncio.run(main(parser.parse_args()))
