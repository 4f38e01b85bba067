"""Push consumer against a real NameServer + broker: delivery, offsets, restart, retries, rebalance.

Daemons run as subprocesses (tests/daemons.py); client timers are shortened so rebalances and
offset commits happen within a second.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import pytest

from rocketpy import Admin, Message, Producer
from rocketpy.client.consumer_types import (
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    MessageModel,
    MessageSelector,
)
from rocketpy.client.push_consumer import PushConsumer
from rocketpy.errors import MQClientError
from tests.waiting import wait_until_async

FAST = {
    "rebalance_interval": 1.0,
    "persist_consumer_offset_interval": 0.3,
    "heartbeat_broker_interval": 1.0,
    "poll_name_server_interval": 1.0,
}


@pytest.fixture
def cluster(daemons: Any) -> str:
    """A NameServer and one broker (stopped by the ``daemons`` pool); returns the NameServer address."""
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    return str(ns.addr)


async def make_topic(namesrv: str, topic: str, queues: int = 4) -> None:
    """Create ``topic`` with ``queues`` read/write queues and wait for its route."""
    async with Admin(namesrv) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)


async def send_all(namesrv: str, topic: str, bodies: list[bytes], tags: str | None = None) -> None:
    """Send every body in batches of 256."""
    producer = Producer("pg_" + topic, namesrv_addr=namesrv)
    await producer.start()
    try:
        for i in range(0, len(bodies), 256):
            await producer.send_batch([Message(topic, b, tags=tags) for b in bodies[i : i + 256]])
    finally:
        await producer.shutdown()


class Collector:
    """A listener that records bodies (thread-safe through the GIL on list.append / Counter)."""

    def __init__(self, fail_first: set[bytes] | None = None) -> None:
        self.bodies: collections.Counter[bytes] = collections.Counter()
        self.fail_first = set(fail_first or ())
        self.failed: set[bytes] = set()

    def __call__(self, msgs: list[Any], ctx: Any) -> Any:
        for m in msgs:
            if m.body in self.fail_first and m.body not in self.failed:
                self.failed.add(m.body)
                raise RuntimeError(f"listener fails once on {m.body!r}")
        for m in msgs:
            self.bodies[m.body] += 1
        return ConsumeStatus.CONSUME_SUCCESS


def consumer(namesrv: str, group: str, topic: str, listener: Any, **kw: Any) -> PushConsumer:
    """A push consumer with test timers, subscribed to ``topic``."""
    options = {**FAST, "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **kw}
    c = PushConsumer(group, namesrv, **options)
    c.subscribe(topic, "*")
    c.register_listener(listener)
    return c


async def test_consume_commit_and_resume_after_restart(cluster: str) -> None:
    topic = "PushResume"
    await make_topic(cluster, topic)
    first = [b"a%d" % i for i in range(300)]
    await send_all(cluster, topic, first)
    col = Collector(fail_first={b"a7", b"a123"})
    c1 = consumer(cluster, "g_resume", topic, col, reconsume_delay=0.2)
    await c1.start()
    await wait_until_async(lambda: set(col.bodies) >= set(first), 20, message="first batch consumed")
    assert col.failed == {b"a7", b"a123"}  # the listener raised, was retried, the consumer lived
    await c1.shutdown()
    second = [b"b%d" % i for i in range(200)]
    await send_all(cluster, topic, second)
    col2 = Collector()
    c2 = consumer(cluster, "g_resume", topic, col2)
    await c2.start()
    try:
        await wait_until_async(lambda: set(col2.bodies) >= set(second), 20, message="second batch consumed")
        assert not set(col2.bodies) & set(first), "restart re-consumed committed messages"
    finally:
        await c2.shutdown()


async def test_tag_filter_and_async_listener(cluster: str) -> None:
    topic = "PushTags"
    await make_topic(cluster, topic)
    got: list[bytes] = []

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.extend(m.body for m in msgs if m.tags == "A")
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("g_tags", cluster, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(topic, "A || C")
    c.register_listener(listener)
    await c.start()
    try:
        await send_all(cluster, topic, [b"b%d" % i for i in range(20)], tags="B")
        await send_all(cluster, topic, [b"a%d" % i for i in range(20)], tags="A")
        await wait_until_async(lambda: len(got) >= 20, 20, message="tag A messages")
        assert sorted(got) == sorted(b"a%d" % i for i in range(20))
    finally:
        await c.shutdown()


async def test_three_consumers_on_eight_queues(cluster: str) -> None:
    topic = "PushRebalance"
    await make_topic(cluster, topic, queues=8)
    consumers = [consumer(cluster, "g_reb", topic, Collector()) for _ in range(3)]
    for c in consumers:
        await c.start()
    try:

        def split() -> tuple[list[int], int]:
            """Queues per consumer, and how many distinct queues they own together."""
            owned = [mq for c in consumers for mq in c.assigned_queues()]
            return sorted(len(c.assigned_queues()) for c in consumers), len(set(owned))

        # Rebalancing converges: while members learn of each other at different times, two may
        # briefly own the same queue (RocketMQ's rebalance behaves alike); the end state is a
        # partition of the 8 queues, 3/3/2.
        await wait_until_async(lambda: split() == ([2, 3, 3], 8), 20, message="3/3/2 split of the 8 queues")
    finally:
        for c in consumers:
            await c.shutdown()


async def test_join_and_leave_during_send_loses_nothing(cluster: str) -> None:
    topic = "PushChurn"
    await make_topic(cluster, topic, queues=8)
    col = Collector()
    total = 20_000
    bodies = [b"m%d" % i for i in range(total)]
    members = [consumer(cluster, "g_churn", topic, col)]
    await members[0].start()
    sender = asyncio.create_task(send_all(cluster, topic, bodies))
    for step in range(4):  # two join, then two leave, while the send runs
        await wait_until_async(lambda n=step: sum(col.bodies.values()) >= (n + 1) * total // 6, 60)
        if step < 2:
            members.append(consumer(cluster, "g_churn", topic, col))
            await members[-1].start()
        else:
            await members.pop(0).shutdown()
    await sender
    try:
        await wait_until_async(lambda: len(col.bodies) == total, 60, message="every message consumed")
    finally:
        for c in members:
            await c.shutdown()
    duplicates = sum(col.bodies.values()) - total
    print(f"churn: {total} messages, {duplicates} duplicates")
    assert set(col.bodies) == set(bodies)


async def test_broadcasting_each_gets_all_and_resumes_from_file(
    cluster: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROCKETPY_OFFSETS_DIR", str(tmp_path / "offsets"))
    topic = "PushBroadcast"
    await make_topic(cluster, topic)
    old = [b"o%d" % i for i in range(50)]
    await send_all(cluster, topic, old)
    cols = [Collector(), Collector()]
    kw = {"message_model": MessageModel.BROADCASTING}
    cs = [consumer(cluster, "g_bc", topic, cols[i], instance_name=f"inst{i}", **kw) for i in range(2)]
    with pytest.raises(MQClientError, match="instance_name"):
        clash = consumer(cluster, "g_bc", topic, Collector(), instance_name="inst0", **kw)
        await cs[0].start()
        await clash.start()
    await cs[1].start()
    await wait_until_async(lambda: all(set(c.bodies) >= set(old) for c in cols), 20, message="both got all")
    for c in cs:
        await c.shutdown()
    assert (tmp_path / "offsets").rglob("offsets.json")
    new = [b"n%d" % i for i in range(30)]
    await send_all(cluster, topic, new)
    again = Collector()
    c = consumer(cluster, "g_bc", topic, again, instance_name="inst0", **kw)
    await c.start()
    try:
        await wait_until_async(
            lambda: set(again.bodies) >= set(new), 20, message="new messages after restart"
        )
        assert not set(again.bodies) & set(old), "broadcast restart did not resume from the local file"
    finally:
        await c.shutdown()


async def test_orderly_per_order_id_across_rebalance(cluster: str) -> None:
    topic = "PushOrderly"
    await make_topic(cluster, topic, queues=4)
    orders, steps = 16, 40
    seen: dict[int, list[int]] = collections.defaultdict(list)
    busy: set[Any] = set()

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        assert ctx.message_queue not in busy, "two listener calls on one queue at once"
        busy.add(ctx.message_queue)
        try:
            await asyncio.sleep(0)
            for m in msgs:
                order, step = map(int, m.body.split(b":"))
                seen[order].append(step)
        finally:
            busy.discard(ctx.message_queue)
        return ConsumeOrderlyStatus.SUCCESS

    def orderly(instance: str) -> PushConsumer:
        c = PushConsumer("g_order", cluster, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
        c.subscribe(topic, "*")
        c.register_listener(listener, orderly=True)
        return c

    producer = Producer("pg_order", namesrv_addr=cluster)
    await producer.start()
    members = [orderly("a"), orderly("b")]
    for c in members:
        await c.start()
    try:
        for step in range(steps):
            for order in range(orders):
                msg = Message(topic, b"%d:%d" % (order, step))
                await producer.send(msg, selector=lambda mqs, _m, arg: mqs[arg % len(mqs)], arg=order)
            if step == steps // 2:  # a third member joins: queues move while messages flow
                members.append(orderly("c"))
                await members[-1].start()
        await wait_until_async(
            lambda: all(len(set(seen[o])) == steps for o in range(orders)), 30, message="all steps consumed"
        )
    finally:
        await producer.shutdown()
        for c in members:
            await c.shutdown()
    for order in range(orders):
        got = seen[order]
        assert got == sorted(got), f"order {order} consumed out of order: {got}"


async def test_bad_input_gives_clear_errors(cluster: str) -> None:
    topic = "PushBadInput"
    await make_topic(cluster, topic)
    with pytest.raises(MQClientError, match="CONSUME_FROM_LAST_OFFSET"):
        PushConsumer("g_bad", cluster, consume_from_where="FROM_THE_MOON")
    c = PushConsumer("g_bad", cluster)
    with pytest.raises(MQClientError, match="non-empty"):
        c.subscribe("", "*")
    with pytest.raises(MQClientError, match="register_listener"):
        await c.start()
    sql = PushConsumer("g_sql", cluster, **FAST)
    sql.subscribe(topic, MessageSelector.by_sql("a > 5"))
    sql.register_listener(Collector())
    with pytest.raises(MQClientError, match="enablePropertyFilter=true"):
        await sql.start()
    nowhere = PushConsumer("g_none", "127.0.0.1:1")
    nowhere.subscribe(topic, "*")
    nowhere.register_listener(Collector())
    with pytest.raises(MQClientError, match="NameServer"):
        await nowhere.start()


async def test_listener_returning_garbage_is_retried_not_committed(cluster: str) -> None:
    topic = "PushGarbage"
    await make_topic(cluster, topic, queues=1)
    calls: collections.Counter[bytes] = collections.Counter()

    def listener(msgs: list[Any], ctx: Any) -> Any:
        calls[msgs[0].body] += 1
        return "OK" if calls[msgs[0].body] == 1 else ConsumeStatus.CONSUME_SUCCESS

    c = consumer(cluster, "g_garbage", topic, listener, reconsume_delay=0.1)
    await c.start()
    try:
        await send_all(cluster, topic, [b"x", b"y"])
        await wait_until_async(lambda: calls[b"x"] >= 2 and calls[b"y"] >= 2, 20, message="retried")
    finally:
        await c.shutdown()


async def test_consume_from_last_and_timestamp_for_new_groups(cluster: str) -> None:
    topic = "PushFromWhere"
    await make_topic(cluster, topic, queues=2)
    old = [b"old%d" % i for i in range(10)]
    await send_all(cluster, topic, old)
    split_ms = int(time.time() * 1000) + 5  # store timestamps of the next batch are after this
    await wait_until_async(lambda: int(time.time() * 1000) > split_ms + 5, 5)
    mid = [b"mid%d" % i for i in range(10)]
    await send_all(cluster, topic, mid)
    last, stamp = Collector(), Collector()
    c_last = consumer(
        cluster, "g_last", topic, last, consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    )
    c_ts = consumer(
        cluster, "g_ts", topic, stamp, consume_from_where="CONSUME_FROM_TIMESTAMP", consume_timestamp=split_ms
    )
    for c in (c_last, c_ts):
        await c.start()
    try:
        await wait_until_async(
            lambda: len(c_last.assigned_queues()) == 2, 20, message="LAST consumer assigned"
        )
        await wait_until_async(
            lambda: c_last.offset_store.cached(c_last.assigned_queues()[-1]) is not None, 20
        )
        new = [b"new%d" % i for i in range(10)]
        await send_all(cluster, topic, new)
        # RocketMQ's rule: a new group starting from LAST reads a young queue (it still starts at
        # offset 0) from the beginning; TIMESTAMP searches the store time.
        everything = set(old + mid + new)
        await wait_until_async(
            lambda: set(last.bodies) >= everything, 20, message="LAST read the young topic"
        )
        await wait_until_async(
            lambda: set(stamp.bodies) >= set(mid + new), 20, message="TIMESTAMP got mid+new"
        )
        assert not set(stamp.bodies) & set(old)
    finally:
        for c in (c_last, c_ts):
            await c.shutdown()
