"""The blocking API for consumers: a plain function listener, no asyncio in your program.

python examples/blocking_consumer.py -n 127.0.0.1:9876 -t TopicTest -c 10
"""

import argparse
import sys
import threading

from rocketpy.sync import ConsumeFromWhere, ConsumeStatus, PushConsumer


def main(args: argparse.Namespace) -> None:
    received = 0
    lock = threading.Lock()
    done = threading.Event()

    def on_messages(msgs, context):
        nonlocal received
        lines = "".join(
            f"received: queue={msg.queue_id} offset={msg.queue_offset} body={msg.body.decode()}\n"
            for msg in msgs
        )
        with lock:  # one write per batch and a shared counter: listener threads run concurrently
            sys.stdout.write(lines)
            sys.stdout.flush()
            received += len(msgs)
            if received >= args.count:
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        args.group, namesrv_addr=args.namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(args.topic, "*")
    consumer.register_listener(on_messages)
    consumer.start()
    try:
        if not done.wait(args.timeout):
            print(f"timeout after {args.timeout} s")
    finally:
        consumer.shutdown()
    print(f"done: received {received} messages with the blocking API")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_blocking_consumer_group")
    parser.add_argument("-c", "--count", type=int, default=10, help="stop after this many messages")
    parser.add_argument("--timeout", type=float, default=30.0, help="stop after this many seconds")
    main(parser.parse_args())
