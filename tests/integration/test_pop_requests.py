"""POP's request codes on the wire: RocketMQ's JSON remoting as its Java client speaks it, and bad input.

The JSON test plays RocketMQ's Java client: every header field as text, the answer's offset infos
turned into each message's ``POP_CK`` as ``MQClientAPIImpl.processPopResponse`` does, a BatchAck
body with fastjson's short names and base64 bit set. The bad-input tests send malformed or
misplaced requests raw and check the response code and remark, then that a normal pop and ack
still work and nothing else changed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rocketpy import Admin, Message, Producer
from rocketpy.perm import PERM_WRITE
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketpy.protocol.receipt import ReceiptHandle, info_key, parse_start_offsets, topic_kind
from rocketpy.record import decode_records
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import SERIALIZE_JSON, RemotingCommand
from tests.daemons import Daemon
from tests.waiting import wait_until_async

TIMEOUT_S = 10.0
RC = ResponseCode


@pytest.fixture
def broker(daemons: Any) -> Daemon:
    namesrv = daemons.namesrv()
    b = daemons.broker(namesrv.addr, popPollingSize=1)
    b.ns = namesrv.addr  # type: ignore[attr-defined]
    return b  # type: ignore[no-any-return]


@pytest.fixture
async def raw() -> AsyncIterator[RemotingClient]:
    c = RemotingClient(name="pop-raw")
    try:
        yield c
    finally:
        await c.close()


async def call(
    c: RemotingClient, addr: str, code: int, ext: dict[str, Any], body: bytes = b""
) -> RemotingCommand:
    return await c.invoke(addr, RemotingCommand.request(code, ext, body), TIMEOUT_S)


async def setup_topic(ns: str, topic: str, n: int, queues: int = 2, **kw: Any) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(
            topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues, **kw
        )
    async with Producer(f"pg_{topic}", namesrv_addr=ns) as p:
        for i in range(n):
            await p.send(Message(topic, b"%d" % i), selector=lambda mqs, _m, a: mqs[a % len(mqs)], arg=i)


def handles(resp: RemotingCommand, broker_name: str = "broker-a") -> list[tuple[Any, str]]:
    """(message, receipt handle) of a POP answer, built as RocketMQ's Java client builds them."""
    h = PopMessageResponseHeader.from_ext(resp.ext)
    starts = parse_start_offsets(h.start_offset_info)
    out = []
    for m in decode_records(resp.body):
        ck = m.properties.get("POP_CK")
        if ck is None:
            kind = topic_kind(m.topic)
            ck = ReceiptHandle(starts[info_key(kind, m.queue_id)], h.pop_time, h.invisible_time, h.revive_qid,
                               kind, broker_name, m.queue_id, m.queue_offset).encode()  # fmt: skip
        out.append((m, ck))
    return out


def java_ext(ext: dict[str, Any]) -> dict[str, str]:
    """A header as RocketMQ's Java client writes it: every value text, booleans 'true'/'false'."""
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in ext.items()}


async def test_a_rocketmq_remoting_client_pops_acks_and_changes(broker: Daemon) -> None:
    await setup_topic(broker.ns, "PopJson", 6)  # type: ignore[attr-defined]
    jc = RemotingClient(name="java-like", serialize_type=SERIALIZE_JSON)
    try:
        pop = java_ext(
            PopMessageRequestHeader("g_json", "PopJson", -1, 32, 30000, 1000, 1700000000000, 0).to_ext()
        )
        resp = await call(jc, broker.addr, RequestCode.POP_MESSAGE, pop)
        assert resp.code == RC.SUCCESS and resp.serialize_type == SERIALIZE_JSON, resp.remark
        assert all(type(v) is str for v in (resp.ext or {}).values())
        got = handles(resp)
        assert sorted(int(m.body) for m, _ in got) == list(range(6))
        (m0, h0), (m1, h1), *rest = got
        ack = java_ext(
            AckMessageRequestHeader("g_json", "PopJson", m0.queue_id, h0, m0.queue_offset).to_ext()
        )
        resp = await call(jc, broker.addr, RequestCode.ACK_MESSAGE, ack)
        assert resp.code == RC.SUCCESS and not resp.remark
        change_header = ChangeInvisibleTimeRequestHeader(
            "g_json", "PopJson", m1.queue_id, h1, m1.queue_offset, 60000
        )
        change = java_ext(change_header.to_ext())
        resp = await call(jc, broker.addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change)
        assert resp.code == RC.SUCCESS and int(resp.ext["invisibleTime"]) == 60000  # type: ignore[index]
        assert int(resp.ext["popTime"]) > ReceiptHandle.parse(h1).pop_time  # type: ignore[index]
        body = {"brokerName": "broker-a", "acks": []}
        for m, h in rest:  # one BatchAck per message, as fastjson writes them
            r = ReceiptHandle.parse(h)
            bits = 1 << (m.queue_offset - r.ck_queue_offset)
            body["acks"].append({  # type: ignore[attr-defined]
                "c": "g_json", "t": "PopJson", "r": "0", "so": r.ck_queue_offset, "q": m.queue_id, "rq": 0,
                "pt": r.pop_time, "it": 30000, "b": _bitset(bits),
            })  # fmt: skip
        resp = await call(jc, broker.addr, RequestCode.BATCH_ACK_MESSAGE, {}, json.dumps(body).encode())
        assert resp.code == RC.SUCCESS and not resp.remark, resp.remark
        peek = java_ext({"consumerGroup": "g_json", "topic": "PopJson", "queueId": -1, "maxMsgNums": 32})
        resp = await call(jc, broker.addr, RequestCode.PEEK_MESSAGE, peek)
        assert resp.code == RC.PULL_NOT_FOUND  # m1 is in flight, the rest acked: nothing to peek
        note = java_ext({"consumerGroup": "g_json", "topic": "PopJson", "queueId": -1, "pollTime": 0,
                         "bornTime": 0})  # fmt: skip
        resp = await call(jc, broker.addr, RequestCode.NOTIFICATION, note)
        assert resp.code == RC.SUCCESS and resp.ext["hasMsg"] == "false"  # type: ignore[index]
    finally:
        await jc.close()


