"""Consume retry and dead letters against a real NameServer + broker.

Shortened delay levels keep the tests quick; every wait is a poll with a deadline. Spacing is
measured on the consumer's clock between deliveries of one message.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from typing import Any

import pytest

from rocketpy import Admin, Message, Producer
from rocketpy.client.consumer_types import ConsumeOrderlyStatus, ConsumeStatus
from rocketpy.client.push_consumer import PushConsumer
from rocketpy.errors import MQClientError
from rocketpy.topic import dlq_topic, retry_topic
from tests.consumer_settings import FAST_CONSUMER
from tests.waiting import wait_until_async

#: Level 3 (first retry) 1 s, level 4 2 s, level 5 3 s, then 1 s.
SPACING_LEVELS = "1s 1s 1s 2s 3s " + "1s " * 13
ONE_SECOND_LEVELS = "1s " * 18
FAST = FAST_CONSUMER


class Deliveries:
    """Listener recording every delivery (message, arrival s) and answering from a script.

    ``script(msg, n)`` gives the answer for the n-th delivery (0-based) of a body: a status, None,
    or an exception to raise.
    """

    def __init__(self, script: Any) -> None:
        self.script = script
        self.got: dict[bytes, list[tuple[Any, float]]] = {}
        self.reconsume_times: dict[bytes, list[int]] = {}  # as seen at each delivery

    def __call__(self, msgs: list[Any], ctx: Any) -> Any:
        [m] = msgs
        seen = self.got.setdefault(bytes(m.body), [])
        seen.append((m, time.monotonic()))
        self.reconsume_times.setdefault(bytes(m.body), []).append(m.reconsume_times)
        answer = self.script(m, len(seen) - 1)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def count(self, body: bytes) -> int:
        return len(self.got.get(body, ()))


async def start_consumer(ns: str, group: str, topic: str, listener: Any, **kw: Any) -> PushConsumer:
    c = PushConsumer(group, ns, **{**FAST, **kw})
    c.subscribe(topic, "*")
    c.register_listener(listener)
    await c.start()
    return c


async def mqadmin(ns: str, *args: str) -> Any:
    """Run ``mqadmin CMD -n NS ARGS --json`` in a subprocess; the parsed JSON output."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocketpy.admin_cli", args[0], "-n", ns, *args[1:], "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def queue_max(admin: Admin, topic: str) -> int:
    """Messages ever stored in ``topic`` (sum of its queues' max offsets; 0 when it does not exist)."""
    try:
        rows = await admin.topic_status(topic)
    except MQClientError:  # no route: the topic does not exist
        return 0
    return sum(int(r["max_offset"]) for r in rows)


@pytest.fixture
def ns(daemons: Any) -> str:
    return str(daemons.namesrv().addr)


async def test_retry_spacing_follows_the_levels(daemons: Any, ns: str) -> None:
    """Raise, None, RECONSUME_LATER: each a failure, redelivered at levels 3, 4, 5 (1 s, 2 s, 3 s)."""
    daemons.broker(ns, messageDelayLevel=SPACING_LEVELS)
    topic, group = "RetrySpacing", "g_spacing"
    answers = [
        RuntimeError("listener fails"),
        None,
        ConsumeStatus.RECONSUME_LATER,
        ConsumeStatus.CONSUME_SUCCESS,
    ]
    deliveries = Deliveries(lambda m, n: answers[n] if m.body == b"R" else ConsumeStatus.CONSUME_SUCCESS)
    c = await start_consumer(ns, group, topic, deliveries)
    try:
        async with Producer("pg_spacing", namesrv_addr=ns) as p:
            sent = await p.send(Message(topic, b"R", keys="retry-key"))
            await p.send(Message(topic, b"ok"))
        await wait_until_async(lambda: deliveries.count(b"R") == 4, 20, message="four deliveries")
        got = deliveries.got[b"R"]
        assert deliveries.reconsume_times[b"R"] == [0, 1, 2, 3]
        for m, _ in got:
            assert m.topic == topic and m.msg_id == sent.msg_id and m.keys == ["retry-key"]
        assert all(m.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id for m, _ in got[1:])
        gaps = [b - a for (_, a), (_, b) in itertools.pairwise(got)]
        for gap, delay in zip(gaps, (1.0, 2.0, 3.0), strict=True):
            assert delay - 0.1 <= gap < delay + 1.5, f"gaps {gaps}"
        assert deliveries.count(b"ok") == 1
        assert c.consume_service is not None and c.consume_service.sent_back_count == 3
        async with Admin(ns) as admin:
            assert await queue_max(admin, retry_topic(group)) == 3
            assert await queue_max(admin, dlq_topic(group)) == 0
    finally:
        await c.shutdown()


