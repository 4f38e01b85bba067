"""Spark connector benchmark: batch read, streaming availableNow and batch write, beside the SDK.

    .venv/bin/python scripts/bench_spark.py                    # 1,000,000 x 1 KiB, temporary daemons
    .venv/bin/python scripts/bench_spark.py --count 200000     # smaller run
    .venv/bin/python scripts/bench_spark.py -n 127.0.0.1:9876  # against a running cluster
    .venv/bin/python scripts/bench_spark.py --brokers 2        # two brokers in the cluster (scale-out)
    .venv/bin/python scripts/bench_spark.py --acl --rounds 2   # ACL off vs on, reads only, ABBA order

Default run:

1. fills a backlog of ``--count`` messages of ``--body-size`` bytes (SDK batch sends);
2. plain SDK: drains it with one ``LitePullConsumer`` (assign + poll), and with the connector's
   own pull + Arrow path outside Spark (``rocketpy.spark.source.read_range``, one queue after
   the other in this process);
3. Spark: ``spark.read.format("rocketpy").load().count()``; a ``readStream`` with
   ``trigger(availableNow=True)`` and ``maxOffsetsPerTrigger = count / 10`` into the ``noop`` sink,
   then the same without a limit (one micro-batch);
   ``df.write.format("rocketpy")`` of ``count`` rows into a second topic, with ``transactional``
   false (plain batch sends) then true (half messages committed by the driver).

``--acl``: two one-broker clusters with the same backlog, one with ``aclEnable=true`` (reads sign
with an account that has SUB, not an admin). Each round runs the reads (SDK drain, Spark
``count()``, availableNow in one micro-batch) on both clusters in ABBA order (``bench_abba``); the
end gives per measure the median and range of rows/s on each side and the median and range of the
rounds' on/off ratios.

Session start and worker warm-up are excluded (one small read first). Figures are wall time on a
shared machine: read them as ranges. ``--broker-set key=value`` passes broker settings (e.g.
``maxTransferCountOnMessageInMemory``, which caps a pull's messages: RocketMQ's default is 32) and
``--pull-batch-size`` the connector's ``pullBatchSize``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_abba import abba, round_ratios

from rocketpy import Admin, Message, MessageQueue, Producer
from rocketpy.client.lite_pull_consumer import LitePullConsumer

#: The ACL side's accounts: an admin to create topics and fill, a reader with SUB only.
ACL_YML = """\
accounts:
  - accessKey: benchAdmin
    secretKey: benchAdminSecret
    admin: true
  - accessKey: benchReader
    secretKey: benchReaderSecret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
ADMIN = ("benchAdmin", "benchAdminSecret")
READER = ("benchReader", "benchReaderSecret")


def _rate(n: int, seconds: float) -> str:
    return f"{n:,} rows in {seconds:.2f} s = {n / seconds:,.0f} rows/s"


def _sdk(keys: tuple[str, str] | None) -> dict[str, str]:
    return {"access_key": keys[0], "secret_key": keys[1]} if keys else {}


async def fill(
    ns: str, topic: str, count: int, body_size: int, queues: int, keys: tuple[str, str] | None = None
) -> None:
    async with Admin(ns, **_sdk(keys)) as admin:  # type: ignore[arg-type]
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)
    body = b"x" * body_size
    t0 = time.perf_counter()
    async with Producer("bench_spark_pg", namesrv_addr=ns, **_sdk(keys)) as p:  # type: ignore[arg-type]
        pending: list[Any] = []
        for i in range(0, count, 256):
            pending.append(asyncio.ensure_future(p.send_batch([Message(topic, body)] * min(256, count - i))))
            if len(pending) >= 16:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    print(f"backlog  : {_rate(count, time.perf_counter() - t0)} (SDK batch sends)")


async def sdk_drain(ns: str, topic: str, count: int, keys: tuple[str, str] | None = None) -> float:
    """Seconds for one ``LitePullConsumer`` to poll the whole backlog from the start."""
    async with Admin(ns, **_sdk(keys)) as admin:  # type: ignore[arg-type]
        mqs: list[MessageQueue] = [row["mq"] for row in await admin.topic_status(topic)]
    c = LitePullConsumer("bench_spark_drain", ns, auto_commit=False, pull_batch_size=32, **_sdk(keys))  # type: ignore[arg-type]
    c.assign(mqs)
    await c.start()
    for mq in mqs:
        await c.seek_to_begin(mq)
    t0, got = time.perf_counter(), 0
    while got < count and time.perf_counter() - t0 < 600:
        got += len(await c.poll(timeout=1.0))
    took = time.perf_counter() - t0
    print(f"SDK      : LitePullConsumer drain: {_rate(got, took)}")
    await c.shutdown()
    return took


