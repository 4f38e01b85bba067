"""Overload: a broker whose disk cannot keep up answers SYSTEM_BUSY instead of queueing without end,
and the SDK sends busy answers again on another broker.

The slow disk is injected (``ROCKETPY_STORE_FAULTS=flush_delay_ms=...``: every commitlog flush
sleeps first) into a SYNC_FLUSH broker, so each put waits for a slow group commit.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketpy import Admin, Message, Producer, SendStatus
from rocketpy.protocol.codes import ResponseCode
from rocketpy.remoting.client import RemotingClient
from tests.conftest import DaemonPool
from tests.integration.test_broker_util import send
from tests.integration.test_producer import all_messages
from tests.integration.test_producer_failover import _any, _brokers_in_route
from tests.waiting import wait_until_async

SLOW_DISK = "flush_delay_ms=250"
SLOW_BROKER = {"flushDiskType": "SYNC_FLUSH", "waitTimeMillsInSendQueue": 50, "syncFlushTimeout": 5000}


async def test_a_flood_that_outruns_the_disk_gets_system_busy(
    daemons: DaemonPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = daemons.namesrv()
    monkeypatch.setenv("ROCKETPY_STORE_FAULTS", SLOW_DISK)
    b = daemons.broker(ns.addr, **SLOW_BROKER)
    client = RemotingClient()
    codes: dict[int, int] = {}
    accepted_s: list[float] = []
    busy_remarks: list[str] = []

    async def flood(n: int, until: float) -> None:
        i = 0
        while time.monotonic() < until:
            t0 = time.monotonic()
            r = await send(client, b.addr, "Flood", b"w%d-%d" % (n, i), queue_id=n % 4, timeout_s=10)
            codes[r.code] = codes.get(r.code, 0) + 1
            if r.code == ResponseCode.SUCCESS:
                accepted_s.append(time.monotonic() - t0)
            elif r.code == ResponseCode.SYSTEM_BUSY:
                busy_remarks.append(r.remark or "")
                await asyncio.sleep(0.005)  # a producer backs off a little before its next try
            i += 1

    try:
        until = time.monotonic() + 3.0
        await asyncio.gather(*(flood(n, until) for n in range(32)))
        async with Admin(ns.addr) as admin:
            runtime = await admin.broker_runtime_info(b.addr)
    finally:
        await client.close()
    assert set(codes) == {ResponseCode.SUCCESS, ResponseCode.SYSTEM_BUSY}, codes
    first_busy = busy_remarks[0]
    assert first_busy.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy"), first_busy
    assert "waitTimeMillsInSendQueue=50ms" in first_busy
    # an accepted put waits for at most about two slow flushes, never until syncFlushTimeout
    assert max(accepted_s) < 2.0, sorted(accepted_s)[-5:]
    print(f"flood: {codes}, accepted max {max(accepted_s) * 1000:.0f} ms")
    assert int(runtime["sendSystemBusyTotal"]) == codes[ResponseCode.SYSTEM_BUSY]
    # log lines reach stderr through the daemon's logging thread
    await wait_until_async(lambda: "flow control started: [TIMEOUT_CLEAN_QUEUE]" in b.stderr_text(), 10.0)


@pytest.mark.parametrize("auto_batch", [False, True], ids=["one-request-per-send", "coalesced"])
async def test_the_sdk_sends_busy_answers_again_on_another_broker(
    daemons: DaemonPool, monkeypatch: pytest.MonkeyPatch, auto_batch: bool
) -> None:
    ns = daemons.namesrv()
    monkeypatch.setenv("ROCKETPY_STORE_FAULTS", SLOW_DISK)
    slow = daemons.broker(ns.addr, **SLOW_BROKER)
    monkeypatch.delenv("ROCKETPY_STORE_FAULTS")
    daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin:
        await admin.create_topic("BusyT", "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        await wait_until_async(lambda: _any(_brokers_in_route(admin, "BusyT", 2)), 10.0)
        acked: set[str] = set()

        async def sender(n: int, until: list[float]) -> None:
            i = 0
            while time.monotonic() < until[0]:
                r = await p.send(Message("BusyT", b"w%d-%d" % (n, i)))
                assert r.status is SendStatus.SEND_OK
                acked.add(r.msg_id)
                i += 1

        async def slow_broker_busy() -> int:
            return int((await admin.broker_runtime_info(slow.addr))["sendSystemBusyTotal"])

        # senders that keep sending while puts wait for the slow flush (not rounds that all arrive
        # at once): a send reaches the slow broker when its oldest put has waited > 50 ms. They send
        # for 2 s and on until the slow broker has refused one (a loaded machine may take longer).
        # Latency fault tolerance is off: one put slower than 550 ms (two flushes on a loaded
        # machine) would keep every send from the slow broker for 30 s. Small coalesced requests,
        # so one tick's sends spread over the queues of both brokers instead of leaving as one.
        async with Producer(
            "pg",
            ns.addr,
            send_timeout=10.0,
            auto_batch=auto_batch,
            batch_max_bytes=512,
            send_latency_fault_enable=False,
        ) as p:
            started = time.monotonic()
            until = [started + 20.0]

            async def stop_when_refused() -> None:
                await wait_until_async(slow_broker_busy, 20.0, interval=0.2)
                until[0] = max(started + 2.0, time.monotonic())

            watcher = asyncio.create_task(stop_when_refused())
            await asyncio.gather(*(sender(n, until) for n in range(16)))
            await asyncio.gather(watcher, return_exceptions=True)
            msgs = await all_messages(p, "BusyT")
        busy = await slow_broker_busy()
    assert busy > 0, "the slow broker never answered SYSTEM_BUSY"
    missing = acked - {m.msg_id for m in msgs}
    assert not missing, f"{len(missing)} acknowledged messages lost"
