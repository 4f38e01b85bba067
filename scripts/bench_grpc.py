#!/usr/bin/env python3
"""gRPC endpoint benchmark: SendMessage from a grpc.aio load generator vs the SDK over remoting.

Starts a NameServer and two idle brokers (one with the gRPC endpoint, one with
``grpcServerPort=-1``) and reports, in one run:

* the idle RSS of each broker after a settle time (target: the endpoint adds <= 30 MiB);
* SendMessage throughput, 1 KiB bodies, ``--inflight`` calls in flight from a ``grpc.aio`` load
  generator in its own process (``--entries`` messages per request, 1 by default), beside the
  SDK's remoting send rate (``rocketpy bench producer``, same in-flight count, auto-batch as the SDK
  defaults) against the same broker, in ABBA order over ``--rounds`` (target: gRPC >= 50 %);
* CPU per message of the broker and of each load generator (from /proc), which says where the
  time goes on a 2-core machine where client and broker share the cores.

Usage:  .venv/bin/python scripts/bench_grpc.py [--seconds 10] [--inflight 64] [--rounds 2] [--entries 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rocketpy import Admin  # noqa: E402
from tests.daemons import start_broker, start_namesrv  # noqa: E402

_COMPLETE = re.compile(r"\[Complete\] Send Total: (\d+) \| Send TPS: (\d+)")
TOPIC = "GrpcBench"
SETTLE_S = 5.0
RSS_TARGET_MIB = 30.0
RATIO_TARGET = 0.5


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the load generator (its own process) -------------------------------------------------------


async def generate(addr: str, seconds: float, inflight: int, entries: int, body_size: int) -> dict[str, Any]:
    """SendMessage calls, ``inflight`` at a time, for ``seconds``; messages sent and CPU used."""
    import grpc

    from rocketpy.grpc_api.v2 import definition_pb2 as pb
    from rocketpy.grpc_api.v2 import service_pb2 as spb

    body = os.urandom(body_size)
    md = [
        ("x-mq-client-id", f"bench@{os.getpid()}"),
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "GRPC_V2"),
    ]

    def request() -> bytes:
        msgs = []
        for _ in range(entries):
            m = pb.Message(topic=pb.Resource(name=TOPIC), body=body)
            m.system_properties.message_id = uuid.uuid4().hex.upper()
            m.system_properties.message_type = pb.NORMAL
            msgs.append(m)
        return spb.SendMessageRequest(messages=msgs).SerializeToString()

    async with grpc.aio.insecure_channel(addr) as channel:
        send = channel.unary_unary(
            "/apache.rocketmq.v2.MessagingService/SendMessage",
            response_deserializer=spb.SendMessageResponse.FromString,
        )
        await send(request(), metadata=md, timeout=10)  # warm the connection
        sent = failed = 0
        end = time.monotonic() + seconds
        cpu0, started = time.process_time(), time.monotonic()

        async def worker() -> None:
            nonlocal sent, failed
            while time.monotonic() < end:
                resp = await send(request(), metadata=md, timeout=10)
                if resp.status.code == pb.Code.OK:
                    sent += entries
                else:
                    failed += entries

        await asyncio.gather(*(worker() for _ in range(inflight)))
        elapsed = time.monotonic() - started
        return {"sent": sent, "failed": failed, "seconds": elapsed, "cpu": time.process_time() - cpu0}


# -- the runs -----------------------------------------------------------------------------------


def run_grpc(grpc_addr: str, a: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--generator", grpc_addr, "--seconds", str(a.seconds),
           "--inflight", str(a.inflight), "--entries", str(a.entries), "--body", str(a.body)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=a.seconds + 120)
    if proc.returncode != 0:
        raise SystemExit(f"gRPC load generator failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["tps"] = result["sent"] / result["seconds"]
    return result


def run_sdk(ns: str, a: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "rocketpy.bench", "producer", "-n", ns, "-t", TOPIC, "-s", str(a.body),
           "-d", str(a.seconds), "-w", str(a.inflight), "-m", "async"]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=a.seconds + 120)
    m = _COMPLETE.search(out)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"SDK bench failed ({proc.returncode}):\n{out[-3000:]}")
    return {"sent": int(m.group(1)), "tps": float(m.group(2)), "seconds": time.monotonic() - started}


async def create_topic(ns: str, broker_addr: str) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(TOPIC, broker_addr=broker_addr, read_queue_nums=8, write_queue_nums=8)


def measure(a: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-grpc-") as tmp:
        tmp_path = Path(tmp)
        ns = start_namesrv(tmp_path)
        on = start_broker(tmp_path, ns.addr, brokerName="broker-grpc")
        off = start_broker(tmp_path, ns.addr, brokerName="broker-nogrpc", grpcServerPort=-1)
        try:
            time.sleep(SETTLE_S)
            rss = {"on": rss_mib(on.pid), "off": rss_mib(off.pid)}
            off.terminate()
            asyncio.run(create_topic(ns.addr, on.addr))
            run_grpc(str(on.grpc_addr), argparse.Namespace(**{**vars(a), "seconds": 2.0}))  # warm-up
            rounds: list[dict[str, Any]] = []
            for i in range(a.rounds):
                order = ("sdk", "grpc") if i % 2 == 0 else ("grpc", "sdk")
                row: dict[str, Any] = {}
                for kind in order:
                    cpu0 = cpu_seconds(on.pid)
                    row[kind] = run_sdk(ns.addr, a) if kind == "sdk" else run_grpc(str(on.grpc_addr), a)
                    row[kind]["broker_cpu_us"] = (
                        (cpu_seconds(on.pid) - cpu0) / max(row[kind]["sent"], 1) * 1e6
                    )
                rounds.append(row)
        finally:
            on.terminate()
            ns.terminate()
    return {"rss_mib": rss, "rounds": rounds}


def report(result: dict[str, Any], a: argparse.Namespace) -> None:
    rss = result["rss_mib"]
    grown = rss["on"] - rss["off"]
    print(f"idle broker RSS: gRPC on {rss['on']:.1f} MiB, off {rss['off']:.1f} MiB: +{grown:.1f} MiB "
          f"(target <= {RSS_TARGET_MIB:.0f}) {'OK' if grown <= RSS_TARGET_MIB else 'ABOVE'}")  # fmt: skip
    print(
        f"1 KiB sends, {a.inflight} in flight, {a.entries} message(s) per gRPC request, {a.seconds:g} s a run"
    )
    print(f"{'round':>5} {'SDK msgs/s':>11} {'gRPC msgs/s':>12} {'ratio':>6} {'broker us/msg SDK':>18} "
          f"{'gRPC':>6} {'generator us/msg':>17}")  # fmt: skip
    ratios = []
    for i, r in enumerate(result["rounds"]):
        sdk, g = r["sdk"], r["grpc"]
        ratio = g["tps"] / max(sdk["tps"], 1)
        ratios.append(ratio)
        gen = g["cpu"] / max(g["sent"], 1) * 1e6
        print(f"{i + 1:>5} {sdk['tps']:>11,.0f} {g['tps']:>12,.0f} {ratio:>6.1%} "
              f"{sdk['broker_cpu_us']:>18.1f} {g['broker_cpu_us']:>6.1f} {gen:>17.1f}")  # fmt: skip
    ratios.sort()
    median = ratios[len(ratios) // 2]
    print(f"gRPC / SDK send rate (median of {len(ratios)}): {median:.1%} (target >= {RATIO_TARGET:.0%}) "
          f"{'OK' if median >= RATIO_TARGET else 'BELOW'}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--entries", type=int, default=1, help="messages per SendMessage request")
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--generator", metavar="ADDR", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.generator:
        print(json.dumps(asyncio.run(generate(a.generator, a.seconds, a.inflight, a.entries, a.body))))
        return
    result = measure(a)
    if a.json:
        print(json.dumps(result))
    report(result, a)


if __name__ == "__main__":
    main()
