"""PendingRequests: every call ends once; deadlines fire in order on one shared timer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from rocketpy.errors import RemotingConnectError, RemotingTimeoutError
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.pending import PendingRequests


def _future(loop: asyncio.AbstractEventLoop) -> asyncio.Future[RemotingCommand]:
    return loop.create_future()


async def test_mixed_timeouts_fire_at_their_own_deadlines() -> None:
    loop = asyncio.get_running_loop()
    table = PendingRequests(loop, "1.2.3.4:5")
    slow, fast = _future(loop), _future(loop)
    start = loop.time()
    table.add(1, slow, 105, 0.4)
    table.add(2, fast, 11, 0.05)  # earlier deadline added later: the timer is re-armed
    with pytest.raises(RemotingTimeoutError, match=r"PULL_MESSAGE\(11\) to 1\.2\.3\.4:5 .* 0\.050s"):
        await fast
    assert loop.time() - start < 0.3 and not slow.done()
    with pytest.raises(RemotingTimeoutError, match="GET_ROUTEINFO_BY_TOPIC"):
        await slow
    assert loop.time() - start >= 0.39
    assert len(table) == 0


async def test_response_completes_once_and_late_one_is_ignored() -> None:
    loop = asyncio.get_running_loop()
    table = PendingRequests(loop, "a:1")
    fut = _future(loop)
    table.add(7, fut, 34, 5.0)
    resp = RemotingCommand(0, opaque=7, flag=1)
    assert table.complete(resp) and fut.result() is resp
    assert not table.complete(resp)
    assert len(table) == 0


async def test_heap_stays_bounded_under_many_completions() -> None:
    loop = asyncio.get_running_loop()
    table = PendingRequests(loop, "a:1")
    for opaque in range(1, 20001):
        table.add(opaque, _future(loop), 10, 30.0)
        table.complete(RemotingCommand(0, opaque=opaque, flag=1))
    assert len(table) == 0
    assert len(table._heap) <= 2 * 1024 + 2  # stale entries are dropped, not accumulated


async def test_fail_all_fails_everything_at_once() -> None:
    loop = asyncio.get_running_loop()
    table = PendingRequests(loop, "a:1")
    futures = [_future(loop) for _ in range(5)]
    for i, fut in enumerate(futures, 1):
        table.add(i, fut, 10, 30.0)
    table.fail_all(lambda code: RemotingConnectError(f"closed while {code} in flight"))
    for fut in futures:
        with pytest.raises(RemotingConnectError, match="closed while 10"):
            fut.result()
    assert len(table) == 0 and table._timer is None


class _ManualClock:
    """A loop stand-in for the table's clock and timer: time moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.timers: list[tuple[float, object]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        handle = asyncio.TimerHandle(when, callback, (), asyncio.get_running_loop())
        self.timers.append((when, handle))
        return handle

    def advance_to(self, when: float) -> None:
        """Move to ``when`` and run every live timer due by then, as the loop would."""
        self.now = when
        due = [(at, h) for at, h in self.timers if at <= when and not h.cancelled()]
        self.timers = [(at, h) for at, h in self.timers if at > when and not h.cancelled()]
        for _, handle in sorted(due, key=lambda item: item[0]):
            handle._run()


async def test_on_expired_hears_the_newest_timed_out_call_once_per_timer_run() -> None:
    loop = asyncio.get_running_loop()
    clock = _ManualClock()
    table = PendingRequests(clock, "a:1")  # type: ignore[arg-type]
    heard: list[tuple[float, float]] = []
    table.on_expired = lambda sent, timeout: heard.append((sent, timeout))
    answered = _future(loop)
    table.add(1, answered, 10, 0.05)
    table.complete(RemotingCommand(0, opaque=1, flag=1))
    first, second = _future(loop), _future(loop)
    table.add(2, first, 10, 0.06)
    clock.now += 0.01
    table.add(3, second, 10, 0.05)  # the same deadline, sent later: the newest sent time is its
    clock.advance_to(1000.06)
    for fut in (first, second):
        with pytest.raises(RemotingTimeoutError):
            fut.result()
    assert heard == [(pytest.approx(1000.01), 0.05)]  # one report per run; an answered call is never reported


async def test_on_expired_stays_silent_when_the_loop_itself_was_held_up() -> None:
    loop = asyncio.get_running_loop()
    table = PendingRequests(loop, "a:1")
    heard: list[tuple[float, float]] = []
    table.on_expired = lambda sent, timeout: heard.append((sent, timeout))
    fut = _future(loop)
    table.add(1, fut, 10, 0.02)
    time.sleep(0.2)  # noqa: ASYNC251 -- the loop blocked past the deadline: answers may sit unread in the socket
    with pytest.raises(RemotingTimeoutError):
        await fut
    assert heard == []