def connector_drain(ns: str, topic: str, count: int, extra: dict[str, str]) -> None:
    from pyspark.sql.datasource import CaseInsensitiveDict

    from rocketpy.spark.options import parse_read_options
    from rocketpy.spark.plan import plan_batch
    from rocketpy.spark.source import read_range

    opts = parse_read_options(CaseInsensitiveDict({"namesrvAddr": ns, "topic": topic, **extra}))
    t0 = time.perf_counter()
    n = sum(b.num_rows for r in plan_batch(opts) for b in read_range(opts, r))
    assert n == count, n
    print(f"SDK      : connector pull + Arrow, one process, no Spark: {_rate(n, time.perf_counter() - t0)}")


class Reads:
    """The Spark reads of one cluster's backlog (options: address, topic, account, pull size)."""

    def __init__(self, spark: Any, ns: str, topic: str, count: int, tmp: str, extra: dict[str, str]) -> None:
        self.spark, self.ns, self.topic, self.count, self.tmp, self.extra = (
            spark,
            ns,
            topic,
            count,
            tmp,
            extra,
        )

    def _options(self, builder: Any) -> Any:
        builder = builder.format("rocketpy").option("namesrvAddr", self.ns).option("topic", self.topic)
        for k, v in self.extra.items():
            builder = builder.option(k, v)
        return builder

    def warm_up(self) -> None:
        """One small read (Spark's Python workers start; excluded from the figures)."""
        end = json.dumps({self.topic: {"broker-a:0": 10}})
        self._options(self.spark.read).option("endingOffsets", end).load().count()

    def count_s(self) -> float:
        t0 = time.perf_counter()
        n = self._options(self.spark.read).load().count()
        took = time.perf_counter() - t0
        assert n == self.count, n
        print(f"Spark    : batch read count(): {_rate(n, took)}")
        return took

    def stream_s(self, limit: int | None = None) -> float:
        """One availableNow query over the whole backlog into ``noop`` (``limit`` rows a micro-batch)."""
        stream = self._options(self.spark.readStream).option("startingOffsets", "earliest")
        if limit:
            stream = stream.option("maxOffsetsPerTrigger", limit)
        t0 = time.perf_counter()
        checkpoint = tempfile.mkdtemp(prefix="cp-", dir=self.tmp)  # a new query each run
        q = (
            stream.load().writeStream.format("noop").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start()
        )  # fmt: skip
        q.awaitTermination(1800)
        took = time.perf_counter() - t0
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        batches = sum(1 for p in q.recentProgress if p["numInputRows"])
        assert rows == self.count, rows
        print(f"Spark    : stream availableNow, {batches} micro-batch(es): {_rate(rows, took)}")
        return took


