"""Controller mode with real daemons and a real etcd: election, failover, fencing, rejoin, switchover."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from rocketpy import Admin, Message, MQClientError, Producer, SendStatus
from tests.conftest import DaemonPool
from tests.etcd import EtcdCluster
from tests.integration.controller_support import (
    broker_log,
    check_no_overlap,
    etcd,
    role_of,
    start_replica,
    tenures,
    wait_master,
    wait_sync_state_set,
)
from tests.integration.test_ha import store_of, wait_identical, written_log
from tests.waiting import wait_until_async

__all__ = ["etcd"]

TOPIC = "CtlT"


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
