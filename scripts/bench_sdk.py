#!/usr/bin/env python3
"""SDK producer benchmark: a NameServer, a broker and the bench client as three processes.

Runs ``python -m rocketpy.bench producer`` three times against a fresh cluster (1 KiB bodies), after
a 2 s warm-up run: async single-message sends (``send_async``), awaited sends (``--awaited``
concurrent ``await producer.send()``, as users write it) and batch sends, each for ``--seconds``, and
prints the ``[Complete]`` lines and the targets (async >= 30,000 msgs/s, batch >= 100,000 msgs/s,
awaited sends <= 12 us of client CPU a message). Client CPU per message is the bench process's
``time.process_time()`` over the run divided by the messages sent. ``--pin``: the bench client on a
CPU of its own, the broker and the NameServer on the others (``pinning.py`` says why). Bounded:
every run has a duration and the daemons are stopped at the end.

Usage: scripts/bench_sdk.py [--seconds 5] [--concurrency 256] [--awaited 64] [--batch 64] [--body 1024]
[--no-auto-batch] [--pin]
(``scripts/bench_autobatch.py`` compares auto-batch on and off back to back.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import pinning  # noqa: E402

from rocketpy import Admin  # noqa: E402
from tests.daemons import start_broker, start_namesrv  # noqa: E402

_COMPLETE = re.compile(r"\[Complete\] Send Total: (\d+) \| Send TPS: (\d+)")
_CPU = re.compile(r"Client CPU\(us/msg\): ([\d.]+)")
_PER_REQUEST = re.compile(r"Msgs/request: ([\d.]+)")


def run_bench(ns: str, *args: str) -> tuple[int, int, str]:
    """Run one bench subprocess; returns (total, tps, output)."""
    cmd = [sys.executable, "-m", "rocketpy.bench", "producer", "-n", ns, *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    m = _COMPLETE.search(out)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"bench failed ({proc.returncode}):\n{out[-3000:]}")
    return int(m.group(1)), int(m.group(2)), out


async def create_topic(ns: str, topic: str, queues: int) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--awaited", type=int, default=64, help="concurrent awaited producer.send() calls")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--auto-batch", action=argparse.BooleanOptionalAction, default=True,
                    help="Producer(auto_batch=...) for the async sends")  # fmt: skip
    ap.add_argument(
        "--pin", action="store_true", help="the client on a CPU of its own, the daemons on the others"
    )
    a = ap.parse_args()
    cpus = pinning.split_cpus() if a.pin else None
    if a.pin and cpus is None:
        ap.error("--pin needs at least 2 CPUs")
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-") as tmp:
        tmp_path = Path(tmp)
        ns = start_namesrv(tmp_path)
        broker = start_broker(tmp_path, ns.addr)
        try:
            asyncio.run(create_topic(ns.addr, "BenchmarkTest", 8))
            if cpus is not None:  # the bench clients start from here and inherit its CPU
                client_cpu, others = cpus
                for pid in (broker.pid, ns.pid):
                    pinning.pin_process(pid, others)
                os.sched_setaffinity(0, {client_cpu})
            common = ["-t", "BenchmarkTest", "-s", str(a.body), "-d", str(a.seconds)]
            # warm-up: first connections, commitlog file pre-allocation, page faults
            run_bench(ns.addr, "-t", "BenchmarkTest", "-s", str(a.body), "-d", "2", "-b", "16", "-w", "4")
            coalesce = "--auto-batch" if a.auto_batch else "--no-auto-batch"
            total_a, tps_a, out_a = run_bench(
                ns.addr, *common, "-m", "async", "-w", str(a.concurrency), coalesce
            )
            total_w, tps_w, out_w = run_bench(ns.addr, *common, "-m", "sync", "-w", str(a.awaited), coalesce)
            total_b, tps_b, out_b = run_bench(ns.addr, *common, "-b", str(a.batch), "-w", "8")
        finally:
            broker.terminate()
            ns.terminate()
    print(next(line for line in out_a.splitlines() if line.startswith("[Complete]")))
    print(next(line for line in out_w.splitlines() if line.startswith("[Complete]")))
    print(out_b.strip().splitlines()[-1])
    print(
        f"async sends : {tps_a:>9,} msgs/s ({total_a:,} in {a.seconds}s)  target >= 30,000  "
        f"{'OK' if tps_a >= 30_000 else 'BELOW'}"
    )
    cpu_w = float(m.group(1)) if (m := _CPU.search(out_w)) else 0.0
    per_req = f", {m.group(1)} msgs/request" if (m := _PER_REQUEST.search(out_w)) else ""
    print(
        f"awaited sends: {tps_w:>8,} msgs/s ({total_w:,} in {a.seconds}s, {a.awaited} concurrent{per_req})"
        f"  client CPU {cpu_w:.1f} us/msg  target <= 12  {'OK' if 0 < cpu_w <= 12 else 'ABOVE'}"
    )
    print(
        f"batch sends : {tps_b:>9,} msgs/s ({total_b:,} in {a.seconds}s, batch {a.batch})"
        "  target >= 100,000  "
        f"{'OK' if tps_b >= 100_000 else 'BELOW'}"
    )
    print(f"(client on cpu {cpus[0]}, daemons on cpus {sorted(cpus[1])})" if cpus else "(unpinned)")


if __name__ == "__main__":
    main()
