"""LitePullConsumer against real daemons: subscribe + poll + commit + resume; assign + seek."""

from __future__ import annotations

from typing import Any

import pytest

from rocketpy import Admin, Message, MessageQueue, Producer
from rocketpy.client.lite_pull_consumer import LitePullConsumer
from rocketpy.errors import MQClientError
from tests.waiting import wait_until_async

pytestmark = pytest.mark.usefixtures("sdk_encoding")  # both wire encodings

FAST = {"rebalance_interval": 1.0, "heartbeat_broker_interval": 1.0, "poll_name_server_interval": 1.0}


@pytest.fixture
def cluster(daemons: Any) -> str:
    """A NameServer and one broker; returns the NameServer address."""
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    return str(ns.addr)


async def _prepare(namesrv: str, topic: str, count: int) -> None:
    async with Admin(namesrv) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
    producer = Producer("pg_lite", namesrv_addr=namesrv)
    await producer.start()
    try:
        for start in range(0, count, count // 4):  # 4 batches: round robin puts one in each queue
            await producer.send_batch([Message(topic, b"%d" % i) for i in range(start, start + count // 4)])
    finally:
        await producer.shutdown()


async def _poll_until(consumer: LitePullConsumer, count: int, timeout_s: float = 20.0) -> list[Any]:
    got: list[Any] = []
    for _ in range(int(timeout_s * 10)):
        if len(got) >= count:
            break
        got += await consumer.poll(timeout=0.1)
    return got


async def test_subscribe_poll_commit_resume(cluster: str) -> None:
    topic = "LiteResume"
    await _prepare(cluster, topic, 100)
    c = LitePullConsumer(
        "g_lite", cluster, auto_commit=False, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST
    )
    c.subscribe(topic, "*")
    await c.start()
    got = await _poll_until(c, 100)
    assert sorted(int(m.body) for m in got) == list(range(100))
    await c.commit()
    assert await c.poll(timeout=0.2) == []
    await c.shutdown()
    with pytest.raises(MQClientError, match="start"):
        await c.poll(timeout=0.1)
    c2 = LitePullConsumer("g_lite", cluster, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c2.subscribe(topic, "*")
    await c2.start()
    try:
        assert await c2.poll(timeout=1.0) == [], "committed messages came back after restart"
    finally:
        await c2.shutdown()


async def test_assign_and_seek(cluster: str) -> None:
    topic = "LiteAssign"
    await _prepare(cluster, topic, 40)
    c = LitePullConsumer("g_assign", cluster, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    with pytest.raises(MQClientError, match="before start"):
        await c.start()
    probe = LitePullConsumer("g_probe", cluster, **FAST)
    probe.subscribe(topic, "*")
    await probe.start()
    queues = await probe.fetch_message_queues(topic)
    await probe.shutdown()
    assert len(queues) == 4
    mq = max(queues, key=lambda q: q.queue_id)
    c.assign([mq])
    with pytest.raises(MQClientError, match="mixed"):
        c.subscribe(topic, "*")
    await c.start()
    try:
        assert c.assigned_queues() == [mq]
        first = await _poll_until(c, 10)
        assert first and all(m.queue_id == mq.queue_id for m in first)
        await c.seek(mq, 0)
        again = await c.poll(timeout=5.0)
        assert again and again[0].queue_offset == 0
        with pytest.raises(MQClientError, match="not assigned"):
            await c.seek(MessageQueue(topic, mq.broker_name, 99), 0)
    finally:
        await c.shutdown()


async def test_pause_resume_and_auto_commit(cluster: str) -> None:
    topic = "LitePause"
    await _prepare(cluster, topic, 40)
    c = LitePullConsumer(
        "g_pause", cluster, consume_from_where="CONSUME_FROM_FIRST_OFFSET", auto_commit_interval=0.2, **FAST
    )
    c.subscribe(topic, "*")
    await c.start()
    try:
        await wait_until_async(lambda: len(c.assigned_queues()) == 4, 10, message="4 queues assigned")
        queues = c.assigned_queues()
        c.pause(queues)
        assert await c.poll(timeout=0.5) == [], "paused queues handed out messages"
        c.resume(queues)
        got = await _poll_until(c, 40)
        assert len({m.body for m in got}) == 40
        mq = queues[0]
        await wait_until_async(lambda: c.committed(mq), 10, message="auto-commit reached the broker")
    finally:
        await c.shutdown()
