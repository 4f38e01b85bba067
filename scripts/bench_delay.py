"""Delayed-delivery benchmark: delay-level throughput, delivery lateness, idle cost of waiting timers.

    .venv/bin/python scripts/bench_delay.py            # starts a temporary NameServer + broker

1. throughput: ``--count`` messages at delay level 1 (1 s) sent with ``send_async`` (bounded window);
   time from the first send until every message is in its real topic (queue max offsets), minus
   the 1 s delay. Every message must arrive.
2. lateness: ``--rate`` level-1 messages per second for ``--seconds`` s; a push consumer records
   arrival - (send time + 1 s) and, on the broker clock, re-put store time - (born time + 1 s).
3. timers: ``--timers`` timer messages due at random times between 15 and 75 minutes ahead; then the
   broker's CPU over ``--idle`` seconds (no message due) and its memory (VmRSS, RssAnon, RssFile).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketpy import Admin, ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer
from tests.waiting import WaitTimeout, wait_until_async

STAMP = struct.Struct(">Q")
args_level = 1  # delay level of the throughput test
WINDOW = 2000  # sends in flight


async def _topic(addr: str, topic: str, queues: int = 8) -> None:
    async with Admin(addr) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)


async def _send_many(producer: Producer, make: object, count: int) -> None:
    sem = asyncio.Semaphore(WINDOW)
    failed = []

    def done(result: object, error: BaseException | None) -> None:
        sem.release()
        if error is not None:
            failed.append(error)

    for i in range(count):
        await sem.acquire()
        producer.send_async(make(i), callback=done)  # type: ignore[operator]
    for _ in range(WINDOW):
        await sem.acquire()
    if failed:
        raise RuntimeError(f"{len(failed)} sends failed, first: {failed[0]!r}")


async def _stored(admin: Admin, topic: str) -> int:
    return sum(int(q["max_offset"]) for q in await admin.topic_status(topic))


async def bench_throughput(addr: str, count: int) -> None:
    topic = f"BenchDelay{int(time.time())}"
    await _topic(addr, topic)
    async with Producer("bench_delay_pg", namesrv_addr=addr) as producer, Admin(addr) as admin:
        t0 = time.perf_counter()
        await _send_many(producer, lambda i: Message(topic, b"x" * 128, delay_level=args_level), count)
        sent_s = time.perf_counter() - t0
        while (n := await _stored(admin, topic)) < count:
            if time.perf_counter() - t0 > 300:
                raise RuntimeError(f"only {n} of {count} delivered after 300 s")
            await asyncio.sleep(0.05)
        total = time.perf_counter() - t0
    print(
        f"throughput: {count} level-1 msgs sent in {sent_s:.1f} s ({count / sent_s:,.0f} msgs/s), all {n} "
        f"re-put after {total:.1f} s: {count / (total - 1.0):,.0f} msgs/s end to end (1 s delay excluded)"
    )


async def bench_lateness(addr: str, rate: int, seconds: float) -> None:
    topic = f"BenchLate{int(time.time())}"
    await _topic(addr, topic)
    late_arrival: list[int] = []
    late_store: list[int] = []

    def listener(msgs: list, ctx: object) -> ConsumeStatus:
        now = int(time.time() * 1000)
        for m in msgs:
            late_arrival.append(now - STAMP.unpack(m.body[:8])[0] - 1000)
            late_store.append(m.store_timestamp - m.born_timestamp - 1000)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "bench_late_cg",
        addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval=1.0,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    await consumer.start()
    total = int(rate * seconds)
    async with Producer("bench_late_pg", namesrv_addr=addr) as producer:
        t0 = time.perf_counter()
        for i in range(total):
            await asyncio.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
            body = STAMP.pack(int(time.time() * 1000)) + b"x" * 120
            producer.send_async(Message(topic, body, delay_level=1))
        try:
            await wait_until_async(lambda: len(late_arrival) >= total, 60, interval=0.1)
        except WaitTimeout:
            pass  # report what arrived
    await consumer.shutdown()
    for name, xs in (("arrival", late_arrival), ("broker re-put", late_store)):
        xs = sorted(xs)
        print(
            f"lateness ({name}) at {rate}/s x {seconds:.0f} s: {len(xs)}/{total} msgs, "
            f"p50 {xs[len(xs) // 2]} ms, p99 {xs[int(len(xs) * 0.99)]} ms, max {xs[-1]} ms, min {xs[0]} ms"
        )


def _proc(pid: int) -> tuple[float, dict[str, int]]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / 100.0
    mem = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, val = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            mem[key] = int(val.split()[0]) // 1024
    return cpu_s, mem


async def bench_timers(addr: str, count: int, idle_s: float, broker_pid: int) -> None:
    topic = f"BenchTimer{int(time.time())}"
    await _topic(addr, topic)
    now = int(time.time() * 1000)
    async with Producer("bench_timer_pg", namesrv_addr=addr) as producer:
        t0 = time.perf_counter()
        await _send_many(
            producer,
            lambda i: Message(topic, b"t" * 64, deliver_time_ms=now + random.randrange(900_000, 4_500_000)),
            count,
        )
        print(f"timers: {count} sent in {time.perf_counter() - t0:.1f} s")
    await asyncio.sleep(5)  # let the enqueue finish
    cpu0, mem = _proc(broker_pid)
    await asyncio.sleep(idle_s)
    cpu1, mem = _proc(broker_pid)
    print(
        f"timers waiting: broker CPU {100 * (cpu1 - cpu0) / idle_s:.2f}% over {idle_s:.0f} s with none due; "
        f"memory VmRSS {mem['VmRSS']} MiB (RssAnon {mem['RssAnon']} MiB, RssFile {mem['RssFile']} MiB)"
    )


async def main(args: argparse.Namespace, broker_pid: int) -> None:
    if "throughput" in args.only:
        await bench_throughput(args.namesrv, args.count)
    if "lateness" in args.only:
        await bench_lateness(args.namesrv, args.rate, args.seconds)
    if "timers" in args.only:
        await bench_timers(args.namesrv, args.timers, args.idle, broker_pid)


def run_with_cluster(args: argparse.Namespace) -> None:
    """Start a temporary NameServer + broker (tests/daemons.py), run, stop them."""
    from tests.daemons import start_broker, start_namesrv

    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-") as tmp:
        ns = start_namesrv(Path(tmp))
        broker = start_broker(Path(tmp), ns.addr, mappedFileSizeCommitLog=1 << 30)
        try:
            args.namesrv = ns.addr
            asyncio.run(main(args, broker.pid))
        finally:
            broker.terminate()
            ns.terminate()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000, help="throughput: level-1 messages")
    parser.add_argument("--rate", type=int, default=5000, help="lateness: msgs/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="lateness: duration")
    parser.add_argument("--timers", type=int, default=1_000_000, help="timer messages waiting")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of CPU measurement")
    parser.add_argument("--only", nargs="+", default=["throughput", "lateness", "timers"])
    run_with_cluster(parser.parse_args())
