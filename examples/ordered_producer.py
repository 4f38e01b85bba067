"""Send ordered messages: every step of one order goes to the same queue (order id -> queue).

python examples/ordered_producer.py -n 127.0.0.1:9876 -t OrderTopic -o 10
"""

import argparse
import asyncio

from rocketpy import Message, Producer

STEPS = ["created", "paid", "shipped", "done"]


def select_by_order_id(queues, msg, order_id):
    """The selector: queues arrive sorted by (broker_name, queue_id); one order id -> one queue."""
    return queues[order_id % len(queues)]


async def main(args: argparse.Namespace) -> None:
    producer = Producer(args.group, namesrv_addr=args.namesrv)
    await producer.start()
    try:
        for step in STEPS:
            for order_id in range(args.orders):
                msg = Message(
                    args.topic, f"order-{order_id}:{step}".encode(), tags=step, keys=f"order-{order_id}"
                )
                r = await producer.send(msg, selector=select_by_order_id, arg=order_id)
                print(f"sent order-{order_id}:{step} -> queue {r.message_queue.queue_id}")
    finally:
        await producer.shutdown()
    print(f"done: {args.orders * len(STEPS)} ordered messages sent")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="OrderTopic")
    parser.add_argument("-g", "--group", default="example_order_producer_group")
    parser.add_argument("-o", "--orders", type=int, default=10, help="number of orders")
    asyncio.run(main(parser.parse_args()))
