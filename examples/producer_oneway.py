"""Fire-and-forget sends (no acknowledgement; for logs and metrics where a rare loss is fine).

python examples/producer_oneway.py -n 127.0.0.1:9876 -t TopicTest -c 10
"""

import argparse
import asyncio

from rocketpy import Message, Producer


async def main(args: argparse.Namespace) -> None:
    producer = Producer(args.group, namesrv_addr=args.namesrv)
    await producer.start()
    try:
        for i in range(args.count):
            await producer.send_oneway(Message(args.topic, f"oneway {i}".encode(), tags="TagA"))
            print(f"sent oneway {i}")
    finally:
        await producer.shutdown()
    print(f"done: {args.count} oneway messages sent to {args.topic}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_oneway_producer_group")
    parser.add_argument("-c", "--count", type=int, default=10, help="messages to send")
    asyncio.run(main(parser.parse_args()))
