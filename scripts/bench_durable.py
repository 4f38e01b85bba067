#!/usr/bin/env python3
"""Durable latency under load: sequential SYNC_FLUSH sends after a burst, beside the disk's own fsync.

Starts a NameServer and a SYNC_FLUSH broker (the production store sizes unless ``--small``: 1 GiB
commitlog files, the 420 MB index) as subprocesses, creates an 8-queue topic and measures, with
1 KiB bodies over raw RPC (no SDK):

  1. ``--sequential`` sequential SEND_MESSAGE_V2 round trips on the fresh broker (one in flight);
  2. ``--load`` sends with ``--inflight`` in flight (throughput; a send answered SYSTEM_BUSY by the
     broker's flow control is sent again 1 ms later, and counted);
  3. ``--sequential`` sequential round trips right after the load: the figure the target is about.

The disk's own figure is measured in the same windows: after every ``--block`` sends of a
sequential phase, as many 1 KiB appends to a file in the store's directory, each made durable with
``fdatasync`` (nothing of the bench is in flight meanwhile). The disk of a shared machine changes
speed from one second to the next, so a probe taken before or after would not compare. Prints each
phase's p50 / p99 beside its disk probe's, and the after-load p50 over its probe's p50 (target <= 2).

``--floor DIR`` (a tmpfs, e.g. /dev/shm) also measures, in each run, the sequential sends of a fresh
broker whose store is in DIR, where a sync costs nothing: the software part of a durable send (the
round trip, the send path, the hand-off to the flush thread and back). The after-load p50 is about
that floor plus the disk's sync, so the ratio target needs floor <= the disk's p50.

``--base DIR`` runs the daemons from another checkout too (e.g. a clone of main), in ABBA order;
``--rounds N`` repeats (ABBA rounds with ``--base``) and prints the medians.

Usage:  .venv/bin/python scripts/bench_durable.py [--load 100000] [--sequential 2000] [--base DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_abba import abba, same_core  # noqa: E402

import tests.daemons as test_daemons  # noqa: E402
from rocketpy.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from rocketpy.remoting.client import RemotingClient  # noqa: E402
from rocketpy.remoting.command import RemotingCommand  # noqa: E402
from tests.integration.test_broker_util import send_ext  # noqa: E402

BODY = b"d" * 1024
QUEUES = 8
TOPIC = "BenchDurable"
TIMEOUT_S = 10.0
SYSTEM_BUSY = int(ResponseCode.SYSTEM_BUSY)
#: The production store sizes (StoreConfig's defaults); ``--small`` keeps the test launcher's.
PRODUCTION_STORE = {
    "mappedFileSizeCommitLog": 1 << 30,
    "maxHashSlotNum": 5_000_000,
    "maxIndexNum": 20_000_000,
}


class DiskProbe:
    """Appends of ``size`` bytes to one file, each made durable with ``fdatasync``: this disk's
    ceiling for a durable append."""

    def __init__(self, directory: Path, size: int = 1024) -> None:
        self.path = directory / "disk-probe"
        self.data = b"p" * size
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

    def run(self, count: int) -> list[float]:
        """Seconds each of ``count`` appends took to be durable."""
        out = []
        for _ in range(count):
            t0 = time.perf_counter()
            os.write(self.fd, self.data)
            os.fdatasync(self.fd)
            out.append(time.perf_counter() - t0)
        return out

    def close(self) -> None:
        """Close and delete the file."""
        os.close(self.fd)
        self.path.unlink()


_EXTS = [send_ext(TOPIC, q, queue_nums=QUEUES) for q in range(QUEUES)]


def _cmd(n: int) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext=_EXTS[n % QUEUES], body=BODY)


async def sequential(
    client: RemotingClient, addr: str, count: int, probe: DiskProbe, block: int
) -> tuple[list[float], list[float]]:
    """Round-trip seconds of ``count`` sends, one at a time, and of the disk probe's appends run
    after every ``block`` of them."""
    sends: list[float] = []
    disk: list[float] = []
    for n in range(count):
        t0 = time.perf_counter()
        r = await client.invoke(addr, _cmd(n), TIMEOUT_S)
        sends.append(time.perf_counter() - t0)
        if r.code != 0:
            raise RuntimeError(f"send failed: {r.code} {r.remark}")
        if (n + 1) % block == 0 or n + 1 == count:
            disk += probe.run(block)
    return sends, disk


async def load(client: RemotingClient, addr: str, count: int, inflight: int) -> tuple[float, int]:
    """Send ``count`` messages keeping ``inflight`` in flight: (messages per second, SYSTEM_BUSY
    answers). A send refused SYSTEM_BUSY (the broker's flow control while its disk is behind) is
    sent again 1 ms later, as a client backs off."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    state = {"sent": 0, "acked": 0, "busy": 0}

    def fire(n: int) -> None:
        client.invoke_future(addr, _cmd(n), TIMEOUT_S).add_done_callback(lambda f: finished(n, f))

    def finished(n: int, fut: asyncio.Future[RemotingCommand]) -> None:
        exc = fut.exception()  # retrieved even after a failure ended the phase
        if done.done():
            return
        if exc is None and fut.result().code == SYSTEM_BUSY:
            state["busy"] += 1
            loop.call_later(0.001, fire, n)
            return
        if exc is None and fut.result().code != 0:
            exc = RuntimeError(f"send failed: {fut.result().code} {fut.result().remark}")
        if exc is not None:
            done.set_exception(exc)
            return
        state["acked"] += 1
        if state["sent"] < count:
            state["sent"] += 1
            fire(state["sent"] - 1)
        elif state["acked"] == count:
            done.set_result(None)

    t0 = time.perf_counter()
    for _ in range(min(inflight, count)):
        state["sent"] += 1
        fire(state["sent"] - 1)
    await done
    return count / (time.perf_counter() - t0), state["busy"]


async def broker_phases(addr: str, probe: DiskProbe, args: argparse.Namespace) -> dict[str, Any]:
    """Create the topic, then the sequential / load / sequential phases."""
    client = RemotingClient()
    try:
        ext = {"topic": TOPIC, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
        create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext=ext)
        r = await client.invoke(addr, create, 10)
        assert r.code == 0, r.remark
        fresh, fresh_disk = await sequential(client, addr, args.sequential, probe, args.block)
        rate, busy = await load(client, addr, args.load, args.inflight)
        after, after_disk = await sequential(client, addr, args.sequential, probe, args.block)
    finally:
        await client.close()
    return {
        "fresh": fresh,
        "fresh_disk": fresh_disk,
        "load_msgs_per_s": rate,
        "load_busy": busy,
        "after": after,
        "after_disk": after_disk,
    }


async def floor_phase(addr: str, probe: DiskProbe, args: argparse.Namespace) -> list[float]:
    """Create the topic, then the sequential sends of the fresh broker (``--floor``)."""
    client = RemotingClient()
    try:
        ext = {"topic": TOPIC, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
        create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext=ext)
        r = await client.invoke(addr, create, 10)
        assert r.code == 0, r.remark
        sends, _ = await sequential(client, addr, args.sequential, probe, args.sequential)
    finally:
        await client.close()
    return sends


def floor_run(base: Path | None, args: argparse.Namespace) -> list[float]:
    """Sequential SYNC_FLUSH sends of a fresh broker with its store in ``args.floor`` (a tmpfs)."""
    test_daemons.REPO_ROOT = base or ROOT
    with tempfile.TemporaryDirectory(prefix="bench-durable-floor-", dir=args.floor) as tmp:
        tmp_path = Path(tmp)
        ns = test_daemons.start_namesrv(tmp_path)
        props = _store_props(args)
        broker = test_daemons.start_broker(tmp_path, ns.addr, flushDiskType="SYNC_FLUSH", **props)
        probe = DiskProbe(tmp_path)
        try:
            runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
            return runner.run(floor_phase(broker.addr, probe, args))
        finally:
            probe.close()
            broker.terminate()
            ns.terminate()


def _store_props(args: argparse.Namespace) -> dict[str, Any]:
    return {} if args.small else dict(PRODUCTION_STORE)


def one_run(base: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    """Start the daemons (from ``base`` when given) and run the phases with the disk probe (and the
    floor's sends after them, with ``--floor``)."""
    test_daemons.REPO_ROOT = base or ROOT
    props = _store_props(args)
    with tempfile.TemporaryDirectory(prefix="bench-durable-", dir=args.dir) as tmp:
        tmp_path = Path(tmp)
        ns = test_daemons.start_namesrv(tmp_path)
        broker = test_daemons.start_broker(tmp_path, ns.addr, flushDiskType="SYNC_FLUSH", **props)
        probe = DiskProbe(tmp_path)
        try:
            runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
            out = runner.run(broker_phases(broker.addr, probe, args))
        finally:
            probe.close()
            broker.terminate()
            ns.terminate()
    if args.floor:
        out["floor"] = floor_run(base, args)
    out["daemons_from"] = str(base or ROOT)
    return out


def _ms(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def summary(run: dict[str, Any]) -> dict[str, float]:
    """The figures of one run (milliseconds, and the after-load p50 over its disk probe's p50)."""
    out = {"load_msgs_per_s": run["load_msgs_per_s"], "load_busy": run["load_busy"]}
    for phase in ("fresh", "fresh_disk", "after", "after_disk"):
        out[f"{phase}_p50_ms"] = _ms(run[phase], 0.5)
        out[f"{phase}_p99_ms"] = _ms(run[phase], 0.99)
    out["after_over_disk"] = out["after_p50_ms"] / out["after_disk_p50_ms"]
    if "floor" in run:
        out["floor_p50_ms"] = _ms(run["floor"], 0.5)
        out["floor_p99_ms"] = _ms(run["floor"], 0.99)
    return out


def _floor_text(s: dict[str, float]) -> str:
    if "floor_p50_ms" not in s:
        return ""
    return f" | floor (store on tmpfs) {s['floor_p50_ms']:.3f}/{s['floor_p99_ms']:.3f} ms"


def print_run(label: str, s: dict[str, float]) -> None:
    """One run's figures on one line."""
    print(
        f"{label:>8}: fresh p50/p99 {s['fresh_p50_ms']:.3f}/{s['fresh_p99_ms']:.3f} ms"
        f" (disk {s['fresh_disk_p50_ms']:.3f}/{s['fresh_disk_p99_ms']:.3f})"
        f" | load {s['load_msgs_per_s']:,.0f} msgs/s ({s['load_busy']:,.0f} busy)"
        f" | after load {s['after_p50_ms']:.3f}/{s['after_p99_ms']:.3f} ms"
        f" (disk {s['after_disk_p50_ms']:.3f}/{s['after_disk_p99_ms']:.3f})"
        f" = {s['after_over_disk']:.2f}x disk p50" + _floor_text(s),
        flush=True,
    )


def main() -> int:
    """Parse arguments, run (ABBA against ``--base`` when given), print."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--load", type=int, default=100_000, help="sends of the load phase (default 100,000)")
    parser.add_argument(
        "--inflight", type=int, default=64, help="sends in flight during the load (default 64)"
    )
    parser.add_argument("--sequential", type=int, default=2000, help="sends of each sequential phase")
    parser.add_argument(
        "--block", type=int, default=100, help="sends between two disk probes (as many appends)"
    )
    parser.add_argument("--small", action="store_true", help="the test launcher's small store files")
    parser.add_argument("--dir", default=None, help="parent of the store directory (default: the temp dir)")
    parser.add_argument(
        "--floor", default=None, help="a tmpfs: also time a fresh broker's sequential sends, its store there"
    )
    parser.add_argument("--base", type=Path, help="also run the daemons from this checkout, ABBA")
    parser.add_argument("--rounds", type=int, default=1, help="runs (ABBA rounds with --base)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()
    base = args.base.resolve() if args.base else None
    if base is not None:
        same_core(ROOT, base)
    results: dict[str, list[dict[str, float]]] = {"this": [], "base": []}
    print(f"load average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus", flush=True)
    for n in range(args.rounds):
        for side in abba(n, "this", "base") if base is not None else ("this",):
            s = summary(one_run(base if side == "base" else None, args))
            results[side].append(s)
            print_run(side, s)
    for side, runs in results.items():
        if runs:
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print_run(f"{side} med", med)
            verdict = "OK" if med["after_over_disk"] <= 2 else "MISSED"
            print(f"          target: after-load p50 <= 2 x the disk's p50 in the same windows: {verdict}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
