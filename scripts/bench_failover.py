"""Controller mode benchmark: failover time per fault kind under load, and controller mode's cost.

    .venv/bin/python scripts/bench_failover.py     # temporary etcd, NameServer and brokers (needs etcd)

1. cost: ``--count`` 1 KiB single sends with ``--inflight`` in flight against a plain SYNC_MASTER +
   SLAVE pair and against a controller-mode pair (brokerRole=SYNC_MASTER: acknowledged once the
   SyncStateSet has the message), alternated ``--cost-runs`` times in this one run; prints each
   rate, the medians and their ratio.
2. failover: a controller-mode group of ``--replicas`` brokers (2: a 2-core machine runs etcd, the
   NameServer, the brokers and this load at once) under ``--rate`` msgs/s (256-byte messages, sent
   asynchronously on a fixed pace); for each fault kind in ``--faults`` (``kill`` = kill -9 of the
   master, ``stop`` = SIGSTOP past the lease, ``elect`` = mqadmin electMaster), ``--rounds`` times:
   the time from the fault to the first acknowledged send on the new master. A killed master is
   restarted on its store, a stopped one continued, and the next round waits until every replica is
   in the SyncStateSet again. Each round also prints the acknowledgement rate of the 3 s before the
   fault (what the machine sustained). Prints every time, then the median and max per kind. The lease is
   ``--lease`` seconds (5: the default of ``controllerLeaseTtlSeconds``).

Figures on a shared 2-core machine are noisy: run it more than once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketpy import Admin, Message, Producer
from rocketpy.msgid import decode_offset_msg_id

BODY = b"x" * 1024
FAST = {"haSendHeartbeatInterval": 1000, "mappedFileSizeCommitLog": 1 << 30, "registerNameServerPeriod": 5000}


async def inflight_rate(ns: str, topic: str, count: int, inflight: int) -> float:
    """Sends per second with ``inflight`` sends outstanding (the topic exists)."""
    async with Producer("bench_fo_" + topic, ns) as p:
        for _ in range(50):  # warm up: routes, connections
            await p.send(Message(topic, BODY))
        sem = asyncio.Semaphore(inflight)

        async def one() -> None:
            async with sem:
                r = await p.send(Message(topic, BODY))
                assert r.status.name == "SEND_OK", r.status

        t0 = time.monotonic()
        await asyncio.gather(*(one() for _ in range(count)))
        return count / (time.monotonic() - t0)


async def role(admin: Admin, addr: str) -> dict[str, str]:
    try:
        return await admin.broker_runtime_info(addr)
    except Exception:
        return {}


async def wait_for(pred: Any, limit_s: float, what: str) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = await pred()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{what}: not within {limit_s:g}s")


class PacedLoad:
    """``rate`` async sends per second; every acknowledgement's time and broker address are kept."""

    def __init__(self, producer: Producer, topic: str, rate: int, max_pending: int = 4000) -> None:
        self.producer, self.topic, self.rate, self.max_pending = producer, topic, rate, max_pending
        self.acks: list[tuple[float, str]] = []
        self.sent = self.failed = self.skipped = self.pending = 0
        self.running = True

    def _done(self, fut: asyncio.Future[Any]) -> None:
        self.pending -= 1
        if fut.cancelled() or fut.exception() is not None:
            self.failed += 1
            return
        r = fut.result()
        if r.status.name == "SEND_OK":
            ip, port, _ = decode_offset_msg_id(r.offset_msg_id)
            self.acks.append((time.monotonic(), f"{ip}:{port}"))

    async def run(self) -> None:
        tick_s, started, issued = 0.01, time.monotonic(), 0
        while self.running:
            due = int((time.monotonic() - started) * self.rate)
            while issued < due:
                issued += 1
                if self.pending >= self.max_pending:
                    self.skipped += 1
                    continue
                self.pending += 1
                self.sent += 1
                fut = self.producer.send_async(Message(self.topic, b"y" * 256))
                fut.add_done_callback(self._done)
            await asyncio.sleep(tick_s)

    def rate_before(self, t: float, window_s: float = 3.0) -> float:
        """Acknowledgements per second in the ``window_s`` before ``t``."""
        return sum(1 for at, _ in self.acks if t - window_s <= at < t) / window_s

    def first_ack_after(self, t: float, not_addr: str) -> float | None:
        for at, addr in self.acks:
            if at >= t and addr != not_addr:
                return at - t
        return None


