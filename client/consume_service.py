"""Runs the user's listener over pulled messages: concurrently or in queue order.

The listener seam (context, runner) is ``client/listener.py``; orderly consumption is
``client/consume_orderly.py``.

Concurrent: each pulled batch becomes one job that calls the listener on chunks of
``consume_message_batch_max_size`` messages. A chunk whose listener returned anything but
``ConsumeStatus.CONSUME_SUCCESS`` (RECONSUME_LATER, None, an exception, another value) failed.
CLUSTERING consumers send each failed message back to its broker (``client/send_back.py``; the
broker redelivers it through ``%RETRY%{group}`` at the level the context asks for, or dead-letters
it), and it leaves the process queue (not counted as consumed); a message whose send-back fails (and
every failed message when no send-back is given) stays in the process queue, so its offset is never
committed, and is consumed again after ``reconsume_delay`` seconds with ``reconsume_times`` increased.
BROADCASTING consumers do not retry (RocketMQ's rule): a failed message is logged and skipped.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import operator
import time

from rocketpy.client.consume_orderly import OrderlyConsumeService
from rocketpy.client.consumer_types import ConsumeStatus
from rocketpy.client.listener import SKIPPED, ConsumeContext, Listener, ListenerRunner, report_failure
from rocketpy.client.queue_context import QueueContext
from rocketpy.client.running_info import ConsumeStatsTable
from rocketpy.client.send_back import SendBack, restore_retry_messages
from rocketpy.errors import RocketpyError
from rocketpy.message import MessageExt, MessageQueue

__all__ = [
    "ConcurrentConsumeService",
    "ConsumeContext",
    "ConsumeService",
    "Listener",
    "ListenerRunner",
    "OrderlyConsumeService",
]

log = logging.getLogger("rocketpy.client.consume")

#: ``map(operator.is_, results, _SUCCESSES)``: identity (not str equality) with CONSUME_SUCCESS, in C.
_SUCCESSES = itertools.repeat(ConsumeStatus.CONSUME_SUCCESS)


class ConcurrentConsumeService:
    """Concurrent consumption: batches in parallel; failures sent back, or consumed again after a delay.

    Args:
        runner: calls the listener.
        batch_max_size: ``consume_message_batch_max_size`` (messages per listener call).
        reconsume_delay_s: wait before a failed chunk is consumed again locally.
        send_back: hands failed messages back to their broker (CLUSTERING); None: local retry only.
        retry_topic: the group's ``%RETRY%`` topic: its messages get their original topic back.
        drop_failures: BROADCASTING: failed messages are logged and skipped, not retried.
    """

    def __init__(
        self,
        runner: ListenerRunner,
        batch_max_size: int,
        reconsume_delay_s: float,
        *,
        send_back: SendBack | None = None,
        retry_topic: str | None = None,
        drop_failures: bool = False,
    ) -> None:
        self._runner = runner
        self._batch_max_size = batch_max_size
        self._reconsume_delay_s = reconsume_delay_s
        self._send_back = send_back
        self._retry_topic = retry_topic
        self._drop_failures = drop_failures
        self._tasks: dict[asyncio.Task[None], MessageQueue] = {}  # task -> its queue
        self._delayed: set[asyncio.Task[None]] = set()  # retries still waiting for their delay
        self._closing = False
        self.consumed_count = 0
        #: per-topic counters of the consumer (``client.running_info``), set by the consumer
        self.stats: ConsumeStatsTable | None = None
        #: Messages handed back to the broker (retry topic or dead-letter queue) so far.
        self.sent_back_count = 0

    def submit(self, ctx: QueueContext, msgs: list[MessageExt], delay_s: float = 0.0) -> None:
        """Consume ``msgs`` (already in ``ctx.pq``) in the background."""
        task = asyncio.get_running_loop().create_task(self._consume(ctx, msgs, delay_s))
        self._tasks[task] = ctx.mq
        if delay_s > 0:
            self._delayed.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        self._delayed.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("consume task failed", exc_info=task.exception())

    async def wait_queue_idle(self, mq: MessageQueue, timeout_s: float) -> None:
        """Let the listener calls running for ``mq`` finish (bounded); pending retries are cancelled."""
        tasks = [t for t, q in self._tasks.items() if q == mq]
        for task in tasks:
            if task in self._delayed:
                task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    async def _consume(self, ctx: QueueContext, msgs: list[MessageExt], delay_s: float) -> None:
        pq = ctx.pq
        if delay_s > 0:
            await asyncio.sleep(delay_s)
            task = asyncio.current_task()
            if task is not None:
                self._delayed.discard(task)  # type: ignore[arg-type]
        if pq.dropped or (delay_s > 0 and self._closing):
            return
        if ctx.mq.topic == self._retry_topic:
            restore_retry_messages(msgs)
        size = self._batch_max_size
        chunks = [msgs[i : i + size] for i in range(0, len(msgs), size)]
        contexts = [ConsumeContext(ctx.mq) for _ in chunks]
        t0 = time.monotonic()
        results = await self._runner.run(chunks, contexts, pq)
        ok_chunks = sum(map(operator.is_, results, _SUCCESSES))
        if self.stats is not None:
            ok = sum(
                len(c) for c, r in zip(chunks, results, strict=True) if r is ConsumeStatus.CONSUME_SUCCESS
            )
            self.stats.on_consume(ctx.mq.topic, ok, len(msgs) - ok, (time.monotonic() - t0) * 1000)
        if ok_chunks == len(chunks):  # the usual case: all consumed
            self._acknowledge(ctx, msgs)
            return
        failed: list[tuple[MessageExt, int]] = []  # (message, delay level asked for)
        done: list[MessageExt] = []
        for chunk, result, cctx in zip(chunks, results, contexts, strict=True):
            if result is SKIPPED:
                continue
            if result is ConsumeStatus.CONSUME_SUCCESS:
                done.extend(chunk)
            else:
                if result is not ConsumeStatus.RECONSUME_LATER:
                    report_failure(result, ConsumeStatus, ctx.mq, len(chunk))
                failed.extend((m, cctx.delay_level_when_next_consume) for m in chunk)
        handed, local = await self._hand_back(ctx, failed)
        self._acknowledge(ctx, done, handed)
        if local and not pq.dropped and not self._closing:
            for msg in local:
                msg.reconsume_times += 1
            self.submit(ctx, local, self._reconsume_delay_s)

    async def _hand_back(
        self, ctx: QueueContext, failed: list[tuple[MessageExt, int]]
    ) -> tuple[list[MessageExt], list[MessageExt]]:
        """Send failed messages back (or skip them, BROADCASTING).

        Returns:
            (the messages the broker took or that were skipped, those to consume again locally)
        """
        if not failed:
            return [], []
        if self._drop_failures:
            log.warning(
                "%d message(s) of %s failed and are skipped: broadcasting consumers do not retry",
                len(failed),
                ctx.mq,
            )
            return [m for m, _ in failed], []
        if self._send_back is None or ctx.pq.dropped:
            return [], [m for m, _ in failed]
        taken = await asyncio.gather(*(self._send_back_one(ctx.mq, m, level) for m, level in failed))
        handed: list[MessageExt] = []
        local: list[MessageExt] = []
        for (msg, _), ok in zip(failed, taken, strict=True):
            (handed if ok else local).append(msg)
        self.sent_back_count += len(handed)
        return handed, local

    async def _send_back_one(self, mq: MessageQueue, msg: MessageExt, delay_level: int) -> bool:
        assert self._send_back is not None
        try:
            await self._send_back(msg, mq, delay_level)
        except RocketpyError as exc:
            log.warning(
                "cannot send message %s of %s back to the broker (%s); consuming it again here in %.1f s",
                msg.msg_id,
                mq,
                exc,
                self._reconsume_delay_s,
            )
            return False
        return True

    def _acknowledge(
        self, ctx: QueueContext, done: list[MessageExt], handed: list[MessageExt] | None = None
    ) -> None:
        """``done`` were consumed, ``handed`` went back to the broker: none is held any more."""
        if not ctx.released:  # acknowledgements after the release commit are not counted either
            self.consumed_count += len(done)
        ctx.acknowledge(done + handed if handed else done)

    async def shutdown(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for running batches (failures not retried), then cancel the rest."""
        self._closing = True
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=timeout_s)
            for task in pending:
                task.cancel()
        self._runner.shutdown()


#: Either consume service (the push consumer picks one by ``orderly``).
ConsumeService = ConcurrentConsumeService | OrderlyConsumeService
