"""The per-queue seams of a consumer: pull loop -> consume service -> listener, release, rebalance.

Driven through their typed collaborators: a Puller that answers from a list, an in-memory offset
table, and a GroupView that plays the routes and the group's members.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rocketpy.client.allocate import allocate_averagely
from rocketpy.client.consume_service import ConcurrentConsumeService, ListenerRunner, OrderlyConsumeService
from rocketpy.client.consumer_types import (
    ConsumeOrderlyStatus,
    ConsumeStatus,
    MessageModel,
    SubscriptionData,
    build_subscription,
)
from rocketpy.client.offset_store import OffsetStore
from rocketpy.client.pull_loop import PullLoop, PullOptions
from rocketpy.client.queue_context import QueueContext
from rocketpy.client.rebalance import GroupMember, Rebalancer
from rocketpy.client.results import PullResult, PullStatus
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.route import TopicRouteData

MQ = MessageQueue("T", "b", 0)


async def _until(pred: Any, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not pred():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def _msg(offset: int, tags: str | None = None) -> MessageExt:
    return MessageExt("T", b"%d" % offset, tags=tags, queue_offset=offset)


class ListPuller:
    """Answers pulls from a list of results, then NO_NEW_MSG after a short wait; records the requests."""

    def __init__(self, results: list[PullResult]) -> None:
        self.results = results
        self.requests: list[dict[str, Any]] = []

    async def pull(self, mq: MessageQueue, ext: dict[str, Any], timeout_s: float) -> PullResult:
        self.requests.append(ext)
        if self.results:
            return self.results.pop(0)
        await asyncio.sleep(0.01)
        return PullResult(PullStatus.NO_NEW_MSG, ext["queueOffset"], 0, ext["queueOffset"], [])


def _found(msgs: list[MessageExt]) -> PullResult:
    nxt = msgs[-1].queue_offset + 1
    return PullResult(PullStatus.FOUND, nxt, 0, nxt, msgs)


def _start(ctx: QueueContext, opts: PullOptions, puller: ListPuller, svc: ConcurrentConsumeService) -> None:
    ctx.pull_task = asyncio.create_task(PullLoop(ctx, opts, puller, svc.submit).run())


def _context(sub: SubscriptionData | None = None, next_offset: int = 0) -> QueueContext:
    return QueueContext(MQ, sub or SubscriptionData("T"), next_offset, OffsetStore("g"))


async def test_pulled_messages_reach_the_listener_and_move_the_offset() -> None:
    seen: list[int] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        seen.extend(m.queue_offset for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    sub = build_subscription("T", "A")
    puller = ListPuller([_found([_msg(0, "A"), _msg(1, "B"), _msg(2, "A")]), _found([_msg(3, "A")])])
    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 2), 1, 0.01)
    ctx = _context(sub)
    _start(ctx, PullOptions("g", 32, 100, 1 << 20), puller, svc)
    await _until(lambda: ctx.offsets.cached(MQ) == 4)
    assert sorted(seen) == [0, 2, 3]  # tag B was filtered on the client
    assert ctx.next_offset == 4 and puller.requests[1]["queueOffset"] == 3
    assert puller.requests[0]["consumerGroup"] == "g" and puller.requests[0]["maxMsgNums"] == 32
    await ctx.stop_pulling()
    assert ctx.pull_task is not None and ctx.pull_task.done()
    await svc.shutdown(1.0)


async def test_flow_control_pauses_pulling_until_the_listener_catches_up() -> None:
    gate = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        await gate.wait()
        return ConsumeStatus.CONSUME_SUCCESS

    puller = ListPuller([_found([_msg(i) for i in range(4)]), _found([_msg(4)])])
    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 2), 4, 0.01)
    ctx = _context()
    _start(ctx, PullOptions("g", 4, 4, 1 << 20), puller, svc)
    await _until(lambda: len(puller.requests) == 1)
    await asyncio.sleep(0.2)  # several flow-control periods pass without a pull
    assert len(puller.requests) == 1 and ctx.pq.msg_count == 4
    gate.set()
    await _until(lambda: ctx.offsets.cached(MQ) == 5)
    await ctx.stop_pulling()
    assert ctx.pull_task is not None and ctx.pull_task.done()
    await svc.shutdown(1.0)


async def test_offset_illegal_restarts_at_the_broker_offset() -> None:
    puller = ListPuller([PullResult(PullStatus.OFFSET_ILLEGAL, 7, 7, 9, [])])
    svc = ConcurrentConsumeService(ListenerRunner(lambda m, c: ConsumeStatus.CONSUME_SUCCESS, 1, 1), 1, 0.01)
    ctx = _context(next_offset=100)
    ctx.offsets.update(MQ, 100)
    _start(ctx, PullOptions("g", 1, 10, 1 << 20), puller, svc)
    await _until(lambda: len(puller.requests) >= 2)
    assert puller.requests[1]["queueOffset"] == 7 and ctx.offsets.cached(MQ) == 7
    await ctx.stop_pulling()
    assert ctx.pull_task is not None and ctx.pull_task.done()
    await svc.shutdown(1.0)


async def test_acknowledgements_after_release_do_not_move_the_offset() -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        started.set()
        await release.wait()
        return ConsumeStatus.CONSUME_SUCCESS

    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 2), 2, 0.01)
    ctx = _context()
    msgs = [_msg(0), _msg(1)]
    ctx.pq.put(msgs)
    ctx.offsets.update(MQ, 0)
    svc.submit(ctx, msgs)
    await started.wait()
    ctx.released = True  # the release committed offset 0; the next owner starts there
    release.set()
    await svc.wait_queue_idle(MQ, 1.0)
    assert ctx.offsets.cached(MQ) == 0 and svc.consumed_count == 0
    await svc.shutdown(1.0)


async def test_orderly_waits_for_the_broker_lock() -> None:
    order: list[int] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        order.extend(m.queue_offset for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    svc = OrderlyConsumeService(ListenerRunner(listener, 1, 1), 2, 0.01)
    ctx = _context()
    ctx.pq.put([_msg(i) for i in range(5)])
    svc.submit(ctx)
    await asyncio.sleep(0.15)
    assert order == []  # not locked yet
    ctx.pq.locked, ctx.pq.last_lock_time = True, asyncio.get_running_loop().time() + 1e9
    await _until(lambda: ctx.offsets.cached(MQ) == 5)
    assert order == [0, 1, 2, 3, 4] and svc.consumed_count == 5
    await svc.shutdown(1.0)


class Group:
    """Plays the routes and the group membership the rebalancer asks the client instance for."""

    def __init__(self, queues: int, members: list[str]) -> None:
        self.queues = [MessageQueue("T", "b", i) for i in range(queues)]
        self.members = members
        self.heartbeats = 0

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        return list(self.queues) if topic == "T" else []

    async def update_topic_route(self, topic: str) -> TopicRouteData | None:
        return None

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        return list(self.members)

    async def send_heartbeat_to_all_brokers(self) -> None:
        self.heartbeats += 1


class Hooks:
    """Starts and stops queues as a consumer would, recording what it was asked."""

    def __init__(self) -> None:
        self.released: list[MessageQueue] = []
        self.refuse: set[MessageQueue] = set()

    async def acquire(self, mq: MessageQueue) -> QueueContext | None:
        if mq in self.refuse:
            return None
        return QueueContext(mq, SubscriptionData("T"), 0, OffsetStore("g"))

    async def release(self, ctx: QueueContext) -> None:
        self.released.append(ctx.mq)


def _rebalancer(group: Group, hooks: Hooks, me: str, model: MessageModel) -> Rebalancer:
    member = GroupMember("g", me, model, allocate_averagely)
    return Rebalancer(member, group, {"T": SubscriptionData("T")}, 20.0, hooks.acquire, hooks.release)


async def test_rebalance_follows_the_group() -> None:
    group, hooks = Group(4, ["c0"]), Hooks()
    rb = _rebalancer(group, hooks, "c0", MessageModel.CLUSTERING)
    await rb.rebalance()
    assert sorted(q.queue_id for q in rb.table) == [0, 1, 2, 3] and rb.balanced
    group.members = ["c0", "c1"]
    await rb.rebalance()
    assert sorted(q.queue_id for q in rb.table) == [0, 1]
    assert sorted(q.queue_id for q in hooks.released) == [2, 3]


async def test_rebalance_retries_a_queue_that_could_not_start() -> None:
    group, hooks = Group(2, ["c0"]), Hooks()
    hooks.refuse = {group.queues[1]}
    rb = _rebalancer(group, hooks, "c0", MessageModel.CLUSTERING)
    await rb.rebalance()
    assert list(rb.table) == [group.queues[0]] and not rb.balanced
    hooks.refuse.clear()
    await rb.rebalance()
    assert sorted(rb.table) == group.queues and rb.balanced


async def test_unknown_member_heartbeats_and_takes_nothing() -> None:
    group, hooks = Group(2, ["c1"]), Hooks()
    rb = _rebalancer(group, hooks, "c0", MessageModel.CLUSTERING)
    await rb.rebalance()
    assert rb.table == {} and group.heartbeats == 1 and not rb.balanced


async def test_broadcasting_takes_every_queue() -> None:
    group, hooks = Group(3, ["c0", "c1", "c2"]), Hooks()
    rb = _rebalancer(group, hooks, "c1", MessageModel.BROADCASTING)
    await rb.rebalance()
    assert sorted(rb.table) == group.queues
