"""The admin's calls that reach live clients through a broker, against real daemons: resetting the
offsets of a running push consumer and a running lite-pull consumer, a client that does not answer,
a consumer's running info and a stored message run on a chosen client."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from rocketpy import Admin, ConsumeStatus, LitePullConsumer, Message, Producer, PushConsumer
from rocketpy.client.heartbeat import CLIENT_VERSION
from rocketpy.message import MessageExt
from rocketpy.protocol.codes import RequestCode
from rocketpy.protocol.headers.clients import NO_ANSWER
from rocketpy.remoting.body import encode_body
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from tests.conftest import DaemonPool
from tests.consumer_settings import FAST_CONSUMER
from tests.waiting import wait_until_async

QUEUES = 2


async def _cluster(daemons: DaemonPool, topic: str) -> tuple[str, Admin]:
    ns = daemons.namesrv().addr
    daemons.broker(ns)
    admin = Admin(ns, timeout=3.0)
    await admin.start()
    await admin.create_topic(topic, "DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    return ns, admin


async def _send_two_rounds(ns: str, topic: str) -> int:
    """Ten 'old' then ten 'new' messages; returns a time between the rounds (ms)."""
    producer = Producer("reset_pg", ns)
    await producer.start()
    try:
        for i in range(10):
            await producer.send(Message(topic, b"old-%d" % i))
        await asyncio.sleep(0.05)
        middle_ms = int(time.time() * 1000)
        await asyncio.sleep(0.05)
        for i in range(10):
            await producer.send(Message(topic, b"new-%d" % i))
    finally:
        await producer.shutdown()
    return middle_ms


async def _committed(admin: Admin, group: str, topic: str) -> list[int]:
    return [r["consumer_offset"] for r in await admin.consumer_progress(group, topic)]


async def _wait_committed(admin: Admin, group: str, topic: str, want: list[int]) -> None:
    async def done() -> bool:
        return await _committed(admin, group, topic) == want

    await wait_until_async(done, 20, interval=0.1, message=f"{group} committed {want}")


async def test_reset_moves_a_live_push_consumer(daemons: DaemonPool) -> None:
    topic, group = "ResetPushT", "reset_push_g"
    ns, admin = await _cluster(daemons, topic)
    middle_ms = await _send_two_rounds(ns, topic)
    seen: list[bytes] = []
    second_round = threading.Event()
    release = threading.Event()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        if second_round.is_set():
            release.wait(10)  # hold the re-read messages: nothing may be committed past them
        seen.extend(bytes(m.body) for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, ns, **FAST_CONSUMER)
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        await wait_until_async(lambda: len(seen) == 20, 20, message="first round consumed")
        ends = [r["broker_offset"] for r in await admin.consumer_progress(group, topic)]
        await _wait_committed(admin, group, topic, ends)
        second_round.set()
        result = await admin.reset_offset(group, topic, middle_ms)
        [client] = result["clients"]
        assert client["clientId"] == consumer.client_id and client["result"] == "OK"
        targets = [off for _mq, off in result["offsets"]]
        assert sum(targets) == 10 and all(t < e for t, e in zip(targets, ends, strict=True))
        # several offset-commit periods pass with the consumer running: the reset stays
        for _ in range(5):
            await asyncio.sleep(0.3)
            assert await _committed(admin, group, topic) == targets
        [status] = await admin.consumer_status(group, topic)
        assert sorted(status["offsets"].values()) == sorted(targets)
        release.set()
        await wait_until_async(lambda: len(seen) == 30, 20, message="re-read from the reset offsets")
        assert sorted(seen[20:]) == sorted(b"new-%d" % i for i in range(10))
        await _wait_committed(admin, group, topic, ends)
    finally:
        release.set()
        await consumer.shutdown()
        await admin.shutdown()


async def test_reset_moves_a_live_lite_pull_consumer(daemons: DaemonPool) -> None:
    topic, group = "ResetLiteT", "reset_lite_g"
    ns, admin = await _cluster(daemons, topic)
    middle_ms = await _send_two_rounds(ns, topic)
    consumer = LitePullConsumer(group, ns, auto_commit=False, **FAST_CONSUMER)
    consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        got: list[bytes] = []
        while len(got) < 20:
            got += [bytes(m.body) for m in await consumer.poll(timeout=5)]
        await consumer.commit()
        ends = [r["broker_offset"] for r in await admin.consumer_progress(group, topic)]
        assert await _committed(admin, group, topic) == ends
        result = await admin.reset_offset(group, topic, middle_ms)
        assert [c["result"] for c in result["clients"]] == ["OK"]
        targets = [off for _mq, off in result["offsets"]]
        await consumer.commit()  # what was polled before the reset is not committed again
        for _ in range(3):
            await asyncio.sleep(0.3)
            assert await _committed(admin, group, topic) == targets
        again: list[bytes] = []
        while len(again) < 10:
            again += [bytes(m.body) for m in await consumer.poll(timeout=5)]
        assert sorted(again) == sorted(b"new-%d" % i for i in range(10))
        await consumer.commit()
        assert await _committed(admin, group, topic) == ends
    finally:
        await consumer.shutdown()
        await admin.shutdown()


async def _silent_client(broker_addr: str, group: str, topic: str) -> RemotingClient:
    """A client that says it is rocketpy's SDK and never answers a reset."""
    client = RemotingClient()

    async def never(channel: Any, cmd: RemotingCommand) -> None:
        await asyncio.Event().wait()

    client.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, never)
    data = {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [{"topic": topic,
            "subString": "*", "subVersion": 1}]}  # fmt: skip
    body = {"clientID": "10.0.0.9@silent@1-1", "producerDataSet": [], "consumerDataSet": [data],
            "language": "PYTHON", "version": CLIENT_VERSION}  # fmt: skip
    resp = await client.invoke(
        broker_addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, encode_body(body, 0x10)), 3.0
    )
    assert resp.code == 0, resp.remark
    return client


