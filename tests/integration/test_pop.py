"""POP consumption through the SDK's SimpleConsumer against a real NameServer and broker.

Each test starts its own daemons. Waits are long polls (``await_duration``: the broker holds the
receive) or ``wait_until_async`` with a deadline; invisible times are seconds, so redeliveries
come within a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from typing import Any

import pytest

from rocketpy import (
    Admin,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageSelector,
    Producer,
    PushConsumer,
    SimpleConsumer,
)
from rocketpy.errors import MQClientError, NoMessageError
from rocketpy.topic import dlq_topic, pop_retry_topic
from tests.consumer_settings import FAST_CONSUMER
from tests.waiting import wait_until_async

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


@pytest.fixture
def ns(daemons: Any) -> str:
    namesrv = daemons.namesrv()
    daemons.broker(namesrv.addr, enablePropertyFilter="true")
    return str(namesrv.addr)


async def make_topic(ns: str, topic: str, queues: int) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)


async def send(ns: str, topic: str, bodies: list[bytes], **kw: Any) -> list[str]:
    async with Producer(f"pg_{topic}", namesrv_addr=ns) as p:
        return [(await p.send(Message(topic, b, **kw))).msg_id for b in bodies]


def consumer(ns: str, group: str, topic: str, expression: Any = "*", **kw: Any) -> SimpleConsumer:
    kw.setdefault("await_duration", 2)
    return SimpleConsumer(group, ns, subscriptions={topic: expression}, consume_from_where=FIRST, **kw)


async def drain(c: SimpleConsumer, want: int, *, invisible: float = 30, ack: bool = True) -> list[MessageExt]:
    """Receive until ``want`` messages came (acking them), failing after ~20 s."""
    got: list[MessageExt] = []
    for _ in range(40):
        msgs = await c.receive(32, invisible)
        if ack and msgs:
            await c.ack(msgs)
        got += msgs
        if len(got) >= want:
            break
    return got


async def mqadmin_json(ns: str, *args: str) -> Any:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocketpy.admin_cli", args[0], "-n", ns, *args[1:], "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def test_receive_ack_and_progress(ns: str) -> None:
    """Every message comes once; acked, the group's offsets reach the end and nothing is in flight."""
    await make_topic(ns, "PopBasic", 4)
    ids = await send(ns, "PopBasic", [b"%d" % i for i in range(100)], tags="A")
    async with consumer(ns, "g_basic", "PopBasic") as c:
        got = await drain(c, 100)
        assert sorted(m.msg_id for m in got) == sorted(ids)
        assert all(m.topic == "PopBasic" and m.tags == "A" and m.receipt_handle for m in got)
        assert await c.receive(32, 30) == []  # held ~await_duration, then nothing
    progress = await mqadmin_json(ns, "consumerProgress", "-g", "g_basic", "-t", "PopBasic")
    assert progress["diffTotal"] == 0 and progress["inflightTotal"] == 0
    assert {r["inflight"] for r in progress["queues"]} == {0}


async def test_more_consumers_than_queues_all_receive(ns: str) -> None:
    await make_topic(ns, "PopShared", 2)
    ids = await send(ns, "PopShared", [b"%d" % i for i in range(120)])
    members = [consumer(ns, "g_shared", "PopShared", await_duration=1) for _ in range(6)]
    for c in members:
        await c.start()
    got: dict[int, list[str]] = {i: [] for i in range(len(members))}

    async def run(i: int, c: SimpleConsumer) -> None:
        for _ in range(30):
            msgs = await c.receive(3, 30)  # small batches: every member gets a share
            if msgs:
                got[i] += [m.msg_id for m in msgs]
                await c.ack(msgs)
                await asyncio.sleep(0.01)  # let the other members pop too
            if sum(map(len, got.values())) >= len(ids):
                return

    try:
        await asyncio.gather(*(run(i, c) for i, c in enumerate(members)))
    finally:
        for c in members:
            await c.shutdown()
    all_ids = [mid for ids_ in got.values() for mid in ids_]
    assert sorted(all_ids) == sorted(ids)  # each exactly once: acked within its invisible time
    assert all(got[i] for i in got), {i: len(v) for i, v in got.items()}


