"""Consume services against a recording consumer: failures retried, never acknowledged; orderly order."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from rocketpy.client.consume_service import ConcurrentConsumeService, ListenerRunner, OrderlyConsumeService
from rocketpy.client.consumer_types import ConsumeOrderlyStatus, ConsumeStatus
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.message import MessageExt, MessageQueue

MQ = MessageQueue("T", "b", 0)


class Recorder:
    """Plays the PushConsumer side of the consume services and records acknowledgements."""

    def __init__(self, batch: int = 1) -> None:
        self.consume_message_batch_max_size = batch
        self.reconsume_delay = 0.01
        self.suspend_current_queue_time = 0.01
        self.acked: list[int] = []
        self.committed = -1

    def on_consumed(self, pq: ProcessQueue, mq: Any, done: list[Any], failed: int) -> None:
        self.acked += [m.queue_offset for m in done]
        self.committed = pq.remove(done)

    def on_orderly_committed(self, pq: ProcessQueue, mq: Any, offset: int, count: int) -> None:
        self.committed = offset

    def may_consume_orderly(self, pq: ProcessQueue) -> bool:
        return True


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

    rec = Recorder()
    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 4), rec)
    pq = ProcessQueue()
    msgs = _msgs(3)
    pq.put(msgs)
    svc.submit(pq, MQ, msgs)
    await _until(lambda: 0 in rec.acked and 2 in rec.acked)
    assert rec.committed == 1  # message 1 is still in flight
    await _until(lambda: 1 in rec.acked)
    assert rec.committed == 3 and seen[1] == 3 and msgs[1].reconsume_times == 2
    await svc.shutdown(1.0)


async def test_async_listener_runs_on_loop_in_batches() -> None:
    batches: list[list[int]] = []

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        assert ctx.message_queue == MQ
        batches.append([m.queue_offset for m in msgs])
        return ConsumeStatus.CONSUME_SUCCESS

    rec = Recorder(batch=4)
    svc = ConcurrentConsumeService(ListenerRunner(listener, 1, 2), rec)
    pq = ProcessQueue()
    msgs = _msgs(10)
    pq.put(msgs)
    svc.submit(pq, MQ, msgs)
    await _until(lambda: rec.committed == 10)
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

    rec = Recorder()
    svc = OrderlyConsumeService(ListenerRunner(listener, 1, 4), rec)
    pq = ProcessQueue()
    pq.put(_msgs(10))
    svc.submit(pq, MQ)
    await _until(lambda: rec.committed == 10)
    assert order == list(range(10))
    assert suspended == {0, 3, 6, 9}
    await svc.shutdown(1.0)
