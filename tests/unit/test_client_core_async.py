"""AsyncSender (send_async machinery): bounds, deadlines, callbacks, cancellation and draining."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from rocketpy.client.async_sender import AsyncSender
from rocketpy.errors import MQClientError, RemotingTimeoutError
from tests.waiting import wait_until_async


class Gate:
    """Sends that finish only when the test opens the gate."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.started: list[float] = []

    def send(self, value: Any) -> Any:
        async def run(remaining: float) -> Any:
            self.started.append(remaining)
            await self.opened.wait()
            if isinstance(value, BaseException):
                raise value
            return value

        return run


async def test_results_errors_and_bound() -> None:
    s = AsyncSender(max_pending=3, max_senders=2)
    gate = Gate()
    f1 = s.submit(gate.send("a"), 5.0, None)
    f2 = s.submit(gate.send(ValueError("boom")), 5.0, None)
    f3 = s.submit(gate.send("c"), 5.0, None)
    with pytest.raises(MQClientError, match="max_async_pending=3"):
        s.submit(gate.send("d"), 5.0, None)
    await wait_until_async(lambda: len(gate.started) == 2, 2.0)  # two senders in flight, one queued
    assert s.pending == 3
    gate.opened.set()
    assert await f1 == "a"
    with pytest.raises(ValueError, match="boom"):
        await f2
    assert await f3 == "c"
    await s.close(1.0)
    assert s.pending == 0


async def test_deadline_counts_time_in_queue() -> None:
    s = AsyncSender(max_pending=10, max_senders=1)
    gate = Gate()
    first = s.submit(gate.send("slow"), 5.0, None)
    late = s.submit(gate.send("never"), 0.05, None)
    await asyncio.wait_for(asyncio.shield(asyncio.sleep(0.1)), 1.0)  # let the queued send's deadline pass
    gate.opened.set()
    assert await first == "slow"
    with pytest.raises(RemotingTimeoutError, match="timed out while queued"):
        await late
    await s.close(1.0)


async def test_callbacks_sync_in_thread_async_on_loop() -> None:
    s = AsyncSender(max_pending=10)
    gate = Gate()
    seen: list[Any] = []
    threads: list[str] = []

    def sync_cb(res: Any, err: BaseException | None) -> None:
        threads.append(threading.current_thread().name)
        seen.append(("sync", res, err))

    async def async_cb(res: Any, err: BaseException | None) -> None:
        seen.append(("async", res, type(err)))

    s.submit(gate.send("ok"), 5.0, sync_cb)
    s.submit(gate.send(KeyError("x")), 5.0, async_cb)
    gate.opened.set()
    await wait_until_async(lambda: len(seen) == 2, 2.0)
    assert ("sync", "ok", None) in seen and ("async", None, KeyError) in seen
    assert threads[0].startswith("rocketpy-send-callback")
    await s.close(1.0)


async def test_plain_callbacks_of_a_tick_go_to_their_thread_as_one_job_in_order(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Sends finishing in one tick hand their plain callbacks over once; each still runs alone: in
    the order the sends finished, a raising one logged and the next ones run."""
    from rocketpy.client import async_sender

    jobs: list[int] = []
    run_batch = async_sender._run_plain_callbacks

    def counted(batch: list[Any]) -> None:
        jobs.append(len(batch))
        run_batch(batch)

    monkeypatch.setattr(async_sender, "_run_plain_callbacks", counted)
    s = AsyncSender(max_pending=100)
    gate = Gate()
    ran: list[Any] = []

    def cb(res: Any, err: BaseException | None) -> None:
        if res == 3:
            raise RuntimeError("callback 3 fails")
        ran.append(res if err is None else type(err))

    futures = [s.submit(gate.send(i if i != 5 else KeyError(i)), 5.0, cb) for i in range(10)]
    assert s.pending == 10
    gate.opened.set()
    await asyncio.gather(*futures, return_exceptions=True)
    await wait_until_async(lambda: s.pending == 0, 2.0)
    assert ran == [0, 1, 2, 4, KeyError, 6, 7, 8, 9]
    assert jobs == [10]
    assert "callback 3 fails" in caplog.text
    await s.close(1.0)


async def test_close_waits_for_plain_callbacks_still_queued_in_their_thread() -> None:
    """What a caller prints after ``await producer.shutdown()`` comes after every callback's output."""
    s = AsyncSender(max_pending=10)
    gate = Gate()
    release = threading.Event()
    ran: list[Any] = []

    def slow_cb(res: Any, err: BaseException | None) -> None:
        release.wait(5.0)  # the first one holds the callback thread; the others queue behind it
        ran.append(res)

    futures = [s.submit(gate.send(i), 5.0, slow_cb) for i in range(3)]
    gate.opened.set()
    await asyncio.gather(*futures)
    closing = asyncio.create_task(s.close(5.0))
    await asyncio.sleep(0)
    assert not closing.done() and ran == []  # the sends are done, their callbacks are not
    release.set()
    await asyncio.wait_for(closing, 5.0)
    assert sorted(ran) == [0, 1, 2] and s.pending == 0


async def test_close_waits_for_callbacks_at_most_its_timeout() -> None:
    s = AsyncSender(max_pending=10)
    gate = Gate()
    release = threading.Event()
    sent = s.submit(gate.send("x"), 5.0, lambda res, err: release.wait(5.0))
    gate.opened.set()
    assert await sent == "x"  # the callback is queued (or running) now
    loop = asyncio.get_running_loop()
    started = loop.time()
    await s.close(0.2)
    assert 0.15 <= loop.time() - started < 2.0  # bounded by close's timeout, not by the callback
    release.set()


async def test_cancelled_future_is_skipped_and_close_drains() -> None:
    s = AsyncSender(max_pending=10, max_senders=1)
    gate = Gate()
    first = s.submit(gate.send(1), 5.0, None)
    skipped = s.submit(gate.send(2), 5.0, None)
    skipped.cancel()
    last = s.submit(gate.send(3), 5.0, None)
    closing = asyncio.create_task(s.close(5.0))
    await wait_until_async(lambda: len(gate.started) == 1, 2.0)
    gate.opened.set()
    await closing
    assert (await first, await last) == (1, 3)
    assert len(gate.started) == 2  # the cancelled one never ran
