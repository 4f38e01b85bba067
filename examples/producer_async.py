"""Send messages without waiting for each one: futures plus a completion callback.

python examples/producer_async.py -n 127.0.0.1:9876 -t TopicTest -c 10
"""

import argparse
import asyncio

from rocketpy import Message, Producer


def on_sent(result, error) -> None:
    """Called once per message (in a worker thread) with exactly one of result / error."""
    if error is not None:
        print(f"callback: send failed: {error}", flush=True)
    else:
        print(f"callback: {result.status.name} msg_id={result.msg_id}", flush=True)


async def main(args: argparse.Namespace) -> None:
    producer = Producer(args.group, namesrv_addr=args.namesrv)
    await producer.start()
    try:
        futures = [
            producer.send_async(Message(args.topic, f"async {i}".encode(), tags="TagA"), callback=on_sent)
            for i in range(args.count)
        ]
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 30)
    finally:
        await producer.shutdown()
    ok = sum(1 for r in results if not isinstance(r, BaseException))
    print(f"done: {ok}/{args.count} async sends acknowledged")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_async_producer_group")
    parser.add_argument("-c", "--count", type=int, default=10, help="messages to send")
    asyncio.run(main(parser.parse_args()))
