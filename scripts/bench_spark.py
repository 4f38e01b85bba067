"""Spark connector benchmark: batch read, streaming availableNow and batch write, beside the SDK.

    .venv/bin/python scripts/bench_spark.py                    # 1,000,000 x 1 KiB, temporary daemons
    .venv/bin/python scripts/bench_spark.py --count 200000     # smaller run
    .venv/bin/python scripts/bench_spark.py -n 127.0.0.1:9876  # against a running cluster
    .venv/bin/python scripts/bench_spark.py --brokers 2        # two brokers in the cluster (scale-out)

1. fills a backlog of ``--count`` messages of ``--body-size`` bytes (SDK batch sends);
2. plain SDK: drains it with one ``LitePullConsumer`` (assign + poll), and with the connector's
   own pull + Arrow path outside Spark (``rocketpy.spark.source.read_range``, one queue after
   the other in this process);
3. Spark: ``spark.read.format("rocketpy").load().count()``; a ``readStream`` with
   ``trigger(availableNow=True)`` and ``maxOffsetsPerTrigger = count / 10`` into the ``noop`` sink,
   then the same without a limit (one micro-batch);
   ``df.write.format("rocketpy")`` of ``count`` rows into a second topic, with ``transactional``
   false (plain batch sends) then true (half messages committed by the driver).
Session start and worker warm-up are excluded (one small read first). Figures are wall time on a
shared machine: read them as ranges.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketpy import Admin, Message, MessageQueue, Producer
from rocketpy.client.lite_pull_consumer import LitePullConsumer


def _rate(n: int, seconds: float) -> str:
    return f"{n:,} rows in {seconds:.2f} s = {n / seconds:,.0f} rows/s"


async def fill(ns: str, topic: str, count: int, body_size: int, queues: int) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)
    body = b"x" * body_size
    t0 = time.perf_counter()
    async with Producer("bench_spark_pg", namesrv_addr=ns) as p:
        pending: list[Any] = []
        for i in range(0, count, 256):
            pending.append(asyncio.ensure_future(p.send_batch([Message(topic, body)] * min(256, count - i))))
            if len(pending) >= 16:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    print(f"backlog  : {_rate(count, time.perf_counter() - t0)} (SDK batch sends)")


async def sdk_drain(ns: str, topic: str, count: int) -> None:
    async with Admin(ns) as admin:
        mqs: list[MessageQueue] = [row["mq"] for row in await admin.topic_status(topic)]
    c = LitePullConsumer("bench_spark_drain", ns, auto_commit=False, pull_batch_size=32)
    c.assign(mqs)
    await c.start()
    for mq in mqs:
        await c.seek_to_begin(mq)
    t0, got = time.perf_counter(), 0
    while got < count and time.perf_counter() - t0 < 600:
        got += len(await c.poll(timeout=1.0))
    print(f"SDK      : LitePullConsumer drain: {_rate(got, time.perf_counter() - t0)}")
    await c.shutdown()


def connector_drain(ns: str, topic: str, count: int) -> None:
    from pyspark.sql.datasource import CaseInsensitiveDict

    from rocketpy.spark.options import parse_read_options
    from rocketpy.spark.plan import plan_batch
    from rocketpy.spark.source import read_range

    opts = parse_read_options(CaseInsensitiveDict({"namesrvAddr": ns, "topic": topic}))
    t0 = time.perf_counter()
    n = sum(b.num_rows for r in plan_batch(opts) for b in read_range(opts, r))
    assert n == count, n
    print(f"SDK      : connector pull + Arrow, one process, no Spark: {_rate(n, time.perf_counter() - t0)}")


def spark_runs(spark: Any, ns: str, topic: str, count: int, body_size: int, tmp: str) -> None:
    def reader() -> Any:
        return spark.read.format("rocketpy").option("namesrvAddr", ns).option("topic", topic)

    warm_end = json.dumps({topic: {"broker-a:0": 10}})
    reader().option("endingOffsets", warm_end).load().count()  # warm-up: worker start excluded
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        assert reader().load().count() == count
        best = min(best, time.perf_counter() - t0)
    print(f"Spark    : batch read count() (best of 2): {_rate(count, best)}")

    for limit in (max(1, count // 10), None):  # the limit spread over 10 micro-batches, then none
        stream = (
            spark.readStream.format("rocketpy").option("namesrvAddr", ns).option("topic", topic)
            .option("startingOffsets", "earliest")
        )  # fmt: skip
        if limit:
            stream = stream.option("maxOffsetsPerTrigger", limit)
        t0 = time.perf_counter()
        q = (
            stream.load().writeStream.format("noop").option("checkpointLocation", f"{tmp}/cp-{limit}")
            .trigger(availableNow=True).start()
        )  # fmt: skip
        q.awaitTermination(1800)
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        batches = sum(1 for p in q.recentProgress if p["numInputRows"])
        took = time.perf_counter() - t0
        print(f"Spark    : stream availableNow, {batches} micro-batch(es): {_rate(rows, took)}")

    out = f"{topic}Out"
    asyncio.run(_create(ns, out))
    df = spark.range(count).selectExpr(f"cast(repeat('x', {body_size}) AS binary) AS body")
    for transactional in ("false", "true"):  # A/B: plain sends vs all-or-nothing (half messages)
        with VisibleRows(ns, out) as visible:
            t0 = time.perf_counter()
            df.write.format("rocketpy").mode("append").option("namesrvAddr", ns).option("topic", out).option(
                "transactional", transactional
            ).save()
            took = time.perf_counter() - t0
        commit = ""
        if transactional == "true" and visible.first is not None and visible.last is not None:
            # the rows become visible only at the driver's commit: its span is the commit phase
            span, before = visible.last - visible.first, visible.first - t0
            commit = f" (rows became visible over {span:.2f} s: the commit; before it {before:.2f} s)"
        print(f"Spark    : batch write (transactional={transactional}): {_rate(count, took)}{commit}")


class VisibleRows:
    """Polls a topic's visible rows (max offsets) every ``POLL_S`` in a thread while a write runs:
    ``first`` / ``last`` are when the count first grew and last grew (perf_counter seconds)."""

    POLL_S = 0.1

    def __init__(self, ns: str, topic: str) -> None:
        self.ns, self.topic = ns, topic
        self.first: float | None = None
        self.last: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._poll()), daemon=True)

    async def _poll(self) -> None:
        async with Admin(self.ns) as admin:
            seen = await self._rows(admin)
            while not self._stop.is_set():
                n = await self._rows(admin)
                if n != seen:
                    now = time.perf_counter()
                    if self.first is None:
                        self.first = now - self.POLL_S / 2
                    self.last, seen = now, n
                await asyncio.sleep(self.POLL_S)

    async def _rows(self, admin: Admin) -> int:
        return sum(r["max_offset"] for r in await admin.topic_status(self.topic))

    def __enter__(self) -> VisibleRows:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(2 * self.POLL_S)  # the last poll sees the end
        self._stop.set()
        self._thread.join(10)


async def _create(ns: str, topic: str) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=4, write_queue_nums=4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--namesrv", help="NameServer of a running cluster (default: start one)")
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--queues", type=int, default=4, help="queues of each topic on each broker")
    ap.add_argument(
        "--brokers", type=int, default=1, help="brokers to start in the cluster (RocketMQ's scale-out)"
    )
    ap.add_argument("--driver-memory", default="3g")
    args = ap.parse_args()
    from rocketpy.spark.local import local_session
    from tests.daemons import start_broker, start_namesrv
    from tests.integration.spark_session import skip_reason

    reason = skip_reason()
    if reason:
        sys.exit(f"cannot run Spark here: {reason}")
    topic = f"BenchSpark{int(time.time())}"
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="rocketpy-bench-spark-"))
        ns = args.namesrv
        if ns is None:
            namesrv = stack.enter_context(start_namesrv(Path(tmp)))
            for _ in range(args.brokers):
                stack.enter_context(start_broker(Path(tmp), namesrv.addr))
            ns = namesrv.addr
        brokers = "the cluster's brokers" if args.namesrv else f"{args.brokers} broker(s)"
        print(f"{args.count:,} x {args.body_size} B, {args.queues} queues a broker, {brokers}, namesrv {ns}")
        asyncio.run(fill(ns, topic, args.count, args.body_size, args.queues))
        asyncio.run(sdk_drain(ns, topic, args.count))
        connector_drain(ns, topic, args.count)
        spark = local_session("rocketpy-bench", args.driver_memory)
        try:
            spark_runs(spark, ns, topic, args.count, args.body_size, tmp)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
