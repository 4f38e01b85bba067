"""A listener that fails a message twice and then succeeds: the broker redelivers it through the retry topic.

python examples/retry_consumer.py -n 127.0.0.1:9876 -t TopicTest -c 10

Returning RECONSUME_LATER (or None, or raising) hands the message back to the broker
(CONSUMER_SEND_MSG_BACK); it comes back from %RETRY%{group} after a delay level (by default level
3 + reconsume_times: 10 s, 30 s, 1 m, ...; here the context asks for level 1, 1 s) with
reconsume_times increased, under its original topic and message id. After max_reconsume_times
failures it goes to %DLQ%{group} instead (see dlq_consumer.py). Broadcasting consumers do not retry.
"""

import argparse
import asyncio
import sys
import threading

from rocketpy import ConsumeFromWhere, ConsumeStatus, PushConsumer


async def main(args: argparse.Namespace) -> None:
    succeeded: set[str] = set()
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    lock = threading.Lock()

    def on_messages(msgs, context):
        [msg] = msgs  # consume_message_batch_max_size=1 (the default): one message per call
        context.delay_level_when_next_consume = args.delay_level  # 0: the broker's schedule
        fail = msg.reconsume_times < args.fail
        verdict = "failing, retry later" if fail else "success"
        with lock:
            sys.stdout.write(
                f"received: msg_id={msg.msg_id} topic={msg.topic} reconsume_times={msg.reconsume_times} "
                f"body={msg.body.decode(errors='replace')} -> {verdict}\n"
            )
            sys.stdout.flush()
            if not fail:
                succeeded.add(msg.msg_id)
                if len(succeeded) >= args.count:
                    loop.call_soon_threadsafe(done.set)
        return ConsumeStatus.RECONSUME_LATER if fail else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        args.group,
        namesrv_addr=args.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        max_reconsume_times=args.max_reconsume_times,
    )
    consumer.subscribe(args.topic, "*")
    consumer.register_listener(on_messages)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), args.timeout)
    except TimeoutError:
        print(f"timeout after {args.timeout} s")
    finally:
        await consumer.shutdown()
    print(f"done: {len(succeeded)} messages consumed after {args.fail} failures each")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_retry_consumer_group")
    parser.add_argument("-c", "--count", type=int, default=10, help="stop after this many messages succeeded")
    parser.add_argument("--fail", type=int, default=2, help="fail each message this many times")
    parser.add_argument("--delay-level", type=int, default=1, help="delay level of each retry (0: broker's)")
    parser.add_argument("--max-reconsume-times", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=60.0, help="stop after this many seconds")
    asyncio.run(main(parser.parse_args()))
