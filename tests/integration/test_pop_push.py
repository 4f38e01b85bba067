"""The push consumer's POP mode, the broker's assignment (QUERY_ASSIGNMENT, ``mqadmin setConsumeMode``),
the ACL over POP's codes and POP's Prometheus metrics, against real daemons."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rocketpy import (
    Admin,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    SimpleConsumer,
)
from rocketpy.acl.signing import RequestSigner
from rocketpy.client.answers import pack_body
from rocketpy.errors import AccessDeniedError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.pop import AckMessageRequestHeader, PopMessageRequestHeader
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from tests.integration.test_acl import ADMIN, USER, start_acl_cluster
from tests.integration.test_metrics import free_port, metrics_url, scrape, value
from tests.integration.test_pop import make_topic, mqadmin_json, send
from tests.waiting import wait_until_async

FAST_POP: dict[str, Any] = {
    "message_request_mode": "POP",
    "rebalance_interval": 1.0,
    "heartbeat_broker_interval": 1.0,
    "poll_name_server_interval": 1.0,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}


def pop_consumer(ns: str, group: str, topic: str, listener: Any, **kw: Any) -> PushConsumer:
    c = PushConsumer(group, ns, **{**FAST_POP, **kw})
    c.subscribe(topic, "*")
    c.register_listener(listener)
    return c


async def test_push_consumers_in_pop_mode_share_one_queue(daemons: Any) -> None:
    """Three POP push consumers on a one-queue topic all consume; a failure comes back later."""
    ns = daemons.namesrv().addr
    daemons.broker(ns)
    await make_topic(ns, "PushPop", 1)
    seen: Counter[bytes] = Counter()
    by_member: list[int] = [0, 0, 0]
    failed_once: set[bytes] = set()

    def listener_of(i: int) -> Any:
        def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
            [m] = msgs
            seen[m.body] += 1
            by_member[i] += 1
            if m.body == b"7" and m.body not in failed_once:
                failed_once.add(m.body)
                ctx.delay_level_when_next_consume = 1  # back in 1 s (RocketMQ's level 1)
                return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.CONSUME_SUCCESS

        return listener

    members = [pop_consumer(ns, "g_push_pop", "PushPop", listener_of(i), pull_batch_size=2) for i in range(3)]
    for c in members:
        await c.start()
    try:
        await send(ns, "PushPop", [b"%d" % i for i in range(90)])
        await wait_until_async(lambda: len(seen) == 90 and seen[b"7"] == 2, 30, message="every message")
        assert all(c.assigned_queues() == [MessageQueue("PushPop", "broker-a", -1)] for c in members)
        assert all(n > 0 for n in by_member), by_member
        assert sum(seen.values()) == 91  # each once, and the failed one twice
    finally:
        for c in members:
            await c.shutdown()
    progress = await mqadmin_json(ns, "consumerProgress", "-g", "g_push_pop", "-t", "PushPop")
    assert progress["diffTotal"] == 0 and progress["inflightTotal"] == 0


async def test_orderly_push_in_pop_mode(daemons: Any) -> None:
    ns = daemons.namesrv().addr
    daemons.broker(ns)
    await make_topic(ns, "PushPopOrder", 2)
    order: dict[int, list[int]] = {0: [], 1: []}
    suspended: set[int] = set()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        for m in msgs:
            qid, seq = map(int, m.body.split(b"/"))
            if seq == 3 and qid not in suspended:
                suspended.add(qid)
                ctx.suspend_current_queue_time = 0.5
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            order[qid].append(seq)
        return ConsumeOrderlyStatus.SUCCESS

    c = PushConsumer("g_push_order", ns, **FAST_POP)
    c.subscribe("PushPopOrder", "*")
    c.register_listener(listener, orderly=True)
    await c.start()
    try:
        async with Producer("pg_push_order", namesrv_addr=ns) as p:
            for seq in range(10):
                for qid in range(2):
                    body = b"%d/%d" % (qid, seq)
                    await p.send(Message("PushPopOrder", body), selector=lambda mqs, _m, q: mqs[q], arg=qid)
        await wait_until_async(lambda: all(len(v) == 10 for v in order.values()), 30, message="both queues")
    finally:
        await c.shutdown()
    assert order == {0: list(range(10)), 1: list(range(10))} and suspended == {0, 1}


async def test_set_consume_mode_changes_the_assignment(daemons: Any) -> None:
    ns = daemons.namesrv().addr
    daemons.broker(ns)
    await make_topic(ns, "PopAssign", 4)
    members = [
        pop_consumer(ns, "g_assign", "PopAssign", lambda m, c: ConsumeStatus.CONSUME_SUCCESS)
        for _ in range(2)
    ]
    for c in members:
        await c.start()
    try:
        share_all = [MessageQueue("PopAssign", "broker-a", -1)]
        await wait_until_async(
            lambda: all(c.assigned_queues() == share_all for c in members), 10, message="POP"
        )
        done = await mqadmin_json(ns, "setConsumeMode", "-g", "g_assign", "-t", "PopAssign", "-m", "PULL")
        assert done["mode"] == "PULL" and len(done["brokers"]) == 1

        def exclusive() -> bool:
            mine = [set(c.assigned_queues()) for c in members]
            return not (mine[0] & mine[1]) and {q.queue_id for s in mine for q in s} == {0, 1, 2, 3}

        await wait_until_async(exclusive, 10, message="each consumer its own queues")
        await mqadmin_json(ns, "setConsumeMode", "-g", "g_assign", "-t", "PopAssign", "-m", "POP", "-q", "0")
        await wait_until_async(
            lambda: all(c.assigned_queues() == share_all for c in members), 10, message="POP"
        )
    finally:
        for c in members:
            await c.shutdown()
    async with Admin(ns) as admin:
        addr = (await admin.topic_route("PopAssign")).broker_datas[0].master_addr()
        assert addr is not None
        assert (
            await admin.instance.api.query_assignment(addr, "NoSuchTopic", "g", "c", "AVG", "CLUSTERING", 3)
            is None
        )
        retry = await admin.instance.remoting.invoke(
            addr,
            RemotingCommand.request(
                RequestCode.SET_MESSAGE_REQUEST_MODE,
                None,
                pack_body({"topic": "%RETRY%g", "consumerGroup": "g", "mode": "POP"}),
            ),
            3,
        )
        assert retry.code == ResponseCode.NO_PERMISSION


async def test_acl_covers_the_pop_codes(daemons: Any, tmp_path: Path) -> None:
    """USER may SUB TopicA and TopicB (groups: SUB, GroupX denied): pops and acks follow those rules,
    and acking a redelivered message (a POP retry topic) needs what its topic needs."""
    ns, addr = start_acl_cluster(daemons, tmp_path / "plain_acl.yml")
    admin = Admin(ns, access_key=ADMIN[0], secret_key=ADMIN[1])
    async with admin:
        for topic in ("TopicA", "TopicC"):
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg", ns, access_key=ADMIN[0], secret_key=ADMIN[1]) as p:
        await p.send(Message("TopicA", b"a"))
    keys = {"access_key": USER[0], "secret_key": USER[1]}
    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    allowed = SimpleConsumer(
        "GroupOK", ns, subscriptions={"TopicA": "*"}, await_duration=1, consume_from_where=first, **keys
    )
    async with allowed as c:
        assert len(await c.receive(1, 1)) == 1  # not acked
        again: list[MessageExt] = []
        for _ in range(10):  # back through %RETRY%GroupOK_TopicA, which USER may read
            again = await c.receive(1, 30)
            if again:
                break
        assert again and again[0].body == b"a"
        await c.ack(again)
    client = RemotingClient(signer=RequestSigner(*USER))
    try:
        for topic, group in (("TopicC", "GroupOK"), ("TopicA", "GroupX")):
            ext = PopMessageRequestHeader(group, topic, -1, 1, 1000).to_ext()
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.POP_MESSAGE, ext), 5)
            assert resp.code == ResponseCode.NO_PERMISSION and "access denied" in (resp.remark or "")
        ack = AckMessageRequestHeader("GroupOK", "%RETRY%GroupOK_TopicC", 0, "1 2 3 0 1 broker-a 0 1", 1)
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack.to_ext()), 5)
        assert resp.code == ResponseCode.NO_PERMISSION and "TopicC" in (resp.remark or "")
    finally:
        await client.close()
    denied = SimpleConsumer("GroupOK", ns, subscriptions={"TopicC": "*"}, await_duration=1, **keys)
    async with denied:
        try:
            await denied.receive(1, 1)
            raise AssertionError("a receive of TopicC was allowed")
        except AccessDeniedError:
            pass


async def test_pop_metrics(daemons: Any) -> None:
    ns = daemons.namesrv().addr
    broker = daemons.broker(ns, metricsPort=free_port())
    await make_topic(ns, "PopMetrics", 2)
    await send(ns, "PopMetrics", [b"%d" % i for i in range(10)])
    c = SimpleConsumer(
        "g_metrics",
        ns,
        subscriptions={"PopMetrics": "*"},
        await_duration=1,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    async with c:
        got: list[MessageExt] = []
        while len(got) < 10:
            got += await c.receive(32, 1)
        await c.ack(got[:4])
        await c.change_invisible_duration(got[4], 1)
        url = metrics_url(broker)
        labels = {"group": "g_metrics", "topic": "PopMetrics"}
        s = await scrape(url)
        assert value(s, "rocketpy_pop_messages_total", **labels) == 10
        assert value(s, "rocketpy_pop_acks_total", **labels) == 4
        assert value(s, "rocketpy_pop_invisible_changes_total", **labels) == 1
        assert value(s, "rocketpy_pop_inflight", **labels) == 6
        assert value(s, "rocketpy_pop_oldest_inflight_age_seconds", **labels) >= 0

        async def revived() -> bool:
            s = await scrape(url)
            return value(s, "rocketpy_pop_revived_total", **labels) == 6

        await wait_until_async(revived, 15, message="six revived", ignore=(KeyError,))
