#!/usr/bin/env python3
"""Auto-batch A/B: the SDK producer with ``--auto-batch`` and ``--no-auto-batch`` back to back.

Starts a NameServer and a broker (ASYNC_FLUSH, then a second cluster with SYNC_FLUSH), creates an
8-queue topic, and runs ``python -m rocketpy.bench producer`` (1 KiB bodies) for each case:
async sends with ``--concurrency`` in flight, and sequential sync sends (one in flight), each with
auto-batch on and off, printing TPS, RT p50/p99 and messages per request beside the targets, with
the load average before and after (the machine may be shared). Bounded: every run has a duration
and the daemons are stopped at the end.

The sequential cases are printed beside their ceiling, measured in the same rounds: a bare uvloop
echo server's sequential round trip of a send-sized frame (``bench_rpc.py``'s echo; target for the
ASYNC_FLUSH sync p50: <= 1.5x it).

With ``--rounds N`` every case runs N times, the cases interleaved round by round (so a slow
spell of a shared machine hits all of them), and each figure is the median with the range beside it.

Usage: scripts/bench_autobatch.py [--seconds 3] [--concurrency 64] [--body 1024] [--only async,sync]
                                  [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_rpc  # noqa: E402

from rocketpy import Admin  # noqa: E402
from rocketpy.protocol.codes import RequestCode  # noqa: E402
from rocketpy.remoting.codec import encode_frame_bytes  # noqa: E402
from rocketpy.remoting.command import RemotingCommand  # noqa: E402
from tests.daemons import start_broker, start_namesrv  # noqa: E402
from tests.integration.test_broker_util import send_ext  # noqa: E402

_COMPLETE = re.compile(
    r"\[Complete\] Send Total: (\d+) \| Send TPS: (\d+).*RT p50\(ms\): ([\d.]+) \| RT p99\(ms\): ([\d.]+)"
)
_BATCHED = re.compile(r"Msgs/request: ([\d.]+)")
TOPIC = "AutoBatchBench"


def run_bench(ns: str, *args: str) -> dict[str, float]:
    """One bench subprocess: tps, p50/p99 RT (ms) and messages per request."""
    cmd = [sys.executable, "-m", "rocketpy.bench", "producer", "-n", ns, "-t", TOPIC, *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    m = _COMPLETE.search(out)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"bench failed ({proc.returncode}):\n{out[-3000:]}")
    b = _BATCHED.search(out)
    return {
        "total": int(m.group(1)),
        "tps": int(m.group(2)),
        "p50": float(m.group(3)),
        "p99": float(m.group(4)),
        "per_request": float(b.group(1)) if b else 1.0,
    }


async def create_topic(ns: str) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=8, write_queue_nums=8)


def echo_p50_ms(body: int) -> float:
    """The bare echo's sequential round trip p50 (ms) of a SEND_MESSAGE_V2 frame with ``body`` bytes."""
    ext = send_ext(TOPIC, 0, queue_nums=8)
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"x" * body)
    frame = encode_frame_bytes(request)
    return bench_rpc.measure_echo_sequential_p50_us(1.0, frame) / 1000


def cluster_runs(
    tmp: Path, flush: str, a: argparse.Namespace, echo: list[float]
) -> list[tuple[str, list[dict[str, float]]]]:
    """Every case ``a.rounds`` times against one fresh NameServer + broker with ``flushDiskType=flush``
    (with sequential cases, the echo ceiling once per round, appended to ``echo``)."""
    ns = start_namesrv(tmp)
    broker = start_broker(tmp, ns.addr, flushDiskType=flush)
    cases: dict[str, list[str]] = {}
    common = ["-s", str(a.body), "-d", str(a.seconds)]
    for case in a.only.split(","):
        for coalesce in ("--auto-batch", "--no-auto-batch"):
            if case == "async":
                args = [*common, "-m", "async", "-w", str(a.concurrency), coalesce]
            else:
                args = [*common, "-m", "sync", "-w", "1", coalesce]
            cases[f"{flush:<11} {case:<5} {coalesce}"] = args
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    try:
        asyncio.run(create_topic(ns.addr))
        run_bench(ns.addr, "-s", str(a.body), "-d", "1", "-w", "8")  # warm-up: connections, page faults
        for _ in range(a.rounds):
            for name, args in cases.items():
                runs[name].append(run_bench(ns.addr, *args))
            if "sync" in a.only.split(","):
                echo.append(echo_p50_ms(a.body))
    finally:
        broker.terminate()
        ns.terminate()
    return list(runs.items())


def _cell(values: list[float], fmt: str) -> str:
    """The median, with the range after it when there is more than one run."""
    mid = format(statistics.median(values), fmt)
    if len(values) == 1:
        return mid
    return f"{mid} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--only", default="async,sync", help="comma-separated subset of: async, sync")
    ap.add_argument("--flush", default="ASYNC_FLUSH,SYNC_FLUSH", help="flushDiskType values to run")
    ap.add_argument("--rounds", type=int, default=1, help="runs of every case; figures are medians")
    a = ap.parse_args()
    load0 = os.getloadavg()
    rows = []
    echo: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rocketpy-autobatch-") as tmp:
        for flush in a.flush.split(","):
            rows += cluster_runs(Path(tmp) / flush, flush, a, echo)
    load1 = os.getloadavg()
    print(f"1 KiB bodies, {os.cpu_count()} cpus, client + namesrv + broker on this host;"
          f" load average {load0[0]:.2f} before, {load1[0]:.2f} after")  # fmt: skip
    rounds = f", median of {a.rounds} interleaved runs (range)" if a.rounds > 1 else ""
    print(f"figures{rounds}:")
    print(f"{'case':<40} " + "  ".join(("msgs/s", "p50 ms", "p99 ms", "msgs/req")))
    for name, rs in rows:
        cells = [
            _cell([r["tps"] for r in rs], ",.0f"),
            _cell([r["p50"] for r in rs], ".3f"),
            _cell([r["p99"] for r in rs], ".3f"),
            _cell([r["per_request"] for r in rs], ".2f"),
        ]
        print(f"{name:<40} " + "  ".join(cells))
    if echo:
        print(f"{'ceiling: bare echo, sequential':<40} {'':>7}  {_cell(echo, '.3f')}")
        for name, rs in rows:
            if name.startswith("ASYNC_FLUSH sync"):
                ratio = statistics.median(r["p50"] for r in rs) / statistics.median(echo)
                print(f"{name}: sync p50 {ratio:.2f}x the echo's (target <= 1.5x)")
    print("targets: ASYNC_FLUSH async >= 40,000 msgs/s; sync p50 <= 0.150 ms, p99 <= 0.400 ms;"
          " SYNC_FLUSH sync p50 <= 0.5 ms, async >= 16,000 msgs/s")  # fmt: skip


if __name__ == "__main__":
    main()
