"""Broker integration: send then pull, tags, auto-create, long polling, bad input (raw RPC, real daemons)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgpack
import pytest

from rocketpy.message import Message
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.record import decode_records, encode_batch
from rocketpy.remoting.client import RemotingClient
from tests.conftest import DaemonPool
from tests.daemons import Daemon
from tests.integration.test_broker_util import (
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    call,
    pull,
    route,
    send,
    send_batch,
)
from tests.waiting import wait_until_async

MIB = 1024 * 1024


@pytest.fixture
def broker(daemons: DaemonPool, namesrv: Daemon) -> Daemon:
    return daemons.broker(namesrv.addr, mappedFileSizeCommitLog=64 * MIB, mappedFileSizeConsumeQueue=6000)


async def test_send_then_pull_single_and_big(broker: Daemon, client: RemotingClient) -> None:
    bodies = [b"x" * 1024, bytes(range(256)) * 4, b"y" * (4 * MIB - 1)]
    offsets = []
    for i, body in enumerate(bodies):
        resp = await send(
            client, broker.addr, "TopicSP", body, queue_id=1, props={"KEYS": f"k{i}", "TAGS": "A"}
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert resp.ext is not None and len(resp.ext["msgId"]) == 32 and resp.ext["queueId"] == 1
        offsets.append(resp.ext["queueOffset"])
    assert offsets == [0, 1, 2]
    got: list[Any] = []
    offset = 0
    while len(got) < 3:
        resp = await pull(client, broker.addr, group="g1", topic="TopicSP", queue_id=1, offset=offset)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        msgs = decode_records(resp.body)
        got.extend(msgs)
        offset = resp.ext["nextBeginOffset"]  # type: ignore[index]
    assert [m.body for m in got] == bodies
    assert [m.queue_offset for m in got] == [0, 1, 2]
    assert got[0].topic == "TopicSP" and got[0].tags == "A"
    # at the end: PULL_NOT_FOUND without suspend, next offset unchanged
    resp = await pull(client, broker.addr, group="g1", topic="TopicSP", queue_id=1, offset=3)
    assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.ext["nextBeginOffset"] == 3  # type: ignore[index]
    # the offset msg id finds the message
    view = await call(
        client, broker.addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": got[1].commitlog_offset}
    )
    assert view.code == 0 and decode_records(view.body)[0].body == bodies[1]


async def test_batch_send_then_pull(broker: Daemon, client: RemotingClient) -> None:
    msgs = [Message("TopicB", b"%05d" % i + b"z" * 1019, tags="T") for i in range(64)]
    resp = await send_batch(client, broker.addr, "TopicB", encode_batch(msgs), queue_id=0)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert len(resp.ext["msgId"].split(",")) == 64  # type: ignore[index]
    assert len(resp.ext["transactionId"].split(",")) == 64  # type: ignore[index]
    got = []
    offset = 0
    while offset < 64:
        r = await pull(client, broker.addr, group="g", topic="TopicB", queue_id=0, offset=offset, max_msgs=32)
        assert r.code == ResponseCode.SUCCESS, r.remark
        got.extend(decode_records(r.body))
        offset = r.ext["nextBeginOffset"]  # type: ignore[index]
    assert [m.body for m in got] == [m.body for m in msgs]
    assert got[5].properties.get("UNIQ_KEY") == msgs[5].properties["UNIQ_KEY"]


async def test_tag_filter(broker: Daemon, client: RemotingClient) -> None:
    for i, tag in enumerate(["A", "B", "C", "A", "B"]):
        r = await send(client, broker.addr, "TopicTag", b"m%d" % i, props={"TAGS": tag})
        assert r.code == 0, r.remark
    await send(client, broker.addr, "TopicTag", b"untagged")
    r = await pull(
        client, broker.addr, group="g", topic="TopicTag", queue_id=0, offset=0, subscription="A || C"
    )
    assert r.code == 0
    assert [m.body for m in decode_records(r.body)] == [b"m0", b"m2", b"m3"]
    r = await pull(client, broker.addr, group="g", topic="TopicTag", queue_id=0, offset=5, subscription="A")
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.ext["nextBeginOffset"] == 6  # type: ignore[index]
    r = await pull(client, broker.addr, group="g", topic="TopicTag", queue_id=0, offset=0, subscription="*")
    assert len(decode_records(r.body)) == 6


async def test_auto_create_on_shows_in_route(broker: Daemon, namesrv: Daemon, client: RemotingClient) -> None:
    r = await send(client, broker.addr, "AutoTopic", b"hello")
    assert r.code == 0, r.remark

    async def routed() -> Any:
        return await route(client, namesrv.addr, "AutoTopic")

    doc = await wait_until_async(routed, timeout=5, message="auto-created topic in route")
    qd = doc["queueDatas"][0]
    assert qd["writeQueueNums"] == 4 and qd["readQueueNums"] == 4 and qd["perm"] == 6
    r = await send(client, broker.addr, "AutoTopic", b"x", queue_id=4)
    assert r.code == ResponseCode.INVALID_PARAMETER and "queueId 4" in (r.remark or "")


async def test_auto_create_off(daemons: DaemonPool, namesrv: Daemon, client: RemotingClient) -> None:
    b = daemons.broker(namesrv.addr, autoCreateTopicEnable=False)
    r = await send(client, b.addr, "NoSuchTopic", b"x")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST and "mqadmin updateTopic" in (r.remark or "")
    ext = {"topic": "Made", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    r = await call(client, b.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert r.code == 0, r.remark
    assert await route(client, namesrv.addr, "Made") is not None  # registered before the answer
    assert (await send(client, b.addr, "Made", b"x", queue_id=1)).code == 0
    # wipe the topic's write perm
    r = await call(client, b.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {**ext, "perm": 4})
    r = await send(client, b.addr, "Made", b"x")
    assert r.code == ResponseCode.NO_PERMISSION and "not writable" in (r.remark or "")
    # wipe the broker's write perm live
    r = await call(client, b.addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
    assert r.code == 0, r.remark
    r = await send(client, b.addr, "Made", b"x")
    assert r.code == ResponseCode.NO_PERMISSION and "write permission" in (r.remark or "")
    r = await call(client, b.addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"listenPort=1\n")
    assert r.code == ResponseCode.INVALID_PARAMETER and "brokerPermission" in (r.remark or "")
    assert "fileReservedTime" in (r.remark or "")  # the live store keys are listed too
    # a bad value of a live store key changes nothing, the broker key beside it neither
    r = await call(
        client, b.addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6\ndeleteWhen=4pm\n"
    )
    assert r.code == ResponseCode.INVALID_PARAMETER and "deleteWhen" in (r.remark or "")
    r = await send(client, b.addr, "Made", b"x")
    assert r.code == ResponseCode.NO_PERMISSION  # brokerPermission is still 4


async def test_long_polling_wake_and_timeout(broker: Daemon, client: RemotingClient) -> None:
    assert (await send(client, broker.addr, "TopicLP", b"first")).code == 0
    flags = FLAG_SUBSCRIPTION | FLAG_SUSPEND
    held = asyncio.ensure_future(
        pull(
            client,
            broker.addr,
            group="g",
            topic="TopicLP",
            queue_id=0,
            offset=1,
            sys_flag=flags,
            suspend_ms=10_000,
        )
    )

    async def held_pulls() -> int:
        r = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return int(msgpack.unpackb(r.body)["table"]["heldPulls"])

    await wait_until_async(held_pulls, timeout=5, message="the pull is held by the broker")
    assert not held.done()
    t0 = time.perf_counter()
    sent = await send(client, broker.addr, "TopicLP", b"second")
    t_ack = time.perf_counter()
    resp = await asyncio.wait_for(held, 5)
    t_pull = time.perf_counter()
    assert resp.code == ResponseCode.SUCCESS and sent.code == 0
    assert [m.body for m in decode_records(resp.body)] == [b"second"]
    assert t_pull - t_ack < 0.05, f"held pull answered {1000 * (t_pull - t_ack):.1f} ms after the send ack"
    assert t_pull - t0 < 0.5
    # the suspend timeout answers PULL_NOT_FOUND
    t0 = time.perf_counter()
    resp = await pull(
        client, broker.addr, group="g", topic="TopicLP", queue_id=0, offset=2, sys_flag=flags, suspend_ms=300
    )
    elapsed = time.perf_counter() - t0
    assert resp.code == ResponseCode.PULL_NOT_FOUND
    assert 0.28 <= elapsed < 2.0


async def test_bad_inputs_get_clear_errors(broker: Daemon, client: RemotingClient) -> None:
    a = broker.addr
    r = await call(client, a, 4242)
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "4242" in (r.remark or "")
    r = await call(client, a, RequestCode.SEND_MESSAGE_V2, {"a": "pg"}, b"x")
    assert r.code == ResponseCode.INVALID_PARAMETER and "'b'" in (r.remark or "")
    r = await call(client, a, RequestCode.PULL_MESSAGE, {"topic": "T"})
    assert r.code == ResponseCode.INVALID_PARAMETER and "consumerGroup" in (r.remark or "")
    assert (await send(client, a, "TopicBad", b"x")).code == 0
    for offset in (-1, 1 << 63, (1 << 64) - 1, "9" * 30):
        r = await pull(client, a, group="g", topic="TopicBad", queue_id=0, offset=offset)
        assert r.code == ResponseCode.INVALID_PARAMETER and "queueOffset" in (r.remark or ""), (offset, r)
    r = await pull(client, a, group="g", topic="TopicBad", queue_id=0, offset=100)
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and "nextBeginOffset" in (r.remark or "")
    assert r.ext is not None and r.ext["minOffset"] <= r.ext["nextBeginOffset"] <= r.ext["maxOffset"] == 1
    r = await pull(client, a, group="g", topic="TopicBad", queue_id=99, offset=0)
    assert r.code == ResponseCode.INVALID_PARAMETER and "queueId 99" in (r.remark or "")
    r = await pull(client, a, group="g", topic="Nope", queue_id=0, offset=0)
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    r = await send(client, a, "bad topic!", b"x")
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "illegal characters" in (r.remark or "")
    r = await send(client, a, "TBW102", b"x")
    assert r.code == ResponseCode.NO_PERMISSION and "system topic" in (r.remark or "")
    r = await send(client, a, "TopicBad", b"x" * (4 * MIB + 1))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "maxMessageSize" in (r.remark or "")
    r = await call(client, a, RequestCode.HEART_BEAT, body=b"\xc1garbage")
    assert r.code == ResponseCode.INVALID_PARAMETER and "HeartbeatData" in (r.remark or "")
    r = await call(
        client, a, RequestCode.SEND_BATCH_MESSAGE, {**_v2("TopicBad"), "m": True}, b"\x00\x00\x00\x05abc"
    )
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "batch" in (r.remark or "")
    # still serving
    assert (await send(client, a, "TopicBad", b"ok")).code == 0


def _v2(topic: str) -> dict[str, Any]:
    from tests.integration.test_broker_util import send_ext

    return send_ext(topic, 0)


async def test_offsets_queries_and_admin(broker: Daemon, client: RemotingClient) -> None:
    a = broker.addr
    for i in range(3):
        assert (await send(client, a, "TopicQ", b"q%d" % i, props={"KEYS": "order-7"})).code == 0
    q = {"consumerGroup": "cg", "topic": "TopicQ", "queueId": 0}
    r = await call(client, a, RequestCode.QUERY_CONSUMER_OFFSET, q)
    # no committed offset, but the queue still holds its offset 0: RocketMQ answers 0
    assert r.code == 0 and r.ext["offset"] == 0  # type: ignore[index]
    assert (await call(client, a, RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 2})).code == 0
    r = await call(client, a, RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert r.code == 0 and r.ext["offset"] == 2  # type: ignore[index]
    # commit offset carried by a pull
    await pull(
        client,
        a,
        group="cg",
        topic="TopicQ",
        queue_id=0,
        offset=2,
        sys_flag=FLAG_SUBSCRIPTION | 1,
        commit_offset=3,
    )
    r = await call(client, a, RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert r.ext["offset"] == 3  # type: ignore[index]
    tq = {"topic": "TopicQ", "queueId": 0}
    assert (await call(client, a, RequestCode.GET_MAX_OFFSET, tq)).ext["offset"] == 3  # type: ignore[index]
    assert (await call(client, a, RequestCode.GET_MIN_OFFSET, tq)).ext["offset"] == 0  # type: ignore[index]
    r = await call(client, a, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**tq, "timestamp": 0})
    assert r.code == 0 and r.ext["offset"] == 0  # type: ignore[index]
    r = await call(client, a, RequestCode.GET_EARLIEST_MSG_STORETIME, tq)
    assert r.code == 0 and r.ext["timestamp"] > 0  # type: ignore[index]
    qm = {"topic": "TopicQ", "key": "order-7", "maxNum": 10, "beginTimestamp": 0, "endTimestamp": 1 << 62}

    async def indexed() -> int:  # the index is written by dispatch, as in RocketMQ: poll
        r = await call(client, a, RequestCode.QUERY_MESSAGE, qm)
        return len(decode_records(r.body)) if r.code == 0 else 0

    assert await wait_until_async(indexed, timeout=5, message="messages found by key") == 3
    r = await call(client, a, RequestCode.GET_BROKER_RUNTIME_INFO)
    table = msgpack.unpackb(r.body)["table"]
    assert int(table["msgPutTotalTodayNow"]) >= 3 and "putTps" in table
    r = await call(client, a, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "cg", "topic": "TopicQ"})
    rows = msgpack.unpackb(r.body)["offsetTable"]
    assert rows[0]["brokerOffset"] == 3 and rows[0]["consumerOffset"] == 3
    r = await call(client, a, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "TopicQ"})
    assert msgpack.unpackb(r.body)["offsetTable"][0]["maxOffset"] == 3
    r = await call(client, a, RequestCode.GET_BROKER_CONFIG)
    assert b"brokerName=" in r.body
    r = await call(client, a, RequestCode.GET_ALL_TOPIC_CONFIG)
    assert "TopicQ" in msgpack.unpackb(r.body)["topicConfigTable"]


async def test_groups_locks_and_topic_delete(broker: Daemon, namesrv: Daemon, client: RemotingClient) -> None:
    a = broker.addr
    mqs = [{"topic": "TopicL", "brokerName": "broker-a", "queueId": q} for q in range(2)]
    lock = {"consumerGroup": "og", "clientId": "c1", "mqSet": mqs, "onlyThisBroker": True}
    r = await call(client, a, RequestCode.LOCK_BATCH_MQ, body=msgpack.packb(lock))
    assert r.code == 0 and len(msgpack.unpackb(r.body)["lockOKMQSet"]) == 2
    r = await call(client, a, RequestCode.LOCK_BATCH_MQ, body=msgpack.packb({**lock, "clientId": "c2"}))
    assert msgpack.unpackb(r.body)["lockOKMQSet"] == []
    assert (await call(client, a, RequestCode.UNLOCK_BATCH_MQ, body=msgpack.packb(lock))).code == 0
    r = await call(client, a, RequestCode.LOCK_BATCH_MQ, body=msgpack.packb({**lock, "clientId": "c2"}))
    assert len(msgpack.unpackb(r.body)["lockOKMQSet"]) == 2
    r = await call(client, a, RequestCode.LOCK_BATCH_MQ, body=msgpack.packb({"mqSet": []}))
    assert r.code == ResponseCode.INVALID_PARAMETER and "consumerGroup" in (r.remark or "")
    # subscription group with consumption disabled
    group = {"groupName": "off", "consumeEnable": False}
    r = await call(client, a, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=msgpack.packb(group))
    assert r.code == 0, r.remark
    r = await call(client, a, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert msgpack.unpackb(r.body)["subscriptionGroupTable"]["off"]["consumeEnable"] is False
    assert (await send(client, a, "TopicDel", b"x")).code == 0
    r = await pull(client, a, group="off", topic="TopicDel", queue_id=0, offset=0)
    assert r.code == ResponseCode.NO_PERMISSION and "consumeEnable" in (r.remark or "")
    # delete the topic: gone from the broker and from the route
    r = await call(client, a, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TopicDel"})
    assert r.code == 0, r.remark
    r = await pull(client, a, group="g", topic="TopicDel", queue_id=0, offset=0)
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    r = await call(client, a, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"})
    assert r.code == ResponseCode.INVALID_PARAMETER and "system topic" in (r.remark or "")


async def test_heartbeat_subscription_drives_pull_filter(broker: Daemon, client: RemotingClient) -> None:
    from tests.integration.test_broker_util import heartbeat_body

    a = broker.addr
    for tag in ("A", "B"):
        assert (await send(client, a, "TopicHB", tag.encode(), props={"TAGS": tag})).code == 0
    r = await pull(client, a, group="hb", topic="TopicHB", queue_id=0, offset=0, sys_flag=0)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST and "HEART_BEAT" in (r.remark or "")
    r = await call(client, a, RequestCode.HEART_BEAT, body=heartbeat_body("cid", "hb", "TopicHB", "B"))
    assert r.code == 0, r.remark
    r = await pull(client, a, group="hb", topic="TopicHB", queue_id=0, offset=0, sys_flag=0)
    assert r.code == 0 and [m.body for m in decode_records(r.body)] == [b"B"]
    r = await call(client, a, RequestCode.UNREGISTER_CLIENT, {"clientID": "cid", "consumerGroup": "hb"})
    assert r.code == 0
    r = await call(client, a, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "hb"})
    assert r.code != 0 and "online" in (r.remark or "")


async def test_sync_flush_sends(daemons: DaemonPool, namesrv: Daemon, client: RemotingClient) -> None:
    b = daemons.broker(namesrv.addr, flushDiskType="SYNC_FLUSH")
    results = await asyncio.gather(*(send(client, b.addr, "TopicSync", b"s%d" % i) for i in range(50)))
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 50
    assert sorted(r.ext["queueOffset"] for r in results) == list(range(50))  # type: ignore[index]
    r = await pull(client, b.addr, group="g", topic="TopicSync", queue_id=0, offset=0, max_msgs=64)
    assert r.code == 0 and len(decode_records(r.body)) == 32
