"""A timed wait on a future that works where ``asyncio.timeout`` cannot.

The broker's send path runs its coroutines eagerly, outside any task, until they first suspend
(``broker/processors/eager.py``). ``asyncio.timeout`` refuses to run there ("Timeout should be used
inside a task") and ``asyncio.wait_for`` can lose a cancellation on Python 3.11, so waits on that
path (the next commitlog file, a SYNC_MASTER slave ack) use ``wait_done``: a timer cancels the
future, and only that timer's cancellation counts as the timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def wait_done(fut: asyncio.Future[Any], timeout_s: float) -> bool:
    """True once ``fut`` is done; False when ``timeout_s`` passed first (``fut`` is then cancelled).

    A cancellation of the waiting coroutine itself propagates as usual.
    """
    if fut.done():
        return True
    expired = False

    def expire() -> None:
        nonlocal expired
        if not fut.done():
            expired = True
            fut.cancel()

    timer = asyncio.get_running_loop().call_later(max(timeout_s, 0.0), expire)
    try:
        await fut
    except asyncio.CancelledError:
        if expired:
            return False
        raise
    finally:
        timer.cancel()
    return True


def answered(value: bool) -> asyncio.Future[bool]:
    """A future already holding ``value`` (a wait with nothing to wait for)."""
    fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut
