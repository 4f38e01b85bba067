"""Consume services on a queue context: failures retried, never acknowledged; orderly order; release."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from rocketpy.client.consume_service import ConcurrentConsumeService, ListenerRunner, OrderlyConsumeService
from rocketpy.client.consumer_types import ConsumeOrderlyStatus, ConsumeStatus, SubscriptionData
from rocketpy.client.offset_store import OffsetStore
from rocketpy.client.queue_context import QueueContext
from rocketpy.errors import MQBrokerError
from rocketpy.message import MessageExt, MessageQueue

MQ = MessageQueue("T", "b", 0)


def _context(msgs: list[MessageExt], *, locked: bool = False) -> QueueContext:
    """A queue context holding ``msgs`` (as pulled), with an in-memory offset table."""
    ctx = QueueContext(MQ, SubscriptionData("T"), len(msgs), OffsetStore("g"))
    ctx.pq.put(msgs)
    ctx.pq.locked, ctx.pq.last_lock_time = locked, float("inf")
    return ctx


def _committed(ctx: QueueContext) -> int | None:
    return ctx.offsets.cached(MQ)


async def _until(pred: Any, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not pred():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def _msgs(n: int) -> list[MessageExt]:
    return [MessageExt("T", b"%d" % i, queue_offset=i) for i in range(n)]


@pytest.mark.parametrize("bad", [ConsumeStatus.RECONSUME_LATER, None, "OK", ValueError("boom")])
async def test_failed_consume_is_retried_and_not_committed(bad: Any) -> None:
    seen: dict[int, int] = {}

    def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        off = msgs[0].queue_offset
        seen[off] = seen.get(off, 0) + 1
        assert threading.current_thread() is not threading.main_thread()
        if off == 1 and seen[off] < 3:
            if isinstance(bad, Exception):
                raise bad
            return bad
        return ConsumeStatus.CONSUME_SUCCESS

    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 4), 1, 0.01)
    msgs = _msgs(3)
    ctx = _context(msgs)
    svc.submit(ctx, msgs)
    await _until(lambda: svc.consumed_count == 2)  # 0 and 2 acknowledged
    assert _committed(ctx) == 1 and ctx.pq.msg_count == 1  # message 1 is still in flight
    await _until(lambda: svc.consumed_count == 3)
    assert _committed(ctx) == 3 and seen[1] == 3 and msgs[1].reconsume_times == 2
    await svc.shutdown(1.0)


async def test_async_listener_runs_on_loop_in_batches() -> None:
    batches: list[list[int]] = []

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        assert ctx.message_queue == MQ
        batches.append([m.queue_offset for m in msgs])
        return ConsumeStatus.CONSUME_SUCCESS

    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 2), 4, 0.01)
    msgs = _msgs(10)
    ctx = _context(msgs)
    svc.submit(ctx, msgs)
    await _until(lambda: _committed(ctx) == 10)
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    await svc.shutdown(1.0)


async def test_orderly_in_order_with_suspend() -> None:
    order: list[int] = []
    suspended = set()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        off = msgs[0].queue_offset
        if off % 3 == 0 and off not in suspended:
            suspended.add(off)
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        order.append(off)
        return ConsumeOrderlyStatus.SUCCESS

    svc = OrderlyConsumeService(ListenerRunner(listener, 1, 4), 1, 0.01)
    ctx = _context(_msgs(10), locked=True)
    svc.submit(ctx)
    await _until(lambda: _committed(ctx) == 10)
    assert order == list(range(10))
    assert suspended == {0, 3, 6, 9}
    await svc.shutdown(1.0)


class FakeBroker:
    """A send-back target: records (body, delay level); refuses while ``refuse`` is set."""

    def __init__(self, refuse: int = 0) -> None:
        self.refuse = refuse
        self.sent: list[tuple[bytes, int]] = []

    async def __call__(self, msg: MessageExt, mq: MessageQueue, delay_level: int) -> None:
        if self.refuse:
            self.refuse -= 1
            raise MQBrokerError(16, "refused", "addr")
        self.sent.append((bytes(msg.body), delay_level))


async def test_failed_messages_go_back_with_the_level_the_context_asks_for() -> None:
    def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        if msgs[0].queue_offset == 1:
            ctx.delay_level_when_next_consume = 5
            return ConsumeStatus.RECONSUME_LATER
        if msgs[0].queue_offset == 2:
            return None
        return ConsumeStatus.CONSUME_SUCCESS

    broker = FakeBroker()
    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 2), 1, 0.01, send_back=broker)
    msgs = _msgs(3)
    ctx = _context(msgs)
    svc.submit(ctx, msgs)
    await _until(lambda: _committed(ctx) == 3)  # sent-back messages are not held any more
    assert sorted(broker.sent) == [(b"1", 5), (b"2", 0)]
    assert svc.consumed_count == 1 and svc.sent_back_count == 2 and ctx.pq.msg_count == 0
    await svc.shutdown(1.0)


async def test_a_refused_send_back_is_consumed_again_locally() -> None:
    seen: list[int] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        seen.append(msgs[0].reconsume_times)
        return ConsumeStatus.CONSUME_SUCCESS if len(seen) > 1 else ConsumeStatus.RECONSUME_LATER

    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 2), 1, 0.01, send_back=FakeBroker(refuse=1))
    msgs = _msgs(1)
    ctx = _context(msgs)
    svc.submit(ctx, msgs)
    await _until(lambda: _committed(ctx) == 1)
    assert seen == [0, 1] and svc.sent_back_count == 0 and svc.consumed_count == 1
    await svc.shutdown(1.0)


async def test_broadcasting_failures_are_skipped() -> None:
    calls = []

    def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        calls.append(msgs[0].queue_offset)
        return ConsumeStatus.RECONSUME_LATER

    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 2), 1, 0.01, drop_failures=True)
    msgs = _msgs(2)
    ctx = _context(msgs)
    svc.submit(ctx, msgs)
    await _until(lambda: _committed(ctx) == 2)
    assert sorted(calls) == [0, 1] and svc.consumed_count == 0
    await svc.shutdown(1.0)


async def test_orderly_dead_letters_after_the_limit_and_moves_on() -> None:
    order: list[tuple[int, int]] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        order.append((msgs[0].queue_offset, msgs[0].reconsume_times))
        if msgs[0].queue_offset == 1:
            raise RuntimeError("poison")
        return ConsumeOrderlyStatus.SUCCESS

    broker = FakeBroker(refuse=1)  # the first dead-letter attempt fails: one more local retry
    svc = OrderlyConsumeService(
        ListenerRunner(listener, 1, 2), 1, 0.01, max_reconsume_times=2, send_back=broker
    )
    ctx = _context(_msgs(3), locked=True)
    svc.submit(ctx)
    await _until(lambda: _committed(ctx) == 3)
    assert order == [(0, 0), (1, 0), (1, 1), (1, 2), (1, 3), (2, 0)]
    assert broker.sent == [(b"1", -1)] and svc.sent_back_count == 1 and svc.consumed_count == 2
    await svc.shutdown(1.0)
