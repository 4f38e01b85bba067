"""Lag in seconds: what computing it costs per scrape at 10,000 queues (target: <= 1 % of a CPU).

An in-process store gets one topic per 100 queues (100 topics x 100 queues by default) and a few
messages per queue; a group has committed offset 0 everywhere (every queue lags). ``LagClock``
(broker/lag.py) then runs as a Prometheus scrape does: a first pass (every store time looked up),
then steady passes (committed offsets unchanged: cached), then passes where a tenth of the offsets
moved. Printed: CPU ms per pass and its share of one CPU at a 15 s scrape interval (Prometheus'
default is 60 s, so 15 s is four times the default load). Setting up 10,000 queues (as many
consume-queue files) takes most of the run: under a minute on an idle machine, a few on a busy one.

Usage: ``.venv/bin/python scripts/bench_lag.py [--queues 10000] [--interval-s 15]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time

from rocketpy.broker.lag import LagClock
from rocketpy.broker.store import BrokerMessage, MessageStore
from rocketpy.config import StoreConfig

QUEUES_PER_TOPIC = 100
MSGS_PER_QUEUE = 3
TARGET_SHARE = 0.01


def _pass(clock: LagClock, queues: list[tuple[str, int]], offsets: dict[tuple[str, int], int]) -> float:
    """One scrape's lag pass; CPU seconds it took."""
    c0 = time.process_time()
    clock.begin_pass()
    for topic, qid in queues:
        clock.latency_ms("g", topic, qid, offsets[(topic, qid)], MSGS_PER_QUEUE)
    clock.end_pass()
    return time.process_time() - c0


async def run(n_queues: int, interval_s: float) -> None:
    root = tempfile.mkdtemp(prefix="rocketpy-bench-lag-")
    store = MessageStore(StoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=64 * 1024 * 1024))
    await store.start()
    try:
        queues = [(f"LagT{i // QUEUES_PER_TOPIC}", i % QUEUES_PER_TOPIC) for i in range(n_queues)]
        for _ in range(MSGS_PER_QUEUE):
            for topic, qid in queues:
                await store.put_message(BrokerMessage(topic, qid, b"x" * 64))
        clock = LagClock(store)
        offsets = {q: 0 for q in queues}
        first = _pass(clock, queues, offsets)
        steady = min(_pass(clock, queues, offsets) for _ in range(5))
        moved = []
        for r in range(5):
            for q in queues[r::10]:
                offsets[q] = 1 + r % 2  # a tenth of the groups' offsets moved since the last scrape
            moved.append(_pass(clock, queues, offsets))
        print(f"queues: {n_queues}, scrape interval: {interval_s:.0f} s, store-time lookups: {clock.lookups}")
        for name, cpu_s in (("first pass (all looked up)", first), ("steady (cached)", steady),
                            ("a tenth moved", min(moved))):  # fmt: skip
            share = cpu_s / interval_s
            verdict = "ok" if share <= TARGET_SHARE else "OVER"
            cost = f"{cpu_s * 1000:8.2f} ms CPU per pass = {share * 100:.3f} % of a CPU"
            print(f"  {name:<28} {cost}  [{verdict}]")
    finally:
        await store.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--interval-s", type=float, default=15.0)
    args = parser.parse_args()
    asyncio.run(run(args.queues, args.interval_s))


if __name__ == "__main__":
    main()
