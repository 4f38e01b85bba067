"""Runs the user's listener over pulled messages: concurrently or in queue order.

Owns the listener seam. Sync listeners run in a bounded thread pool (``consume_thread_min..max``);
``async def`` listeners run on the event loop, at most ``consume_thread_max`` at a time. Results
always come back to the loop, which alone touches process queues and the offset table.

Concurrent: each pulled batch becomes one job that calls the listener on chunks of
``consume_message_batch_max_size`` messages. A chunk whose listener returned anything but
``ConsumeStatus.CONSUME_SUCCESS`` (RECONSUME_LATER, None, an exception, another value) stays in the
process queue, so its offset is never committed, and is consumed again after ``reconsume_delay``
seconds with ``reconsume_times`` increased.

Orderly: one task per queue takes messages in offset order and calls the listener one batch at a
time while the broker lock is held; ``SUSPEND_CURRENT_QUEUE_A_MOMENT`` (or a failure) puts the
batch back and retries after ``suspend_current_queue_time``.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import operator
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Any

from rocketpy.client.consumer_types import ConsumeOrderlyStatus, ConsumeStatus
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.client.queue_context import QueueContext
from rocketpy.errors import MQClientError
from rocketpy.message import MessageExt, MessageQueue

log = logging.getLogger("rocketpy.client.consume")

#: Orderly: give the queue up after consuming this long without a break (RocketMQ: 60 s).
MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0


class ConsumeContext:
    """What a listener learns about the batch it consumes.

    Attributes:
        message_queue: the queue the messages come from.
        suspend_current_queue_time: orderly only: back-off in seconds after a suspend (settable).
    """

    __slots__ = ("message_queue", "suspend_current_queue_time")

    def __init__(self, message_queue: MessageQueue, suspend_current_queue_time: float = 1.0) -> None:
        self.message_queue = message_queue
        self.suspend_current_queue_time = suspend_current_queue_time


#: The user's listener: ``(msgs, context) -> ConsumeStatus`` (or ``ConsumeOrderlyStatus``); may be ``async``.
Listener = Callable[[list[MessageExt], ConsumeContext], Any]


def is_async_listener(listener: Listener) -> bool:
    """True for ``async def`` functions and objects with an ``async def __call__``."""
    if inspect.iscoroutinefunction(listener):
        return True
    call = getattr(listener, "__call__", None)  # noqa: B004
    return call is not None and inspect.iscoroutinefunction(call)


def _describe(result: Any, expected: type[Enum]) -> str:
    names = " or ".join(f"{expected.__name__}.{m.name}" for m in expected)
    return f"the listener returned {result!r}; return {names}"


#: ``map(operator.is_, results, _SUCCESSES)``: identity (not str equality) with CONSUME_SUCCESS, in C.
_SUCCESSES = itertools.repeat(ConsumeStatus.CONSUME_SUCCESS)

#: Result of a chunk that was not handed to the listener because its queue was released meanwhile.
SKIPPED = object()


def _call_chunks(
    listener: Listener, chunks: list[list[MessageExt]], ctx: ConsumeContext, pq: ProcessQueue
) -> list[Any]:
    """Worker-thread side: call a sync listener on each chunk, capturing errors as results."""
    results: list[Any] = []
    for chunk in chunks:
        if pq.dropped:  # released to another consumer: do not consume twice
            results.append(SKIPPED)
            continue
        try:
            results.append(listener(chunk, ctx))
        except Exception as exc:  # a user error must not kill the worker; reported on the loop
            results.append(exc)
    return results


class ListenerRunner:
    """Calls the listener wherever it belongs (thread pool or loop), bounded in both cases."""

    def __init__(self, listener: Listener, thread_min: int, thread_max: int) -> None:
        assert 1 <= thread_min <= thread_max
        self.listener = listener
        self.is_async = is_async_listener(listener)
        self._executor: ThreadPoolExecutor | None = None
        if not self.is_async:
            self._executor = ThreadPoolExecutor(thread_max, thread_name_prefix="rocketpy-consume")
        self._async_slots = asyncio.Semaphore(thread_max)

    async def run(self, chunks: list[list[MessageExt]], ctx: ConsumeContext, pq: ProcessQueue) -> list[Any]:
        """Call the listener once per chunk; exceptions are returned in place of results.

        Chunks of a queue dropped meanwhile are not consumed (``SKIPPED``).
        """
        if self._executor is not None:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, _call_chunks, self.listener, chunks, ctx, pq)
        results: list[Any] = []
        async with self._async_slots:
            for chunk in chunks:
                if pq.dropped:
                    results.append(SKIPPED)
                    continue
                try:
                    results.append(await self.listener(chunk, ctx))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    results.append(exc)
        return results

    def shutdown(self) -> None:
        """Stop the thread pool (running calls finish in their threads)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def report_failure(result: Any, expected: type[Enum], mq: MessageQueue, count: int) -> None:
    """Log a failed consume in one line that says what happened and what to do."""
    if isinstance(result, BaseException):
        log.warning(
            "listener raised on %d message(s) of %s; they will be consumed again", count, mq, exc_info=result
        )
    elif result is None or not isinstance(result, expected):
        log.error("%s (consumed again later)", MQClientError(_describe(result, expected)))


