#!/usr/bin/env python3
"""Send and pull throughput with the plain ACL on vs off, in one run.

Starts two clusters side by side (a NameServer and a broker each): one with ``aclEnable=false``,
one with ``aclEnable=true`` where every request is signed (HmacSHA1) by the client and checked by the
broker. Then alternates the bench client between them, ``--rounds`` times: ``bench producer`` (async
sends, 1 KiB) and ``bench consumer --from-first`` (push consumer pulling the backlog just sent).
Prints every run, the best of each side, the on/off ratio against the 10 % target and the load
average (the machine may be shared). Bounded: every run has a duration; the daemons are stopped.

Usage: scripts/bench_acl.py [--seconds 4] [--rounds 2] [--concurrency 128] [--body 1024]
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


def bench(kind: str, ns: str, acl: bool, *args: str) -> tuple[int, int]:
    """Run one bench subprocess; return its (total, TPS)."""
    cmd = [sys.executable, "-m", "rocketpy.client.bench", kind, "-n", ns, "-t", TOPIC, *args]
    if acl:
        cmd += ["--access-key", KEYS[0], "--secret-key", KEYS[1]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    m = (_SEND if kind == "producer" else _CONSUME).search(out)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"bench {kind} failed ({proc.returncode}):\n{out[-3000:]}")
    return int(m.group(1)), int(m.group(2))


async def create_topic(ns: str, acl: bool) -> None:
    keys = {"access_key": KEYS[0], "secret_key": KEYS[1]} if acl else {}
    async with Admin(ns, **keys) as admin:  # type: ignore[arg-type]
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=8, write_queue_nums=8)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--body", type=int, default=1024)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-acl-") as tmp:
        tmp_path = Path(tmp)
        acl_file = tmp_path / "plain_acl.yml"
        acl_file.write_text(ACL_YML)
        started: list[Daemon] = []
        try:
            ns_off = start_namesrv(tmp_path)
            started += [ns_off, start_broker(tmp_path, ns_off.addr)]
            ns_on = start_namesrv(tmp_path)
            acl = {"aclEnable": True, "aclFile": acl_file}
            started += [ns_on, start_broker(tmp_path, ns_on.addr, **acl)]
            clusters = {"off": ns_off.addr, "on": ns_on.addr}
            for side, ns in clusters.items():
                asyncio.run(create_topic(ns, side == "on"))
            print(f"load average before: {load()}")
            send: dict[str, list[int]] = {"off": [], "on": []}
            pull: dict[str, list[int]] = {"off": [], "on": []}
            common = ["-s", str(a.body), "-d", str(a.seconds), "-m", "async", "-w", str(a.concurrency)]
            backlog = {"off": 0, "on": 0}  # messages stored so far: what a new group pulls from the start
            for side, ns in clusters.items():  # warm-up: connections, commitlog pre-allocation
                warm = ["-s", str(a.body), "-d", "1", "-w", "16"]
                backlog[side] += bench("producer", ns, side == "on", *warm)[0]
            for r in range(a.rounds):
                for side, ns in clusters.items():
                    total, tps = bench("producer", ns, side == "on", *common)
                    backlog[side] += total
                    send[side].append(tps)
                    print(f"round {r + 1} send ACL {side:<3}: {tps:>8,} msgs/s  (load {load()})")
                for side, ns in clusters.items():
                    pull_args = [
                        "-g",
                        f"bench_acl_{r}",
                        "--from-first",
                        "-q",
                        str(backlog[side]),
                        "-d",
                        "120",
                    ]
                    _, tps = bench("consumer", ns, side == "on", *pull_args)
                    pull[side].append(tps)
                    print(f"round {r + 1} pull ACL {side:<3}: {tps:>8,} msgs/s (of {backlog[side]:,})")
        finally:
            for daemon in reversed(started):
                daemon.terminate()
    for what, figures in (("send", send), ("pull", pull)):
        off, on = max(figures["off"]), max(figures["on"])
        ratio = on / off if off else 0.0
        verdict = "OK" if ratio >= 0.9 else "BELOW"
        print(
            f"{what}: ACL off {off:>8,} msgs/s  ACL on {on:>8,} msgs/s  on/off {ratio:.1%}  "
            f"target >= 90%  {verdict}"
        )
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