def _bitset(bits: int) -> str:
    import base64

    raw = bits.to_bytes((bits.bit_length() + 7) // 8 or 1, "little")
    return base64.b64encode(raw).decode()


async def _pop(raw: RemotingClient, addr: str, topic: str, group: str, **kw: Any) -> RemotingCommand:
    fields = {"queue_id": -1, "max_msgs": 32, "invisible_time_ms": 30000, "poll_time_ms": 0, **kw}
    ext = PopMessageRequestHeader(group, topic, **fields).to_ext()
    return await call(raw, addr, RequestCode.POP_MESSAGE, ext)


async def test_bad_pops_are_refused_with_a_remark(broker: Daemon, raw: RemotingClient) -> None:
    ns, addr = broker.ns, broker.addr  # type: ignore[attr-defined]
    await setup_topic(ns, "PopBad", 4)
    await setup_topic(ns, "PopWriteOnly", 1, perm=PERM_WRITE)
    async with Admin(ns) as admin:
        await admin.update_subscription_group("g_off", "DefaultCluster", consume_enable=False)
    good = PopMessageRequestHeader("g_bad", "PopBad", -1, 32, 30000).to_ext()
    cases = [
        ({**good, "maxMsgNums": 33}, RC.INVALID_PARAMETER, "'maxMsgNums' must be between 1 and 32"),
        ({**good, "maxMsgNums": 0}, RC.INVALID_PARAMETER, "'maxMsgNums' must be between 1 and 32"),
        (
            {**good, "invisibleTime": 0},
            RC.INVALID_PARAMETER,
            "'invisibleTime' must be between 1 and 43200000",
        ),
        ({**good, "invisibleTime": 43_200_001}, RC.INVALID_PARAMETER, "at most 12 hours"),
        ({**good, "topic": "PopWriteOnly"}, RC.NO_PERMISSION, "is not readable"),
        ({**good, "consumerGroup": "g_off"}, RC.NO_PERMISSION, "consumeEnable=false"),
        ({**good, "topic": "NoSuchTopic"}, RC.TOPIC_NOT_EXIST, "does not exist"),
        ({**good, "queueId": 4}, RC.INVALID_PARAMETER, "queueId 4 is out of range"),
        ({**good, "expType": "SQL92", "exp": "a > 1"}, RC.SYSTEM_ERROR, "enablePropertyFilter=true"),
        ({**good, "expType": "XPATH", "exp": "a"}, RC.SUBSCRIPTION_PARSE_FAILED, "not supported"),
    ]
    for ext, code, remark in cases:
        resp = await call(raw, addr, RequestCode.POP_MESSAGE, ext)
        assert (resp.code, remark in (resp.remark or "")) == (code, True), (ext, resp.code, resp.remark)
    resp = await _pop(raw, addr, "PopBad", "g_bad")  # nothing else was affected: all 4 are there
    assert resp.code == RC.SUCCESS and len(decode_records(resp.body)) == 4


async def test_bad_acks_are_refused_with_a_remark(broker: Daemon, raw: RemotingClient) -> None:
    ns, addr = broker.ns, broker.addr  # type: ignore[attr-defined]
    await setup_topic(ns, "PopAck", 3)
    got = handles(await _pop(raw, addr, "PopAck", "g_ack", invisible_time_ms=2000))
    (m, h), (_, h2), _ = got

    def ack(handle: str, offset: int | None = None, qid: int | None = None) -> dict[str, Any]:
        off = m.queue_offset if offset is None else offset
        return AckMessageRequestHeader(
            "g_ack", "PopAck", m.queue_id if qid is None else qid, handle, off
        ).to_ext()

    foreign = ReceiptHandle.parse(h)._replace(broker_name="broker-z")
    cases = [
        (ack("garbage"), RC.INVALID_PARAMETER, "receipt handle (extraInfo) is malformed"),
        (ack(foreign.encode()), RC.INVALID_PARAMETER, "issued by broker 'broker-z'"),
        (ack(h, offset=m.queue_offset + 100), RC.NO_MESSAGE, "is outside"),
        (ack(h, qid=9), RC.MESSAGE_ILLEGAL, "queueId 9 is out of range"),
        (ack(h2), RC.INVALID_PARAMETER, "the request names"),  # another message's handle
    ]
    for ext, code, remark in cases:
        resp = await call(raw, addr, RequestCode.ACK_MESSAGE, ext)
        assert (resp.code, remark in (resp.remark or "")) == (code, True), (ext, resp.code, resp.remark)
    resp = await call(raw, addr, RequestCode.ACK_MESSAGE, ack(h))
    assert resp.code == RC.SUCCESS and resp.remark is None
    resp = await call(raw, addr, RequestCode.ACK_MESSAGE, ack(h))  # a repeated ack
    assert resp.code == RC.SUCCESS and "not in flight" in (resp.remark or "")
    change = ChangeInvisibleTimeRequestHeader("g_ack", "PopAck", m.queue_id, h, m.queue_offset, 5000).to_ext()
    resp = await call(raw, addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change)
    assert resp.code == RC.NO_MESSAGE and "not in flight" in (resp.remark or "")
    resp = await call(raw, addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {**change, "invisibleTime": 0})
    assert resp.code == RC.INVALID_PARAMETER
    for body, code in [(b"not json or msgpack", RC.INVALID_PARAMETER), (b'{"acks": []}', RC.NO_MESSAGE)]:
        jc = RemotingClient(name="j", serialize_type=SERIALIZE_JSON)
        try:
            resp = await call(jc, addr, RequestCode.BATCH_ACK_MESSAGE, {}, body)
        finally:
            await jc.close()
        assert resp.code == code, (body, resp.remark)


async def test_an_ack_after_the_message_revived_keeps_the_revived_copy(
    broker: Daemon, raw: RemotingClient
) -> None:
    ns, addr = broker.ns, broker.addr  # type: ignore[attr-defined]
    await setup_topic(ns, "PopLate", 1, queues=1)
    [(m, h)] = handles(await _pop(raw, addr, "PopLate", "g_late", invisible_time_ms=1000))
    # the copy comes back through the retry topic once the invisible time passed
    resp = await _pop(raw, addr, "PopLate", "g_late", poll_time_ms=8000)
    [(copy, copy_handle)] = handles(resp)
    assert copy.body == m.body and copy.reconsume_times == 1 and ReceiptHandle.parse(copy_handle).retry
    late = AckMessageRequestHeader("g_late", "PopLate", m.queue_id, h, m.queue_offset).to_ext()
    resp = await call(raw, addr, RequestCode.ACK_MESSAGE, late)
    assert resp.code == RC.SUCCESS and "delivered again" in (resp.remark or "")  # RocketMQ: SUCCESS
    r = ReceiptHandle.parse(copy_handle)
    own = AckMessageRequestHeader("g_late", "%RETRY%g_late_PopLate", r.queue_id, copy_handle, r.queue_offset)
    resp = await call(raw, addr, RequestCode.ACK_MESSAGE, own.to_ext())
    assert resp.code == RC.SUCCESS and resp.remark is None  # the revived copy was still in flight


async def test_waiting_pops_are_bounded(broker: Daemon, raw: RemotingClient) -> None:
    """popPollingSize=1: a second pop waiting on the same queue gets POLLING_FULL at once."""
    ns, addr = broker.ns, broker.addr  # type: ignore[attr-defined]
    await setup_topic(ns, "PopFull", 0, queues=1)
    first = asyncio.ensure_future(_pop(raw, addr, "PopFull", "g_full", poll_time_ms=3000))
    info = {"consumerGroup": "g_full", "topic": "PopFull", "queueId": -1}

    async def waiting() -> int:
        resp = await call(raw, addr, RequestCode.POLLING_INFO, info)
        return int(resp.ext["pollingNum"])  # type: ignore[index]

    assert await wait_until_async(waiting, 5, message="the first pop waiting") == 1
    second = await _pop(raw, addr, "PopFull", "g_full", poll_time_ms=3000)
    assert second.code == RC.POLLING_FULL and "popPollingSize" in (second.remark or "")
    assert (await first).code == RC.POLLING_TIMEOUT
