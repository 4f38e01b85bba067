"""The listener seam of the push consumer: the context a listener gets, and where it runs.

Owns ``ConsumeContext``, ``ListenerRunner`` (sync listeners in a bounded thread pool of
``consume_thread_min..max`` threads; ``async def`` listeners on the event loop, at most
``consume_thread_max`` at a time; results always come back to the loop, which alone touches process
queues and offsets; a listener's exception is returned as its result) and the one-line report of a
failed call.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import TYPE_CHECKING, Any

from rocketpy.client.process_queue import ProcessQueue
from rocketpy.errors import MQClientError
from rocketpy.message import MessageExt, MessageQueue

if TYPE_CHECKING:
    from rocketpy.client.trace import ConsumeTracer

log = logging.getLogger("rocketpy.client.consume")


class ConsumeContext:
    """What a listener learns about the batch it consumes.

    Attributes:
        message_queue: the queue the messages come from.
        suspend_current_queue_time: orderly only: back-off in seconds after a suspend (settable).
        delay_level_when_next_consume: concurrent only: the delay level of the redelivery if this
            call fails (settable; 0: the broker's schedule ``3 + reconsume_times``; -1: straight to
            the dead-letter queue).
    """

    __slots__ = ("delay_level_when_next_consume", "message_queue", "suspend_current_queue_time")

    def __init__(self, message_queue: MessageQueue, suspend_current_queue_time: float = 1.0) -> None:
        self.message_queue = message_queue
        self.suspend_current_queue_time = suspend_current_queue_time
        self.delay_level_when_next_consume = 0


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


#: Result of a chunk that was not handed to the listener because its queue was released meanwhile.
SKIPPED = object()


def _call_chunks(
    listener: Listener,
    chunks: list[list[MessageExt]],
    contexts: list[ConsumeContext],
    pq: ProcessQueue,
    times: list[float] | None = None,
) -> list[Any]:
    """Worker-thread side: call a sync listener on each chunk, capturing errors as results.

    With ``times`` (message trace), the ``time.time()`` before the first chunk and after each chunk
    are appended to it (chunk ``i`` ran from ``times[i]`` to ``times[i + 1]``).
    """
    results: list[Any] = []
    if times is not None:
        times.append(time.time())
    for chunk, ctx in zip(chunks, contexts, strict=True):
        if pq.dropped:  # released to another consumer: do not consume twice
            results.append(SKIPPED)
        else:
            try:
                results.append(listener(chunk, ctx))
            except Exception as exc:  # a user error must not kill the worker; reported on the loop
                results.append(exc)
        if times is not None:
            times.append(time.time())
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
        #: message trace (``client/trace.py`` ``ConsumeTracer``): SubBefore/SubAfter per call
        self.tracer: ConsumeTracer | None = None

    async def run(
        self, chunks: list[list[MessageExt]], contexts: list[ConsumeContext], pq: ProcessQueue
    ) -> list[Any]:
        """Call the listener once per chunk (with its context); exceptions are returned in place of
        results.

        Chunks of a queue dropped meanwhile are not consumed (``SKIPPED``).
        """
        tracer = self.tracer
        if tracer is None:
            return await self._run(chunks, contexts, pq, None)
        token = tracer.before(chunks)
        times: list[float] = []
        results = await self._run(chunks, contexts, pq, times)
        tracer.after(chunks, token, results, times)
        return results

    async def _run(
        self,
        chunks: list[list[MessageExt]],
        contexts: list[ConsumeContext],
        pq: ProcessQueue,
        times: list[float] | None,
    ) -> list[Any]:
        if self._executor is not None:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._executor, _call_chunks, self.listener, chunks, contexts, pq, times
            )
        results: list[Any] = []
        mark = None if times is None else times.append
        clock = time.time
        async with self._async_slots:
            if mark is not None:
                mark(clock())
            for chunk, ctx in zip(chunks, contexts, strict=True):
                if pq.dropped:
                    results.append(SKIPPED)
                else:
                    try:
                        results.append(await self.listener(chunk, ctx))
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        results.append(exc)
                if mark is not None:
                    mark(clock())
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
