"""Producer against real daemons: every send mode, verified by pulling the stored messages back."""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

import pytest

from rocketpy import Admin, Message, MessageQueue, MQClientError, Producer, SendStatus
from rocketpy.client.api import PullStatus
from rocketpy.client.instance import MQClientInstance
from rocketpy.message import MessageExt
from rocketpy.record import COMPRESSED_FLAG
from tests.conftest import DaemonPool
from tests.waiting import wait_until_async

pytestmark = pytest.mark.usefixtures("sdk_encoding")  # both wire encodings


async def pull_all(inst: MQClientInstance, mq: MessageQueue, start: int = 0) -> list[MessageExt]:
    """Every message of ``mq`` from ``start`` (non-suspending pulls)."""
    addr = inst.find_broker_addr(mq.broker_name)
    assert addr
    out: list[MessageExt] = []
    offset = start
    while True:
        ext = {
            "consumerGroup": "TEST_READER",
            "topic": mq.topic,
            "queueId": mq.queue_id,
            "queueOffset": offset,
            "maxMsgNums": 32,
            "sysFlag": 4,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": "*",
            "subVersion": 0,
            "expressionType": "TAG",
        }
        r = await inst.api.pull_message(addr, ext, 5.0)
        if r.status is not PullStatus.FOUND:
            return out
        out += r.messages
        offset = r.next_begin_offset


async def all_messages(producer: Producer, topic: str) -> list[MessageExt]:
    inst = producer._inst()
    await inst.update_topic_route(topic)
    out: list[MessageExt] = []
    for mq in inst.subscribe_queues(topic):
        out += await pull_all(inst, mq)
    return out


@pytest.fixture
def cluster(daemons: DaemonPool) -> dict[str, Any]:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    return {"ns": ns.addr, "broker": broker.addr, "pool": daemons}


async def create_topic(ns: str, topic: str, queues: int = 4) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)


async def test_send_modes_stored_and_readable(cluster: dict[str, Any]) -> None:
    await create_topic(cluster["ns"], "TopicA")
    async with Producer("pg", cluster["ns"]) as p:
        r = await p.send(Message("TopicA", b"sync", tags="TagA", keys=["k1", "k2"], properties={"age": "3"}))
        assert r.status is SendStatus.SEND_OK and len(r.msg_id) == 32 and len(r.offset_msg_id) == 32
        seen: list[Any] = []
        fut = p.send_async(Message("TopicA", b"async"), callback=lambda res, err: seen.append((res, err)))
        r2 = await fut
        await wait_until_async(lambda: seen, 5.0)
        assert seen[0][0] is r2 and seen[0][1] is None
        await p.send_oneway(Message("TopicA", b"oneway"))
        batch = [Message("TopicA", b"b%d" % i) for i in range(100)]
        results = await p.send_batch(batch)
        assert [x.msg_id for x in results] == [m.unique_key for m in batch]
        qs = {x.message_queue for x in results}
        assert len(qs) == 1
        offs = [x.queue_offset for x in results]
        assert offs == list(range(offs[0], offs[0] + 100))
        big = bytes(range(256)) * 40  # 10 KiB, compressible -> compressed on the wire
        r3 = await p.send(Message("TopicA", big))

        msgs = await wait_until_async(lambda: _any(_n(all_messages(p, "TopicA"), 104)), 10.0)
    by_body = {bytes(m.body): m for m in msgs}
    m = by_body[b"sync"]
    assert (m.tags, m.keys, m.properties.get("age"), m.msg_id) == ("TagA", ["k1", "k2"], "3", r.msg_id)
    assert m.queue_id == r.message_queue.queue_id and m.queue_offset == r.queue_offset
    assert {b"async", b"oneway"} <= set(by_body)
    assert all(b"b%d" % i in by_body for i in range(100))
    stored_big = by_body[big]
    assert stored_big.sys_flag & COMPRESSED_FLAG and stored_big.msg_id == r3.msg_id
    assert zlib.crc32(big) != stored_big.body_crc  # the broker stored the compressed bytes


async def _n(coro: Any, n: int) -> Any:
    msgs = await coro
    return msgs if len(msgs) >= n else None


