"""Jepsen-style rounds of faults against controller mode, across network namespaces, with a 3-member etcd.

Layout: a bridge in the test's namespace (NameServer, producers, consumer on ``.1``), three etcd
members and three brokers of one group (``broker-a``, SYNC semantics: a message is acknowledged once
every member of the SyncStateSet has it), each in its own namespace on a veth pair. Producers send
unique ids without pause and keep every acknowledgement. Rounds, each measured from the fault to the
first acknowledgement by another master:

1. ``kill -9`` of the master (it restarts on its store and rejoins);
2. ``SIGSTOP`` of the master for longer than its lease (then ``SIGCONT``: it must not acknowledge);
3. a partition: the master's link goes down (cut from etcd, its replicas, the NameServer and the
   clients), then heals (it learns the new epoch, truncates, follows);
4. ``mqadmin electMaster`` under load (graceful: writes pause, nothing fails).

After the rounds: every acknowledged id is in the surviving master's log at the offset its
acknowledgement named, byte for byte, and read back by a consumer; no two masters acknowledged in
overlapping times (from the brokers' own EPOCH-BEGIN/END lines); every broker's commitlog equals the
master's. Elapsed failover time per round is printed. Needs root, ``ip netns`` and etcd; skipped with
the reason otherwise.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest

from rocketpy import Admin, Producer
from rocketpy.client.consumer_types import ConsumeStatus
from rocketpy.client.push_consumer import PushConsumer
from rocketpy.errors import MQClientError
from tests.conftest import DaemonPool
from tests.daemons import Daemon
from tests.etcd import EtcdCluster, etcd_unavailable
from tests.integration.controller_support import (
    CONTROLLER_FAST,
    Load,
    broker_log,
    check_all_acked_in_log,
    check_no_overlap,
    role_of,
    tenures,
    wait_master,
    wait_sync_state_set,
)
from tests.integration.test_ha import store_of, wait_identical, written_log
from tests.integration.test_ha_netns import NetLab
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.netns, pytest.mark.slow]

TOPIC = "JepsenT"


@pytest.fixture
def lab(netlab: NetLab) -> NetLab:
    reason = etcd_unavailable()
    if reason:
        pytest.skip(reason)
    return netlab


class Group:
    """Three brokers of one group, each in its namespace; a broker can be restarted on its store."""

    def __init__(self, daemons: DaemonPool, lab: NetLab, ns: str, etcd: EtcdCluster) -> None:
        self.daemons, self.lab, self.ns, self.etcd = daemons, lab, ns, etcd
        self.hosts = [lab.host(f"b{i}") for i in range(3)]
        self.brokers: list[Daemon] = []
        self.logs: list[Any] = []
        self.killed_ms: dict[str, int] = {}

    def start(self, i: int, **props: Any) -> Daemon:
        space, ip = self.hosts[i]
        conf = {**CONTROLLER_FAST, "brokerName": "broker-a", "etcdEndpoints": self.etcd.endpoints, **props}
        d = self.daemons.broker(self.ns, netns=space, bindAddress=ip, **conf)
        if i < len(self.brokers):
            self.brokers[i] = d
        else:
            self.brokers.append(d)
        self.logs.append(broker_log(d))
        return d

    def index(self, d: Daemon) -> int:
        return next(i for i, b in enumerate(self.brokers) if b is d)


async def _follower(admin: Admin, d: Daemon) -> bool:
    return (await role_of(admin, d)).get("controllerRole") == "FOLLOWER"


async def _round(name: str, load: Load, fault_at: float, times: dict[str, float], old: Daemon) -> None:
    took = await load.first_ack_after(fault_at, 60.0, not_addr=old.addr)
    times[name] = took
    print(f"round {name}: first acknowledged send {took:.2f}s after the fault")


async def test_jepsen_rounds(daemons: DaemonPool, lab: NetLab, tmp_path: Any) -> None:
    etcd_hosts = [lab.host(f"e{i}") for i in range(3)]
    etcd = EtcdCluster.start(
        tmp_path / "etcd", 3, hosts=[ip for _, ip in etcd_hosts], netns=[s for s, _ in etcd_hosts]
    )
    try:
        await _rounds(daemons, lab, etcd)
    finally:
        etcd.stop()


async def _rounds(daemons: DaemonPool, lab: NetLab, etcd: EtcdCluster) -> None:
    ns = daemons.namesrv(bindAddress=lab.gateway)
    group = Group(daemons, lab, ns.addr, etcd)
    times: dict[str, float] = {}
    async with Admin(ns.addr) as admin:
        first = group.start(0)
        assert await wait_master(admin, [first]) is first
        group.start(1), group.start(2)
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        await wait_sync_state_set(admin, first, 3)
        async with Producer("jepsen_pg", ns.addr, send_timeout=2.0) as producer:
            load = Load(producer, TOPIC, senders=4)
            load.start()
            try:
                await wait_until_async(lambda: len(load.acked) >= 300, 60.0)
                master = await _kill_round(admin, group, load, times)
                master = await _stop_round(admin, group, master, load, times)
                master = await _partition_round(admin, group, master, load, times)
                master = await _switchover_round(admin, group, master, load, times)
                mark = time.monotonic()
                await wait_until_async(lambda: load.acked_since(mark) >= 200, 60.0)
            finally:
                await load.stop()
        print(f"failover times: {times}; acknowledged {len(load.acked)}, failed sends {load.failures}")
        for d in group.brokers:
            if d is not master:
                await wait_until_async(lambda d=d: _follower(admin, d), 60.0)
                wait_identical(master, d, 60.0)
    check_all_acked_in_log(load, written_log(store_of(master)))
    check_no_overlap(tenures(group.logs), group.killed_ms)
    await _consume_all(ns.addr, set(load.acked))


async def _kill_round(admin: Admin, group: Group, load: Load, times: dict[str, float]) -> Daemon:
    master = await wait_master(admin, group.brokers)
    i = group.index(master)
    store = store_of(master)
    fault = time.monotonic()
    group.killed_ms[str(broker_log(master))] = int(time.time() * 1000)
    master.kill()
    await _round("kill -9", load, fault, times, master)
    new = await wait_master(admin, [b for b in group.brokers if b is not master])
    restarted = group.start(i, storePathRootDir=store)
    await wait_until_async(lambda: _follower(admin, restarted), 60.0, message="the killed master follows")
    await wait_sync_state_set(admin, new, 3)
    return new


async def _stop_round(
    admin: Admin, group: Group, master: Daemon, load: Load, times: dict[str, float]
) -> Daemon:
    fault = time.monotonic()
    os.kill(master.pid, signal.SIGSTOP)
    try:
        await _round("SIGSTOP", load, fault, times, master)
        new = await wait_master(admin, [b for b in group.brokers if b is not master])
    finally:
        os.kill(master.pid, signal.SIGCONT)
    await wait_until_async(lambda: _follower(admin, master), 60.0, message="the stopped master follows")
    await wait_sync_state_set(admin, new, 3)
    return new


async def _partition_round(
    admin: Admin, group: Group, master: Daemon, load: Load, times: dict[str, float]
) -> Daemon:
    space = group.hosts[group.index(master)][0]
    fault = time.monotonic()
    group.lab.set_link(space, up=False)
    try:
        await _round("partition", load, fault, times, master)
        new = await wait_master(admin, [b for b in group.brokers if b is not master])
    finally:
        group.lab.set_link(space, up=True)
    await wait_until_async(lambda: _follower(admin, master), 60.0, message="the partitioned master follows")
    await wait_sync_state_set(admin, new, 3)
    return new


async def _switchover_round(
    admin: Admin, group: Group, master: Daemon, load: Load, times: dict[str, float]
) -> Daemon:
    target = next(b for b in group.brokers if b is not master)
    target_id = int((await role_of(admin, target))["controllerBrokerId"])
    failures = load.failures
    fault = await _elect(admin, target_id)
    await _round("electMaster", load, fault, times, master)
    assert await wait_master(admin, group.brokers) is target
    assert load.failures == failures, (
        f"a graceful switchover failed sends: {load.errors[failures - load.failures :]}"
    )
    return target


async def _elect(admin: Admin, target_id: int, deadline_s: float = 30.0) -> float:
    """electMaster to ``target_id``, once the admin sees the group's master in its route (the last
    round's master registers asynchronously after the SyncStateSet is whole); when it was sent."""
    give_up = time.monotonic() + deadline_s
    while True:
        sent = time.monotonic()
        try:
            await admin.elect_master("broker-a", target_id)
            return sent
        except MQClientError as e:
            if "has no master now" not in str(e) or time.monotonic() > give_up:
                raise
        await asyncio.sleep(0.2)


async def _consume_all(namesrv: str, want: set[bytes]) -> None:
    got: set[bytes] = set()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("jepsen_cg", namesrv, rebalance_interval=1.0, poll_name_server_interval=1.0,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        await wait_until_async(lambda: want <= got, 120.0, message="every acknowledged id consumed")
    finally:
        await consumer.shutdown()
    await asyncio.sleep(0)
