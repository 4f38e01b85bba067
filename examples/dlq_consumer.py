"""Dead letters: messages that always fail end in %DLQ%{group}, and a consumer can read them there.

python examples/dlq_consumer.py -n 127.0.0.1:9876 -t TopicTest -c 10

One consumer (group -g) fails every message; after max_reconsume_times retries (1 here, each after
1 s) the broker stores the message in %DLQ%{group} instead of the retry topic. A second consumer, of
its own group, subscribes to that topic and prints the dead letters: original topic (RETRY_TOPIC),
message id and how often they were tried. `mqadmin queryMsgByKey -t %DLQ%{group} -k KEY` finds them
too, and `mqadmin resendDlq -g {group}` puts them back to the retry topic for another round.
"""

import argparse
import asyncio
import sys
import threading

from rocketpy import ConsumeFromWhere, ConsumeStatus, PushConsumer


async def main(args: argparse.Namespace) -> None:
    dead: set[str] = set()
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    lock = threading.Lock()

    def always_fail(msgs, context):
        context.delay_level_when_next_consume = 1  # retry after 1 s (level 1)
        return ConsumeStatus.RECONSUME_LATER

    def on_dead_letters(msgs, context):
        with lock:
            for msg in msgs:
                sys.stdout.write(
                    f"dead letter: msg_id={msg.msg_id} from topic={msg.properties.get('RETRY_TOPIC')} "
                    f"tried {msg.reconsume_times} times body={msg.body.decode(errors='replace')}\n"
                )
                dead.add(msg.msg_id)
            sys.stdout.flush()
            if len(dead) >= args.count:
                loop.call_soon_threadsafe(done.set)
        return ConsumeStatus.CONSUME_SUCCESS

    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    failing = PushConsumer(args.group, args.namesrv, consume_from_where=first, max_reconsume_times=1)
    failing.subscribe(args.topic, "*")
    failing.register_listener(always_fail)
    reader = PushConsumer(f"{args.group}_dlq_reader", args.namesrv, consume_from_where=first)
    reader.subscribe(f"%DLQ%{args.group}", "*")
    reader.register_listener(on_dead_letters)
    await failing.start()
    await reader.start()
    try:
        await asyncio.wait_for(done.wait(), args.timeout)
    except TimeoutError:
        print(f"timeout after {args.timeout} s")
    finally:
        await reader.shutdown()
        await failing.shutdown()
    print(f"done: {len(dead)} dead letters read from %DLQ%{args.group}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_dlq_group")
    parser.add_argument("-c", "--count", type=int, default=10, help="stop after this many dead letters")
    parser.add_argument("--timeout", type=float, default=60.0, help="stop after this many seconds")
    asyncio.run(main(parser.parse_args()))
