#!/usr/bin/env python3
"""Send and pull throughput with the plain ACL on vs off, in one run.

Starts two clusters side by side (a NameServer and a broker each): one with ``aclEnable=false``, one
with ``aclEnable=true`` where every request is signed (HmacSHA1) by the client and checked by the
broker. Then runs the bench client against both, ``--rounds`` times, each phase four times a round
in ABBA order (off, on, on, off; the next round on, off, off, on): ``bench producer`` (async single
sends of ``--body`` bytes, then batch sends of ``--batch``) and ``bench consumer --from-first`` (a
push consumer pulling the backlog stored so far, as many messages on both sides, at most
``--pull-count``). Each run prints its TPS and the CPU time per message of the client process and
of the broker, and their sum (rusage and /proc; it includes the bench process's start-up, so compare
runs of similar message counts). Ends, per phase, with each round's on/off ratio and their median
against the 10 % target, the best TPS of each side, and the load average (the machine may be
shared). The verdict is the median of the rounds' ratios (a round's two runs on over its two runs
off): runs seconds apart, in both orders, while this machine's throughput swings by up to 15 % from
minute to minute, so comparing the best of each side measured the swings as much as the ACL.
``--control`` runs the same with ACL off on both clusters (nothing signed): its ratios are the
noise of the method itself on this machine, the yardstick for reading the real run's. Bounded:
every run has a duration or a count and a timeout; the daemons are stopped.

Usage: scripts/bench_acl.py [--seconds 4] [--rounds 8] [--concurrency 128] [--body 1024] [--batch 32]
                            [--pull-count 600000] [--no-auto-batch] [--control]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_abba import abba, round_ratios  # noqa: E402

from rocketpy import Admin  # noqa: E402
from tests.daemons import Daemon, start_broker, start_namesrv  # noqa: E402

KEYS = ("benchAdmin", "benchSecret01")
ACL_YML = f"""\
accounts:
  - accessKey: {KEYS[0]}
    secretKey: {KEYS[1]}
    admin: true
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [BenchmarkTest=PUB|SUB]
"""
TOPIC = "BenchmarkTest"
_SEND = re.compile(r"\[Complete\] Send Total: (\d+) \| Send TPS: (\d+)")
_CONSUME = re.compile(r"\[Complete\] Consume Total: (\d+) \| Consume TPS: (\d+)")
_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench(kind: str, ns: str, broker: Daemon, acl: bool, *args: str) -> tuple[int, int, float, float]:
    """Run one bench subprocess; return (messages, TPS, CPU µs per message of the client, of the broker)."""
    cmd = [sys.executable, "-m", "rocketpy.bench", kind, "-n", ns, "-t", TOPIC, *args]
    if acl:
        cmd += ["--access-key", KEYS[0], "--secret-key", KEYS[1]]
    client0, broker0 = children_cpu_s(), process_cpu_s(broker.pid)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    client, broker_cpu = children_cpu_s() - client0, process_cpu_s(broker.pid) - broker0
    out = proc.stdout + proc.stderr
    m = (_SEND if kind == "producer" else _CONSUME).search(out)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"bench {kind} failed ({proc.returncode}):\n{out[-3000:]}")
    total = int(m.group(1))
    per_msg = 1e6 / max(total, 1)
    return total, int(m.group(2)), client * per_msg, broker_cpu * per_msg


async def create_topic(ns: str, acl: bool) -> None:
    keys = {"access_key": KEYS[0], "secret_key": KEYS[1]} if acl else {}
    async with Admin(ns, **keys) as admin:  # type: ignore[arg-type]
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=8, write_queue_nums=8)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    # 8: one round's ratio moves by 5-12 % in a control run here; a median of 4 still moved by 5 %
    ap.add_argument("--rounds", type=int, default=8, help="Each round runs every phase on, off, off, on.")
    ap.add_argument("--pull-count", type=int, default=600_000, help="Most messages one pull run reads.")
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32, help="Messages per batch send.")
    ap.add_argument(
        "--auto-batch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Single sends coalesced by the SDK (default) or one request each (--no-auto-batch).",
    )
    ap.add_argument(
        "--control", action="store_true", help="ACL off on both sides: the method's own noise (A/A)."
    )
    a = ap.parse_args()
    runs: dict[tuple[str, str], list[tuple[int, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-acl-") as tmp:
        tmp_path = Path(tmp)
        acl_file = tmp_path / "plain_acl.yml"
        acl_file.write_text(ACL_YML)
        on_props: dict[str, object] = {} if a.control else {"aclEnable": True, "aclFile": acl_file}
        signed = not a.control  # the "on" side's clients sign their requests
        started: list[Daemon] = []
        try:
            clusters: dict[str, tuple[str, Daemon]] = {}
            for side, props in (("off", {}), ("on", on_props)):
                ns = start_namesrv(tmp_path)
                broker = start_broker(tmp_path, ns.addr, **props)
                started += [ns, broker]
                clusters[side] = (ns.addr, broker)
                asyncio.run(create_topic(ns.addr, signed and side == "on"))
            if a.control:
                print("control run: ACL off on both clusters; 'on' is the second cluster, unsigned")
            print(f"load average before: {load()}")
            backlog = {"off": 0, "on": 0}  # messages stored so far: what a new group pulls from the start
            for side, (ns, broker) in clusters.items():  # warm-up: connections, commitlog pre-allocation
                warm = ["-s", str(a.body), "-d", "1", "-w", "16"]
                backlog[side] += bench("producer", ns, broker, signed and side == "on", *warm)[0]
            send_args = ["-s", str(a.body), "-d", str(a.seconds), "-m", "async", "-w", str(a.concurrency)]
            if not a.auto_batch:  # one request per send: a signature per message on both sides
                send_args.append("--no-auto-batch")
            batch_args = ["-s", str(a.body), "-d", str(a.seconds), "-b", str(a.batch), "-w", "8"]
            for r in range(a.rounds):
                for what in ("send", "batch", "pull"):
                    for side, (ns, broker) in abba(r, *clusters.items()):
                        acl_on = signed and side == "on"
                        if what == "pull":
                            # the same count on both sides: the fixed start-up cost is spread alike
                            count = min(*backlog.values(), a.pull_count)
                            pull_args = ["-g", f"bench_acl_{r}_{len(runs.get((what, side), []))}"]
                            pull_args += ["--from-first", "-q", str(count), "-d", "120"]
                            total, tps, client, server = bench("consumer", ns, broker, acl_on, *pull_args)
                        else:
                            args = send_args if what == "send" else batch_args
                            total, tps, client, server = bench("producer", ns, broker, acl_on, *args)
                            backlog[side] += total
                        runs.setdefault((what, side), []).append((tps, client + server))
                        print(f"round {r + 1} {what:<5} ACL {side:<3}: {tps:>8,} msgs/s  "
                              f"{client + server:6.1f} CPU µs/msg (client {client:.1f}, broker {server:.1f})"
                              f"  ({total:,} msgs, load {load()})")  # fmt: skip
        finally:
            for daemon in reversed(started):
                daemon.terminate()
    for what in ("send", "batch", "pull"):
        off, on = runs[(what, "off")], runs[(what, "on")]
        ratios = round_ratios([t for t, _ in on], [t for t, _ in off])
        median = statistics.median(ratios)
        off_tps, on_tps = max(t for t, _ in off), max(t for t, _ in on)
        off_cpu, on_cpu = statistics.mean(c for _, c in off), statistics.mean(c for _, c in on)
        passed = "OK" if median >= 0.9 else "BELOW"
        verdict = "control: no ACL on either side" if a.control else f"target >= 90% {passed}"
        print(f"{what}: on/off per round {', '.join(f'{x:.1%}' for x in ratios)}: median {median:.1%} "
              f"({verdict}); best TPS off {off_tps:,} on {on_tps:,} "
              f"({on_tps / off_tps if off_tps else 0:.1%}); CPU µs/msg off {off_cpu:.1f} on {on_cpu:.1f} "
              f"(+{(on_cpu / off_cpu - 1) if off_cpu else 0:.1%})")  # fmt: skip
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
