"""Consume a topic with a push consumer until COUNT messages arrived or TIMEOUT seconds passed.

python examples/push_consumer.py -n 127.0.0.1:9876 -t TopicTest -c 10
"""

import argparse
import asyncio
import sys
import threading

from rocketpy import ConsumeFromWhere, ConsumeStatus, PushConsumer


async def main(args: argparse.Namespace) -> None:
    received = 0
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    lock = threading.Lock()

    def on_messages(msgs, context):
        """Runs in the consumer's thread pool (several at once); return CONSUME_SUCCESS to acknowledge."""
        nonlocal received
        lines = "".join(
            f"received: queue={msg.queue_id} offset={msg.queue_offset} tags={msg.tags} "
            f"body={msg.body.decode(errors='replace')}\n"
            for msg in msgs
        )
        with lock:  # one write per batch and a shared counter: listener threads run concurrently
            sys.stdout.write(lines)
            sys.stdout.flush()
            received += len(msgs)
            if received >= args.count:
                loop.call_soon_threadsafe(done.set)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        args.group, namesrv_addr=args.namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(args.topic, args.tags)
    consumer.register_listener(on_messages)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), args.timeout)
    except TimeoutError:
        print(f"timeout after {args.timeout} s")
    finally:
        await consumer.shutdown()
    print(f"done: received {received} messages")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_consumer_group")
    parser.add_argument("-s", "--tags", default="*", help="tag expression, e.g. 'TagA || TagB'")
    parser.add_argument("-c", "--count", type=int, default=10, help="stop after this many messages")
    parser.add_argument("--timeout", type=float, default=30.0, help="stop after this many seconds")
    asyncio.run(main(parser.parse_args()))
