"""Consume ordered messages: one message at a time per queue, in queue order (orderly listener).

Checks that each order's steps arrive as created -> paid -> shipped -> done.

    python examples/ordered_consumer.py -n 127.0.0.1:9876 -t OrderTopic -o 10
"""

import argparse
import asyncio

from rocketpy import ConsumeFromWhere, ConsumeOrderlyStatus, PushConsumer

STEPS = ["created", "paid", "shipped", "done"]


async def main(args: argparse.Namespace) -> None:
    progress: dict[str, int] = {}
    errors = 0
    expected = args.orders * len(STEPS)
    done = asyncio.Event()

    async def on_messages(msgs, context):
        """An ``async def`` listener runs on the event loop; orderly: one queue never runs twice at once."""
        nonlocal errors
        for msg in msgs:
            order, step = msg.body.decode().split(":")
            if STEPS.index(step) != progress.get(order, 0):
                errors += 1
                print(f"OUT OF ORDER: {order} {step}")
            progress[order] = STEPS.index(step) + 1
            print(f"queue {context.message_queue.queue_id}: {order} {step}", flush=True)
        if sum(progress.values()) >= expected:
            done.set()
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(
        args.group, namesrv_addr=args.namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(args.topic, "*")
    consumer.register_listener(on_messages, orderly=True)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), args.timeout)
    except TimeoutError:
        print(f"timeout after {args.timeout} s")
    finally:
        await consumer.shutdown()
    print(f"done: {sum(progress.values())} messages of {len(progress)} orders, {errors} out of order")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="OrderTopic")
    parser.add_argument("-g", "--group", default="example_order_consumer_group")
    parser.add_argument("-o", "--orders", type=int, default=10, help="number of orders expected")
    parser.add_argument("--timeout", type=float, default=30.0, help="stop after this many seconds")
    asyncio.run(main(parser.parse_args()))
