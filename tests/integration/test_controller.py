"""Controller mode with real daemons and a real etcd: election, failover, fencing, rejoin, switchover."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rocketpy import Admin, Message, MQClientError, Producer, SendStatus
from tests.conftest import DaemonPool
from tests.daemons import REPO_ROOT
from tests.etcd import EtcdCluster, etcd_unavailable, free_port
from tests.integration.controller_support import (
    CONTROLLER_FAST,
    Load,
    broker_log,
    check_all_acked_in_log,
    check_no_overlap,
    etcd,
    role_of,
    start_replica,
    store_addr,
    tenures,
    wait_master,
    wait_sync_state_set,
)
from tests.integration.test_ha import store_of, wait_identical, written_log
from tests.integration.test_metrics import scrape, value
from tests.waiting import wait_until_async

__all__ = ["etcd"]

TOPIC = "CtlT"


def mqadmin(namesrv: str, *args: str) -> str:
    """Run ``mqadmin`` (blocking: call it in a thread); its stdout, after checking it succeeded."""
    out = subprocess.run(
        [sys.executable, "-m", "rocketpy.admin_cli", *args, "-n", namesrv],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


async def send_acked(producer: Producer, n: int, tag: str) -> list[Any]:
    """``n`` sends that must all be acknowledged (SEND_OK)."""
    out = []
    for i in range(n):
        r = await producer.send(Message(TOPIC, f"{tag}-{i}".encode() * 20, keys=[f"{tag}-{i}"]))
        assert r.status is SendStatus.SEND_OK, r
        out.append(r)
    return out


async def first_ack_after(producer: Producer, tag: str, limit_s: float = 30.0) -> tuple[float, Any]:
    """Send until one is acknowledged; (seconds it took, its result)."""
    started = time.monotonic()
    deadline = started + limit_s
    i = 0
    while time.monotonic() < deadline:
        i += 1
        try:
            r = await producer.send(Message(TOPIC, f"{tag}-{i}".encode()))
        except Exception:
            await asyncio.sleep(0.05)
            continue
        if r.status is SendStatus.SEND_OK:
            return time.monotonic() - started, r
    raise AssertionError(f"no send acknowledged within {limit_s}s")


async def test_a_killed_master_is_replaced_and_rejoins_truncated(
    daemons: DaemonPool, etcd: EtcdCluster
) -> None:
    ns = daemons.namesrv()
    a = start_replica(daemons, ns.addr, etcd)
    async with Admin(ns.addr) as admin:
        assert await wait_master(admin, [a]) is a
        b = start_replica(daemons, ns.addr, etcd)
        c = start_replica(daemons, ns.addr, etcd)
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        await wait_sync_state_set(admin, a, 3)
        async with Producer("ctl_pg", ns.addr, send_timeout=3.0, poll_name_server_interval=30.0) as producer:
            acked = await send_acked(producer, 200, "before")
            wait_identical(a, b)
            a_store = store_of(a)
            killed_ms = int(time.time() * 1000)
            a.kill()
            took, r = await first_ack_after(producer, "after")
            print(f"failover after kill -9: first acknowledged send after {took:.2f}s")
            assert took < 10.0
            new = await wait_master(admin, [b, c])
            assert r.message_queue.broker_name == "broker-a"
            acked += await send_acked(producer, 100, "later")
            # the old master comes back with its store: it follows the new master, byte for byte
            a = start_replica(daemons, ns.addr, etcd, storePathRootDir=a_store)
            await wait_until_async(lambda: _is_follower(admin, a), 30.0, message="the old master follows")
            acked += await send_acked(producer, 50, "rejoined")
            wait_identical(new, a)
        info = await role_of(admin, new)
        assert int(info["masterEpoch"]) >= 2 and info["inSyncStateSet"] == "true"
    for r in acked:  # every acknowledged message is in the new master's log
        off = int(r.offset_msg_id[-16:], 16)
        assert written_log(store_of(new))[off + 4 : off + 8] == b"\xda\xa3\x20\xa7"
    check_no_overlap(tenures([broker_log(d) for d in (a, b, c)]), {str(broker_log(a)): killed_ms})


async def test_a_topic_created_just_before_the_master_died_survives_the_failover(
    daemons: DaemonPool, etcd: EtcdCluster
) -> None:
    """The replicas copy the master's topic table only every slaveSyncInterval (here: not again after
    they start), so none has a topic created right before the master dies. The new master takes it
    over from the NameServer's route before it registers: the route keeps it, with its queues, and
    producers that knew it go on sending to the new master."""
    ns = daemons.namesrv()
    a = start_replica(daemons, ns.addr, etcd)
    async with Admin(ns.addr) as admin:
        assert await wait_master(admin, [a]) is a
        late = {"slaveSyncInterval": 3_600_000}  # one copy of the table when they start, no more
        b, c = start_replica(daemons, ns.addr, etcd, **late), start_replica(daemons, ns.addr, etcd, **late)
        await wait_sync_state_set(admin, a, 3)
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=3, write_queue_nums=3)
        async with Producer("ctl_new_topic", ns.addr, send_timeout=3.0) as producer:
            await send_acked(producer, 20, "before")
            a.kill()
            took, r = await first_ack_after(producer, "after")
            new = await wait_master(admin, [b, c])
            assert store_addr(r.offset_msg_id) == new.addr
            print(f"failover after kill -9: first acknowledged send after {took:.2f}s")
        route = await admin.topic_route(TOPIC)
        assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [
            ("broker-a", 3, 3)
        ]
    assert "took over 1 topic(s)" in broker_log(new).read_text()


async def _is_follower(admin: Admin, d: Any) -> bool:
    return (await role_of(admin, d)).get("controllerRole") == "FOLLOWER"


async def test_plain_broker_answers_controller_codes_with_the_reason(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    b = daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin:
        assert "controllerMode" not in await admin.broker_runtime_info(b.addr)
        with pytest.raises(MQClientError, match="controller mode is off"):
            await admin.get_sync_state_set(b.name or "")
        [epochs] = await admin.get_broker_epoch(b.name or "")
        assert "controller mode is off" in epochs["error"]


async def test_a_stopped_master_is_fenced_replaced_and_rejoins(
    daemons: DaemonPool, etcd: EtcdCluster
) -> None:
    """SIGSTOP longer than the lease: another replica takes over; the old one, resumed, acknowledges
    nothing more, steps down and follows (its own log says when it last acknowledged)."""
    ns = daemons.namesrv()
    a = start_replica(daemons, ns.addr, etcd)
    async with Admin(ns.addr) as admin:
        assert await wait_master(admin, [a]) is a
        b, c = start_replica(daemons, ns.addr, etcd), start_replica(daemons, ns.addr, etcd)
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        await wait_sync_state_set(admin, a, 3)
        async with Producer("ctl_stop", ns.addr, send_timeout=2.0) as producer:
            load = Load(producer, TOPIC)
            load.start()
            try:
                await wait_until_async(lambda: len(load.acked) >= 200, 30.0)
                stopped = time.monotonic()
                os.kill(a.pid, signal.SIGSTOP)
                took = await load.first_ack_after(stopped + 0.5, not_addr=a.addr)
                print(f"failover after SIGSTOP: first acknowledged send {took + 0.5:.2f}s after the stop")
                new = await wait_master(admin, [b, c])
                await asyncio.sleep(1.0)  # the stopped master stays stopped past its lease
                os.kill(a.pid, signal.SIGCONT)
                await wait_until_async(lambda: _is_follower(admin, a), 30.0, message="the old master follows")
                resumed = time.monotonic()
                await wait_until_async(lambda: load.acked_since(resumed) >= 100, 30.0)
            finally:
                await load.stop()
        wait_identical(new, a)
    check_all_acked_in_log(load, written_log(store_of(new)))
    assert "EPOCH-END" in broker_log(a).read_text()
    check_no_overlap(tenures([broker_log(d) for d in (a, b, c)]))


async def test_an_old_master_ahead_of_the_new_one_is_truncated(
    daemons: DaemonPool, etcd: EtcdCluster
) -> None:
    """ASYNC semantics: the master acknowledged bytes its follower never got, then died. The follower
    (in the SyncStateSet) takes over; the old master comes back, cuts those bytes and copies the new
    master's log: the two logs are identical, nothing of the old tail is spliced in."""
    ns = daemons.namesrv()
    props = {"brokerRole": "ASYNC_MASTER", "haMaxTimeSlaveNotCatchup": 60_000}
    a = start_replica(daemons, ns.addr, etcd, **props)
    async with Admin(ns.addr) as admin:
        assert await wait_master(admin, [a]) is a
        b = start_replica(daemons, ns.addr, etcd, **props)
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
        await wait_sync_state_set(admin, a, 2)
        async with Producer("ctl_ahead", ns.addr, send_timeout=3.0) as producer:
            await send_acked(producer, 100, "shared")
            wait_identical(a, b)
            os.kill(b.pid, signal.SIGSTOP)
            # only the master has these: 18 MB that do not compress, more than the sockets between
            # the two buffer
            rng = random.Random(5)
            for i in range(200):
                body = b"lost-%03d." % i + rng.randbytes(90_000)
                r = await producer.send(Message(TOPIC, body, keys=[f"lost-{i}"]))
                assert r.status is SendStatus.SEND_OK
            a_store = store_of(a)
            a.kill()
            os.kill(b.pid, signal.SIGCONT)
            assert await wait_master(admin, [b]) is b
            await send_acked(producer, 30, "new")
            a = start_replica(daemons, ns.addr, etcd, storePathRootDir=a_store, **props)
            await wait_until_async(lambda: _is_follower(admin, a), 30.0, message="the old master follows")
            await send_acked(producer, 20, "after")
        wait_identical(b, a)
        assert "truncating this log from" in broker_log(a).read_text()
        for d in (a, b):  # the old tail is gone from both: cut, not spliced in
            assert b"lost-199." not in written_log(store_of(d))
        assert not await admin.query_msg_by_key(TOPIC, "lost-199")


