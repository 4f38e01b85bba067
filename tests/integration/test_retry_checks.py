"""Broker refusals around retry and delayed delivery, through raw requests, and the waiting counts
mqadmin shows."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from rocketpy import Message, Producer
from rocketpy.client.message_check import batch_ext
from rocketpy.message import MessageQueue
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.send_back import ConsumerSendMsgBackRequestHeader
from rocketpy.record import encode_batch
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from tests.waiting import wait_until_async


async def _send_back(client: RemotingClient, addr: str, offset: int, group: str) -> RemotingCommand:
    ext = ConsumerSendMsgBackRequestHeader(offset, group, 0, "ID", "T").to_ext()
    return await client.invoke(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, ext), 5.0)


async def test_send_back_of_unknown_offset_or_group_is_refused(daemons: Any, client: RemotingClient) -> None:
    ns = str(daemons.namesrv().addr)
    broker = daemons.broker(ns, autoCreateSubscriptionGroup="false")
    addr = str(broker.addr)
    async with Producer("pg_sendback_bad", namesrv_addr=ns) as p:
        r = await p.send(Message("SendBackBad", b"x"))
    resp = await _send_back(client, addr, 123_457, "TOOLS_CONSUMER")  # not a record's start
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "no message at commitlog offset 123457" in (resp.remark or "")
    resp = await _send_back(client, addr, 0, "no_such_group")
    assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert "mqadmin updateSubGroup" in (resp.remark or "")
    bad = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": -1, "group": "g"})
    resp = await client.invoke(addr, bad, 5.0)
    assert resp.code == ResponseCode.INVALID_PARAMETER and "offset" in (resp.remark or "")
    assert r.offset_msg_id  # the broker still serves: a good send-back of a stored record works
    _, _, phys = decode_offset_msg_id(r.offset_msg_id)
    resp = await _send_back(client, addr, phys, "TOOLS_CONSUMER")
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def test_batch_with_delivery_time_is_refused(daemons: Any, client: RemotingClient) -> None:
    ns = str(daemons.namesrv().addr)
    broker = daemons.broker(ns)
    mq = MessageQueue("BatchDelay", "broker-a", 0)
    for timed in (
        Message("BatchDelay", b"d", delay_level=2),
        Message("BatchDelay", b"t", delay_seconds=5),
        Message("BatchDelay", b"t", deliver_time_ms=int(time.time() * 1000) + 5000),
    ):
        body = encode_batch([Message("BatchDelay", b"plain"), timed])
        req = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, batch_ext("pg", mq.topic, 4, mq), body)
        resp = await client.invoke(str(broker.addr), req, 5.0)
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert "a batch cannot carry delayed or timed messages" in (resp.remark or "")
    body = encode_batch([Message("BatchDelay", b"a"), Message("BatchDelay", b"b", properties={"x": "DELAY"})])
    req = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, batch_ext("pg", mq.topic, 4, mq), body)
    resp = await client.invoke(str(broker.addr), req, 5.0)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def _broker_status(ns: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocketpy.admin_cli", "brokerStatus", "-n", ns, "-c", "DefaultCluster",
        "--json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    [table] = json.loads(out).values()
    return dict(table)


async def test_broker_status_shows_waiting_timer_and_delay_messages(daemons: Any) -> None:
    ns = str(daemons.namesrv().addr)
    daemons.broker(ns)
    async with Producer("pg_waiting", namesrv_addr=ns) as p:
        for _ in range(3):
            await p.send(Message("Waiting", b"t", delay_seconds=600))
        await p.send(Message("Waiting", b"d", delay_level=18))
    table = await wait_until_async(
        lambda: _status_if(ns, lambda t: t.get("timerWaitingCount") == "3"), 20, message="3 timers waiting"
    )
    assert table["scheduleWaitingCount"] == "1"


async def _status_if(ns: str, pred: Any) -> dict[str, Any] | None:
    table = await _broker_status(ns)
    return table if pred(table) else None
