"""Push-consumer benchmark: backlog consumption rate and send -> listener latency (bounded).

    .venv/bin/python scripts/bench_consume.py                  # starts a temporary NameServer + broker
    .venv/bin/python scripts/bench_consume.py -n 127.0.0.1:9876  # against a running cluster

1. backlog: sends ``--backlog`` messages of ``--body-size`` bytes in batches, then measures how fast one
   PushConsumer (sync listener in its thread pool) consumes them all.
2. latency: sends ``--rate`` messages per second for ``--seconds`` seconds; each body carries its send
   time; the listener records now - send time. Prints p50 / p99 / max.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_core

from rocketpy import Admin, ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer
from tests.waiting import wait_until_async

STAMP = struct.Struct(">Q")
DEADLINE_S = 300.0


async def _topic(addr: str, topic: str, queues: int) -> None:
    async with Admin(addr) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)


async def bench_backlog(addr: str, count: int, body_size: int, queues: int, pull_batch_size: int) -> float:
    """Fill a backlog, then time one consumer draining it; returns msgs/s."""
    topic = f"BenchBacklog{int(time.time())}"
    await _topic(addr, topic, queues)
    producer = Producer("bench_backlog_pg", namesrv_addr=addr)
    await producer.start()
    body = b"x" * body_size
    t0 = time.perf_counter()
    for i in range(0, count, 512):
        await producer.send_batch([Message(topic, body) for _ in range(min(512, count - i))])
    send_s = time.perf_counter() - t0
    await producer.shutdown()
    print(
        f"backlog: {count} x {body_size} B sent in {send_s:.1f} s ({count / send_s:,.0f} msgs/s batch send)"
    )
    consumed = 0
    lock = threading.Lock()
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    def listener(msgs: list, ctx: object) -> ConsumeStatus:
        nonlocal consumed
        with lock:
            consumed += len(msgs)
            if consumed >= count:
                loop.call_soon_threadsafe(done.set)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "bench_backlog_cg",
        addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_batch_size=pull_batch_size,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    t0 = time.perf_counter()
    cpu0 = time.process_time()  # this process: the consumer's loop and listener threads
    await consumer.start()
    await asyncio.wait_for(done.wait(), DEADLINE_S)
    took = time.perf_counter() - t0
    cpu_us = (time.process_time() - cpu0) * 1e6 / count
    await consumer.shutdown()
    rate = count / took
    print(
        f"backlog: consumed {consumed} in {took:.2f} s = {rate:,.0f} msgs/s"
        f" with pull_batch_size={pull_batch_size} (target >= 50,000); client CPU {cpu_us:.1f} us/msg"
    )
    return rate


async def bench_latency(addr: str, rate: int, seconds: float, body_size: int) -> float:
    """Send at ``rate``/s and record send -> listener latency; returns p99 in ms."""
    topic = f"BenchLatency{int(time.time())}"
    await _topic(addr, topic, 4)
    lat_ns: list[int] = []

    def listener(msgs: list, ctx: object) -> ConsumeStatus:
        now = time.monotonic_ns()
        lat_ns.extend(now - STAMP.unpack_from(m.body)[0] for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "bench_latency_cg", addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    await consumer.start()
    await wait_until_async(lambda: len(consumer.assigned_queues()) == 4, 30, message="queues assigned")
    await asyncio.sleep(0.5)  # let the first long-polling pulls reach the broker
    producer = Producer("bench_latency_pg", namesrv_addr=addr)
    await producer.start()
    pad = b"x" * max(0, body_size - STAMP.size)
    total = int(rate * seconds)
    start = time.monotonic()
    for i in range(total):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await producer.send(Message(topic, STAMP.pack(time.monotonic_ns()) + pad))
    await wait_until_async(lambda: len(lat_ns) >= total, 30, message="every message received")
    await producer.shutdown()
    await consumer.shutdown()
    lat = sorted(lat_ns)
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1e6  # noqa: E731
    print(
        f"latency at {rate}/s for {seconds:.0f} s: {len(lat)}/{total} received, p50 {p(0.5):.2f} ms, "
        f"p99 {p(0.99):.2f} ms, max {lat[-1] / 1e6:.2f} ms (target p99 <= 10 ms)"
    )
    return p(0.99)


async def main(args: argparse.Namespace) -> None:
    if "backlog" in args.only:
        await bench_backlog(args.namesrv, args.backlog, args.body_size, args.queues, args.pull_batch_size)
    if "latency" in args.only:
        await bench_latency(args.namesrv, args.rate, args.seconds, args.body_size)


def run_with_cluster(args: argparse.Namespace) -> None:
    """Start a temporary NameServer + broker (tests/daemons.py), run, stop them."""
    from tests.daemons import start_broker, start_namesrv

    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-") as tmp:
        ns = start_namesrv(Path(tmp))
        # the broker answers at most maxTransferCountOnMessageInMemory messages per pull (default 32)
        transfer = {"maxTransferCountOnMessageInMemory": max(32, args.pull_batch_size)}
        broker = start_broker(Path(tmp), ns.addr, maxTransferBytesOnMessageInMemory=1 << 20, **transfer)
        try:
            args.namesrv = ns.addr
            asyncio.run(main(args))
        finally:
            broker.terminate()
            ns.terminate()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default=None, help="NameServer address (default: start a cluster)")
    parser.add_argument("--backlog", type=int, default=100_000, help="backlog size (messages)")
    parser.add_argument("--body-size", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--pull-batch-size", type=int, default=32, help="consumer pull_batch_size")
    parser.add_argument("--rate", type=int, default=1000, help="latency test send rate (msgs/s)")
    parser.add_argument("--seconds", type=float, default=10.0, help="latency test duration")
    parser.add_argument("--only", nargs="+", default=["backlog", "latency"], choices=["backlog", "latency"])
    bench_core.add_options(parser)
    parsed = parser.parse_args()
    bench_core.apply(parsed)
    if parsed.namesrv:
        asyncio.run(main(parsed))
    else:
        run_with_cluster(parsed)
