"""Send messages one by one and wait for each broker acknowledgement.

python examples/producer_sync.py -n 127.0.0.1:9876 -t TopicTest -c 10
"""

import argparse
import asyncio

from rocketpy import Message, Producer


async def main(args: argparse.Namespace) -> None:
    producer = Producer(args.group, namesrv_addr=args.namesrv)
    await producer.start()
    try:
        for i in range(args.count):
            msg = Message(args.topic, f"Hello RocketMQ {i}".encode(), tags="TagA", keys=f"key-{i}")
            result = await producer.send(msg)
            print(
                f"sent {i}: {result.status.name} msg_id={result.msg_id} "
                f"queue={result.message_queue.queue_id} offset={result.queue_offset}"
            )
    finally:
        await producer.shutdown()
    print(f"done: {args.count} messages sent to {args.topic}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_producer_group")
    parser.add_argument("-c", "--count", type=int, default=10, help="messages to send")
    asyncio.run(main(parser.parse_args()))
