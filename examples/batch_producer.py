"""Send messages in batches, split so that no batch request exceeds 4 MiB.

python examples/batch_producer.py -n 127.0.0.1:9876 -t BatchTopic -c 1000 -b 10240
"""

import argparse
import asyncio

from rocketpy import Message, Producer

SIZE_LIMIT = 4 * 1024 * 1024
PER_MESSAGE_OVERHEAD = 20  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN in the batch encoding


def split_batches(msgs, limit=SIZE_LIMIT):
    """Yield lists of messages whose encoded size stays under ``limit`` (RocketMQ's ListSplitter)."""
    batch, size = [], 0
    for msg in msgs:
        msg_size = len(msg.body) + len(msg.properties_string()) + len(msg.topic) + PER_MESSAGE_OVERHEAD
        if msg_size > limit:
            raise ValueError(f"a single message of {msg_size} bytes exceeds the {limit} byte limit")
        if batch and size + msg_size > limit:
            yield batch
            batch, size = [], 0
        batch.append(msg)
        size += msg_size
    if batch:
        yield batch


async def main(args: argparse.Namespace) -> None:
    producer = Producer(args.group, namesrv_addr=args.namesrv)
    await producer.start()
    body = b"x" * args.body_size
    msgs = [Message(args.topic, body, tags="batch", keys=f"batch-{i}") for i in range(args.count)]
    sent = 0
    try:
        for n, batch in enumerate(split_batches(msgs)):
            results = await producer.send_batch(batch)
            sent += len(results)
            print(
                f"batch {n}: {len(batch)} messages, {sum(len(m.body) for m in batch)} body bytes, "
                f"first queue={results[0].message_queue.queue_id} offset={results[0].queue_offset}"
            )
    finally:
        await producer.shutdown()
    print(f"done: {sent} messages sent in batches")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="BatchTopic")
    parser.add_argument("-g", "--group", default="example_batch_producer_group")
    parser.add_argument("-c", "--count", type=int, default=1000, help="messages to send")
    parser.add_argument("-b", "--body-size", type=int, default=10240, help="body bytes per message")
    asyncio.run(main(parser.parse_args()))