async def test_etcd_down_at_boot_then_lost_fences_the_master_and_reads_go_on(
    daemons: DaemonPool, tmp_path: Path
) -> None:
    reason = etcd_unavailable()
    if reason:
        pytest.skip(reason)
    ports = [(free_port(), free_port())]
    ns = daemons.namesrv()
    endpoint = f"127.0.0.1:{ports[0][0]}"
    metrics_port = free_port()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    a = daemons.broker(ns.addr, brokerName="broker-a", etcdEndpoints=endpoint, metricsPort=metrics_port,
                       **CONTROLLER_FAST)  # fmt: skip
    said = lambda: "does not answer" in a.stderr_text() and "takes no role" in a.stderr_text()  # noqa: E731
    # its log lines reach stderr through a logging thread: maybe after the broker is up
    await wait_until_async(said, 10.0, message="the broker's log line saying etcd does not answer")
    async with Admin(ns.addr) as admin, Producer("ctl_etcd", ns.addr, send_timeout=2.0) as producer:
        assert (await role_of(admin, a)).get("controllerRole") == "NONE"
        samples = await scrape(metrics)
        assert value(samples, "rocketpy_controller_etcd_reachable") == 0
        assert value(samples, "rocketpy_controller_is_master") == 0
        etcd = EtcdCluster.start(tmp_path / "etcd", 1, ports=ports)
        try:
            assert await wait_master(admin, [a]) is a
            samples = await scrape(metrics)
            assert value(samples, "rocketpy_controller_is_master") == 1
            assert value(samples, "rocketpy_controller_elections_total") == 1
            assert value(samples, "rocketpy_controller_master_epoch") == 1
            assert value(samples, "rocketpy_controller_sync_state_set_size") == 1
            assert value(samples, "rocketpy_controller_lease_remaining_seconds") > 0
            await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
            acked = await send_acked(producer, 20, "up")
            etcd.kill()
            lost_at = time.monotonic()

            async def refused() -> bool:
                try:
                    return (await producer.send(Message(TOPIC, b"x"))).status is not SendStatus.SEND_OK
                except MQClientError:
                    return True

            await wait_until_async(refused, 10.0, message="the master fences itself")
            fenced_after = time.monotonic() - lost_at
            assert fenced_after < 3.0  # before the 3 s lease could end in etcd
            m = await admin.query_msg_by_id(acked[0].offset_msg_id, broker_addr=a.addr)
            assert m.body.startswith(b"up-0")  # reads go on
            etcd.restart()
            await wait_until_async(lambda: _acked(producer), 30.0, message="writes again once etcd is back")
        finally:
            etcd.stop()