async def test_dead_letter_once_then_resend(daemons: Any, ns: str) -> None:
    daemons.broker(ns, messageDelayLevel=ONE_SECOND_LEVELS)
    topic, group = "RetryDlq", "g_dlq"
    healed = asyncio.Event()

    def script(m: Any, n: int) -> Any:
        return ConsumeStatus.CONSUME_SUCCESS if healed.is_set() else ConsumeStatus.RECONSUME_LATER

    deliveries = Deliveries(script)
    c = await start_consumer(ns, group, topic, deliveries, max_reconsume_times=2)
    try:
        async with Producer("pg_dlq", namesrv_addr=ns) as p:
            sent = await p.send(Message(topic, b"D", keys="dead-key"))
        async with Admin(ns) as admin:
            await wait_until_async(
                lambda: queue_max(admin, dlq_topic(group)), 20, message="the message in the DLQ"
            )
            assert deliveries.count(b"D") == 3  # first delivery + max_reconsume_times retries
            await asyncio.sleep(2.5)  # observation window: a further retry would come within 1 s
            assert deliveries.count(b"D") == 3
            assert await queue_max(admin, dlq_topic(group)) == 1
        found = await mqadmin(ns, "queryMsgByKey", "-t", dlq_topic(group), "-k", "dead-key")
        [dead] = found["messages"]
        assert dead["msgId"] == sent.msg_id and dead["topic"] == dlq_topic(group)
        assert dead["properties"]["RETRY_TOPIC"] == topic and dead["reconsumeTimes"] == 3

        dlq_seen = Deliveries(lambda m, n: ConsumeStatus.CONSUME_SUCCESS)
        dlq_consumer = await start_consumer(ns, "g_dlq_reader", dlq_topic(group), dlq_seen)
        try:
            await wait_until_async(lambda: dlq_seen.count(b"D") == 1, 20, message="DLQ consumed")
        finally:
            await dlq_consumer.shutdown()

        healed.set()
        resent = await mqadmin(ns, "resendDlq", "-g", group)
        assert [r["msgId"] for r in resent["resent"]] == [sent.msg_id]
        await wait_until_async(lambda: deliveries.count(b"D") == 4, 20, message="redelivered after resendDlq")
        m, _ = deliveries.got[b"D"][3]
        assert m.topic == topic and m.msg_id == sent.msg_id and m.reconsume_times == 0
        again = await mqadmin(ns, "resendDlq", "-g", group)
        assert again["resent"] == []  # already resent: progress is kept
        by_id = await mqadmin(ns, "resendDlq", "-g", group, "-i", sent.msg_id)
        assert len(by_id["resent"]) == 1
        await wait_until_async(lambda: deliveries.count(b"D") == 5, 20, message="resent by id")
    finally:
        await c.shutdown()


async def test_orderly_retries_locally_then_dead_letters(daemons: Any, ns: str) -> None:
    daemons.broker(ns)
    topic, group = "RetryOrderly", "g_orderly_dlq"
    async with Admin(ns) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
    order: list[tuple[bytes, int]] = []

    def listener(msgs: list[Any], ctx: Any) -> ConsumeOrderlyStatus:
        [m] = msgs
        order.append((bytes(m.body), m.reconsume_times))
        if m.body == b"bad":
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    c = PushConsumer(group, ns, max_reconsume_times=2, suspend_current_queue_time=0.1, **FAST)  # type: ignore[arg-type]
    c.subscribe(topic, "*")
    c.register_listener(listener, orderly=True)
    await c.start()
    try:
        async with Producer("pg_orderly_dlq", namesrv_addr=ns) as p:
            for body in (b"a", b"bad", b"b"):
                await p.send(Message(topic, body, keys=body.decode()))
        await wait_until_async(lambda: (b"b", 0) in order, 20, message="the queue moved on")
        assert order == [(b"a", 0), (b"bad", 0), (b"bad", 1), (b"bad", 2), (b"b", 0)]
        async with Admin(ns) as admin:
            # The broker created the DLQ topic for the send-back and registers it with the
            # NameServer at once, but asynchronously: its route may come a moment after the ack.
            await wait_until_async(
                lambda: queue_max(admin, dlq_topic(group)), 20, message="the DLQ's route and message"
            )
            [dead] = await admin.query_msg_by_key(dlq_topic(group), "bad")
            assert dead.properties["RETRY_TOPIC"] == topic
            assert await queue_max(admin, dlq_topic(group)) == 1
            assert await queue_max(admin, retry_topic(group)) == 0
    finally:
        await c.shutdown()


async def test_send_back_failure_falls_back_to_local_retry(daemons: Any, ns: str) -> None:
    broker = daemons.broker(ns, messageDelayLevel=ONE_SECOND_LEVELS)
    topic, group = "RetryLocal", "g_local"
    async with Producer("pg_local", namesrv_addr=ns) as p:
        await p.send(Message(topic, b"L"))
    async with Admin(ns) as admin:  # the broker refuses writes: send-backs fail, pulls still work
        await admin.update_broker_config("brokerPermission", "4", broker_addr=str(broker.addr))
        deliveries = Deliveries(
            lambda m, n: ConsumeStatus.RECONSUME_LATER if n == 0 else ConsumeStatus.CONSUME_SUCCESS
        )
        c = await start_consumer(ns, group, topic, deliveries, reconsume_delay=0.2)
        try:
            await wait_until_async(lambda: deliveries.count(b"L") == 2, 20, message="consumed again locally")
            assert deliveries.reconsume_times[b"L"] == [0, 1]
            assert c.consume_service is not None and c.consume_service.sent_back_count == 0
            assert await queue_max(admin, retry_topic(group)) == 0
        finally:
            await c.shutdown()


async def test_broadcasting_does_not_retry(daemons: Any, ns: str, tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("ROCKETPY_OFFSETS_DIR", str(tmp_path / "offsets"))
    daemons.broker(ns)
    topic, group = "RetryBroadcast", "g_broadcast_retry"
    deliveries = Deliveries(
        lambda m, n: ConsumeStatus.RECONSUME_LATER if m.body == b"x" else ConsumeStatus.CONSUME_SUCCESS
    )
    c = await start_consumer(ns, group, topic, deliveries, message_model="BROADCASTING", reconsume_delay=0.1)
    try:
        async with Producer("pg_broadcast_retry", namesrv_addr=ns) as p:
            await p.send(Message(topic, b"x"))
            await p.send(Message(topic, b"y"))
        await wait_until_async(lambda: deliveries.count(b"y") == 1, 20, message="both consumed")
        await asyncio.sleep(0.5)  # observation window: a local retry would come after 0.1 s
        assert deliveries.count(b"x") == 1
    finally:
        await c.shutdown()