class Group:
    """A controller-mode group of three brokers started through the test launcher."""

    def __init__(self, tmp: Path, ns: str, etcd: str, lease_s: int) -> None:
        self.tmp, self.ns = tmp, ns
        self.props = {
            **FAST,
            "enableControllerMode": True,
            "etcdEndpoints": etcd,
            "brokerName": "bench-fo",
            "brokerRole": "SYNC_MASTER",
            "controllerLeaseTtlSeconds": lease_s,
            "haHousekeepingInterval": 5000,
            "haMaxTimeSlaveNotCatchup": 5000,
        }
        self.brokers: list[Any] = []

    def start(self, i: int | None = None, **extra: Any) -> Any:
        from tests.daemons import start_broker

        d = start_broker(self.tmp, self.ns, **{**self.props, **extra})
        if i is None:
            self.brokers.append(d)
        else:
            self.brokers[i] = d
        return d

    async def master(self, admin: Admin) -> Any:
        async def find() -> Any:
            info = await admin.cluster_info()
            routed = {bd.broker_addrs.get(0) for bd in info.broker_addr_table.values()}
            for d in self.brokers:
                if (
                    d.returncode is None
                    and d.addr in routed
                    and (await role(admin, d.addr)).get("controllerRole") == "MASTER"
                ):
                    return d
            return None

        return await wait_for(find, 60, "a master")

    async def all_in_sync(self, admin: Admin) -> None:
        async def full() -> bool:
            m = await self.master(admin)
            return len((await role(admin, m.addr)).get("syncStateSet", "").split(",")) == len(self.brokers)

        await wait_for(full, 60, "every broker in the SyncStateSet")


