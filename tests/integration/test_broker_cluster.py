"""Broker and NameServers: routes on kill / clean stop, two brokers, two NameServers, consumer-ids-changed
notifications and frame garbage from other connections (raw RPC, real daemons)."""

from __future__ import annotations

import asyncio
import os
import signal
import struct
from typing import Any

import msgpack

from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from tests.conftest import DaemonPool
from tests.daemons import Daemon
from tests.integration.test_broker_util import call, heartbeat_body, route, route_brokers, send
from tests.waiting import wait_until_async


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 4) -> None:
    ext = {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}
    r = await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert r.code == 0, r.remark


async def test_routes_vanish_on_kill_and_on_clean_stop(daemons: DaemonPool, client: RemotingClient) -> None:
    ns = daemons.namesrv(scanNotActiveBrokerInterval=200, brokerChannelExpiredTime=1500)
    killed = daemons.broker(ns.addr)
    clean = daemons.broker(ns.addr)
    await create_topic(client, killed.addr, "KillT")
    await create_topic(client, clean.addr, "CleanT")
    assert route_brokers(await route(client, ns.addr, "KillT")) == {"broker-a"}
    killed.kill()

    async def kill_route_gone() -> bool:
        return await route(client, ns.addr, "KillT") is None

    await wait_until_async(kill_route_gone, timeout=5, message="route of the killed broker expires")
    clean.terminate()
    assert await route(client, ns.addr, "CleanT") is None, "clean shutdown unregisters at once"


async def test_two_brokers_one_cluster(daemons: DaemonPool, namesrv: Daemon, client: RemotingClient) -> None:
    a = daemons.broker(namesrv.addr)
    b = daemons.broker(namesrv.addr)
    for broker in (a, b):
        assert (await send(client, broker.addr, "Shared", b"x")).code == 0

    async def both() -> bool:
        return route_brokers(await route(client, namesrv.addr, "Shared")) == {"broker-a", "broker-b"}

    await wait_until_async(both, timeout=5, message="both brokers in the route")
    doc = await route(client, namesrv.addr, "Shared")
    assert doc is not None
    assert {bd["brokerName"]: bd["cluster"] for bd in doc["brokerDatas"]} == {
        "broker-a": "DefaultCluster",
        "broker-b": "DefaultCluster",
    }


async def test_broker_registers_with_two_namesrvs(daemons: DaemonPool, client: RemotingClient) -> None:
    ns1, ns2 = daemons.namesrv(), daemons.namesrv()
    b = daemons.broker(f"{ns1.addr};{ns2.addr}")
    await create_topic(client, b.addr, "TwoNs")
    for ns in (ns1, ns2):
        assert route_brokers(await route(client, ns.addr, "TwoNs")) == {"broker-a"}