async def test_a_client_that_does_not_answer_is_reported_and_the_others_still_are(
    daemons: DaemonPool,
) -> None:
    topic, group = "ResetSilentT", "reset_silent_g"
    ns, admin = await _cluster(daemons, topic)
    await _send_two_rounds(ns, topic)
    consumer = PushConsumer(group, ns, **FAST_CONSUMER)
    consumer.subscribe(topic, "*")
    consumer.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
    await consumer.start()
    route = await admin.topic_route(topic)
    silent = await _silent_client(route.broker_datas[0].master_addr() or "", group, topic)
    try:
        started = time.monotonic()
        result = await admin.reset_offset(group, topic, 0)
        assert time.monotonic() - started < admin.timeout
        by_id = {c["clientId"]: c["result"] for c in result["clients"]}
        assert by_id == {consumer.client_id: "OK", "10.0.0.9@silent@1-1": NO_ANSWER}
        assert await _committed(admin, group, topic) == [0] * QUEUES  # applied all the same
    finally:
        await silent.close()
        await consumer.shutdown()
        await admin.shutdown()


async def test_running_info_and_a_message_consumed_directly_on_a_chosen_client(daemons: DaemonPool) -> None:
    topic, group = "DirectT", "direct_g"
    ns, admin = await _cluster(daemons, topic)
    calls: dict[str, list[bytes]] = {"a": [], "b": []}

    def listener_of(name: str) -> Any:
        def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
            calls[name].extend(bytes(m.body) for m in msgs)
            if msgs[0].body == b"boom":
                raise ValueError("boom in the listener")
            return (
                ConsumeStatus.RECONSUME_LATER if msgs[0].body == b"later" else ConsumeStatus.CONSUME_SUCCESS
            )

        return listener

    consumers = []
    for name in ("a", "b"):
        c = PushConsumer(group, ns, **FAST_CONSUMER)
        c.subscribe(topic, "*")
        c.register_listener(listener_of(name))
        await c.start()
        consumers.append(c)
    producer = Producer("direct_pg", ns)
    await producer.start()
    try:
        sent = {body: await producer.send(Message(topic, body)) for body in (b"fine", b"later", b"boom")}
        await wait_until_async(lambda: len(calls["a"]) + len(calls["b"]) >= 3, 20, message="consumed once")
        chosen = consumers[1]
        before = list(calls["b"])
        ok = await admin.consume_message_directly(group, chosen.client_id, sent[b"fine"].offset_msg_id)
        assert ok["consumeResult"] == "CR_SUCCESS" and ok["spentTimeMills"] >= 0
        assert calls["b"][len(before) :] == [b"fine"]  # the chosen client ran it
        later = await admin.consume_message_directly(group, chosen.client_id, sent[b"later"].msg_id, topic)
        assert later["consumeResult"] == "CR_LATER"
        boom = await admin.consume_message_directly(group, chosen.client_id, sent[b"boom"].offset_msg_id)
        assert boom["consumeResult"] == "CR_THROW_EXCEPTION" and "boom in the listener" in boom["remark"]

        info = await admin.consumer_running_info(group, chosen.client_id, jstack=True)
        props = info["properties"]
        assert (
            props["PROP_CLIENT_VERSION"] == CLIENT_VERSION
            and props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        )
        assert props["PROP_THREADPOOL_CORE_SIZE"] == "20"
        assert {s["topic"] for s in info["subscriptionSet"]} >= {topic}
        assert {row["mq"]["topic"] for row in info["mqTable"]} <= {topic, f"%RETRY%{group}"}
        assert set(info["statusTable"][topic]) >= {"pullRT", "pullTPS", "consumeRT", "consumeOKTPS"}
        assert "rocketpy-" in info["jstack"] or "Thread" in info["jstack"] or "task" in info["jstack"]
    finally:
        await producer.shutdown()
        for c in consumers:
            await c.shutdown()
        await admin.shutdown()
