"""Scale and overload benchmark: 100,000 topics registering, and a flood that outruns the disk.

1. Registration (``--topics``, default 0,10000,100000): for each count a real NameServer and a
   broker whose ``config/topics.json`` holds that many topics (written before it starts). Reported:
   time from the broker's start to the NameServer routing its last topic, the route-query p50/p99/
   max of a client asking the NameServer all along, the NameServer's and the broker's RSS (peak
   and idle, from /proc) and the RSS per idle topic against the 0-topic run. ``--no-split``
   repeats the largest count with ``enableSplitRegistration=false`` (one request).
2. SYSTEM_BUSY flood (``--flood-seconds``, default 5): a SYNC_FLUSH broker whose disk is made slow
   (``ROCKETPY_STORE_FAULTS=flush_mib_per_s=2;flush_delay_ms=5``: every flush sleeps as long as
   writing its bytes at 2 MiB/s takes) and an open-loop flood of ``--flood-rate`` (4,000) sends/s of
   1 KiB, twice what that disk writes. Reported: sends accepted / answered SYSTEM_BUSY / other,
   and p50/p99/max of the accepted ones. ``--flood-compare`` runs the same flood with
   ``waitTimeMillsInSendQueue`` at its maximum (flow control off) as the A/B.

Print ``uptime`` with the figures: the machine may be shared. Quick: ``--topics 0,10000 --flood-seconds 3``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.daemons starts the daemons

from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicConfig
from tests.daemons import Daemon, start_broker, start_namesrv
from tests.integration.test_broker_util import send


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def write_topics(store: Path, n: int) -> None:
    """A topics.json of ``n`` topics (8 queues each) before the broker starts."""
    table = {
        f"scale-topic-{i:06d}": TopicConfig(
            topic_name=f"scale-topic-{i:06d}", read_queue_nums=8, write_queue_nums=8
        ).to_wire()
        for i in range(n)
    }
    (store / "config").mkdir(parents=True, exist_ok=True)
    doc = {"topicConfigTable": table, "dataVersion": {"timestamp": int(time.time() * 1000), "counter": 1}}
    (store / "config" / "topics.json").write_text(json.dumps(doc))


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))] if s else 0.0


async def route_probe(client: RemotingClient, ns: str, stop: asyncio.Event, lat_ms: list[float]) -> None:
    """Ask the NameServer for a route all along (TOPIC_NOT_EXIST counts too: it was answered)."""
    while not stop.is_set():
        t0 = time.perf_counter()
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext={"topic": "scale-topic-000000"})
        await client.invoke(ns, cmd, 30.0)
        lat_ms.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0.005)


async def last_topic_routed(client: RemotingClient, ns: str, n: int) -> bool:
    topic = f"scale-topic-{n - 1:06d}" if n else "TBW102"
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext={"topic": topic})
    return (await client.invoke(ns, cmd, 30.0)).code == ResponseCode.SUCCESS


async def registration(tmp: Path, n: int, split: bool) -> dict[str, float]:
    ns = start_namesrv(tmp)
    store = tmp / f"store-{n}-{split}"
    write_topics(store, n)
    client = RemotingClient()
    lat: list[float] = []
    stop = asyncio.Event()
    probe = asyncio.ensure_future(route_probe(client, ns.addr, stop, lat))
    ns_peak = rss_mib(ns.pid)
    t0 = time.monotonic()
    broker: Daemon | None = None
    try:
        broker = await asyncio.to_thread(
            start_broker, tmp, ns.addr, boot_timeout=600, storePathRootDir=store,
            enableSplitRegistration=split, mappedFileSizeCommitLog=64 << 20,
        )  # fmt: skip
        while not await last_topic_routed(client, ns.addr, n):
            ns_peak = max(ns_peak, rss_mib(ns.pid))
            await asyncio.sleep(0.02)
        took = time.monotonic() - t0
        ns_peak = max(ns_peak, rss_mib(ns.pid))
        stop.set()
        await probe
        await asyncio.sleep(2.0)  # idle
        return {
            "topics": n, "split": split, "register_s": took, "probe_p50_ms": pct(lat, 0.5),
            "probe_p99_ms": pct(lat, 0.99), "probe_max_ms": max(lat, default=0.0), "probes": len(lat),
            "namesrv_rss_peak": ns_peak, "namesrv_rss_idle": rss_mib(ns.pid),
            "broker_rss_idle": rss_mib(broker.pid),
        }  # fmt: skip
    finally:
        stop.set()
        await client.close()
        if broker is not None:
            broker.terminate()
        ns.terminate()
        shutil.rmtree(store, ignore_errors=True)


async def flood(tmp: Path, args: argparse.Namespace, flow_control: bool) -> dict[str, float]:
    """An open-loop flood (``--flood-rate`` sends/s whatever the answers) at a disk that writes
    ``--disk-mib-per-s`` (+ ``--flush-delay-ms`` per flush): it outruns the disk by design."""
    ns = start_namesrv(tmp)
    os.environ["ROCKETPY_STORE_FAULTS"] = (
        f"flush_delay_ms={args.flush_delay_ms};flush_mib_per_s={args.disk_mib_per_s}"
    )
    try:
        wait_ms = 200 if flow_control else 2**31 - 1
        b = start_broker(tmp, ns.addr, flushDiskType="SYNC_FLUSH", waitTimeMillsInSendQueue=wait_ms,
                         sendThreadPoolQueueCapacity=1 << 30, syncFlushTimeout=60_000)  # fmt: skip
    finally:
        del os.environ["ROCKETPY_STORE_FAULTS"]
    client = RemotingClient()
    accepted: list[float] = []
    counts = {"ok": 0, "busy": 0, "other": 0}
    body = b"x" * args.body_bytes

    async def one(k: int) -> None:
        t0 = time.perf_counter()
        try:
            r = await send(client, b.addr, "FloodBench", body, queue_id=k % 4, timeout_s=120)
        except Exception:  # a timeout counts as "other"
            counts["other"] += 1
            return
        if r.code == ResponseCode.SUCCESS:
            counts["ok"] += 1
            accepted.append((time.perf_counter() - t0) * 1000)
        elif r.code == ResponseCode.SYSTEM_BUSY:
            counts["busy"] += 1
        else:
            counts["other"] += 1

    tasks: set[asyncio.Task[None]] = set()
    try:
        await send(client, b.addr, "FloodBench", b"warm", queue_id=0, timeout_s=30)
        per_tick = max(1, int(args.flood_rate / 100))
        until = time.monotonic() + args.flood_seconds
        k = 0
        while time.monotonic() < until:
            for _ in range(per_tick):
                task = asyncio.ensure_future(one(k))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                k += 1
            await asyncio.sleep(0.01)
        await asyncio.gather(*tasks)
    finally:
        await client.close()
        b.terminate()
        ns.terminate()
    return {
        "flow_control": flow_control, **counts, "sent": k,
        "accepted_per_s": counts["ok"] / args.flood_seconds,
        "p50_ms": pct(accepted, 0.5), "p99_ms": pct(accepted, 0.99), "max_ms": max(accepted, default=0.0),
    }  # fmt: skip


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    print(f"load before: {os.getloadavg()}")
    try:
        counts = [int(x) for x in args.topics.split(",") if x.strip()]
        runs = [await registration(tmp, n, True) for n in counts]
        if args.no_split and counts:
            runs.append(await registration(tmp, max(counts), False))
        base = next((r for r in runs if r["topics"] == 0), None)
        for r in runs:
            line = (
                f"topics={r['topics']:>6} split={r['split']!s:5} register={r['register_s']:.2f}s "
                f"route probe p50/p99/max={r['probe_p50_ms']:.1f}/{r['probe_p99_ms']:.1f}/"
                f"{r['probe_max_ms']:.0f} ms ({r['probes']} probes) "
                f"namesrv RSS peak/idle={r['namesrv_rss_peak']:.0f}/{r['namesrv_rss_idle']:.0f} MiB "
                f"broker RSS idle={r['broker_rss_idle']:.0f} MiB"
            )
            if base is not None and r["topics"]:
                per_b = (r["broker_rss_idle"] - base["broker_rss_idle"]) * 1024 * 1024 / r["topics"]
                per_n = (r["namesrv_rss_idle"] - base["namesrv_rss_idle"]) * 1024 * 1024 / r["topics"]
                line += f" | per idle topic: broker {per_b:.0f} B, namesrv {per_n:.0f} B"
            print(line, flush=True)
        if args.flood_seconds > 0:
            modes = [True, False] if args.flood_compare else [True]
            for fc in modes:
                f = await flood(tmp, args, fc)
                print(
                    f"flood {args.flood_seconds:g}s at {args.flood_rate}/s of {args.body_bytes} B, disk "
                    f"{args.disk_mib_per_s} MiB/s +{args.flush_delay_ms} ms/flush, flow control "
                    f"{'on ' if fc else 'off'}: sent={f['sent']} accepted={f['ok']}"
                    f" ({f['accepted_per_s']:.0f}/s)"
                    f" SYSTEM_BUSY={f['busy']} other={f['other']} accepted p50/p99/max="
                    f"{f['p50_ms']:.0f}/{f['p99_ms']:.0f}/{f['max_ms']:.0f} ms",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", default="0,10000,100000", help="comma-separated topic counts")
    ap.add_argument("--no-split", action="store_true", help="also register the largest count in one request")
    ap.add_argument("--flood-seconds", type=float, default=5.0)
    ap.add_argument("--flood-rate", type=int, default=4000, help="sends per second, open loop")
    ap.add_argument("--body-bytes", type=int, default=1024)
    ap.add_argument("--disk-mib-per-s", type=float, default=2.0, help="injected disk write rate")
    ap.add_argument("--flush-delay-ms", type=int, default=5, help="injected delay per flush")
    ap.add_argument("--flood-compare", action="store_true", help="also flood with flow control off")
    uvloop.run(main(ap.parse_args()))