async def test_unacked_messages_go_to_another_consumer(ns: str) -> None:
    await make_topic(ns, "PopHung", 2)
    ids = await send(ns, "PopHung", [b"%d" % i for i in range(10)], keys="k")
    async with consumer(ns, "g_hung", "PopHung") as hung, consumer(ns, "g_hung", "PopHung") as other:
        first = await drain(hung, 10, invisible=2, ack=False)  # never acked
        assert sorted(m.msg_id for m in first) == sorted(ids)
        again = await drain(other, 10)
        assert sorted(m.msg_id for m in again) == sorted(ids)
        assert {m.reconsume_times for m in again} == {1} and {m.topic for m in again} == {"PopHung"}
        assert all(m.keys == ["k"] and m.properties["1ST_POP_TIME"] for m in again)
        await hung.ack(first)  # too late: answered as RocketMQ does, changing nothing
        assert await other.receive(32, 30) == []
    async with Admin(ns) as admin:
        rows = await admin.topic_status(pop_retry_topic("g_hung", "PopHung"))
    assert sum(r["max_offset"] for r in rows) == 10


async def test_change_invisible_duration_extends_it(ns: str) -> None:
    await make_topic(ns, "PopExtend", 1)
    [mid] = await send(ns, "PopExtend", [b"x"])
    async with consumer(ns, "g_extend", "PopExtend") as c, consumer(ns, "g_extend", "PopExtend") as other:
        [m] = await c.receive(1, 2)
        old = MessageExt("PopExtend", b"x", properties=dict(m.properties))
        await c.change_invisible_duration(m, 6)
        assert m.receipt_handle != old.receipt_handle
        assert await other.receive(32, 30) == []  # 2 s after the pop, it stays invisible
        await c.ack(old)  # the replaced handle: nothing changes
        with pytest.raises(NoMessageError, match="replaced by an invisible-time change"):
            await c.change_invisible_duration(old, 5)
        await c.ack(m)
        other.await_duration = 6
        assert await other.receive(32, 30) == []  # acked: never comes back
    assert mid


async def test_retry_then_dead_letter(daemons: Any) -> None:
    namesrv = daemons.namesrv()
    daemons.broker(namesrv.addr)
    ns = namesrv.addr
    await make_topic(ns, "PopDlq", 1)
    async with Admin(ns) as admin:
        await admin.update_subscription_group("g_dlq", "DefaultCluster", retry_max_times=2)
    [mid] = await send(ns, "PopDlq", [b"poison"])
    seen: list[int] = []
    async with consumer(ns, "g_dlq", "PopDlq", await_duration=2) as c:
        for _ in range(20):
            for m in await c.receive(32, 1):  # never acked
                assert m.msg_id == mid
                seen.append(m.reconsume_times)
            if len(seen) == 3:
                break
        assert seen == [0, 1, 2]
        async with Admin(ns) as admin:
            await wait_until_async(lambda: _count(admin, dlq_topic("g_dlq")), 15, message="a dead letter")
        assert await c.receive(32, 1) == []
    dlq = consumer(ns, "g_dlq_reader", dlq_topic("g_dlq"))
    async with dlq:
        [dead] = await drain(dlq, 1)
    assert dead.msg_id == mid and dead.body == b"poison" and dead.reconsume_times == 3


async def _count(admin: Admin, topic: str) -> int:
    try:
        return sum(r["max_offset"] for r in await admin.topic_status(topic))
    except MQClientError:
        return 0


