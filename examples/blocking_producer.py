"""The blocking API: no asyncio in your program (rocketpy.sync runs the loop in a thread).

python examples/blocking_producer.py -n 127.0.0.1:9876 -t TopicTest -c 10
"""

import argparse

from rocketpy.sync import Message, Producer


def main(args: argparse.Namespace) -> None:
    with Producer(args.group, namesrv_addr=args.namesrv) as producer:  # start() ... shutdown()
        for i in range(args.count):
            result = producer.send(Message(args.topic, f"blocking {i}".encode(), tags="TagA"))
            print(
                f"sent {i}: {result.status.name} msg_id={result.msg_id} queue={result.message_queue.queue_id}"
            )
    print(f"done: {args.count} messages sent with the blocking API")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_blocking_producer_group")
    parser.add_argument("-c", "--count", type=int, default=10, help="messages to send")
    main(parser.parse_args())