class ConcurrentConsumeService:
    """Concurrent consumption: batches in parallel, failures consumed again after a delay.

    Args:
        runner: calls the listener.
        batch_max_size: ``consume_message_batch_max_size`` (messages per listener call).
        reconsume_delay_s: wait before a failed chunk is consumed again.
    """

    def __init__(self, runner: ListenerRunner, batch_max_size: int, reconsume_delay_s: float) -> None:
        self._runner = runner
        self._batch_max_size = batch_max_size
        self._reconsume_delay_s = reconsume_delay_s
        self._tasks: dict[asyncio.Task[None], MessageQueue] = {}  # task -> its queue
        self._delayed: set[asyncio.Task[None]] = set()  # retries still waiting for their delay
        self._closing = False
        self.consumed_count = 0

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
        size = self._batch_max_size
        chunks = [msgs[i : i + size] for i in range(0, len(msgs), size)]
        results = await self._runner.run(chunks, ConsumeContext(ctx.mq), pq)
        if sum(map(operator.is_, results, _SUCCESSES)) == len(chunks):  # the usual case: all consumed
            self._acknowledge(ctx, msgs)
            return
        failed: list[MessageExt] = []
        done: list[MessageExt] = []
        for chunk, result in zip(chunks, results, strict=True):
            if result is SKIPPED:
                continue
            if result is ConsumeStatus.CONSUME_SUCCESS:
                done.extend(chunk)
            else:
                if result is not ConsumeStatus.RECONSUME_LATER:
                    report_failure(result, ConsumeStatus, ctx.mq, len(chunk))
                failed.extend(chunk)
        self._acknowledge(ctx, done)
        if failed and not pq.dropped and not self._closing:
            for msg in failed:
                msg.reconsume_times += 1
            self.submit(ctx, failed, self._reconsume_delay_s)

    def _acknowledge(self, ctx: QueueContext, done: list[MessageExt]) -> None:
        if not ctx.released:  # acknowledgements after the release commit are not counted either
            self.consumed_count += len(done)
        ctx.acknowledge(done)

    async def shutdown(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for running batches (failures not retried), then cancel the rest."""
        self._closing = True
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=timeout_s)
            for task in pending:
                task.cancel()
        self._runner.shutdown()


class OrderlyConsumeService:
    """Orderly consumption: one task per queue, one batch at a time, in offset order.

    Args:
        runner: calls the listener.
        batch_max_size: ``consume_message_batch_max_size`` (messages per listener call).
        suspend_s: ``suspend_current_queue_time``, the default back-off after a suspend or failure.
    """

    def __init__(self, runner: ListenerRunner, batch_max_size: int, suspend_s: float) -> None:
        self._runner = runner
        self._batch_max_size = batch_max_size
        self._suspend_s = suspend_s
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self.consumed_count = 0

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
            [result] = await self._runner.run([msgs], cctx, pq)
            if result is SKIPPED:
                pq.put_back_taken()
                return
            if result is ConsumeOrderlyStatus.SUCCESS:
                self.consumed_count += len(msgs)
                ctx.commit_taken()
                continue
            if result is not ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                report_failure(result, ConsumeOrderlyStatus, mq, len(msgs))
            for msg in msgs:
                msg.reconsume_times += 1
            pq.put_back_taken()
            self._retry_later(ctx, max(cctx.suspend_current_queue_time, 0.01))
            return

    def _retry_later(self, ctx: QueueContext, delay_s: float) -> None:
        self._tasks.pop(ctx.mq, None)
        self.submit(ctx, None, delay_s)

    async def wait_queue_idle(self, mq: MessageQueue, timeout_s: float) -> None:
        """Wait (bounded) for the queue's current listener call to finish; used before unlocking."""
        task = self._tasks.pop(mq, None)
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
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


#: Either consume service (the push consumer picks one by ``orderly``).
ConsumeService = ConcurrentConsumeService | OrderlyConsumeService
