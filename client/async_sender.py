"""AsyncSender: the machinery behind ``Producer.send_async``.

Owns the bounded queue of submitted async sends, the futures handed to callers, and the user
callbacks: an ``async def`` callback runs as a tracked task on the loop, a plain function in a
one-thread executor so it never blocks the loop. Plain callbacks go to that thread a loop tick's
worth at a time, in the order their sends finished: one hand-off (and one wake-up of the loop
when they have run) per tick instead of per send, which costs ~10 µs of thread traffic a message.

A send is *launched* at once when fewer than ``max_senders`` are in flight and nothing is queued;
otherwise it waits in the queue and is launched when an earlier send finishes (FIFO). Launching
calls the send function with the seconds left of its deadline; it returns either a coroutine
(run as a task: route lookups, connects, retries) or a ``DirectSend`` (the producer's is
``client.send_path.Attempt``): a request already written whose response future gets a done
callback, so the common send costs no task, no coroutine frame and no wake-up of a sender.
Invariants: ``pending`` (queued + in flight + callbacks not yet run) never exceeds ``max_pending``,
submitting beyond it raises ``MQClientError``; at most ``max_senders`` sends are in flight; every
send keeps the deadline it got at submission, so time spent queued counts against its timeout.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import inspect
import logging
import types
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rocketpy.errors import MQClientError, RemotingTimeoutError

log = logging.getLogger("rocketpy.client.producer")

SendCallback = Callable[[Any, BaseException | None], Any]


class DirectSend:
    """A request already on the wire; subclasses say how its response becomes the send's result.

    The sender binds ``_on_response`` to ``future`` (one bound method per send: cheaper, and less
    work for the garbage collector, than closures). ``finish(response_future)`` returns the result,
    raises the send's error, or returns a coroutine that continues the send (retries), which the
    sender then runs as a task.
    """

    __slots__ = ("_callback", "_fut", "_sender", "future")
    _sender: AsyncSender
    _fut: asyncio.Future[Any]
    _callback: SendCallback | None

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self.future = future

    def finish(self, done: asyncio.Future[Any]) -> Any:
        """The send's result from its completed response future (see the class docstring)."""
        raise NotImplementedError

    def _on_response(self, done: asyncio.Future[Any]) -> None:
        self._sender._done(done, self, self._fut, self._callback)


#: (remaining seconds) -> a coroutine of the result, or a DirectSend.
SendFn = Callable[[float], "Coroutine[Any, Any, Any] | DirectSend"]
_Item = tuple[SendFn, float, "asyncio.Future[Any]", "SendCallback | None"]