def spark_writes(spark: Any, ns: str, topic: str, count: int, body_size: int) -> None:
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


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def default_run(args: argparse.Namespace, stack: ExitStack, tmp: str, topic: str) -> None:
    from rocketpy.spark.local import local_session
    from tests.daemons import start_broker, start_namesrv

    ns = args.namesrv
    if ns is None:
        namesrv = stack.enter_context(start_namesrv(Path(tmp)))
        for _ in range(args.brokers):
            stack.enter_context(start_broker(Path(tmp), namesrv.addr, **args.broker_props))
        ns = namesrv.addr
    brokers = "the cluster's brokers" if args.namesrv else f"{args.brokers} broker(s)"
    print(f"{args.count:,} x {args.body_size} B, {args.queues} queues a broker, {brokers}, namesrv {ns}")
    asyncio.run(fill(ns, topic, args.count, args.body_size, args.queues))
    asyncio.run(sdk_drain(ns, topic, args.count))
    connector_drain(ns, topic, args.count, args.extra)
    spark = local_session("rocketpy-bench", args.driver_memory)
    try:
        reads = Reads(spark, ns, topic, args.count, tmp, args.extra)
        reads.warm_up()
        best = min(reads.count_s() for _ in range(2))
        print(f"Spark    : batch read count() (best of 2): {_rate(args.count, best)}")
        reads.stream_s(max(1, args.count // 10))
        reads.stream_s()
        spark_writes(spark, ns, topic, args.count, args.body_size)
    finally:
        spark.stop()


def acl_run(args: argparse.Namespace, stack: ExitStack, tmp: str, topic: str) -> None:
    """Reads on a cluster without and one with ACL, rounds in ABBA order; medians and ranges."""
    from rocketpy.spark.local import local_session
    from tests.daemons import start_broker, start_namesrv

    acl_file = Path(tmp) / "plain_acl.yml"
    acl_file.write_text(ACL_YML)
    sides: dict[str, tuple[str, dict[str, str], tuple[str, str] | None]] = {}
    for side, props in (("off", {}), ("on", {"aclEnable": True, "aclFile": acl_file})):
        namesrv = stack.enter_context(start_namesrv(Path(tmp), **props))
        broker_props = {"brokerName": "broker-a", **args.broker_props, **props}  # two clusters
        if props:
            broker_props.update(aclAccessKey=ADMIN[0], aclSecretKey=ADMIN[1])
        stack.enter_context(start_broker(Path(tmp), namesrv.addr, **broker_props))
        account = {"accessKey": READER[0], "secretKey": READER[1]} if props else {}
        sides[side] = (namesrv.addr, {**args.extra, **account}, READER if props else None)
        print(f"ACL {side}: namesrv {namesrv.addr}")
        asyncio.run(
            fill(namesrv.addr, topic, args.count, args.body_size, args.queues, ADMIN if props else None)
        )
    spark = local_session("rocketpy-bench-acl", args.driver_memory)
    runs: dict[tuple[str, str], list[float]] = {}
    try:
        reads = {
            side: Reads(spark, ns, topic, args.count, tmp, extra) for side, (ns, extra, _) in sides.items()
        }
        for r in reads.values():
            r.warm_up()
        for rnd in range(args.rounds):
            for side in abba(rnd, "off", "on"):
                ns, _, keys = sides[side]
                print(f"-- round {rnd + 1}, ACL {side} (load {_load()})")
                runs.setdefault(("SDK drain", side), []).append(
                    asyncio.run(sdk_drain(ns, topic, args.count, keys))
                )
                runs.setdefault(("Spark count()", side), []).append(reads[side].count_s())
                runs.setdefault(("Spark availableNow, 1 batch", side), []).append(reads[side].stream_s())
    finally:
        spark.stop()
    summarize(runs, args.count)


def summarize(runs: dict[tuple[str, str], list[float]], count: int) -> None:
    print(f"\n{count:,} rows a run; rows/s median [min - max] per side; on/off per round (two runs each)")
    for what in dict.fromkeys(w for w, _ in runs):
        rates = {side: [count / s for s in runs[(what, side)]] for side in ("off", "on")}
        shown = "; ".join(
            f"ACL {side} {statistics.median(v):,.0f} [{min(v):,.0f} - {max(v):,.0f}]"
            for side, v in rates.items()
        )
        ratios = round_ratios(rates["on"], rates["off"])
        med = statistics.median(ratios)
        print(f"{what}: {shown}; on/off {med:.1%} [{min(ratios):.1%} - {max(ratios):.1%}]")


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
    ap.add_argument("--acl", action="store_true", help="reads on a cluster with ACL off and one with it on")
    ap.add_argument(
        "--rounds", type=int, default=2, help="--acl: rounds of off,on,on,off (then on,off,off,on)"
    )
    ap.add_argument("--broker-set", action="append", default=[], metavar="KEY=VALUE", help="a broker setting")
    ap.add_argument("--pull-batch-size", type=int, help="the connector's pullBatchSize (default: its own)")
    args = ap.parse_args()
    args.broker_props = dict(kv.split("=", 1) for kv in args.broker_set)
    args.extra = {"pullBatchSize": str(args.pull_batch_size)} if args.pull_batch_size else {}
    from tests.integration.spark_session import skip_reason

    reason = skip_reason()
    if reason:
        sys.exit(f"cannot run Spark here: {reason}")
    if args.acl and args.namesrv:
        sys.exit("--acl starts its own two clusters: leave out -n")
    topic = f"BenchSpark{int(time.time())}"
    print(f"load average at start: {_load()}; broker settings {args.broker_props or 'default'}")
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="rocketpy-bench-spark-"))
        (acl_run if args.acl else default_run)(args, stack, tmp, topic)


if __name__ == "__main__":
    main()
