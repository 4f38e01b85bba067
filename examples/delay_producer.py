"""Send messages delivered later: at delay levels, and at a time of your choice.

python examples/delay_producer.py -n 127.0.0.1:9876 -t DelayTopic

A delay level (1..18, default levels 1s 5s 10s 30s 1m ... 2h, the broker's messageDelayLevel) holds
the message in SCHEDULE_TOPIC_XXXX until due; deliver_time_ms (epoch ms) or delay_seconds (RocketMQ 5
timer messages) hold it until that moment. Consumers see it in its topic only then.
"""

import argparse
import asyncio
import time

from rocketpy import Message, Producer


async def main(args: argparse.Namespace) -> None:
    producer = Producer(args.group, namesrv_addr=args.namesrv)
    await producer.start()
    try:
        for level in args.levels:
            r = await producer.send(Message(args.topic, f"level {level}".encode(), delay_level=level))
            print(f"sent delay_level={level}: {r.status.name} msg_id={r.msg_id}")
        at_ms = int(time.time() * 1000) + int(args.at * 1000)
        r = await producer.send(Message(args.topic, b"deliver at a time", deliver_time_ms=at_ms))
        print(f"sent deliver_time_ms={at_ms} (in {args.at:g} s): {r.status.name} msg_id={r.msg_id}")
        r = await producer.send(Message(args.topic, b"delay seconds", delay_seconds=args.at))
        print(f"sent delay_seconds={args.at:g}: {r.status.name} msg_id={r.msg_id}")
    finally:
        await producer.shutdown()
    print(f"done: {len(args.levels) + 2} delayed messages sent to {args.topic}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="DelayTopic")
    parser.add_argument("-g", "--group", default="example_delay_producer_group")
    parser.add_argument("-l", "--levels", type=int, nargs="*", default=[1, 2], help="delay levels to send")
    parser.add_argument("--at", type=int, default=3, help="seconds from now for the timer messages")
    asyncio.run(main(parser.parse_args()))
