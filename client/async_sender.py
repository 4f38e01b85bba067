"""AsyncSender: the machinery behind ``Producer.send_async``.

Owns the bounded queue of submitted async sends, the fixed pool of long-lived sender coroutines that
serve it (no asyncio.Task per message: a task per send costs more CPU than the send path itself),
the futures handed to callers, and the user callbacks: an ``async def`` callback runs as a tracked
task on the loop, a plain function in a one-thread executor so it never blocks the loop. Invariant:
``pending`` (queued + in flight + callbacks not yet run) never exceeds ``max_pending``; submitting
beyond it raises ``MQClientError`` instead of growing memory. Every send keeps the deadline it got at
submission, so time spent queued counts against its timeout.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rocketpy.errors import MQClientError, RemotingTimeoutError

log = logging.getLogger("rocketpy.client.producer")

SendCallback = Callable[[Any, BaseException | None], Any]
#: (remaining seconds) -> awaitable result: one send with everything else already bound.
SendFn = Callable[[float], Awaitable[Any]]


class AsyncSender:
    """Runs submitted sends on ``max_senders`` coroutines and resolves their futures.

    Args:
        max_pending: bound on unfinished sends (queued, in flight, or waiting for their callback).
        max_senders: sender coroutines (= sends in flight at once through this producer).
    """

    def __init__(self, max_pending: int, max_senders: int = 256) -> None:
        assert max_pending > 0 and max_senders > 0
        self.max_pending = max_pending
        self.max_senders = max_senders
        self._queue: collections.deque[tuple[SendFn, float, asyncio.Future[Any], SendCallback | None]] = (
            collections.deque()
        )
        self._idle: collections.deque[asyncio.Future[None]] = collections.deque()
        self._senders: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._callbacks: set[asyncio.Future[Any]] = set()
        self._callbacks_queued = 0
        self._pool: ThreadPoolExecutor | None = None
        self._drained: asyncio.Event | None = None

    @property
    def pending(self) -> int:
        """Unfinished sends: queued, in flight, or with a callback still to run."""
        return len(self._queue) + self._in_flight + len(self._callbacks) + self._callbacks_queued

    def submit(self, send: SendFn, timeout: float, callback: SendCallback | None) -> asyncio.Future[Any]:
        """Queue ``send`` (called with the seconds left of ``timeout``) and return its future.

        Raises:
            MQClientError: ``max_pending`` sends are unfinished.
        """
        if self.pending >= self.max_pending:
            raise MQClientError(
                f"{self.pending} async sends are unfinished (max_async_pending={self.max_pending}):"
                " await some futures before sending more, or raise max_async_pending"
            )
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._queue.append((send, loop.time() + timeout, fut, callback))
        if self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
        elif len(self._senders) < self.max_senders:
            task = loop.create_task(self._sender_routine(), name="rocketpy-async-sender")
            self._senders.add(task)
            task.add_done_callback(self._senders.discard)
        return fut

    async def _sender_routine(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                if self._drained is not None and self._in_flight == 0:
                    self._drained.set()
                waiter: asyncio.Future[None] = loop.create_future()
                self._idle.append(waiter)
                await waiter
                continue
            send, deadline, fut, callback = self._queue.popleft()
            if fut.cancelled():
                continue
            self._in_flight += 1
            try:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise RemotingTimeoutError(
                        "async send timed out while queued: raise send_timeout or send less"
                    )
                result = await send(remaining)
            except asyncio.CancelledError:
                fut.cancel()
                raise
            except Exception as e:
                self._finish(fut, None, e, callback)
            else:
                self._finish(fut, result, None, callback)
            finally:
                self._in_flight -= 1

    def _finish(
        self, fut: asyncio.Future[Any], result: Any, err: BaseException | None, cb: SendCallback | None
    ) -> None:
        if not fut.done():
            if err is None:
                fut.set_result(result)
            else:
                fut.set_exception(err)
                if cb is not None:
                    fut.exception()  # the callback gets the error: no "never retrieved" warning at GC
        if cb is None:
            return
        if inspect.iscoroutinefunction(cb):
            task = asyncio.get_running_loop().create_task(cb(result, err))
            self._callbacks.add(task)
            task.add_done_callback(self._callback_task_done)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="rocketpy-send-callback")
        loop = asyncio.get_running_loop()
        self._callbacks_queued += 1
        done = self._pool.submit(cb, result, err)
        done.add_done_callback(lambda f: _call_soon_safe(loop, self._sync_callback_done, f))

    def _sync_callback_done(self, fut: Any) -> None:
        self._callbacks_queued -= 1
        _log_callback_error(fut)

    def _callback_task_done(self, task: asyncio.Future[Any]) -> None:
        self._callbacks.discard(task)
        _log_callback_error(task)

    async def close(self, timeout: float) -> None:  # noqa: ASYNC109 (bounded drain, then stop)
        """Wait up to ``timeout`` seconds for unfinished sends, then stop the senders."""
        if self._queue or self._in_flight:
            self._drained = asyncio.Event()
            try:
                await asyncio.wait_for(self._drained.wait(), timeout)
            except TimeoutError:
                log.warning(
                    "producer shutdown: %d async sends still unfinished after %.1fs", self.pending, timeout
                )
        if self._callbacks:
            await asyncio.wait(list(self._callbacks), timeout=timeout)
        for task in list(self._senders):
            task.cancel()
        await asyncio.gather(*self._senders, return_exceptions=True)
        for waiter in self._idle:
            waiter.cancel()
        self._idle.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        self._drained = None


def _call_soon_safe(loop: asyncio.AbstractEventLoop, fn: Callable[[Any], None], arg: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, arg)
    except RuntimeError:  # the loop closed after shutdown; nothing left to account for
        _log_callback_error(arg)


def _log_callback_error(fut: Any) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("send_async callback raised: %r", fut.exception())