async def failover(
    group: Group, ns: str, rate: int, faults: list[str], rounds: int
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {f: [] for f in faults}
    async with Admin(ns) as admin:
        await admin.create_topic("BenchFailover", "DefaultCluster", read_queue_nums=8, write_queue_nums=8)
        await group.all_in_sync(admin)
        async with Producer("bench_fo_load", ns, send_timeout=3.0) as producer:
            load = PacedLoad(producer, "BenchFailover", rate)
            runner = asyncio.ensure_future(load.run())
            try:
                await asyncio.sleep(3.0)
                for _ in range(rounds):
                    for fault in faults:
                        before = load.rate_before(time.monotonic())
                        took = await one_round(group, admin, load, fault)
                        out[fault].append(took)
                        print(
                            f"  {fault:5s}: first acknowledged send on the new master after {took:.2f} s "
                            f"(load before the fault: {before:,.0f} acknowledged/s)"
                        )
                        await group.all_in_sync(admin)
                        await asyncio.sleep(2.0)
            finally:
                load.running = False
                await runner
            span = max(1e-9, (load.acks[-1][0] - load.acks[0][0]) if load.acks else 1e-9)
            print(
                f"  load: {load.sent:,} sent, {len(load.acks):,} acknowledged "
                f"({len(load.acks) / span:,.0f}/s overall), {load.failed:,} failed, "
                f"{load.skipped:,} skipped (too many pending)"
            )
    return out


async def one_round(group: Group, admin: Admin, load: PacedLoad, fault: str) -> float:
    master = await group.master(admin)
    i = group.brokers.index(master)
    t0 = time.monotonic()
    if fault == "kill":
        store = None
        for line in master.config_file.read_text().splitlines():
            if line.startswith("storePathRootDir="):
                store = line.split("=", 1)[1]
        master.kill()
    elif fault == "stop":
        os.kill(master.pid, signal.SIGSTOP)
    else:
        others = [d for d in group.brokers if d is not master]
        target = int((await role(admin, others[0].addr))["controllerBrokerId"])
        await admin.elect_master("bench-fo", target)

    async def acked() -> float | None:
        return load.first_ack_after(t0, master.addr)

    took = float(await wait_for(acked, 60, f"an acknowledgement after {fault}"))
    if fault == "kill":
        group.start(i, storePathRootDir=store)
    elif fault == "stop":
        os.kill(master.pid, signal.SIGCONT)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--cost-runs", type=int, default=4)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lease", type=int, default=5)
    ap.add_argument("--replicas", type=int, default=2, help="brokers in the failover group (>= 2)")
    ap.add_argument("--faults", default="kill,stop,elect")
    ap.add_argument("--only", choices=["cost", "failover"])
    args = ap.parse_args()
    from tests.daemons import start_broker, start_namesrv
    from tests.etcd import EtcdCluster, etcd_unavailable

    reason = etcd_unavailable()
    if reason:
        sys.exit(f"error: {reason}")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        etcd = EtcdCluster.start(tmp / "etcd", 1)
        ns = start_namesrv(tmp)
        daemons: list[Any] = [ns]
        groups: list[Group] = []  # their brokers change as rounds restart them: stopped at the end
        try:
            if args.only in (None, "cost"):
                plain = [
                    start_broker(tmp, ns.addr, brokerName="bench-plain", brokerRole="SYNC_MASTER", **FAST),
                    start_broker(
                        tmp, ns.addr, brokerName="bench-plain", brokerId=1, brokerRole="SLAVE", **FAST
                    ),
                ]
                daemons += plain
                ctl = Group(tmp, ns.addr, etcd.endpoints, args.lease)
                groups.append(ctl)
                ctl.props["brokerName"] = "bench-ctl"
                ctl.start(), ctl.start()
                asyncio.run(_cost(ns.addr, plain, ctl, args))
                for d in [*daemons[1:], *ctl.brokers]:
                    d.terminate()
                daemons, groups = [ns], []
            if args.only in (None, "failover"):
                group = Group(tmp, ns.addr, etcd.endpoints, args.lease)
                groups.append(group)
                for _ in range(args.replicas):
                    group.start()
                print(f"failover under {args.rate:,} msgs/s, lease {args.lease} s:")
                times = asyncio.run(failover(group, ns.addr, args.rate, args.faults.split(","), args.rounds))
                for fault, ts in times.items():
                    if ts:
                        print(
                            f"{fault:5s}: median {statistics.median(ts):.2f} s, max {max(ts):.2f} s "
                            f"over {len(ts)} rounds"
                        )
        finally:
            for d in [*(b for g in groups for b in g.brokers), *reversed(daemons)]:
                if d.returncode is None:
                    d.terminate()
            etcd.stop()


async def _cost(ns: str, plain: list[Any], ctl: Group, args: Any) -> None:
    async with Admin(ns) as admin:
        await ctl.all_in_sync(admin)
    rates: dict[str, list[float]] = {"plain": [], "controller": []}
    for run in range(args.cost_runs):
        for kind in ("plain", "controller") if run % 2 == 0 else ("controller", "plain"):
            topic = f"BenchCost{kind.capitalize()}{run}"
            # each kind has its own broker group: a topic created on the cluster lands on both, so
            # the producer is pointed at the group by a topic only that group holds
            rate = await _group_rate(ns, topic, kind, args)
            rates[kind].append(rate)
            print(f"  {kind:10s}: {rate:,.0f} msgs/s")
    p, c = statistics.median(rates["plain"]), statistics.median(rates["controller"])
    print(
        f"{args.inflight} in flight, 1 KiB: plain SYNC_MASTER {p:,.0f} msgs/s, "
        f"controller mode {c:,.0f} msgs/s ({100 * (c - p) / p:+.1f} %)"
    )


async def _group_rate(ns: str, topic: str, kind: str, args: Any) -> float:
    async with Admin(ns) as admin:
        info = await admin.cluster_info()
        name = "bench-plain" if kind == "plain" else "bench-ctl"
        master = info.broker_addr_table[name].broker_addrs[0]
        await admin.create_topic(topic, broker_addr=master, read_queue_nums=8, write_queue_nums=8)
    return await inflight_rate(ns, topic, args.count, args.inflight)


if __name__ == "__main__":
    main()
