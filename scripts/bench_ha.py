"""Replication benchmark: slave catch-up rate, SYNC_MASTER vs ASYNC_MASTER throughput, slave lag.

    .venv/bin/python scripts/bench_ha.py      # starts temporary NameServer, master and slave daemons

1. keep-up: ``--count`` 1 KiB messages sent in batches of ``--batch`` to an ASYNC_MASTER with a
   connected slave; reports the send rate and the rate at which the slave had every byte (time
   from the first send until the master's haStatus shows 0 bytes behind).
2. sync vs async: ``--count`` 1 KiB single sends with ``--inflight`` in flight, once against an
   ASYNC_MASTER pair and once against a SYNC_MASTER pair; the ratio of the two rates.
3. lag: ``--rate`` msgs/s for ``--seconds`` s against the ASYNC_MASTER pair; haStatus is sampled
   every 5 ms and each sample's bytes behind is turned into a time (bytes / byte rate); p50/p99.
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


async def _wait_connected(admin: Admin, master: str) -> None:
    deadline = time.monotonic() + 30
    while await _behind(admin, master) < 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the slave did not connect within 30 s")
        await asyncio.sleep(0.05)


async def keep_up(ns: str, master: str, count: int, batch: int) -> None:
    async with Admin(ns) as admin, Producer("bench_ha", ns) as p:
        await admin.create_topic("BenchHa", "DefaultCluster", read_queue_nums=8, write_queue_nums=8)
        await _wait_connected(admin, master)
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
    samples: list[float] = []
    async with Admin(ns) as admin, Producer("bench_ha_lag", ns) as p:
        stop = time.monotonic() + seconds

        async def sample() -> None:
            while time.monotonic() < stop:
                samples.append(await _behind(admin, master) / (rate * len(BODY)))
                await asyncio.sleep(0.005)

        sampler = asyncio.ensure_future(sample())
        per_tick = max(1, rate // 100)
        next_t = time.monotonic()
        while time.monotonic() < stop:
            await p.send_batch([Message("BenchHa", BODY) for _ in range(per_tick)])
            next_t += per_tick / rate
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))
        await sampler
    samples.sort()
    p50, p99 = samples[len(samples) // 2], samples[int(len(samples) * 0.99)]
    print(
        f"lag at {rate:,} msgs/s: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms ({len(samples)} samples)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--sync-count", type=int, default=20_000)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    from tests.daemons import start_broker, start_namesrv

    with tempfile.TemporaryDirectory() as tmp:
        ns = start_namesrv(Path(tmp))
        daemons = [ns]
        try:
            a = start_broker(Path(tmp), ns.addr, brokerName="bench-a", **FAST)
            daemons += [a, start_broker(Path(tmp), ns.addr, brokerName="bench-a", brokerId=1,
                                        brokerRole="SLAVE", **FAST)]  # fmt: skip
            asyncio.run(keep_up(ns.addr, a.addr, args.count, args.batch))
            asyncio.run(lag(ns.addr, a.addr, args.rate, args.seconds))
            async_rate = asyncio.run(inflight_rate(ns.addr, "BenchAsync", args.sync_count, args.inflight))
            for d in daemons[1:]:
                d.terminate()
            s = start_broker(Path(tmp), ns.addr, brokerName="bench-s", brokerRole="SYNC_MASTER", **FAST)
            daemons += [s, start_broker(Path(tmp), ns.addr, brokerName="bench-s", brokerId=1,
                                        brokerRole="SLAVE", **FAST)]  # fmt: skip

            async def sync_run() -> float:
                async with Admin(ns.addr) as admin:
                    await _wait_connected(admin, s.addr)
                return await inflight_rate(ns.addr, "BenchSync", args.sync_count, args.inflight)

            sync_rate = asyncio.run(sync_run())
            print(f"{args.inflight} in flight: ASYNC_MASTER {async_rate:,.0f} msgs/s, SYNC_MASTER "
                  f"{sync_rate:,.0f} msgs/s ({100 * sync_rate / async_rate:.0f} %)")  # fmt: skip
        finally:
            for d in reversed(daemons):
                d.terminate()


if __name__ == "__main__":
    main()
