"""Filter by message properties with SQL92: the broker ships only the messages that match.

Sends ``-c`` messages with properties ``n`` (0, 1, 2, ...) and ``color`` (red/blue), then consumes
them with ``MessageSelector.by_sql`` (default: ``n >= 5 AND color = 'red'``). The broker needs
``enablePropertyFilter=true``; a bad expression fails at ``by_sql`` with the column.

python examples/sql_filter_consumer.py -n 127.0.0.1:9876 -t SqlTopic -c 20
"""

import argparse
import asyncio
import time

from rocketpy import ConsumeFromWhere, LitePullConsumer, Message, MessageSelector, Producer


async def produce(args: argparse.Namespace) -> None:
    producer = Producer(args.group + "_producer", namesrv_addr=args.namesrv)
    await producer.start()
    try:
        for i in range(args.count):
            props = {"n": str(i), "color": "red" if i % 2 else "blue"}
            await producer.send(Message(args.topic, f"message {i}".encode(), tags="TagA", properties=props))
    finally:
        await producer.shutdown()
    print(f"sent {args.count} messages", flush=True)


async def main(args: argparse.Namespace) -> None:
    selector = MessageSelector.by_sql(args.sql)
    await produce(args)
    consumer = LitePullConsumer(
        args.group, namesrv_addr=args.namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(args.topic, selector)
    await consumer.start()
    received = 0
    deadline = time.monotonic() + args.timeout
    try:
        while time.monotonic() < deadline and (args.expect is None or received < args.expect):
            msgs = await consumer.poll(timeout=1.0)
            for msg in msgs:
                print(f"matched: n={msg.properties['n']} color={msg.properties['color']}", flush=True)
            received += len(msgs)
            if not msgs and args.expect is None and received:
                break
    finally:
        await consumer.shutdown()
    print(f"done: {received} of {args.count} messages matched {args.sql!r}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="SqlTopic")
    parser.add_argument("-g", "--group", default="example_sql_group")
    parser.add_argument("-c", "--count", type=int, default=20, help="messages to send")
    parser.add_argument("--sql", default="n >= 5 AND color = 'red'", help="the SQL92 expression")
    parser.add_argument("--expect", type=int, default=None, help="stop after this many matches")
    parser.add_argument("--timeout", type=float, default=30.0, help="stop after this many seconds")
    asyncio.run(main(parser.parse_args()))
