"""Delay levels and timer messages against a real NameServer + broker.

Shortened levels (``1s 2s 3s``) keep the tests quick; every wait is a poll with a deadline.
"Never early" is checked on the broker's clock: the delivered record's store time is at least the
send time plus the delay. "Less than 1 s late" is checked on arrival at the consumer.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rocketpy import Admin, Message, Producer
from rocketpy.client.consumer_types import ConsumeStatus
from rocketpy.client.push_consumer import PushConsumer
from rocketpy.errors import MQBrokerError
from tests.consumer_settings import FAST_CONSUMER
from tests.daemons import daemon_env, write_properties
from tests.waiting import wait_until_async

LEVELS = "1s 2s 3s"
LEVELS_MS = [1000, 2000, 3000]
FAST = FAST_CONSUMER


class Arrivals:
    """Listener recording (message, arrival ms) per body."""

    def __init__(self) -> None:
        self.got: dict[bytes, list[tuple[Any, int]]] = {}

    def __call__(self, msgs: list[Any], ctx: Any) -> ConsumeStatus:
        now = int(time.time() * 1000)
        for m in msgs:
            self.got.setdefault(m.body, []).append((m, now))
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self, body: bytes) -> int:
        return len(self.got.get(body, ()))


async def consume(namesrv: str, group: str, topic: str) -> tuple[PushConsumer, Arrivals]:
    arrivals = Arrivals()
    c = PushConsumer(group, namesrv, **FAST)  # type: ignore[arg-type]
    c.subscribe(topic, "*")
    c.register_listener(arrivals)
    await c.start()
    return c, arrivals


async def make_topic(namesrv: str, topic: str) -> None:
    async with Admin(namesrv) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)


@pytest.fixture
def ns(daemons: Any) -> str:
    return str(daemons.namesrv().addr)


async def test_each_level_delivers_on_time_and_in_order(daemons: Any, ns: str) -> None:
    daemons.broker(ns, messageDelayLevel=LEVELS)
    topic = "DelayLevels"
    await make_topic(ns, topic)
    c, arrivals = await consume(ns, "g_levels", topic)
    sent: dict[bytes, tuple[int, int, int]] = {}
    async with Producer("pg_levels", namesrv_addr=ns) as p:
        for level in (1, 2, 3, 5):  # 5 is clamped to the highest level (3)
            for i in range(5):
                body = b"L%d-%d" % (level, i)
                t0 = int(time.time() * 1000)
                await p.send(Message(topic, body, delay_level=level))
                sent[body] = (t0, int(time.time() * 1000), LEVELS_MS[min(level, 3) - 1])
    try:
        await wait_until_async(lambda: all(arrivals.count(b) for b in sent), 15, message="all delivered")
        for body, (t0, t1, delay) in sent.items():
            [(m, arrived)] = arrivals.got[body]
            assert m.store_timestamp >= t0 + delay, (
                f"{body!r} re-put {t0 + delay - m.store_timestamp} ms early"
            )
            assert arrived - (t1 + delay) < 1000, f"{body!r} arrived {arrived - t1 - delay} ms late"
            assert m.topic == topic and m.delay_level == 0
            assert m.properties["REAL_TOPIC"] == topic
    finally:
        await c.shutdown()


async def test_deliver_at_times_in_random_order(daemons: Any, ns: str) -> None:
    daemons.broker(ns)
    topic = "TimerAt"
    await make_topic(ns, topic)
    c, arrivals = await consume(ns, "g_timer_at", topic)
    base = int(time.time() * 1000) + 1500
    due = [base + k * 370 for k in range(12)]
    random.shuffle(due)
    sent = {}
    async with Producer("pg_timer_at", namesrv_addr=ns) as p:
        for k, at in enumerate(due):
            body = b"T%d" % k
            await p.send(Message(topic, body, deliver_time_ms=at))
            sent[body] = at
        await p.send(Message(topic, b"S", delay_seconds=2))
        sent[b"S"] = int(time.time() * 1000) + 2000
    try:
        await wait_until_async(lambda: all(arrivals.count(b) for b in sent), 20, message="all delivered")
        for body, at in sent.items():
            [(m, arrived)] = arrivals.got[body]
            if body != b"S":
                assert m.store_timestamp >= at, f"{body!r} delivered {at - m.store_timestamp} ms early"
                assert "TIMER_DELIVER_MS" not in m.properties
            assert arrived - at < 1000, f"{body!r} arrived {arrived - at} ms late"
    finally:
        await c.shutdown()


async def test_timer_beyond_max_delay_is_refused(daemons: Any, ns: str) -> None:
    daemons.broker(ns, timerMaxDelaySec=10)
    async with Producer("pg_timer_max", namesrv_addr=ns, retry_times=0) as p:
        with pytest.raises(MQBrokerError, match="timerMaxDelaySec is 10"):
            await p.send(Message("TimerMax", b"x", delay_seconds=60))
        r = await p.send(Message("TimerMax", b"y", delay_seconds=5))
        assert r.status.name == "SEND_OK"


async def test_waiting_message_found_by_key_and_id(daemons: Any, ns: str) -> None:
    daemons.broker(ns)
    topic = "DelayQuery"
    await make_topic(ns, topic)
    async with Producer("pg_query", namesrv_addr=ns) as p:
        r1 = await p.send(Message(topic, b"level", keys="k-level", delay_level=4))  # 30 s
        r2 = await p.send(Message(topic, b"timer", keys="k-timer", delay_seconds=600))
    async with Admin(ns) as admin:
        for key, res, body in (("k-level", r1, b"level"), ("k-timer", r2, b"timer")):
            # the index learns of a record after the put is acknowledged (as RocketMQ's reput service)
            [m] = await wait_until_async(
                lambda k=key: admin.query_msg_by_key(topic, k), 10, message=f"key {key} indexed"
            )
            assert m.body == body and m.properties["REAL_TOPIC"] == topic
            by_id = await admin.query_msg_by_id(res.offset_msg_id)
            assert by_id.body == body and by_id.msg_id == res.msg_id


@pytest.mark.parametrize("how", ["terminate", "kill"])
async def test_waiting_messages_survive_restart(daemons: Any, ns: str, tmp_path: Path, how: str) -> None:
    store = tmp_path / f"store-{how}"
    props = {"storePathRootDir": store, "messageDelayLevel": LEVELS, "flushDelayOffsetInterval": 200}
    b = daemons.broker(ns, **props)
    topic = "DelayRestart"
    await make_topic(ns, topic)
    async with Producer("pg_restart", namesrv_addr=ns) as p:
        for i in range(20):  # level 1: delivered before the stop, and so must not come again
            await p.send(Message(topic, b"early-%d" % i, delay_level=1))
        for i in range(20):
            await p.send(Message(topic, b"late-%d" % i, delay_level=3))
            await p.send(Message(topic, b"timer-%d" % i, delay_seconds=4))
    c, arrivals = await consume(ns, "g_restart", topic)
    early = [b"early-%d" % i for i in range(20)]
    await wait_until_async(lambda: all(arrivals.count(x) for x in early), 10, message="level 1 delivered")
    await c.shutdown()
    b.terminate() if how == "terminate" else b.kill()
    daemons.broker(ns, **props)
    c, arrivals2 = await consume(ns, "g_restart2", topic)  # a new group: sees the whole topic
    late = [b"%s-%d" % (k, i) for k in (b"late", b"timer") for i in range(20)]
    try:
        await wait_until_async(
            lambda: all(arrivals2.count(x) for x in late + early), 20, message="all delivered"
        )
        await asyncio.sleep(0)
        if how == "terminate":
            dup = {x: arrivals2.count(x) for x in late + early if arrivals2.count(x) != 1}
            assert not dup, f"delivered more than once after a graceful restart: {dup}"
    finally:
        await c.shutdown()


def test_bad_delay_level_stops_the_broker(tmp_path: Path) -> None:
    conf = write_properties(
        tmp_path / "broker.properties",
        {"listenPort": 0, "storePathRootDir": tmp_path / "store", "messageDelayLevel": "1s 5x 10s"},
    )
    r = subprocess.run(
        [sys.executable, "-m", "rocketpy.cli", "broker", "-c", str(conf)],
        env=daemon_env(tmp_path, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert f"error: {conf}:3: messageDelayLevel='1s 5x 10s'" in r.stderr and "'5x'" in r.stderr
