"""Message store benchmark: put / get throughput, many queues, SYNC_FLUSH group commit, recovery, RSS.

Prints each figure against its target (issue #3). Uses a temporary directory (removed at the end).
Quick run: ``python scripts/bench_store.py --messages 100000 --recovery-gib 0.1``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time

import bench_core
import uvloop

from rocketpy.broker.store import BrokerMessage, MessageStore, PutMessageStatus
from rocketpy.config import FlushDiskType, StoreConfig
from rocketpy.message import properties_to_string
from rocketpy.msgid import new_unique_id

BODY = b"x" * 1024
WARM_FILES = False  # --warm: warmMapedFileEnable=true (whole new commitlog files faulted in)


def _config(root: str, **kw: object) -> StoreConfig:
    base: dict[str, object] = dict(store_path_root_dir=root, mapped_file_size_commit_log=256 * 1024 * 1024,
                                   clean_resource_interval=3_600_000)  # fmt: skip
    base["warm_mapped_file_enable"] = WARM_FILES
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _messages(n: int, queues: int) -> list[BrokerMessage]:
    # Distinct messages as a producer sends them: TAGS + UNIQ_KEY properties.
    props = [
        properties_to_string({"TAGS": "TagA", "UNIQ_KEY": new_unique_id()}) for _ in range(min(n, 65536))
    ]
    return [BrokerMessage("BenchTopic", i % queues, BODY, properties=props[i % len(props)]) for i in range(n)]


async def bench_put_get(root: str, n: int, queues: int) -> tuple[float, float, float]:
    store = MessageStore(_config(root))
    await store.start()
    msgs = _messages(min(n, 200_000), queues)
    rss0 = _rss_mib()
    t0, c0, l0 = time.perf_counter(), time.process_time(), time.thread_time()
    for i in range(n):
        r = await store.put_message(msgs[i % len(msgs)])
        if r.status is not PutMessageStatus.PUT_OK:
            raise SystemExit(f"put failed: {r}")
    put_rate = n / (time.perf_counter() - t0)
    print(f"  (put: {n / (time.process_time() - c0):,.0f} msg/s per CPU-second of this process; "
          f"loop thread {1e6 * (time.thread_time() - l0) / n:.2f} us CPU/msg)", flush=True)  # fmt: skip
    await store.settle()
    rss_growth = _rss_mib() - rss0
    t0, c0 = time.perf_counter(), time.process_time()
    got = 0
    for q in range(queues):
        off = 0
        while True:
            g = store.get_message("g", "BenchTopic", q, off, 32)
            if g.message_count == 0:
                break
            got += g.message_count
            off = g.next_begin_offset
            g.release()
    get_rate = got / (time.perf_counter() - t0)
    print(
        f"  (get: {got / (time.process_time() - c0):,.0f} msg/s per CPU-second of this process)", flush=True
    )
    assert got == n, (got, n)
    await store.shutdown()
    return put_rate, get_rate, rss_growth


async def bench_batch(root: str, n: int, queues: int, batch: int) -> tuple[float, float]:
    """put_messages in batches of ``batch`` (one topic and queue each): (msg/s wall, CPU us/msg)."""
    store = MessageStore(_config(root))
    await store.start()
    msgs = _messages(min(n, 200_000), 1)
    batches = []
    for i in range(0, len(msgs), batch):
        group = msgs[i : i + batch]
        for m in group:
            m.queue_id = (i // batch) % queues
        batches.append(group)
    t0, c0 = time.perf_counter(), time.thread_time()
    done = 0
    while done < n:
        r = await store.put_messages(batches[(done // batch) % len(batches)])
        if r.status is not PutMessageStatus.PUT_OK:
            raise SystemExit(f"put failed: {r}")
        done += r.msg_num
    rate, cpu_us = done / (time.perf_counter() - t0), 1e6 * (time.thread_time() - c0) / done
    await store.shutdown()
    return rate, cpu_us


async def bench_sync_flush(root: str, n: int, putters: int) -> float:
    store = MessageStore(_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH))
    await store.start()
    msgs = _messages(n, 16)
    per = n // putters

    async def putter(k: int) -> None:
        for i in range(per):
            r = await store.put_message(msgs[k * per + i])
            if r.status is not PutMessageStatus.PUT_OK:
                raise SystemExit(f"put failed: {r}")

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for k in range(putters):
            tg.create_task(putter(k))
    rate = per * putters / (time.perf_counter() - t0)
    await store.shutdown()
    return rate


async def bench_recovery(root: str, gib: float) -> float:
    # default 1 GiB commitlog files: recovery scans the whole file holding the checkpoint
    cfg = _config(root, mapped_file_size_commit_log=1 << 30)
    store = MessageStore(cfg)
    await store.start()
    msgs = _messages(100_000, 16)
    total = int(gib * 1024**3) // (len(BODY) + 200)
    for i in range(total):
        await store.put_message(msgs[i % len(msgs)])
    await store.settle()
    await store.terminate()  # abnormal stop: abort file kept
    store = MessageStore(cfg)
    t0 = time.perf_counter()
    await store.start()
    elapsed = time.perf_counter() - t0
    assert store.get_max_offset_in_queue("BenchTopic", 0) == (total + 15) // 16
    await store.shutdown()
    return elapsed


def _line(name: str, value: float, unit: str, target: str, ok: bool) -> None:
    print(f"{name:<44} {value:>12,.1f} {unit:<8} target {target:<14} {'OK' if ok else 'MISSED'}", flush=True)


async def main(args: argparse.Namespace) -> None:
    base = tempfile.mkdtemp(prefix="bench_store_", dir=args.dir)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    only = set(args.only.split(",")) if args.only else {"put", "many", "batch", "sync", "recovery"}
    put16 = 0.0
    try:
        if "put" in only:
            put16, get16, rss = await bench_put_get(os.path.join(base, "a"), args.messages, 16)
            _line(
                f"put {args.messages:,} x 1 KiB over 16 queues",
                put16,
                "msg/s",
                ">= 150,000",
                put16 >= 150_000,
            )
            _line("get back in batches of 32", get16, "msg/s", ">= 300,000", get16 >= 300_000)
            _line("anonymous RSS growth during the puts", rss, "MiB", "flat", rss < 64)
            shutil.rmtree(os.path.join(base, "a"))
        if "many" in only:
            many, _, _ = await bench_put_get(os.path.join(base, "b"), args.messages, args.many_queues)
            target = f">= {0.8 * put16:,.0f}" if put16 else "80% of 16 queues"
            _line(f"put over {args.many_queues:,} queues", many, "msg/s", target, many >= 0.8 * put16)
            shutil.rmtree(os.path.join(base, "b"))
        if "batch" in only:
            rate, cpu_us = await bench_batch(os.path.join(base, "e"), args.messages, 16, 32)
            _line("put_messages, batches of 32 over 16 queues", rate, "msg/s", "cheaper than 1", True)
            print(f"  (batch: loop thread {cpu_us:.2f} us CPU/msg)", flush=True)
            shutil.rmtree(os.path.join(base, "e"))
        if "sync" in only:
            sync = await bench_sync_flush(os.path.join(base, "c"), args.sync_messages, 64)
            _line("SYNC_FLUSH, 64 concurrent putters", sync, "msg/s", ">= 20,000", sync >= 20_000)
            shutil.rmtree(os.path.join(base, "c"))
        if "recovery" in only:
            rec = await bench_recovery(os.path.join(base, "d"), args.recovery_gib)
            _line(
                f"abnormal-stop recovery of {args.recovery_gib} GiB", rec, "s", "<= 10 s (1 GiB)", rec <= 10
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--many-queues", type=int, default=10_000)
    p.add_argument("--sync-messages", type=int, default=100_000)
    p.add_argument("--recovery-gib", type=float, default=1.0)
    p.add_argument("--dir", default=None, help="parent of the temporary store directory")
    p.add_argument("--only", default="", help="comma-separated subset of: put, many, batch, sync, recovery")
    p.add_argument("--warm", action="store_true", help="warmMapedFileEnable=true")
    bench_core.add_options(p)
    args = p.parse_args()
    bench_core.apply(args)
    WARM_FILES = args.warm
    uvloop.install()
    asyncio.run(main(args))
