"""Spark connector benchmark: batch read, streaming availableNow and batch write, beside the SDK.

    .venv/bin/python scripts/bench_spark.py                    # 1,000,000 x 1 KiB, temporary daemons
    .venv/bin/python scripts/bench_spark.py --count 200000     # smaller run
    .venv/bin/python scripts/bench_spark.py -n 127.0.0.1:9876  # against a running cluster
    .venv/bin/python scripts/bench_spark.py --brokers 2        # two brokers in the cluster (scale-out)
    .venv/bin/python scripts/bench_spark.py --acl --rounds 2   # ACL off vs on, reads only, ABBA order
    .venv/bin/python scripts/bench_spark.py --ceiling          # also Spark's own cost of the same reads

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

Session start and worker warm-up are excluded (one small read first). Rows/s are wall time on a
shared machine: read them as ranges. Beside them each read prints its CPU time per row, which a
busy machine disturbs less (not nothing): the connector's own read by stage (pull RPCs, decode, Arrow
build; ``time.process_time`` of this process), Spark's reads by process (the JVM, its Python
workers), and the brokers' (``/proc`` utime + stime, when the bench started them).
``--ceiling`` adds Spark's own cost of the same reads: ``count()`` and an availableNow stream of as
many rows from a Python source with the connector's schema that only repeats one of the connector's
batches (no broker, no decoding), which the connector's reads cannot beat on the same machine.
Spark's processes are counted from its JVM down (the daemons the bench started are not Spark's).
``--broker-set key=value`` passes broker settings (e.g.
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


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> tuple[str, int, float]:
    """``(name, parent pid, CPU seconds of it and its reaped children)`` of process ``pid``."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text.rsplit(")", 1)[1].split()
    cpu = sum(int(x) for x in fields[11:15]) / _TICK  # utime stime cutime cstime
    return text[text.index("(") + 1 : text.rindex(")")], int(fields[1]), cpu


def _cpu_of(pids: list[int]) -> float:
    return sum(_proc_cpu(p)[2] for p in pids)


