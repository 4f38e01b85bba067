#!/usr/bin/env python3
"""Send and consume with message trace off and on (``enable_trace``), in one run, ABBA.

Starts one NameServer and one broker, creates the bench topic, then runs ``rocketpy bench
producer`` (``--send-count`` single sends of ``--body`` bytes through the SDK as applications write
them: ``--concurrency`` tasks each looping ``await producer.send(msg)``; ``--mode async`` uses
``send_async`` futures instead)
and ``rocketpy bench consumer --from-first`` (a push consumer reading ``--pull-count`` messages of
the backlog with a new group) with ``--trace`` off and on, ``--rounds`` times, each phase four runs
a round in ABBA order (off, on, on, off; the next round on, off, off, on: ``bench_abba``). Both
sides use the same broker, so with trace on the broker also stores the trace records (a Pub record
per sent message, a SubBefore and a SubAfter per consumed batch, sent as batched trace messages to
``RMQ_SYS_TRACE_TOPIC``), as it does in production.

Each run prints its TPS, the CPU time per message of the bench client (measured in it from the
client's start to its shutdown, which sends what trace still buffers; the interpreter's start-up
left out) and of the broker (/proc), and, with trace on, what the trace dispatcher appended and dropped (a run
that dropped traces is flagged: dropping is what keeps sends fast when the trace buffer is full,
and would make the on side look cheaper than it is). Ends, per phase, with each round's on/off
throughput ratio and their median against the 90 % target, and the same from CPU per message
(off CPU over on CPU: the throughput ratio a CPU-bound machine would see; on a shared machine the
throughput ratio also carries other processes' load, which CPU time per message does not).
``--control`` runs both sides with trace off: its ratios are the noise of the method here.

Usage: scripts/bench_trace.py [--rounds 4] [--send-count 20000] [--concurrency 128] [--body 1024]
                              [--mode sync|async] [--pull-count 40000] [--control]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_abba import abba, round_ratios  # noqa: E402
from bench_acl import load, process_cpu_s  # noqa: E402

from rocketpy import Admin  # noqa: E402
from tests.daemons import Daemon, start_broker, start_namesrv  # noqa: E402

TOPIC = "BenchmarkTest"
_SEND = re.compile(r"\[Complete\] Send Total: (\d+) \| Send TPS: (\d+)")
_CONSUME = re.compile(r"\[Complete\] Consume Total: (\d+) \| Consume TPS: (\d+)")
_CPU = re.compile(r"\[CPU\] Client CPU incl. start and shutdown\(us/msg\): ([0-9.]+)")
_TRACE = re.compile(r"\[Trace\] Appended: (\d+) \| Dropped: (\d+) \| Sent records: (\d+)")


class Run:
    """One bench run's figures."""

    def __init__(self, total: int, tps: int, client_us: float, broker_us: float, trace: str) -> None:
        self.total, self.tps = total, tps
        self.client_us, self.broker_us = client_us, broker_us
        self.trace = trace  # "appended/dropped/sent" ("" with trace off)

    @property
    def cpu_us(self) -> float:
        return self.client_us + self.broker_us


def bench(kind: str, ns: str, broker: Daemon, traced: bool, *args: str, child: str | None = None) -> Run:
    """Run one bench subprocess and read its summary lines (``child``: a script run as
    ``child --child <bench args>`` instead of ``python -m rocketpy.bench``)."""
    runner = ["-m", "rocketpy.bench"] if child is None else [child, "--child"]
    cmd = [sys.executable, *runner, kind, "-n", ns, "-t", TOPIC, *args]
    if traced:
        cmd.append("--trace")
    broker0 = process_cpu_s(broker.pid)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    broker_cpu = process_cpu_s(broker.pid) - broker0
    out = proc.stdout + proc.stderr
    m = (_SEND if kind == "producer" else _CONSUME).search(out)
    c, t = _CPU.search(out), _TRACE.search(out)
    if proc.returncode != 0 or m is None or c is None or (traced and t is None):
        raise SystemExit(f"bench {kind} failed ({proc.returncode}):\n{out[-3000:]}")
    total = int(m.group(1))
    trace = f"{t.group(1)}/{t.group(2)}/{t.group(3)}" if t else ""
    if t and int(t.group(2)):
        print(f"  warning: the trace buffer dropped {t.group(2)} records in this run")
    return Run(total, int(m.group(2)), float(c.group(1)), broker_cpu * 1e6 / max(total, 1), trace)