async def test_consumer_ids_changed_on_join_and_leave(daemons: DaemonPool, namesrv: Daemon) -> None:
    b = daemons.broker(namesrv.addr)
    notified: list[Any] = []
    first = RemotingClient()

    def on_notify(channel: Any, request: RemotingCommand) -> None:
        notified.append(request.ext)

    first.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    second = RemotingClient()
    try:
        r = await call(first, b.addr, RequestCode.HEART_BEAT, body=heartbeat_body("c1", "cg", "T"))
        assert r.code == 0, r.remark
        await wait_until_async(lambda: len(notified) >= 1, timeout=5, message="notified of its own join")
        n = len(notified)
        r = await call(second, b.addr, RequestCode.HEART_BEAT, body=heartbeat_body("c2", "cg", "T"))
        assert r.code == 0
        await wait_until_async(lambda: len(notified) > n, timeout=5, message="notified of the second join")
        assert notified[-1] == {"consumerGroup": "cg"}
        r = await call(first, b.addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
        assert msgpack.unpackb(r.body)["consumerIdList"] == ["c1", "c2"]
        n = len(notified)
        await second.close()  # connection closes: c2 leaves
        await wait_until_async(lambda: len(notified) > n, timeout=5, message="notified of the leave")
        r = await call(first, b.addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
        assert msgpack.unpackb(r.body)["consumerIdList"] == ["c1"]
    finally:
        await first.close()
        await second.close()


async def _garbage(host: str, port: int, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)  # the broker closes the connection
    finally:
        writer.close()


async def test_garbage_frames_do_not_disturb_others(
    daemons: DaemonPool, namesrv: Daemon, client: RemotingClient
) -> None:
    b = daemons.broker(namesrv.addr)
    host, port = b.addr.rsplit(":", 1)
    assert (await send(client, b.addr, "Calm", b"warm-up")).code == 0

    async def good_sender() -> list[int]:
        codes = []
        for i in range(200):
            codes.append((await send(client, b.addr, "Calm", b"m%d" % i)).code)
        return codes

    bad = [
        b"\x00\x00\x00\x10\x77\x00\x00\x04garbagegarbage!!",  # unknown serialize type
        struct.pack(">I", 0x7FFFFFF0) + b"\x10\x00\x00\x01",  # 2 GiB frame announced
        struct.pack(">I", 20) + b"\x10\x00\x00\x08" + b"\xc1" * 16,  # header not msgpack
    ]
    results = await asyncio.gather(good_sender(), *(_garbage(host, int(port), p) for p in bad))
    assert results[0] == [ResponseCode.SUCCESS] * 200
    assert all(r == b"" for r in results[1:]), "bad connections are closed without an answer"
    r = await call(client, b.addr, RequestCode.GET_MAX_OFFSET, {"topic": "Calm", "queueId": 0})
    assert r.ext is not None and r.ext["offset"] == 201


async def test_clean_stop_answers_held_pulls_and_removes_abort(
    daemons: DaemonPool, namesrv: Daemon, client: RemotingClient, tmp_path: Any
) -> None:
    store = tmp_path / "graceful-store"
    b = daemons.broker(namesrv.addr, storePathRootDir=store)
    assert (await send(client, b.addr, "Held", b"x")).code == 0
    assert (store / "abort").exists()
    ext = {
        "consumerGroup": "g", "topic": "Held", "queueId": 0, "queueOffset": 1, "maxMsgNums": 32,
        "sysFlag": 0x4 | 0x2, "commitOffset": 0, "suspendTimeoutMillis": 20_000, "subscription": "*",
    }  # fmt: skip
    held = asyncio.ensure_future(call(client, b.addr, RequestCode.PULL_MESSAGE, ext, timeout_s=30))

    async def is_held() -> bool:
        r = await call(client, b.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return msgpack.unpackb(r.body)["table"]["heldPulls"] == "1"

    await wait_until_async(is_held, timeout=5, message="pull held")
    await asyncio.to_thread(b.terminate)
    resp = await asyncio.wait_for(held, 5)
    assert resp.code == ResponseCode.PULL_NOT_FOUND
    assert b.returncode == 0
    assert not (store / "abort").exists(), "a clean stop removes the abort file"


async def test_route_expires_when_broker_goes_silent(daemons: DaemonPool, client: RemotingClient) -> None:
    """A broker that stops registering (frozen, connection still open) leaves routes after the expiry."""
    ns = daemons.namesrv(scanNotActiveBrokerInterval=200, brokerChannelExpiredTime=1500)
    b = daemons.broker(ns.addr)
    await create_topic(client, b.addr, "Silent")
    assert route_brokers(await route(client, ns.addr, "Silent")) == {"broker-a"}
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    os.kill(b.pid, signal.SIGSTOP)
    try:

        async def gone() -> bool:
            return await route(client, ns.addr, "Silent") is None

        await wait_until_async(gone, timeout=10, message="route of the silent broker expires")
        assert loop.time() - t0 >= 1.0, "evicted by the expiry, not at once"
    finally:
        os.kill(b.pid, signal.SIGCONT)
