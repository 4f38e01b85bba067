"""Unit tests of eager handler execution (inline result vs. resumed awaitable)."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.broker.processors.eager import run_eager


async def no_suspend(x: int) -> int:
    return x * 2


async def suspends(fut: asyncio.Future[int]) -> int:
    v = await fut
    await asyncio.sleep(0)
    return v + 1


async def raises_after(fut: asyncio.Future[int]) -> int:
    await fut
    raise ValueError("boom")


async def test_inline_result() -> None:
    assert run_eager(no_suspend(21)) == 42


async def test_resumed_result_and_exception() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    rest = run_eager(suspends(fut))
    task = asyncio.ensure_future(rest)  # type: ignore[arg-type]
    loop.call_soon(fut.set_result, 4)
    assert await task == 5
    fut2: asyncio.Future[int] = loop.create_future()
    task2 = asyncio.ensure_future(run_eager(raises_after(fut2)))  # type: ignore[arg-type]
    loop.call_soon(fut2.set_result, 0)
    with pytest.raises(ValueError, match="boom"):
        await task2


async def test_resumed_cancellation_reaches_coroutine() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    cancelled = []

    async def waiter() -> int:
        try:
            return await fut
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    task = asyncio.ensure_future(run_eager(waiter()))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled == [True]