async def test_round_robin_and_selector(cluster: dict[str, Any]) -> None:
    await create_topic(cluster["ns"], "TopicRR", queues=4)
    async with Producer("pg", cluster["ns"]) as p:
        rs = [await p.send(Message("TopicRR", b"x")) for _ in range(8)]
        assert sorted(r.message_queue.queue_id for r in rs) == [0, 0, 1, 1, 2, 2, 3, 3]
        queues = await p.fetch_publish_message_queues("TopicRR")
        assert queues == sorted(queues)
        for order_id in range(10):
            r = await p.send(
                Message("TopicRR", b"o%d" % order_id),
                selector=lambda mqs, msg, arg: mqs[arg % len(mqs)],
                arg=order_id,
            )
            assert r.message_queue == queues[order_id % 4]
        with pytest.raises(MQClientError, match="not one of"):
            await p.send(Message("TopicRR", b"x"), selector=lambda mqs, msg, arg: "nope")  # type: ignore[arg-type,return-value]


async def test_auto_create_via_tbw102(cluster: dict[str, Any]) -> None:
    async with Producer("pg", cluster["ns"]) as p:
        r = await p.send(Message("BrandNewTopic", b"hello"))
        assert r.status is SendStatus.SEND_OK
        assert r.message_queue.queue_id < 4


async def test_unknown_topic_without_auto_create(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr, autoCreateTopicEnable=False)
    async with Producer("pg", ns.addr) as p:
        with pytest.raises(MQClientError, match=r"does not exist: create it with `mqadmin updateTopic"):
            await p.send(Message("NoSuchTopic", b"x"))


async def test_no_namesrv_reachable() -> None:
    async with Producer("pg", "127.0.0.1:1;127.0.0.1:2") as p:
        with pytest.raises(MQClientError, match=r"no NameServer reachable.*mqnamesrv"):
            await p.send(Message("T", b"x"))


async def test_bad_input_raises_before_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    p = Producer("pg", "127.0.0.1:1")
    with pytest.raises(MQClientError, match="not started"):
        await p.send(Message("T", b"x"))
    await p.start()
    try:
        with pytest.raises(MQClientError, match="empty"):
            await p.send(Message("T", b""))
        with pytest.raises(MQClientError, match="empty"):
            p.send_async(Message("T", b""))
        with pytest.raises(MQClientError, match="one topic"):
            await p.send_batch([Message("A", b"1"), Message("B", b"2")])
    finally:
        await p.shutdown()
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(MQClientError, match="no NameServer address given"):
        await Producer("pg", "").start()


async def test_many_async_sends_in_flight(cluster: dict[str, Any]) -> None:
    await create_topic(cluster["ns"], "TopicAsync", queues=8)
    async with Producer("pg", cluster["ns"]) as p:
        futs = [p.send_async(Message("TopicAsync", b"m%d" % i)) for i in range(2000)]
        results = await asyncio.gather(*futs)
        assert all(r.status is SendStatus.SEND_OK for r in results)
        assert len({r.msg_id for r in results}) == 2000
        msgs = await wait_until_async(lambda: _any(_n(all_messages(p, "TopicAsync"), 2000)), 10.0)
        assert len(msgs) == 2000


async def test_async_callbacks_sync_and_async_and_shutdown_waits(cluster: dict[str, Any]) -> None:
    await create_topic(cluster["ns"], "TopicCb", queues=2)
    seen_sync: list[Any] = []
    seen_async: list[Any] = []

    async def acb(res: Any, err: Any) -> None:
        seen_async.append((res, err))

    p = Producer("pg", cluster["ns"])
    await p.start()
    for i in range(50):
        p.send_async(Message("TopicCb", b"c%d" % i), callback=lambda r, e: seen_sync.append((r, e)))
        p.send_async(Message("TopicCb", b"a%d" % i), callback=acb)
    await p.shutdown()  # waits for the unfinished sends (futures not awaited by the test)
    await wait_until_async(lambda: len(seen_sync) == 50 and len(seen_async) == 50, 5.0)
    assert all(r is not None and e is None for r, e in seen_sync + seen_async)


def _any(value: object) -> Any:
    """Type an awaitable predicate result as Any for wait_until_async (its TypeVar cannot be solved)."""
    return value


async def test_send_batch_over_4mib_is_split_and_ordered(cluster: dict[str, Any]) -> None:
    await create_topic(cluster["ns"], "TopicBig", queues=2)
    async with Producer("pg", cluster["ns"]) as p:
        msgs = [Message("TopicBig", bytes([i]) * (900 * 1024)) for i in range(10)]  # ~9 MiB -> 3 requests
        results = await p.send_batch(msgs)
        assert [r.msg_id for r in results] == [m.unique_key for m in msgs]
        assert len({(r.message_queue, r.queue_offset) for r in results}) == 10
        stored = await wait_until_async(lambda: _any(_n(all_messages(p, "TopicBig"), 10)), 10.0)
    assert sorted(bytes(m.body)[:1] for m in stored) == [bytes([i]) for i in range(10)]
