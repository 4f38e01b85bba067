"""Replication benchmark: slave catch-up rate, SYNC_MASTER vs ASYNC_MASTER throughput, slave lag.

    .venv/bin/python scripts/bench_ha.py      # starts temporary NameServer, master and slave daemons

0. catch-up: ``--count`` 1 KiB messages sent to a master with no slave, then a slave started; the
   rate at which the slave took the backlog (bytes its acknowledged offset advanced from the first
   haStatus row until 0 bytes behind, in messages). The slave's own ceiling: keep-up below can go
   no faster than the producer sends.
1. keep-up: ``--count`` 1 KiB messages sent in batches of ``--batch`` to an ASYNC_MASTER with a
   connected slave; reports the send rate and the rate at which the slave had every byte (time
   from the first send until the master's haStatus shows 0 bytes behind).
2. sync vs async: ``--count`` 1 KiB single sends with ``--inflight`` in flight, once against an
   ASYNC_MASTER pair and once against a SYNC_MASTER pair; the ratio of the two rates.
3. lag: ``--rate`` msgs/s for ``--seconds`` s against the ASYNC_MASTER pair; the master's runtime
   info (commitlog end and the slave's acknowledged offset, read at one instant) is sampled without
   pause, and each sample's lag is the age of the slave's next missing byte: between the last
   sample whose log ended at or before the slave's offset and the next one (both bounds printed).
   ``--only lag`` runs this part alone; ``--set`` / ``--slave-set KEY=VALUE`` for A/B runs (e.g.
   ``--slave-set messageIndexEnable=false``).
Figures on a shared machine are noisy: run it more than once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketpy import Admin, Message, Producer

BODY = b"x" * 1024
FAST = {"haSendHeartbeatInterval": 1000, "mappedFileSizeCommitLog": 1 << 30}


async def _behind(admin: Admin, master: str) -> int:
    status = json.loads((await admin.broker_runtime_info(master))["haStatus"])
    return int(status[0]["bytesBehind"]) if status else -1


async def wait_connected(admin: Admin, master: str) -> None:
    """Until ``master``'s runtime info shows a connected slave (30 s at most)."""
    deadline = time.monotonic() + 30
    while await _behind(admin, master) < 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the slave did not connect within 30 s")
        await asyncio.sleep(0.05)