async def _acked(producer: Producer) -> bool:
    try:
        return (await producer.send(Message(TOPIC, b"back"))).status is SendStatus.SEND_OK
    except MQClientError:
        return False


async def test_elect_master_switches_over_under_load_and_mqadmin_shows_it(
    daemons: DaemonPool, etcd: EtcdCluster
) -> None:
    ns = daemons.namesrv()
    a = start_replica(daemons, ns.addr, etcd)
    async with Admin(ns.addr) as admin:
        assert await wait_master(admin, [a]) is a
        b = start_replica(daemons, ns.addr, etcd)
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        await wait_sync_state_set(admin, a, 2)
        b_id = int((await role_of(admin, b))["controllerBrokerId"])
        async with Producer("ctl_switch", ns.addr, send_timeout=3.0) as producer:
            load = Load(producer, TOPIC, senders=2)
            load.start()
            try:
                await wait_until_async(lambda: len(load.acked) >= 100, 30.0)
                result = await admin.elect_master("broker-a", b_id)
                assert f"brokerId {b_id} is the master" in result["result"]
                switched = time.monotonic()
                await wait_until_async(lambda: load.acked_since(switched) >= 100, 30.0)
            finally:
                await load.stop()
        assert load.failures == 0  # producers saw retries at most
        assert await wait_master(admin, [a, b]) is b
        await wait_until_async(lambda: _is_follower(admin, a), 30.0)
        sss = await admin.get_sync_state_set("broker-a")
        assert sss["masterId"] == b_id and sss["masterEpoch"] == 2
        epochs = await admin.get_broker_epoch("broker-a")
        assert all([2, sss["epochStartOffset"]] in e["entries"] for e in epochs)
    wait_identical(b, a)
    check_all_acked_in_log(load, written_log(store_of(b)))
    check_no_overlap(tenures([broker_log(d) for d in (a, b)]))
    for args in (["getSyncStateSet", "-b", "broker-a"], ["getBrokerEpoch", "-b", "broker-a"]):
        json.loads(await asyncio.to_thread(mqadmin, ns.addr, *args, "--json"))
    json.loads(await asyncio.to_thread(mqadmin, ns.addr, "getControllerMetaData", "--json"))
    cluster = await asyncio.to_thread(mqadmin, ns.addr, "clusterList")
    assert "Epoch" in cluster and "InSync" in cluster
