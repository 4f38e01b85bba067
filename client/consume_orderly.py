"""Orderly consumption: one task per queue, one batch at a time, in offset order.

Owns ``OrderlyConsumeService``: while the queue's broker lock is held (CLUSTERING), the queue's task
takes messages in offset order and calls the listener one batch at a time;
``SUSPEND_CURRENT_QUEUE_A_MOMENT`` (or a failure) puts the batch back and retries it after
``suspend_current_queue_time``. Once every message of a failed batch was retried
``max_reconsume_times`` times, the batch goes to the group's dead-letter queue and the queue moves on
(when that send fails, the batch is retried locally again).
"""

from __future__ import annotations

import asyncio
import logging
import time

from rocketpy.client.consumer_types import ConsumeOrderlyStatus
from rocketpy.client.listener import SKIPPED, ConsumeContext, ListenerRunner, report_failure
from rocketpy.client.queue_context import QueueContext
from rocketpy.client.running_info import ConsumeStatsTable
from rocketpy.client.send_back import DLQ_DELAY_LEVEL, SendBack
from rocketpy.errors import RocketpyError
from rocketpy.message import MessageExt, MessageQueue

log = logging.getLogger("rocketpy.client.consume")

#: Give the queue up after consuming this long without a break (RocketMQ: 60 s).
MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0


class OrderlyConsumeService:
    """Orderly consumption: one task per queue, one batch at a time, in offset order.

    Args:
        runner: calls the listener.
        batch_max_size: ``consume_message_batch_max_size`` (messages per listener call).
        suspend_s: ``suspend_current_queue_time``, the default back-off after a suspend or failure.
        max_reconsume_times: local retries of a failed batch before it is dead-lettered (< 0: no limit).
        send_back: hands a batch past the limit to the group's dead-letter queue (None: no limit).
    """

    def __init__(
        self,
        runner: ListenerRunner,
        batch_max_size: int,
        suspend_s: float,
        *,
        max_reconsume_times: int = -1,
        send_back: SendBack | None = None,
    ) -> None:
        self._runner = runner
        self._batch_max_size = batch_max_size
        self._suspend_s = suspend_s
        self._max_reconsume_times = max_reconsume_times
        self._send_back = send_back
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self.consumed_count = 0
        #: per-topic counters of the consumer (``client.running_info``), set by the consumer
        self.stats: ConsumeStatsTable | None = None
        #: Messages sent to the dead-letter queue so far.
        self.sent_back_count = 0

    def submit(self, ctx: QueueContext, msgs: list[MessageExt] | None = None, delay_s: float = 0.0) -> None:
        """Make sure the queue's consume task runs (messages are taken from ``ctx.pq``)."""
        task = self._tasks.get(ctx.mq)
        if task is not None and not task.done():
            return
        task = asyncio.get_running_loop().create_task(self._consume_queue(ctx, delay_s))
        self._tasks[ctx.mq] = task

    async def _consume_queue(self, ctx: QueueContext, delay_s: float) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        started = time.monotonic()
        pq, mq = ctx.pq, ctx.mq
        while not pq.dropped and pq.has_waiting():
            if not pq.holds_lock():
                self._retry_later(ctx, 0.1)
                return
            if time.monotonic() - started > MAX_TIME_CONSUME_CONTINUOUSLY_S:
                self._retry_later(ctx, 0.01)
                return
            msgs = pq.take(self._batch_max_size)
            cctx = ConsumeContext(mq, self._suspend_s)
            t0 = time.monotonic()
            [result] = await self._runner.run([msgs], [cctx], pq)
            if self.stats is not None:
                ok = result is ConsumeOrderlyStatus.SUCCESS
                self.stats.on_consume(mq.topic, len(msgs) if ok else 0, 0 if ok else len(msgs),
                                      (time.monotonic() - t0) * 1000)  # fmt: skip
            if result is SKIPPED:
                pq.put_back_taken()
                return
            if result is ConsumeOrderlyStatus.SUCCESS:
                self.consumed_count += len(msgs)
                ctx.commit_taken()
                continue
            if result is not ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                report_failure(result, ConsumeOrderlyStatus, mq, len(msgs))
            if self._past_limit(msgs) and await self._dead_letter(mq, msgs):
                ctx.commit_taken()  # the queue moves on; the batch waits in the DLQ
                continue
            for msg in msgs:
                msg.reconsume_times += 1
            pq.put_back_taken()
            self._retry_later(ctx, max(cctx.suspend_current_queue_time, 0.01))
            return

    def _past_limit(self, msgs: list[MessageExt]) -> bool:
        limit = self._max_reconsume_times
        return self._send_back is not None and limit >= 0 and all(m.reconsume_times >= limit for m in msgs)

    async def _dead_letter(self, mq: MessageQueue, msgs: list[MessageExt]) -> bool:
        """Send ``msgs`` to the dead-letter queue; False when one of them did not get there."""
        assert self._send_back is not None
        for msg in msgs:
            try:
                await self._send_back(msg, mq, DLQ_DELAY_LEVEL)
            except RocketpyError as exc:
                log.warning(
                    "cannot send message %s of %s to the dead-letter queue (%s); retrying it here",
                    msg.msg_id,
                    mq,
                    exc,
                )
                return False
            self.sent_back_count += 1
        log.warning(
            "%d message(s) of %s failed %d times and went to the dead-letter queue",
            len(msgs),
            mq,
            self._max_reconsume_times + 1,
        )
        return True

    def _retry_later(self, ctx: QueueContext, delay_s: float) -> None:
        self._tasks.pop(ctx.mq, None)
        self.submit(ctx, None, delay_s)

    async def wait_queue_idle(self, mq: MessageQueue, timeout_s: float) -> None:
        """Wait (bounded) for the queue's current listener call to finish; used before unlocking."""
        task = self._tasks.pop(mq, None)
        if task is None or task.done():
            return
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()

    async def shutdown(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for running queues, then cancel them."""
        tasks = [t for t in self._tasks.values() if not t.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout_s)
            for task in pending:
                task.cancel()
        self._tasks.clear()
        self._runner.shutdown()
