"""Message trace: a traced producer and consumer, then one message's timeline read back.

python examples/traced_messages.py -n 127.0.0.1:9876 -t TopicTest -c 5

enable_trace=True makes the producer write a Pub record per sent message and the push consumer a
SubBefore and a SubAfter per consumed one, to RMQ_SYS_TRACE_TOPIC, in the background (a full trace
buffer drops records, never slows a send). Admin.query_msg_trace gathers a message's records into
its timeline: what mqadmin queryMsgTraceById and the dashboard's trace page show. A broker with
traceTopicEnable=true adds its own records (each delivery, retry and dead letter).
"""

import argparse
import asyncio
import time

from rocketpy import Admin, ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer


async def main(args: argparse.Namespace) -> None:
    consumed: set[str] = set()
    consumer = PushConsumer(
        args.group,
        namesrv_addr=args.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_trace=True,
    )
    consumer.subscribe(args.topic, "*")

    async def on_messages(msgs, context):
        consumed.update(m.msg_id for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.register_listener(on_messages)
    await consumer.start()
    try:
        async with Producer(args.producer_group, namesrv_addr=args.namesrv, enable_trace=True) as producer:
            sent = [await producer.send(Message(args.topic, b"traced %d" % i)) for i in range(args.count)]
        # shutdown (leaving the block) sent what the trace buffer still held
        print(f"sent {len(sent)} traced messages; trace records: {producer.trace_stats}")
        first = sent[0].msg_id
        deadline = time.monotonic() + args.timeout
        async with Admin(args.namesrv) as admin:
            while time.monotonic() < deadline:
                trace = await admin.query_msg_trace(first)
                events = {e.event for e in trace.events}
                if events >= {"sent", "consumed"} and consumed >= {m.msg_id for m in sent}:
                    break
                await asyncio.sleep(0.5)  # the consumer's records leave within its flush interval
            else:
                print(f"timeout after {args.timeout} s")
    finally:
        await consumer.shutdown()
    print(f"timeline of {first}:")
    for e in trace.events:
        print(f"  {e.event:<10} group={e.group or '-'} host={e.host} status={e.status} cost_ms={e.cost_ms}")
    print(f"done: {len(consumed)} of {len(sent)} consumed; the first has {len(trace.events)} trace events")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_traced_consumer_group")
    parser.add_argument("-p", "--producer-group", default="example_traced_producer_group")
    parser.add_argument("-c", "--count", type=int, default=5, help="messages to send and consume")
    parser.add_argument("--timeout", type=float, default=60.0, help="stop after this many seconds")
    asyncio.run(main(parser.parse_args()))