def _descendants_cpu() -> dict[str, float]:
    """CPU seconds of Spark's processes under this one: its JVM, and the Python workers the JVM
    started. Only the JVM's subtree counts: the NameServer and brokers this bench started are its
    children too (their CPU is the brokers' figure, not Spark's)."""
    procs: dict[int, tuple[str, int, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                procs[int(entry)] = _proc_cpu(int(entry))
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    kinds = {"JVM": 0.0, "Python workers": 0.0}
    me = os.getpid()
    todo = [pid for pid, (name, ppid, _) in procs.items() if ppid == me and name == "java"]
    for pid in todo:
        kinds["JVM"] += procs[pid][2]
    seen = set(todo)
    while todo:
        parent = todo.pop()
        for pid, (_, ppid, cpu) in procs.items():
            if ppid == parent and pid not in seen:
                seen.add(pid)
                todo.append(pid)
                kinds["Python workers"] += cpu
    return kinds


class CpuMeter:
    """CPU per row of a Spark read: Spark's processes (this one's descendants) and the brokers."""

    def __init__(self, brokers: list[int]) -> None:
        self.brokers = brokers

    def __enter__(self) -> CpuMeter:
        self.spark0, self.broker0 = _descendants_cpu(), _cpu_of(self.brokers)
        return self

    def __exit__(self, *exc: object) -> None:
        self.spark1, self.broker1 = _descendants_cpu(), _cpu_of(self.brokers)

    def line(self, rows: int) -> str:
        parts = {k: (self.spark1[k] - self.spark0[k]) * 1e6 / rows for k in self.spark0}
        if self.brokers:
            parts["broker"] = (self.broker1 - self.broker0) * 1e6 / rows
        shown = ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
        return f"CPU per row: {shown} (total {sum(parts.values()):.2f} us)"


def _read_options(ns: str, topic: str, extra: dict[str, str]) -> Any:
    """The connector's ``ReadOptions`` for reading ``topic`` of the cluster at ``ns`` outside Spark."""
    from pyspark.sql.datasource import CaseInsensitiveDict

    from rocketpy.spark.options import parse_read_options

    return parse_read_options(CaseInsensitiveDict({"namesrvAddr": ns, "topic": topic, **extra}))


def connector_drain(ns: str, topic: str, count: int, extra: dict[str, str], brokers: list[int]) -> None:
    """The connector's read outside Spark, in this process: rows/s, CPU per row by stage."""
    import rocketpy.spark.convert as convert
    import rocketpy.spark.source as source
    from rocketpy.spark.plan import plan_batch

    spent = {"decode": 0.0, "decode + Arrow": 0.0}

    def timed(fn: Any, stage: str) -> Any:
        def call(*args: Any) -> Any:
            t = time.process_time()
            try:
                return fn(*args)
            finally:
                spent[stage] += time.process_time() - t

        return call

    opts = _read_options(ns, topic, extra)
    ranges = plan_batch(opts)
    decode, to_batch = convert.decode_columns, source.to_record_batch
    convert.decode_columns = timed(decode, "decode")  # type: ignore[assignment]
    source.to_record_batch = timed(to_batch, "decode + Arrow")  # type: ignore[assignment]
    try:
        t0, cpu0, broker0 = time.perf_counter(), time.process_time(), _cpu_of(brokers)
        n = sum(b.num_rows for r in ranges for b in source.read_range(opts, r))
        took, cpu, broker = time.perf_counter() - t0, time.process_time() - cpu0, _cpu_of(brokers) - broker0
    finally:
        convert.decode_columns, source.to_record_batch = decode, to_batch  # type: ignore[assignment]
    assert n == count, n
    print(f"SDK      : connector pull + Arrow, one process, no Spark: {_rate(n, took)}")
    us = {k: v * 1e6 / n for k, v in spent.items()}
    pull = cpu * 1e6 / n - us["decode + Arrow"]
    broker_us = f"; broker {broker * 1e6 / n:.2f}" if brokers else ""
    print(
        f"CPU      : connector read {cpu * 1e6 / n:.2f} us/row: pulls (RPC, joining) {pull:.2f},"
        f" decode {us['decode']:.2f}, Arrow build {us['decode + Arrow'] - us['decode']:.2f}{broker_us}"
    )


def _available_now(stream: Any, tmp: str) -> tuple[Any, float]:
    """Run ``stream`` (a loaded streaming DataFrame) once with ``trigger(availableNow=True)`` into
    the ``noop`` sink, with a new checkpoint: the finished query and its seconds."""
    t0 = time.perf_counter()
    checkpoint = tempfile.mkdtemp(prefix="cp-", dir=tmp)  # a new query each run
    q = (
        stream.writeStream.format("noop").option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination(1800)
    return q, time.perf_counter() - t0


class Reads:
    """The Spark reads of one cluster's backlog (options: address, topic, account, pull size)."""

    def __init__(
        self,
        spark: Any,
        ns: str,
        topic: str,
        count: int,
        tmp: str,
        extra: dict[str, str],
        brokers: list[int] | None = None,
    ) -> None:
        self.spark, self.ns, self.topic, self.count, self.tmp, self.extra = (
            spark,
            ns,
            topic,
            count,
            tmp,
            extra,
        )
        self.brokers = brokers or []

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
        with CpuMeter(self.brokers) as cpu:
            t0 = time.perf_counter()
            n = self._options(self.spark.read).load().count()
            took = time.perf_counter() - t0
        assert n == self.count, n
        print(f"Spark    : batch read count(): {_rate(n, took)}; {cpu.line(n)}")
        return took

    def stream_s(self, limit: int | None = None) -> float:
        """One availableNow query over the whole backlog into ``noop`` (``limit`` rows a micro-batch)."""
        stream = self._options(self.spark.readStream).option("startingOffsets", "earliest")
        if limit:
            stream = stream.option("maxOffsetsPerTrigger", limit)
        with CpuMeter(self.brokers) as cpu:
            q, took = _available_now(stream.load(), self.tmp)
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        batches = sum(1 for p in q.recentProgress if p["numInputRows"])
        assert rows == self.count, rows
        rate = _rate(rows, took)
        print(f"Spark    : stream availableNow, {batches} micro-batch(es): {rate}; {cpu.line(rows)}")
        return took


def sample_batch(ns: str, topic: str, extra: dict[str, str]) -> Any:
    """The connector's first RecordBatch of the backlog (the rows the ceiling source repeats)."""
    from rocketpy.spark.plan import plan_batch
    from rocketpy.spark.source import read_range

    opts = _read_options(ns, topic, extra)
    return next(iter(read_range(opts, plan_batch(opts)[0])))


class Ceiling:
    """Spark's own cost of a Python source with the connector's schema, for ``count()`` and for an
    availableNow stream into ``noop``: the same number of rows, yielded by a source with no broker
    and no decoding as copies of ``sample`` (one of the connector's own batches), over
    ``partitions`` partitions as the connector plans one per queue. The connector's reads cannot be
    faster than these on the same machine."""

    def __init__(self, spark: Any, sample: Any, partitions: int, tmp: str) -> None:
        import pyarrow as pa

        self.spark, self.rows_a_batch, self.partitions, self.tmp = spark, sample.num_rows, partitions, tmp
        self.path = os.path.join(tmp, "ceiling-sample.arrow")
        with pa.OSFile(self.path, "wb") as f, pa.ipc.new_file(f, sample.schema) as w:
            w.write_batch(sample)
        spark.dataSource.register(_ceiling_source())

    def _options(self, builder: Any, rows: int) -> Any:
        return (
            builder.format("rocketpy-ceiling").option("path", self.path).option("count", str(rows))
            .option("parts", str(self.partitions))
        )  # fmt: skip

    def _line(self, what: str, rows: int, took: float, cpu: CpuMeter) -> None:
        print(
            f"Spark    : ceiling {what} (the same rows from a source with no broker, {self.rows_a_batch}"
            f" a batch, {self.partitions} partitions): {_rate(rows, took)}; {cpu.line(rows)}"
        )

    def count_s(self, count: int) -> float:
        self._options(self.spark.read, self.partitions * self.rows_a_batch).load().count()  # workers warm
        with CpuMeter([]) as cpu:
            t0 = time.perf_counter()
            n = self._options(self.spark.read, count).load().count()  # a new reader: options stay set
            took = time.perf_counter() - t0
        assert n == count, n
        self._line("count()", n, took, cpu)
        return took

    def stream_s(self, count: int) -> float:
        with CpuMeter([]) as cpu:
            q, took = _available_now(self._options(self.spark.readStream, count).load(), self.tmp)
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        assert rows == count, rows
        self._line("stream availableNow", rows, took, cpu)
        return took


def _ceiling_source() -> Any:
    """The ``rocketpy-ceiling`` data source (options: path of an Arrow file of one batch, count of
    rows, parts): batch reads and a stream whose offsets are a row count, from 0 to ``count``."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

    from rocketpy.spark.schema import SCHEMA_DDL

    class CeilingPartition(InputPartition):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    def settings(options: Any) -> tuple[str, int, int]:  # path, count, parts
        return options["path"], int(options["count"]), int(options["parts"])

    def split(rows: int, parts: int) -> list[Any]:
        share, extra = divmod(rows, parts)
        return [CeilingPartition(share + (i < extra)) for i in range(parts)]

    def copies(path: str, rows: int) -> Any:
        import pyarrow as pa

        with pa.memory_map(path) as src:
            batch = pa.ipc.open_file(src).get_batch(0)
        whole, rest = divmod(rows, batch.num_rows)
        for _ in range(whole):
            yield batch
        if rest:
            yield batch.slice(0, rest)

    class CeilingReader(DataSourceReader):
        def __init__(self, options: Any) -> None:
            self.path, self.count, self.parts = settings(options)

        def partitions(self) -> list[Any]:
            return split(self.count, self.parts)

        def read(self, partition: Any) -> Any:
            return copies(self.path, partition.rows)

    class CeilingStreamReader(DataSourceStreamReader):
        def __init__(self, options: Any) -> None:
            self.path, self.count, self.parts = settings(options)

        def initialOffset(self) -> dict[str, int]:
            return {"rows": 0}

        def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
            return {"rows": self.count}  # everything at once: no micro-batch limit to honour

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Any]:
            return split(end["rows"] - start["rows"], self.parts)

        def read(self, partition: Any) -> Any:
            return copies(self.path, partition.rows)

        def commit(self, end: dict[str, int]) -> None:
            pass

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketpy-ceiling"

        def schema(self) -> str:
            return SCHEMA_DDL

        def reader(self, schema: Any) -> Any:
            return CeilingReader(self.options)

        def streamReader(self, schema: Any) -> Any:
            return CeilingStreamReader(self.options)

    return CeilingSource


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

    ns, broker_pids = args.namesrv, []
    if ns is None:
        namesrv = stack.enter_context(start_namesrv(Path(tmp)))
        for _ in range(args.brokers):
            broker = stack.enter_context(start_broker(Path(tmp), namesrv.addr, **args.broker_props))
            broker_pids.append(broker.process.pid)
        ns = namesrv.addr
    brokers = "the cluster's brokers" if args.namesrv else f"{args.brokers} broker(s)"
    print(f"{args.count:,} x {args.body_size} B, {args.queues} queues a broker, {brokers}, namesrv {ns}")
    asyncio.run(fill(ns, topic, args.count, args.body_size, args.queues))
    asyncio.run(sdk_drain(ns, topic, args.count))
    connector_drain(ns, topic, args.count, args.extra, broker_pids)
    spark = local_session("rocketpy-bench", args.driver_memory)
    try:
        reads = Reads(spark, ns, topic, args.count, tmp, args.extra, broker_pids)
        reads.warm_up()
        best = min(reads.count_s() for _ in range(2))
        print(f"Spark    : batch read count() (best of 2): {_rate(args.count, best)}")
        ceiling = None
        if args.ceiling:
            ceiling = Ceiling(spark, sample_batch(ns, topic, args.extra), args.queues * args.brokers, tmp)
            floor = min(ceiling.count_s(args.count) for _ in range(2))
            print(
                f"Spark    : ceiling count() (best of 2): {_rate(args.count, floor)};"
                f" connector/ceiling {floor / best:.0%}"
            )
        reads.stream_s(max(1, args.count // 10))
        one = reads.stream_s()
        if ceiling is not None:
            floor = ceiling.stream_s(args.count)
            print(f"Spark    : availableNow in one micro-batch, connector/ceiling {floor / one:.0%}")
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
    pids: dict[str, list[int]] = {}
    for side, props in (("off", {}), ("on", {"aclEnable": True, "aclFile": acl_file})):
        namesrv = stack.enter_context(start_namesrv(Path(tmp), **props))
        broker_props = {"brokerName": "broker-a", **args.broker_props, **props}  # two clusters
        if props:
            broker_props.update(aclAccessKey=ADMIN[0], aclSecretKey=ADMIN[1])
        broker = stack.enter_context(start_broker(Path(tmp), namesrv.addr, **broker_props))
        pids[side] = [broker.process.pid]
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
            side: Reads(spark, ns, topic, args.count, tmp, extra, pids[side])
            for side, (ns, extra, _) in sides.items()
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
    ap.add_argument(
        "--ceiling",
        action="store_true",
        help="also count() the same rows from a Python source with no broker (Spark's own cost)",
    )
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
