"""Blocking twins of the async SDK classes (public as ``rocketpy.sync``).

Owns one background event loop thread per process (``_LoopThread``), started on first use, on
which every wrapped object lives: its constructor, its coroutines and even its plain methods run
there (so asyncio primitives are only ever touched from their loop), and the caller's thread
blocks on the result with ``run_coroutine_threadsafe``. Each blocking call is bounded
(``CALL_TIMEOUT_S``, or the call's own ``timeout`` plus a margin). Futures returned by the async
API (``send_async``) come back as ``concurrent.futures.Future``.

The twins are generated from the async classes, so they keep the same class and method names:
``rocketpy.sync.Producer("pg").send(msg)``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from rocketpy.errors import MQClientError

CALL_TIMEOUT_S = 120.0
TIMEOUT_MARGIN_S = 30.0
_START_TIMEOUT_S = 10.0


class _LoopThread:
    """The process-wide background event loop (uvloop when available), as a daemon thread."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def loop(cls) -> asyncio.AbstractEventLoop:
        """The running background loop (started on first use)."""
        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                cls._loop = cls._start()
            return cls._loop

    @staticmethod
    def _start() -> asyncio.AbstractEventLoop:
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # uvloop is a dependency, but the SDK works without it
            loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        threading.Thread(target=run, name="rocketpy-sync-loop", daemon=True).start()
        if not ready.wait(_START_TIMEOUT_S):
            raise MQClientError("the rocketpy background event loop did not start")
        return loop


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _wait(cf: concurrent.futures.Future[Any], timeout_s: float, what: str) -> Any:
    try:
        return cf.result(timeout_s)
    except concurrent.futures.TimeoutError as exc:
        cf.cancel()
        raise MQClientError(f"{what} did not finish within {timeout_s:.0f} s") from exc


def run_blocking(fn: Callable[..., Any], *args: Any, timeout_s: float = CALL_TIMEOUT_S, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` on the background loop and block for its result.

    Coroutine functions are awaited there; an ``asyncio.Future`` result is converted to a
    ``concurrent.futures.Future``.

    Raises:
        MQClientError: called from the background loop itself, or the call timed out.
    """
    loop = _LoopThread.loop()
    if _on_loop_thread(loop):
        raise MQClientError(
            "a rocketpy.sync method was called from a listener's loop: use the async API there"
        )

    async def call() -> Any:
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result) and not isinstance(result, asyncio.Future):
            result = await result
        if isinstance(result, asyncio.Future):
            return _to_concurrent(result)
        return result

    name = getattr(fn, "__qualname__", repr(fn))
    return _wait(asyncio.run_coroutine_threadsafe(call(), loop), timeout_s, name)


def _to_concurrent(fut: asyncio.Future[Any]) -> concurrent.futures.Future[Any]:
    out: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def copy(f: asyncio.Future[Any]) -> None:
        if f.cancelled():
            out.cancel()
        elif f.exception() is not None:
            out.set_exception(f.exception())  # type: ignore[arg-type]
        else:
            out.set_result(f.result())

    out.set_running_or_notify_cancel()
    fut.add_done_callback(copy)
    return out


def _call_timeout(kwargs: dict[str, Any]) -> float:
    t = kwargs.get("timeout")
    if isinstance(t, int | float) and not isinstance(t, bool) and t > 0:
        return float(t) + TIMEOUT_MARGIN_S
    return CALL_TIMEOUT_S


class BlockingTwin:
    """Base of the generated blocking classes: wraps one async object living on the background loop."""

    _async_cls: ClassVar[type]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "_obj", run_blocking(self._async_cls, *args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._obj, name)
        if not callable(attr) or inspect.isclass(attr):
            return attr

        @functools.wraps(attr)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return run_blocking(attr, *args, timeout_s=_call_timeout(kwargs), **kwargs)

        return blocking

    def __setattr__(self, name: str, value: Any) -> None:
        run_blocking(setattr, self._obj, name, value)

    def __enter__(self) -> Any:
        run_blocking(self._obj.start)
        return self

    def __exit__(self, *exc: object) -> None:
        run_blocking(self._obj.shutdown)

    def __repr__(self) -> str:
        return f"rocketpy.sync.{type(self).__name__}({self._obj!r})"


def blocking_twin(async_cls: type) -> type:
    """Create the blocking twin of ``async_cls`` (same name, same methods, blocking)."""
    doc = f"Blocking twin of ``{async_cls.__module__}.{async_cls.__name__}``.\n\n{async_cls.__doc__ or ''}"
    attrs = {"_async_cls": async_cls, "__doc__": doc, "__module__": "rocketpy.sync"}
    return type(async_cls.__name__, (BlockingTwin,), attrs)


#: Public name -> (module, class) of every async class that has a blocking twin.
TWINS = {
    "Producer": ("rocketpy.client.producer", "Producer"),
    "PushConsumer": ("rocketpy.client.push_consumer", "PushConsumer"),
    "LitePullConsumer": ("rocketpy.client.lite_pull_consumer", "LitePullConsumer"),
    "SimpleConsumer": ("rocketpy.client.simple_consumer", "SimpleConsumer"),
    "Admin": ("rocketpy.client.admin", "Admin"),
    "TransactionProducer": ("rocketpy.client.transaction_producer", "TransactionProducer"),
}
_made: dict[str, type] = {}


def twin(name: str) -> type:
    """The blocking twin class for a public name (created once, on first use).

    Raises:
        AttributeError: ``name`` has no twin.
    """
    if name not in TWINS:
        raise AttributeError(f"rocketpy.sync has no {name!r}; it offers {', '.join(sorted(TWINS))}")
    cls = _made.get(name)
    if cls is None:
        import importlib

        module, attr = TWINS[name]
        cls = _made[name] = blocking_twin(getattr(importlib.import_module(module), attr))
    return cls
