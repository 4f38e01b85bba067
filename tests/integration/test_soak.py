"""Soak: producers and push consumers run against a broker while its resources are sampled.

After a warm-up, the broker's anonymous memory (RssAnon: heap, not the mapped store files whose
pages count as they fill), its file descriptors other than store files (sockets, pipes), its
asyncio tasks (``asyncioTaskCount`` in GET_BROKER_RUNTIME_INFO) and its held pulls must stay flat:
a bounded growth, whatever the run's length. Producers and consumers come and go meanwhile, so
leaks per connection show. 3 minutes marked ``slow`` (CI runs it), 30 minutes marked ``long``
(``pytest -m long``).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rocketpy import Admin, Message, Producer
from rocketpy.client.consumer_types import ConsumeStatus
from rocketpy.client.push_consumer import PushConsumer
from tests.conftest import DaemonPool
from tests.consumer_settings import FAST_CONSUMER
from tests.daemons import Daemon

SAMPLE_S = 5.0
TOPICS = ("SoakA", "SoakB")
QUEUES = 4
#: growth allowed between the first sample after warm-up and any later one
MAX_ANON_GROWTH_MIB = 24.0
MAX_FD_GROWTH = 8
MAX_TASK_GROWTH = 16


@dataclass
class Sample:
    at: float
    anon_mib: float
    fds: int
    tasks: int
    held: int


@dataclass
class Traffic:
    sent: int = 0
    consumed: int = 0
    churned: int = 0
    errors: list[str] = field(default_factory=list)


def anon_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc status")


def non_store_fds(pid: int, store: Path) -> int:
    """Open descriptors of ``pid`` that are not files of its store (store files grow as it rolls)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if not target.startswith(str(store)):
            n += 1
    return n


async def sample(admin: Admin, broker: Daemon, store: Path) -> Sample:
    info = await admin.broker_runtime_info(broker.addr)
    return Sample(
        time.monotonic(),
        anon_mib(broker.pid),
        non_store_fds(broker.pid, store),
        int(info["asyncioTaskCount"]),
        int(info["heldPulls"]),
    )


async def produce(ns: str, topic: str, until: float, traffic: Traffic) -> None:
    async with Producer(f"soak_pg_{topic}", ns) as p:
        i = 0
        while time.monotonic() < until:
            try:
                await asyncio.gather(
                    *(p.send(Message(topic, b"%s-%d" % (topic.encode(), i + k))) for k in range(20))
                )
                traffic.sent += 20
            except Exception as e:  # counted and shown: the soak goes on
                traffic.errors.append(repr(e))
            i += 20
            await asyncio.sleep(0.1)


async def churn(ns: str, until: float, traffic: Traffic) -> None:
    """A short-lived producer and consumer every few seconds: connections open and close."""
    n = 0
    while time.monotonic() < until:
        async with Producer(f"soak_churn_{n % 3}", ns) as p:
            await p.send(Message("SoakA", b"churn"))
        c = PushConsumer(f"soak_churn_cg_{n % 3}", ns, **FAST_CONSUMER)
        c.subscribe("SoakB", "*")
        c.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
        await c.start()
        await asyncio.sleep(1.0)
        await c.shutdown()
        traffic.churned += 1
        n += 1
        await asyncio.sleep(2.0)


async def run_soak(daemons: DaemonPool, tmp_path: Path, duration_s: float) -> None:
    ns = daemons.namesrv()
    store = tmp_path / "soak-store"
    broker = daemons.broker(ns.addr, storePathRootDir=store)
    traffic = Traffic()
    async with Admin(ns.addr) as admin:
        for t in TOPICS:
            await admin.create_topic(t, "DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        consumers = []
        for t in TOPICS:
            c = PushConsumer(f"soak_cg_{t}", ns.addr, **FAST_CONSUMER)
            c.subscribe(t, "*")

            def listener(msgs: list[object], ctx: object) -> ConsumeStatus:
                traffic.consumed += len(msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            c.register_listener(listener)
            await c.start()
            consumers.append(c)
        until = time.monotonic() + duration_s
        load = [asyncio.ensure_future(produce(ns.addr, t, until, traffic)) for t in TOPICS]
        load.append(asyncio.ensure_future(churn(ns.addr, until, traffic)))
        samples: list[Sample] = []
        try:
            while time.monotonic() < until:
                await asyncio.sleep(SAMPLE_S)
                samples.append(await sample(admin, broker, store))
            await asyncio.gather(*load)
        finally:
            for task in load:
                task.cancel()
            for c in consumers:
                await c.shutdown()
    warm = [s for s in samples if s.at >= samples[0].at + duration_s / 4]
    base = warm[0]
    report = (
        f"soak {duration_s:.0f}s: sent {traffic.sent}, consumed {traffic.consumed}, churn {traffic.churned}; "
        f"RssAnon {base.anon_mib:.0f}->{warm[-1].anon_mib:.0f} MiB "
        f"(max {max(s.anon_mib for s in warm):.0f}), "
        f"fds {base.fds}->{warm[-1].fds}, tasks {base.tasks}->{warm[-1].tasks}, "
        f"held pulls max {max(s.held for s in samples)}"
    )
    print(report)
    assert not traffic.errors, f"{len(traffic.errors)} send errors, e.g. {traffic.errors[:3]}"
    assert traffic.consumed >= traffic.sent * 0.9, report  # consumers keep up (the rest is in flight)
    assert max(s.anon_mib for s in warm) - base.anon_mib <= MAX_ANON_GROWTH_MIB, report
    assert max(s.fds for s in warm) - base.fds <= MAX_FD_GROWTH, report
    assert max(s.tasks for s in warm) - base.tasks <= MAX_TASK_GROWTH, report
    # one pull per queue of each group; a churned consumer's pulls end at their hold timeout (its
    # connection is shared with the producers): bounded, whatever the duration
    assert max(s.held for s in samples) <= 4 * len(TOPICS) * QUEUES, report


@pytest.mark.slow
async def test_soak_resources_stay_flat(daemons: DaemonPool, tmp_path: Path) -> None:
    await run_soak(daemons, tmp_path, float(os.environ.get("ROCKETPY_SOAK_SECONDS", 180)))


@pytest.mark.long
async def test_soak_resources_stay_flat_30_minutes(daemons: DaemonPool, tmp_path: Path) -> None:
    await run_soak(daemons, tmp_path, 1800.0)