async def create_topic(ns: str) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=8, write_queue_nums=8)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="Each round runs every phase twice per side.")
    ap.add_argument("--send-count", type=int, default=20_000, help="Messages one send run sends.")
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument(
        "--mode",
        choices=("sync", "async"),
        default="sync",
        help="sync: --concurrency tasks awaiting producer.send(); async: send_async futures.",
    )
    ap.add_argument("--pull-count", type=int, default=40_000, help="Messages one consume run reads.")
    ap.add_argument("--control", action="store_true", help="Trace off on both sides: the method's noise.")
    return ap.parse_args()


def main() -> None:
    a = parse_args()
    runs: dict[tuple[str, str], list[Run]] = {}
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-trace-") as tmp:
        tmp_path = Path(tmp)
        ns = start_namesrv(tmp_path)
        broker = start_broker(tmp_path, ns.addr)
        try:
            asyncio.run(create_topic(ns.addr))
            print(
                f"load average before: {load()}"
                + ("  (control: trace off on both sides)" if a.control else "")
            )
            stored = bench("producer", ns.addr, broker, False, "-s", str(a.body), "-d", "1", "-w", "16").total
            send_args = ["-s", str(a.body), "-q", str(a.send_count), "-d", "300", "-m", a.mode]
            send_args += ["-w", str(a.concurrency)]
            for r in range(a.rounds):
                for what in ("send", "consume"):
                    for side in abba(r, "off", "on"):
                        traced = side == "on" and not a.control
                        if what == "send":
                            run = bench("producer", ns.addr, broker, traced, *send_args)
                            stored += run.total
                        else:
                            count = min(stored, a.pull_count)
                            group = f"bench_trace_{r}_{side}_{len(runs.get((what, side), []))}"
                            args = ["-g", group, "--from-first", "-q", str(count), "-d", "120"]
                            run = bench("consumer", ns.addr, broker, traced, *args)
                        runs.setdefault((what, side), []).append(run)
                        trace = f"  trace appended/dropped/sent {run.trace}" if run.trace else ""
                        cpu = f"client {run.client_us:.1f}, broker {run.broker_us:.1f}"
                        print(f"round {r + 1} {what:<7} trace {side:<3}: {run.tps:>8,} msgs/s  "
                              f"{run.cpu_us:6.1f} CPU µs/msg ({cpu})  ({run.total:,} msgs, "
                              f"load {load()}){trace}")  # fmt: skip
        finally:
            broker.terminate()
            ns.terminate()
    report(runs, a.control)
    print(f"load average after: {load()}")


def report(runs: dict[tuple[str, str], list[Run]], control: bool) -> None:
    """Per phase: each round's on/off ratio (throughput, and CPU per message), their median."""
    for what in ("send", "consume"):
        on, off = runs[(what, "on")], runs[(what, "off")]
        tps = round_ratios([float(r.tps) for r in on], [float(r.tps) for r in off])
        # CPU: off over on, so that, as throughput, 100 % is "no cost" and lower is worse
        cpu = round_ratios([1 / r.cpu_us for r in on], [1 / r.cpu_us for r in off])
        for name, ratios in (("throughput", tps), ("CPU-equivalent", cpu)):
            median = statistics.median(ratios)
            verdict = "control: trace off on both sides" if control else (
                "target >= 90% " + ("met" if median >= 0.9 else "NOT met"))  # fmt: skip
            print(f"{what} {name} on/off per round: {', '.join(f'{x:.1%}' for x in ratios)}; "
                  f"median {median:.1%} ({verdict})")  # fmt: skip
        off_cpu, on_cpu = statistics.mean(r.cpu_us for r in off), statistics.mean(r.cpu_us for r in on)
        print(f"{what} CPU µs/msg mean: off {off_cpu:.1f}, on {on_cpu:.1f}; best TPS off "
              f"{max(r.tps for r in off):,}, on {max(r.tps for r in on):,}")  # fmt: skip


if __name__ == "__main__":
    main()