class AsyncSender:
    """Launches submitted sends (at most ``max_senders`` in flight) and resolves their futures.

    Args:
        max_pending: bound on unfinished sends (queued, in flight, or waiting for their callback).
        max_senders: sends in flight at once through this producer.
    """

    def __init__(self, max_pending: int, max_senders: int = 256) -> None:
        assert max_pending > 0 and max_senders > 0
        self.max_pending = max_pending
        self.max_senders = max_senders
        self._queue: collections.deque[_Item] = collections.deque()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._in_flight = 0
        self._callbacks: set[asyncio.Future[Any]] = set()
        self._ready: list[tuple[SendCallback, Any, BaseException | None]] = []  # plain, next hand-off
        self._pool_calls: set[concurrent.futures.Future[Any]] = set()  # hand-offs not finished
        self._plain_unfinished = 0  # plain callbacks waiting for a hand-off or running in it
        self._pool: ThreadPoolExecutor | None = None
        self._drained: asyncio.Event | None = None

    @property
    def pending(self) -> int:
        """Unfinished sends: queued, in flight, or with a callback still to run."""
        return len(self._queue) + self._in_flight + len(self._callbacks) + self._plain_unfinished

    def submit(self, send: SendFn, timeout: float, callback: SendCallback | None) -> asyncio.Future[Any]:
        """Launch (or queue) ``send``, called with the seconds left of ``timeout``; return its future.

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
        if self._queue or self._in_flight >= self.max_senders:
            self._queue.append((send, loop.time() + timeout, fut, callback))
        else:
            self._launch(send, loop.time() + timeout, fut, callback, loop)
        return fut

    def _launch(
        self,
        send: SendFn,
        deadline: float,
        fut: asyncio.Future[Any],
        callback: SendCallback | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        remaining = deadline - loop.time()
        if remaining <= 0:
            err = RemotingTimeoutError("async send timed out while queued: raise send_timeout or send less")
            self._finish(fut, None, err, callback)
            return
        try:
            started = send(remaining)
        except Exception as e:  # a send that fails before anything is written
            self._finish(fut, None, e, callback)
            return
        self._in_flight += 1
        self._await(started, fut, callback, loop)

    def _await(
        self,
        started: Coroutine[Any, Any, Any] | DirectSend,
        fut: asyncio.Future[Any],
        callback: SendCallback | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        if isinstance(started, DirectSend):
            started._sender, started._fut, started._callback = self, fut, callback
            started.future.add_done_callback(started._on_response)
            return
        task = loop.create_task(started, name="rocketpy-async-send")
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._done, direct=None, fut=fut, callback=callback))

    def _done(
        self,
        done: asyncio.Future[Any],
        direct: DirectSend | None,
        fut: asyncio.Future[Any],
        callback: SendCallback | None,
    ) -> None:
        loop = done.get_loop()
        if direct is None:
            self._tasks.discard(done)  # type: ignore[arg-type]
        if done.cancelled():
            fut.cancel()  # the send was stopped (close timed out)
            self._send_finished(loop)
            return
        try:
            result = direct.finish(done) if direct is not None else done.result()
        except Exception as e:
            self._finish(fut, None, e, callback)
        else:
            if type(result) is types.CoroutineType:  # the send goes on (retries): still in flight
                self._await(result, fut, callback, loop)
                return
            self._finish(fut, result, None, callback)
        self._send_finished(loop)

    def _send_finished(self, loop: asyncio.AbstractEventLoop) -> None:
        self._in_flight -= 1
        queue = self._queue
        while queue and self._in_flight < self.max_senders:
            send, deadline, fut, callback = queue.popleft()
            if not fut.cancelled():
                self._launch(send, deadline, fut, callback, loop)
        if self._drained is not None and not queue and self._in_flight == 0:
            self._drained.set()

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
        if _is_async_callback(cb):
            task = asyncio.get_running_loop().create_task(cb(result, err))
            self._callbacks.add(task)
            task.add_done_callback(self._callback_task_done)
            return
        self._plain_unfinished += 1
        self._ready.append((cb, result, err))
        if len(self._ready) == 1:
            asyncio.get_running_loop().call_soon(self._hand_off)

    def _hand_off(self) -> None:
        """Give the plain callbacks ready so far to the callback thread, as one job."""
        batch, self._ready = self._ready, []
        if not batch:
            return  # handed off already (by close)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="rocketpy-send-callback")
        loop = asyncio.get_running_loop()
        done = self._pool.submit(_run_plain_callbacks, batch)
        self._pool_calls.add(done)
        done.add_done_callback(lambda f: _call_soon_safe(loop, self._hand_off_done, f, len(batch)))

    def _hand_off_done(self, fut: concurrent.futures.Future[Any], count: int) -> None:
        self._pool_calls.discard(fut)
        self._plain_unfinished -= count

    def _callback_task_done(self, task: asyncio.Future[Any]) -> None:
        self._callbacks.discard(task)
        _log_callback_error(task)

    async def close(self, timeout: float) -> None:  # noqa: ASYNC109 (bounded drain, then stop)
        """Wait up to ``timeout`` seconds in all for unfinished sends and their callbacks (both
        kinds: a plain callback still queued in the thread would otherwise run after the producer
        is shut down), then stop the sends still running."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._queue or self._in_flight:
            self._drained = asyncio.Event()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._drained.wait()
            except TimeoutError:
                log.warning(
                    "producer shutdown: %d async sends still unfinished after %.1fs", self.pending, timeout
                )
        self._hand_off()  # plain callbacks of this tick: not left behind
        callbacks = [*self._callbacks, *(asyncio.wrap_future(f) for f in self._pool_calls)]
        if callbacks:
            await asyncio.wait(callbacks, timeout=max(0.0, deadline - loop.time()))
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        self._drained = None


def _is_async_callback(cb: SendCallback) -> bool:
    """``inspect.iscoroutinefunction``, with a fast path for the plain function most callers pass
    (the full check costs ~2 µs a send)."""
    if type(cb) is types.FunctionType and not hasattr(cb, "_is_coroutine_marker"):  # 3.12's marker
        return bool(cb.__code__.co_flags & inspect.CO_COROUTINE)
    return inspect.iscoroutinefunction(cb)


def _run_plain_callbacks(batch: list[tuple[SendCallback, Any, BaseException | None]]) -> None:
    """In the callback thread: each callback in turn; one that raises is logged, the rest still run."""
    for cb, result, err in batch:
        try:
            cb(result, err)
        except Exception as e:
            log.error("send_async callback raised: %r", e)


def _call_soon_safe(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # the loop closed after shutdown; nothing left to account for
        pass


def _log_callback_error(fut: Any) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("send_async callback raised: %r", fut.exception())
