"""RocketMQ's JSON remoting against real daemons: the requests RocketMQ's C++ client sends, byte
shapes included (ints and strings mixed in extFields, enum ordinals, batch flag "1"), and bad input."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.record import BATCH_HEAD, decode_records
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import SERIALIZE_JSON, RemotingCommand
from tests.conftest import DaemonPool
from tests.daemons import Daemon
from tests.integration.test_broker_util import route as msgpack_route
from tests.waiting import wait_until_async

TIMEOUT_S = 10.0
ACL = {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "c2lnbmF0dXJl"}


@pytest.fixture
async def jclient() -> AsyncIterator[RemotingClient]:
    """A raw RPC client speaking RocketMQ's JSON remoting."""
    c = RemotingClient(name="json-test", serialize_type=SERIALIZE_JSON)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
def broker(daemons: DaemonPool, namesrv: Daemon) -> Daemon:
    return daemons.broker(
        namesrv.addr, mappedFileSizeCommitLog=4 * 1024 * 1024, mappedFileSizeConsumeQueue=6000
    )


async def jcall(
    client: RemotingClient, addr: str, code: int, ext: dict[str, Any] | None = None, body: Any = b""
) -> RemotingCommand:
    if not isinstance(body, bytes):
        body = json.dumps(body).encode() + b"\n"
    assert client.serialize_type == SERIALIZE_JSON
    cmd = RemotingCommand.request(code, {**ACL, **(ext or {})}, body)
    resp = await client.invoke(addr, cmd, TIMEOUT_S)
    assert resp.serialize_type == SERIALIZE_JSON
    assert resp.ext is not None and all(type(v) is str for v in resp.ext.values()), resp.ext
    return resp


def cpp_send_ext(topic: str, queue_id: int, props: str, batch: bool = False) -> dict[str, Any]:
    return {
        "producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": "1700000000000", "flag": 0,
        "properties": props, "reconsumeTimes": "0", "unitMode": "0", "batch": "1" if batch else "0",
    }  # fmt: skip


def cpp_batch_entry(body: bytes, props: str) -> bytes:
    p = props.encode()
    total = BATCH_HEAD.size + len(body) + 2 + len(p)
    return BATCH_HEAD.pack(total, 0, 0, 0, len(body)) + body + struct.pack(">H", len(p)) + p


def props(**kv: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in kv.items())