async def test_pop_group_and_pull_group_on_one_topic(ns: str) -> None:
    await make_topic(ns, "PopMixed", 4)
    ids = await send(ns, "PopMixed", [b"%d" % i for i in range(60)])
    pulled: list[str] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        pulled.extend(m.msg_id for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    push = PushConsumer("g_mixed_pull", ns, **FAST_CONSUMER)
    push.subscribe("PopMixed", "*")
    push.register_listener(listener)
    await push.start()
    try:
        async with consumer(ns, "g_mixed_pop", "PopMixed") as c:
            popped = await drain(c, 60)
        await wait_until_async(lambda: len(pulled) >= 60, 20, message="the pull group's messages")
    finally:
        await push.shutdown()
    assert sorted(m.msg_id for m in popped) == sorted(ids) == sorted(set(pulled))


async def test_orderly_pop_keeps_queue_order_under_redelivery(ns: str) -> None:
    """A failed message blocks its queue: the rest of the queue waits until it comes back and is acked."""
    await make_topic(ns, "PopOrder", 2)
    async with Producer("pg_order", namesrv_addr=ns) as p:
        for seq in range(12):
            for qid in range(2):
                await p.send(
                    Message("PopOrder", b"%d/%d" % (qid, seq)), selector=lambda mqs, _m, q: mqs[q], arg=qid
                )
    acked: dict[int, list[int]] = {0: [], 1: []}
    deliveries: Counter[tuple[int, int]] = Counter()
    failed_once: set[tuple[int, int]] = set()
    async with consumer(ns, "g_order", "PopOrder", orderly=True, await_duration=1) as c:
        for _ in range(60):
            msgs = await c.receive(4, 2)
            by_queue: dict[int, list[MessageExt]] = {}
            for m in msgs:
                qid, seq = map(int, m.body.split(b"/"))
                deliveries[(qid, seq)] += 1
                by_queue.setdefault(qid, []).append(m)
            for qid, queue_msgs in by_queue.items():
                ok: list[MessageExt] = []
                for m in queue_msgs:
                    seq = int(m.body.split(b"/")[1])
                    if seq == 5 and (qid, seq) not in failed_once:  # fail once: stop this queue's batch
                        failed_once.add((qid, seq))
                        break
                    assert seq == (acked[qid][-1] + 1 if acked[qid] else 0), (qid, seq, acked[qid])
                    ok.append(m)
                    acked[qid].append(seq)
                if ok:
                    await c.ack(ok)
            if all(len(v) == 12 for v in acked.values()):
                break
    assert acked == {0: list(range(12)), 1: list(range(12))}
    assert deliveries[(0, 5)] == deliveries[(1, 5)] == 2


async def test_sql92_and_subscriptions_at_run_time(ns: str) -> None:
    await make_topic(ns, "PopSqlA", 2)
    await make_topic(ns, "PopSqlB", 2)
    async with Producer("pg_sql", namesrv_addr=ns) as p:
        for i in range(10):
            await p.send(Message("PopSqlA", b"a%d" % i, properties={"n": str(i)}))
            await p.send(Message("PopSqlB", b"b%d" % i))
    c = consumer(ns, "g_sql", "PopSqlA", MessageSelector.by_sql("n >= 7"))
    async with c:
        got = await drain(c, 3)
        assert sorted(m.body for m in got) == [b"a7", b"a8", b"a9"]
        c.subscribe("PopSqlB", "*")
        c.unsubscribe("PopSqlA")
        got = await drain(c, 10)
        assert sorted(m.body for m in got) == sorted(b"b%d" % i for i in range(10))
        with pytest.raises(MQClientError, match="max_message_num=33"):
            await c.receive(33)
        with pytest.raises(MQClientError, match="invisible_duration=0"):
            await c.receive(1, 0)


def test_blocking_twin(ns: str) -> None:
    from rocketpy import sync

    asyncio.run(make_topic(ns, "PopSync", 2))
    ids = asyncio.run(send(ns, "PopSync", [b"%d" % i for i in range(20)]))
    c = sync.SimpleConsumer(
        "g_sync", ns, subscriptions={"PopSync": "*"}, await_duration=2, consume_from_where=FIRST
    )
    c.start()
    try:
        got: list[MessageExt] = []
        while len(got) < 20:
            msgs = c.receive(max_message_num=8, invisible_duration=30)
            assert msgs, "a receive came back empty before every message arrived"
            c.ack(msgs)
            got += msgs
        assert sorted(m.msg_id for m in got) == sorted(ids)
        c.change_invisible_duration  # noqa: B018  (the twin has every method)
    finally:
        c.shutdown()
