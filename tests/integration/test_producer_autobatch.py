"""Producer auto-batch against real daemons: concurrent sends coalesce into fewer requests, each
message keeps its keys, tags and ids (queryable in the broker's index), a refused message fails
alone, and a broker killed mid-batch has its sends retried on the other broker, each acked once."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from rocketpy import Admin, Message, Producer, SendStatus
from rocketpy.errors import MessageIllegalError
from tests.conftest import DaemonPool
from tests.integration.test_producer import all_messages, create_topic
from tests.integration.test_producer_failover import _any, _brokers_in_route, _name
from tests.waiting import wait_until_async


async def test_concurrent_sends_coalesce_and_every_message_is_stored(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    await create_topic(ns.addr, "AbT", queues=2)
    async with Producer("pg", ns.addr) as p:
        await p.send(Message("AbT", b"warm"))  # the route and the connection
        futs = [p.send_async(Message("AbT", b"c%d" % i)) for i in range(300)]
        results = await asyncio.gather(*futs)
        many = await asyncio.gather(*(p.send(Message("AbT", b"s%d" % i)) for i in range(50)))
        stats = p.coalesce_stats
        assert stats is not None and stats.messages == 351
        assert stats.requests < 351 // 4 and stats.batches > 0  # far fewer requests than messages
        assert all(r.status is SendStatus.SEND_OK for r in results + many)
        stored = await all_messages(p, "AbT")
    by_id = {m.msg_id: m for m in stored}
    assert len(stored) == 351 and len(by_id) == 351
    for i, r in enumerate(results):  # each message at the queue offset its own result names
        m = by_id[r.msg_id]
        assert m.body == b"c%d" % i and m.queue_offset == r.queue_offset
        assert m.queue_id == r.message_queue.queue_id
    per_queue = collections.defaultdict(list)
    for r in results:
        per_queue[r.message_queue.queue_id].append(r.queue_offset)
    assert all(len(set(offsets)) == len(offsets) for offsets in per_queue.values())


async def test_keys_tags_and_ids_of_coalesced_messages_are_indexed(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    await create_topic(ns.addr, "AbKeys", queues=1)
    async with Producer("pg", ns.addr) as p, Admin(ns.addr) as admin:
        await p.send(Message("AbKeys", b"warm"))
        msgs = [Message("AbKeys", b"k%d" % i, tags=f"tag{i % 3}", keys=[f"order-{i}"]) for i in range(20)]
        results = await asyncio.gather(*(p.send_async(m) for m in msgs))
        stats = p.coalesce_stats
        assert stats is not None and stats.batches >= 1
        for i in (0, 7, 19):
            found = await wait_until_async(
                lambda i=i: _any(admin.query_msg_by_key("AbKeys", f"order-{i}")), 10.0
            )
            assert [m.body for m in found] == [b"k%d" % i]
            assert found[0].tags == f"tag{i % 3}" and found[0].msg_id == results[i].msg_id
            by_id = await admin.query_msg_by_id(results[i].offset_msg_id)
            assert by_id.body == b"k%d" % i and by_id.keys == [f"order-{i}"]


async def test_a_message_the_broker_refuses_fails_alone(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr, maxMessageSize=2048)
    await create_topic(ns.addr, "AbRefuse", queues=1)
    async with Producer("pg", ns.addr, compress_over_bytes=1_000_000) as p:
        await p.send(Message("AbRefuse", b"warm"))
        bodies = [b"a", b"b", b"x" * 4000, b"c", b"d"]  # the third is over the broker's maxMessageSize
        outcomes = await asyncio.gather(
            *(p.send_async(Message("AbRefuse", body)) for body in bodies), return_exceptions=True
        )
        assert isinstance(outcomes[2], MessageIllegalError) and "maxMessageSize" in str(outcomes[2])
        ok = [o for i, o in enumerate(outcomes) if i != 2]
        assert all(not isinstance(o, BaseException) and o.status is SendStatus.SEND_OK for o in ok)
        stats = p.coalesce_stats
        assert stats is not None and stats.splits == 1
        stored = await all_messages(p, "AbRefuse")
    assert sorted(m.body for m in stored) == [b"a", b"b", b"c", b"d", b"warm"]


async def test_broker_killed_mid_batch_sends_retry_on_the_other_each_acked_once(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    broker_a = daemons.broker(ns.addr)
    broker_b = daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin:
        await admin.create_topic("AbFail", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        await wait_until_async(lambda: _any(_brokers_in_route(admin, "AbFail", 2)), 10.0)
    acks: collections.Counter[int] = collections.Counter()
    errors: list[BaseException] = []

    def on_done(i: int) -> Any:
        async def callback(result: Any, error: BaseException | None) -> None:
            acks[i] += 1
            if error is not None:
                errors.append(error)

        return callback

    async with Producer("pg", ns.addr, poll_name_server_interval=1.0, send_timeout=10.0) as p:
        await asyncio.gather(*(p.send(Message("AbFail", b"warm")) for _ in range(8)))
        futs = []
        for i in range(2000):
            if i == 600:
                broker_a.kill()
            futs.append(p.send_async(Message("AbFail", b"f%d" % i), on_done(i)))
            if i % 50 == 49:
                await asyncio.sleep(0)  # let responses in: sends arrive while batches are in flight
        outcomes = await asyncio.gather(*futs, return_exceptions=True)
        await wait_until_async(lambda: sum(acks.values()) == 2000, 10.0)
    assert set(acks.values()) == {1}, "a send was acknowledged twice"
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert not failed and not errors, failed[:3] or errors[:3]
    results = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len({r.msg_id for r in results}) == 2000
    assert {r.message_queue.broker_name for r in results[1200:]} == {_name(broker_b)}


def test_bench_producer_auto_batch_switch(daemons: DaemonPool) -> None:
    from click.testing import CliRunner

    from rocketpy.bench import bench

    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    common = ["producer", "-n", ns.addr, "-t", "AbBench", "-s", "100", "-q", "200", "-w", "16", "-d", "30"]
    on = CliRunner().invoke(bench, [*common, "--auto-batch"])
    off = CliRunner().invoke(bench, [*common, "--no-auto-batch"])
    assert on.exit_code == 0 and off.exit_code == 0, on.output + off.output
    for result in (on, off):
        assert "Send Total: 200 |" in result.output and "Send Failed: 0" in result.output
        assert "RT p50(ms):" in result.output and "RT p99(ms):" in result.output
    assert "[Auto-batch] Requests:" in on.output and "[Auto-batch]" not in off.output
