"""Eager execution of a handler coroutine: finish inline when it never suspends.

Owns ``run_eager(coro)``. Most sends never suspend (ASYNC_FLUSH appends are memory copies), so
running the coroutine's first step at once lets the server answer inline — its fast path, with
responses written in one batch per read — instead of creating a task per request. When the
coroutine does suspend (SYNC_FLUSH wait, next commitlog file), the rest runs as a normal awaitable
that forwards every value and exception, so semantics are those of ``await coro``.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class _Resumed:
    """The remainder of a coroutine that suspended on its first step."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        to_yield = self._first
        while True:
            try:
                value = yield to_yield
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # forwarded into the coroutine (CancelledError too)
                try:
                    to_yield = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                to_yield = coro.send(value)
            except StopIteration as stop:
                return stop.value


def run_eager(coro: Coroutine[Any, Any, T]) -> T | _Resumed:
    """Run ``coro`` until it first suspends.

    Returns:
        The coroutine's result when it finished without suspending; otherwise an awaitable that
        completes it (give it to the event loop, e.g. return it from a handler).
    """
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    return _Resumed(coro, first)