async def test_cpp_client_flow_over_json(namesrv: Daemon, broker: Daemon, jclient: RemotingClient) -> None:
    client = jclient
    # The default-topic route a producer falls back to for a topic the NameServer does not know.
    resp = await jcall(client, namesrv.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "JTopic"})
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    resp = await jcall(client, namesrv.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    doc = json.loads(resp.body)
    assert doc["brokerDatas"][0]["brokerAddrs"] == {"0": broker.addr}
    assert doc["queueDatas"][0]["writeQueueNums"] > 0
    # SEND_MESSAGE (10) with long names and the C++ client's mixed value types: auto-creates.
    resp = await jcall(
        client, broker.addr, RequestCode.SEND_MESSAGE,
        cpp_send_ext("JTopic", 1, props(KEYS="k1", TAGS="TagA", UNIQ_KEY="U1", color="café ✓")), b"one",
    )  # fmt: skip
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext is not None
    assert (resp.ext["queueId"], resp.ext["queueOffset"], len(resp.ext["msgId"])) == ("1", "0", 32)
    # A batch: SEND_MESSAGE with batch "1", entries whose magic and CRC are 0.
    batch = b"".join(
        cpp_batch_entry(f"b{i}".encode(), props(TAGS="TagB", UNIQ_KEY=f"B{i}")) for i in range(3)
    )
    resp = await jcall(
        client,
        broker.addr,
        RequestCode.SEND_MESSAGE,
        cpp_send_ext("JTopic", 1, "WAIT\x01true\x02", True),
        batch,
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext is not None and resp.ext["queueOffset"] == "1" and resp.ext["msgId"].count(",") == 2
    # Heartbeat with enum ordinals, then the group's members, its offset and queue locks.
    hb = {
        "clientID": "123-127.0.0.1@DEFAULT",
        "consumerDataSet": [{
            "groupName": "jg", "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0,
            "subscriptionDataSet": [
                {"topic": "JTopic", "subString": "TagA || TagB", "subVersion": "1700000000000",
                 "tagsSet": ["TagA", "TagB"], "codeSet": [0, 0]},
                {"topic": "%RETRY%jg", "subString": "*", "subVersion": "1700000000000"},
            ],
        }],
        "producerDataSet": [{"groupName": "pg"}],
    }  # fmt: skip
    resp = await jcall(client, broker.addr, RequestCode.HEART_BEAT, body=hb)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await jcall(client, broker.addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "jg"})
    assert json.loads(resp.body) == {"consumerIdList": ["123-127.0.0.1@DEFAULT"]}
    q = {"consumerGroup": "jg", "topic": "JTopic", "queueId": 1}
    resp = await jcall(client, broker.addr, RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert (resp.code, resp.ext) == (ResponseCode.SUCCESS, {"offset": "0"})
    mq = {"brokerName": broker.name, "queueId": 1, "topic": "JTopic"}
    lock = {"clientId": "123-127.0.0.1@DEFAULT", "consumerGroup": "jg", "mqSet": [mq]}
    resp = await jcall(client, broker.addr, RequestCode.LOCK_BATCH_MQ, body=lock)
    assert json.loads(resp.body) == {"lockOKMQSet": [mq]}
    # Pull: every ext field the client reads, as strings; the body is commitlog records.
    pull = {
        "consumerGroup": "jg", "topic": "JTopic", "queueId": 1, "queueOffset": "0", "maxMsgNums": 32,
        "sysFlag": 6, "commitOffset": "0", "suspendTimeoutMillis": "15000", "subscription": "TagA || TagB",
        "subVersion": "1700000000000",
    }  # fmt: skip
    resp = await jcall(client, broker.addr, RequestCode.PULL_MESSAGE, pull)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext is not None
    wanted = {"nextBeginOffset": "4", "minOffset": "0", "maxOffset": "4", "suggestWhichBrokerId": "0"}
    assert {k: resp.ext[k] for k in wanted} == wanted
    msgs = decode_records(resp.body)
    assert [m.body for m in msgs] == [b"one", b"b0", b"b1", b"b2"]
    assert msgs[0].properties["color"] == "café ✓" and msgs[0].keys == ["k1"]
    resp = await jcall(client, broker.addr, RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "4"})
    resp = await jcall(client, broker.addr, RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert resp.ext == {"offset": "4"}
    resp = await jcall(client, broker.addr, RequestCode.UNLOCK_BATCH_MQ, body=lock)
    assert resp.code == ResponseCode.SUCCESS
    # NameServer tables as JSON.
    resp = await jcall(client, namesrv.addr, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert broker.name in json.loads(resp.body)["brokerAddrTable"]
    resp = await jcall(client, namesrv.addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert "TBW102" in json.loads(resp.body)["topicList"]


@pytest.mark.parametrize(
    ("code", "body"),
    [
        (RequestCode.HEART_BEAT, b"{not json"),
        (RequestCode.HEART_BEAT, b"[" * 50_000 + b"]" * 50_000),
        (RequestCode.HEART_BEAT, b'{"clientID": 5}'),
        (RequestCode.HEART_BEAT, b'{"clientID":"c","consumerDataSet":[{"groupName":"g","messageModel":9}]}'),
        (RequestCode.LOCK_BATCH_MQ, b'{"clientId":"c","consumerGroup":"g","mqSet":[{"topic":"T"}]}'),
        (RequestCode.LOCK_BATCH_MQ, b'"' + b"x" * 1_000_000 + b'"'),
        (RequestCode.SEND_MESSAGE, b"x"),
    ],
)
async def test_bad_json_bodies_get_error_answers(
    broker: Daemon, jclient: RemotingClient, code: int, body: bytes
) -> None:
    client = jclient
    ext = cpp_send_ext("JBad", 0, "", batch=True) if code == RequestCode.SEND_MESSAGE else {}
    resp = await jcall(client, broker.addr, code, ext, body)
    assert resp.code in (ResponseCode.INVALID_PARAMETER, ResponseCode.MESSAGE_ILLEGAL), resp
    assert resp.remark and len(resp.remark) < 400


async def test_bad_json_header_closes_only_its_connection(
    namesrv: Daemon, broker: Daemon, client: RemotingClient, jclient: RemotingClient
) -> None:
    for header in (b"{oops", b'{"code":"x"}', b'{"code":10,"extFields":{"a":[1]}}', b"[" * 10_000):
        reader, writer = await asyncio.open_connection(*broker.addr.rsplit(":", 1))
        writer.write(struct.pack(">II", 4 + len(header), len(header)) + header)
        assert await asyncio.wait_for(reader.read(), TIMEOUT_S) == b""  # closed, nothing answered
        writer.close()
    # JSON and msgpack requests on one connection each still work, side by side.
    doc = await msgpack_route(client, namesrv.addr, "TBW102")
    assert doc is not None
    resp = await jcall(
        jclient, broker.addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "none"}
    )
    assert resp.code == ResponseCode.SYSTEM_ERROR
    await wait_until_async(lambda: "protocol error" in broker.stderr_text(), 10.0)  # its logging thread
    assert "Traceback" not in broker.stderr_text()


async def test_sdk_setting_selects_json(
    namesrv: Daemon, broker: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rocketpy import Admin

    monkeypatch.setenv("ROCKETPY_SERIALIZE_TYPE", "json")
    async with Admin(namesrv.addr) as admin:
        assert admin.instance.remoting.serialize_type == SERIALIZE_JSON
        await admin.create_topic("JsonSdk", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        assert "JsonSdk" in await admin.topic_list()
    monkeypatch.setenv("ROCKETPY_SERIALIZE_TYPE", "xml")
    with pytest.raises(Exception, match="serialize_type='xml' is not valid"):
        async with Admin(namesrv.addr):
            pass