async def fill(ns: str, count: int, batch: int) -> None:
    async with Admin(ns) as admin, Producer("bench_ha", ns) as p:
        await admin.create_topic("BenchHaFill", "DefaultCluster", read_queue_nums=8, write_queue_nums=8)
        for _ in range(count // batch):
            await p.send_batch([Message("BenchHaFill", BODY) for _ in range(batch)])


async def catch_up(ns: str, master: str, count: int) -> None:
    async with Admin(ns) as admin:
        await wait_connected(admin, master)
        first = json.loads((await admin.broker_runtime_info(master))["haStatus"])[0]
        t0 = time.monotonic()
        total = first["ackOffset"] + first["bytesBehind"]  # the master's log: the backlog only
        while True:  # polled: the figure is another process's
            if await _behind(admin, master) == 0:
                break
            await asyncio.sleep(0.002)
        took = time.monotonic() - t0
    moved = total - first["ackOffset"]
    msgs = count * moved / total
    print(f"catch-up: slave started after {count} x 1 KiB: {moved / 2**20:,.0f} MiB in {took:.2f} s, "
          f"{msgs / took:,.0f} msgs/s ({moved / took / 2**20:,.0f} MiB/s)")  # fmt: skip


async def keep_up(ns: str, master: str, count: int, batch: int) -> None:
    async with Admin(ns) as admin, Producer("bench_ha", ns) as p:
        await admin.create_topic("BenchHa", "DefaultCluster", read_queue_nums=8, write_queue_nums=8)
        await wait_connected(admin, master)
        t0 = time.monotonic()
        for _ in range(count // batch):
            await p.send_batch([Message("BenchHa", BODY) for _ in range(batch)])
        sent_s = time.monotonic() - t0
        while True:  # polled: the figure is another process's
            if await _behind(admin, master) == 0:
                break
            await asyncio.sleep(0.002)
        done_s = time.monotonic() - t0
    print(f"keep-up: {count} x 1 KiB in batches of {batch}: sent {count / sent_s:,.0f} msgs/s, "
          f"on the slave {count / done_s:,.0f} msgs/s")  # fmt: skip


async def inflight_rate(ns: str, topic: str, count: int, inflight: int) -> float:
    async with Admin(ns) as admin, Producer("bench_ha_" + topic, ns) as p:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=8, write_queue_nums=8)
        await p.send(Message(topic, BODY))
        sem = asyncio.Semaphore(inflight)

        async def one() -> None:
            async with sem:
                r = await p.send(Message(topic, BODY))
                assert r.status.name == "SEND_OK", r.status

        t0 = time.monotonic()
        await asyncio.gather(*(one() for _ in range(count)))
        return count / (time.monotonic() - t0)


async def lag(ns: str, master: str, rate: int, seconds: float) -> None:
    """Replication lag as time: for each sample, how long ago the master's log ended where the
    slave's acknowledged offset is now (sample interval = resolution)."""
    samples: list[tuple[float, int, int]] = []  # (time, master max offset, slave acked offset)
    async with Admin(ns) as admin, Producer("bench_ha_lag", ns) as p:
        stop = time.monotonic() + seconds

        async def sample() -> None:
            while time.monotonic() < stop:
                info = await admin.broker_runtime_info(master)
                status = json.loads(info["haStatus"])
                samples.append(
                    (time.monotonic(), int(info["commitLogMaxOffset"]), int(status[0]["ackOffset"]))
                )
                await asyncio.sleep(0.005)

        sampler = asyncio.ensure_future(sample())
        per_tick = max(1, rate // 100)
        next_t, sent, t0 = time.monotonic(), 0, time.monotonic()
        while time.monotonic() < stop:
            await p.send_batch([Message("BenchHa", BODY) for _ in range(per_tick)])
            sent += per_tick
            next_t += per_tick / rate
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))
        await sampler
    sent_rate = sent / (time.monotonic() - t0)
    low, high = _lags(samples)
    lp50, lp99 = low[len(low) // 2], low[int(len(low) * 0.99)]
    hp50, hp99 = high[len(high) // 2], high[int(len(high) * 0.99)]
    print(
        f"lag at {rate:,} msgs/s target ({sent_rate:,.0f} sent): p50 {lp50 * 1000:.1f}-{hp50 * 1000:.1f} ms, "
        f"p99 {lp99 * 1000:.1f}-{hp99 * 1000:.1f} ms ({len(samples)} samples in {seconds:g} s; "
        "each figure is a range: the master wrote the slave's next byte between two samples)"
    )


async def _lag_run(ns: str, master: str, rate: int, seconds: float) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic("BenchHa", "DefaultCluster", read_queue_nums=8, write_queue_nums=8)
        await wait_connected(admin, master)
    await lag(ns, master, rate, seconds)


def _lags(samples: list[tuple[float, int, int]]) -> tuple[list[float], list[float]]:
    """Per sample: 0 when the slave has all the master has; else the age of the slave's next missing
    byte, bounded by the two samples between which the master's log passed that offset."""
    low, high, j = [], [], 0
    for t, master_max, acked in samples:
        if acked >= master_max:
            low.append(0.0)
            high.append(0.0)
            continue
        while samples[j][1] <= acked:  # the first sample whose log is past the slave's offset
            j += 1
        low.append(t - samples[j][0])
        high.append(t - samples[j - 1][0] if j else t - samples[j][0])
    return sorted(low), sorted(high)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--sync-count", type=int, default=20_000)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--only", choices=["catch-up", "keep-up", "lag", "sync"], help="run one part")
    ap.add_argument("--slave-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker key for the slaves (A/B runs)")  # fmt: skip
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker key for masters and slaves (A/B runs)")  # fmt: skip
    args = ap.parse_args()
    both = dict(kv.split("=", 1) for kv in args.set)
    slave_props = {**FAST, **both, **dict(kv.split("=", 1) for kv in args.slave_set)}
    master_props = {**FAST, **both}
    from tests.daemons import start_broker, start_namesrv

    with tempfile.TemporaryDirectory() as tmp:
        ns = start_namesrv(Path(tmp))
        daemons = [ns]
        try:
            a = start_broker(Path(tmp), ns.addr, brokerName="bench-a", **master_props)
            daemons.append(a)
            if args.only in (None, "catch-up"):
                asyncio.run(fill(ns.addr, args.count, args.batch))
            daemons.append(start_broker(Path(tmp), ns.addr, brokerName="bench-a", brokerId=1,
                                        brokerRole="SLAVE", **slave_props))  # fmt: skip
            if args.only in (None, "catch-up"):
                asyncio.run(catch_up(ns.addr, a.addr, args.count))
            if args.only in (None, "keep-up"):
                asyncio.run(keep_up(ns.addr, a.addr, args.count, args.batch))
            if args.only in (None, "lag"):
                asyncio.run(_lag_run(ns.addr, a.addr, args.rate, args.seconds))
            if args.only not in (None, "sync"):
                return
            async_rate = asyncio.run(inflight_rate(ns.addr, "BenchAsync", args.sync_count, args.inflight))
            for d in daemons[1:]:
                d.terminate()
            s = start_broker(
                Path(tmp), ns.addr, brokerName="bench-s", brokerRole="SYNC_MASTER", **master_props
            )
            daemons += [s, start_broker(Path(tmp), ns.addr, brokerName="bench-s", brokerId=1,
                                        brokerRole="SLAVE", **slave_props)]  # fmt: skip

            async def sync_run() -> float:
                async with Admin(ns.addr) as admin:
                    await wait_connected(admin, s.addr)
                return await inflight_rate(ns.addr, "BenchSync", args.sync_count, args.inflight)

            sync_rate = asyncio.run(sync_run())
            print(f"{args.inflight} in flight: ASYNC_MASTER {async_rate:,.0f} msgs/s, SYNC_MASTER "
                  f"{sync_rate:,.0f} msgs/s ({100 * sync_rate / async_rate:.0f} %)")  # fmt: skip
        finally:
            for d in reversed(daemons):
                d.terminate()


if __name__ == "__main__":
    main()
