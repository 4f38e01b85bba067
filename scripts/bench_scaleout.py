#!/usr/bin/env python3
"""Scale-out benchmark: N brokers (one NameServer) on one host, 2N producer processes.

For each ``--brokers`` count: a NameServer, N brokers of one cluster, one topic with ``--queues``
write queues on every broker, a 2 s warm-up, then 2N ``python -m rocketpy.bench producer``
processes for ``--seconds``, each ``--concurrency`` awaited ``producer.send()`` calls (1 KiB bodies,
auto-batch on). Printed per run: the aggregate msgs/s (sum of the producers' ``[Complete]`` TPS),
messages per request (all producers' coalesced messages / requests), the producers' client CPU
per message, each broker's CPU (from /proc) per request and per message, and the aggregate against
N x the first count's figure.

Pinning: with at least 3N cores (``os.sched_getaffinity``) each broker gets its own core and each
producer its own core (``taskset``: brokers on cores 0..N-1, producers on N..3N-1, the NameServer
unpinned); with fewer cores the run is unpinned and says so (brokers and producers then share the
cores, and the aggregate measures the host, not the brokers). Bounded: every run has a duration
and the daemons are stopped at the end.

Usage: scripts/bench_scaleout.py [--brokers 1,2] [--seconds 5] [--concurrency 64] [--body 1024] [--queues 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rocketpy import Admin  # noqa: E402
from tests.daemons import Daemon, start_broker, start_namesrv  # noqa: E402

_COMPLETE = re.compile(r"\[Complete\] Send Total: (\d+) \| Send TPS: (\d+).*Client CPU\(us/msg\): ([\d.]+)")
_BATCH = re.compile(r"\[Auto-batch\] Requests: (\d+) \| Messages: (\d+)")
TOPIC = "ScaleOutTest"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def create_topic(ns: str, queues: int) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)


def producer_cmd(ns: str, a: argparse.Namespace, seconds: float, core: int | None) -> list[str]:
    cmd = [
        sys.executable, "-m", "rocketpy.bench", "producer", "-n", ns, "-t", TOPIC, "-s", str(a.body),
        "-d", str(seconds), "-m", "sync", "-w", str(a.concurrency), "--auto-batch",
    ]  # fmt: skip
    return cmd if core is None else ["taskset", "-c", str(core), *cmd]


def run_producers(
    ns: str, a: argparse.Namespace, n: int, seconds: float, cores: list[int] | None
) -> list[str]:
    """Run ``n`` producer processes at once; return their outputs."""
    procs = [
        subprocess.Popen(
            producer_cmd(ns, a, seconds, None if cores is None else cores[i]),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(n)
    ]
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=seconds + 120)
        if p.returncode != 0 or not _COMPLETE.search(out):
            raise SystemExit(f"producer failed ({p.returncode}):\n{out[-3000:]}")
        outs.append(out)
    return outs


def run(n: int, a: argparse.Namespace) -> dict[str, float]:
    """One run with ``n`` brokers; prints its lines and returns its figures."""
    have = len(os.sched_getaffinity(0))
    pinned = have >= 3 * n and shutil.which("taskset") is not None
    allowed = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="rocketpy-scaleout-") as tmp:
        tmp_path = Path(tmp)
        ns = start_namesrv(tmp_path)
        brokers: list[Daemon] = []
        try:
            for i in range(n):
                b = start_broker(tmp_path, ns.addr)
                brokers.append(b)
                if pinned:  # every thread of the broker on its own core
                    subprocess.run(["taskset", "-apc", str(allowed[i]), str(b.pid)], check=True,
                                   capture_output=True)  # fmt: skip
            asyncio.run(create_topic(ns.addr, a.queues))
            time.sleep(1.0)  # every broker registered the topic with the NameServer
            prod_cores = allowed[n : 3 * n] if pinned else None
            run_producers(ns.addr, a, 2 * n, 2.0, prod_cores)  # warm-up: connections, page faults
            cpu0 = [cpu_seconds(b.pid) for b in brokers]
            outs = run_producers(ns.addr, a, 2 * n, a.seconds, prod_cores)
            cpu1 = [cpu_seconds(b.pid) for b in brokers]
        finally:
            for b in brokers:
                b.terminate()
            ns.terminate()
    tps = total = requests = messages = 0
    client_cpu = 0.0
    for out in outs:
        m = _COMPLETE.search(out)
        assert m is not None
        total += int(m.group(1))
        tps += int(m.group(2))
        client_cpu += float(m.group(3)) * int(m.group(1))
        if mb := _BATCH.search(out):
            requests += int(mb.group(1))
            messages += int(mb.group(2))
    per_req = messages / requests if requests else 1.0
    broker_cpu = sum(c1 - c0 for c0, c1 in zip(cpu0, cpu1, strict=True))
    reqs = requests or total
    print(
        f"brokers={n} producers={2 * n} {'pinned' if pinned else f'UNPINNED ({have} cores < {3 * n})'}:"
        f" aggregate {tps:,} msgs/s | msgs/request {per_req:.2f}"
        f" | client CPU {client_cpu / total if total else 0:.1f} us/msg"
        f" | broker CPU {broker_cpu * 1e6 / reqs if reqs else 0:.1f} us/request,"
        f" {broker_cpu * 1e6 / total if total else 0:.1f} us/msg"
        f" ({broker_cpu / a.seconds * 100 / n:.0f} % of a core per broker)",
        flush=True,
    )
    return {"tps": tps, "per_req": per_req}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="1,2", help="broker counts, comma separated (e.g. 1,2,4,8)")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=64, help="awaited sends in flight per producer")
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--queues", type=int, default=8, help="write queues of the topic on each broker")
    a = ap.parse_args()
    counts = [int(x) for x in a.brokers.split(",") if x]
    print(f"uptime: {os.getloadavg()[0]:.2f} load, {len(os.sched_getaffinity(0))} cores", flush=True)
    first: dict[str, float] | None = None
    base_n = 0
    for n in counts:
        r = run(n, a)
        if first is None:
            first, base_n = r, n
        else:
            ideal = first["tps"] * n / base_n
            ratio = r["tps"] / ideal if ideal else 0.0
            print(f"  aggregate / ({n}/{base_n} x first) = {ratio:.2f}  (target >= 0.80 for N <= cores/3)")


if __name__ == "__main__":
    main()
