"""rocketpy.waits.wait_done: a timed wait on a future that also works outside a task."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.broker.processors.eager import run_eager
from rocketpy.waits import wait_done


async def test_done_future_and_result_in_time() -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    done.set_result(None)
    assert await wait_done(done, 0.0)
    later = loop.create_future()
    loop.call_later(0.01, later.set_result, None)
    assert await wait_done(later, 5.0)


async def test_timeout_returns_false_and_cancels_the_future() -> None:
    fut = asyncio.get_running_loop().create_future()
    assert not await wait_done(fut, 0.02)
    assert fut.cancelled()


async def test_a_cancelled_waiter_is_not_a_timeout() -> None:
    fut = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(wait_done(fut, 5.0))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_runs_eagerly_outside_a_task() -> None:
    """The broker's send path drives its coroutines with run_eager from a protocol callback, where no
    task runs (asyncio.timeout raises there)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    started: asyncio.Future[object] = loop.create_future()

    def from_a_callback() -> None:
        assert asyncio.current_task() is None
        try:
            started.set_result(run_eager(wait_done(fut, 0.02)))
        except BaseException as e:
            started.set_exception(e)

    loop.call_soon(from_a_callback)
    resumed = await started  # the coroutine suspended on the future: an awaitable of the rest
    assert await resumed is False  # type: ignore[misc]
