"""Polling with a deadline: the only way tests wait for a condition (no bare sleeps as synchronization).

``wait_until(predicate, timeout)`` calls ``predicate`` every ``interval`` seconds until it returns a
truthy value (which is returned) or the deadline passes, then raises ``WaitTimeout`` with the
message and the last value observed (or the last exception the predicate raised).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A condition did not become true in time; the message carries the last observed value."""


def _timeout_message(message: str | None, timeout: float, last: Any, error: BaseException | None) -> str:
    what = message or "condition not met"
    seen = f"last error: {error!r}" if error is not None else f"last value: {last!r}"
    return f"{what} within {timeout:g}s ({seen})"


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.02,
    message: str | None = None,
    *,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll ``predicate`` until it returns something truthy; return that value.

    Args:
        predicate: called with no arguments.
        timeout: seconds before giving up.
        interval: seconds between calls.
        message: what was awaited, for the error.
        ignore: exception types that count as "not yet" (the last one is reported).

    Raises:
        WaitTimeout: the deadline passed.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    error: BaseException | None = None
    while True:
        try:
            last = predicate()
            error = None
            if last:
                return last
        except ignore as e:
            error = e
        if time.monotonic() >= deadline:
            raise WaitTimeout(_timeout_message(message, timeout, last, error))
        time.sleep(interval)


async def wait_until_async(
    predicate: Callable[[], Any],
    timeout: float,  # noqa: ASYNC109 (the signature twin of wait_until)
    interval: float = 0.02,
    message: str | None = None,
    *,
    ignore: tuple[type[BaseException], ...] = (),
) -> Any:
    """Like ``wait_until`` inside a coroutine; ``predicate`` may be sync or ``async``.

    Raises:
        WaitTimeout: the deadline passed.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    error: BaseException | None = None
    while True:
        try:
            value = predicate()
            last = await value if inspect.isawaitable(value) else value
            error = None
            if last:
                return last
        except ignore as e:
            error = e
        if loop.time() >= deadline:
            raise WaitTimeout(_timeout_message(message, timeout, last, error))
        await asyncio.sleep(interval)
