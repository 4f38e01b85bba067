"""Unit tests of the long-polling hold table (in-process, real event loop, fake channels)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rocketpy.broker.long_polling import PullRequestHoldService
from rocketpy.broker.subscription import TagMessageFilter
from rocketpy.filter.tags import java_string_hash
from rocketpy.subscription import parse_subscription
from tests.waiting import wait_until_async


class FakeChannel:
    def __init__(self) -> None:
        self.closed = False
        self.sent: list[Any] = []
        self.event = asyncio.Event()

        self.counted: list[tuple[Any, Any]] = []

    def count_response(self, request: Any, response: Any) -> None:
        self.counted.append((request, response))

    def send(self, cmd: Any) -> None:
        self.sent.append(cmd)
        self.event.set()


async def wait_sent(ch: FakeChannel, timeout_s: float = 2.0) -> None:
    await asyncio.wait_for(ch.event.wait(), timeout_s)


def make_service(calls: list[Any], **kw: Any) -> PullRequestHoldService:
    def run_pull(channel: Any, request: Any) -> Any:
        calls.append(request)
        return ("response", request)

    return PullRequestHoldService(run_pull, **kw)


async def test_wake_on_matching_message() -> None:
    calls: list[Any] = []
    svc = make_service(calls)
    ch = FakeChannel()
    filt = TagMessageFilter(parse_subscription("T", "A"))
    assert svc.hold(ch, "req1", "T", 0, 5, 10_000, filt) is None
    assert svc.held_count == 1
    svc.notify_message_arriving("T", 1, 5, java_string_hash("A"))  # other queue
    svc.notify_message_arriving("T", 0, 5, java_string_hash("B"))  # tag does not match
    assert svc.held_count == 1
    t0 = time.perf_counter()
    svc.notify_message_arriving("T", 0, 5, java_string_hash("A"))
    assert svc.held_count == 0
    await wait_sent(ch)
    assert time.perf_counter() - t0 < 0.05
    assert ch.sent == [("response", "req1")]
    assert ch.counted == [("req1", ("response", "req1"))]  # in the request metrics
    assert (svc.held_total, svc.woken_count, svc.expired_count) == (1, 1, 0)


async def test_offset_below_hold_does_not_wake() -> None:
    svc = make_service([])
    ch = FakeChannel()
    assert svc.hold(ch, "r", "T", 0, 7, 10_000, None) is None
    svc.notify_message_arriving("T", 0, 6, 0)
    assert svc.held_count == 1
    svc.notify_message_arriving("T", 0, 7, 0)
    await wait_sent(ch)


async def test_expiry_answers() -> None:
    calls: list[Any] = []
    svc = make_service(calls)
    ch = FakeChannel()
    t0 = time.perf_counter()
    assert svc.hold(ch, "r", "T", 0, 0, 100, None) is None
    await wait_sent(ch)
    elapsed = time.perf_counter() - t0
    assert 0.09 <= elapsed < 1.0
    assert svc.held_count == 0 and svc.expired_count == 1


async def test_bounds_and_channel_close() -> None:
    svc = make_service([], max_total=3, max_per_channel=2)
    a, b = FakeChannel(), FakeChannel()
    assert svc.hold(a, "1", "T", 0, 0, 10_000, None) is None
    assert svc.hold(a, "2", "T", 1, 0, 10_000, None) is None
    assert "connection" in (svc.hold(a, "3", "T", 2, 0, 10_000, None) or "")
    assert svc.hold(b, "4", "T", 0, 0, 10_000, None) is None
    assert "retry later" in (svc.hold(b, "5", "T", 0, 0, 10_000, None) or "")
    svc.on_channel_close(a)
    assert svc.held_count == 1
    svc.notify_message_arriving("T", 0, 0, 0)
    await wait_sent(b)
    assert a.sent == []


async def test_shutdown_answers_everything() -> None:
    svc = make_service([])
    chans = [FakeChannel() for _ in range(5)]
    for i, ch in enumerate(chans):
        assert svc.hold(ch, str(i), "T", i, 0, 10_000, None) is None
    assert svc.shutdown() == 5
    assert all(len(ch.sent) == 1 for ch in chans)
    assert "shutting down" in (svc.hold(chans[0], "x", "T", 0, 0, 10_000, None) or "")


async def test_closed_channel_not_answered() -> None:
    svc = make_service([])
    ch = FakeChannel()
    svc.hold(ch, "r", "T", 0, 0, 10_000, None)
    ch.closed = True
    svc.notify_message_arriving("T", 0, 0, 0)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert ch.sent == []


class Listening:
    """A stand-in for the store's ``listen_to_dispatches``: the listeners it has now."""

    def __init__(self) -> None:
        self.fns: list[Any] = []

    def __call__(self, fn: Any, on: bool) -> None:
        if on and fn not in self.fns:
            self.fns.append(fn)
        elif not on and fn in self.fns:
            self.fns.remove(fn)


async def test_listens_to_dispatches_only_while_a_pull_is_held() -> None:
    svc = make_service([])
    listening = Listening()
    svc.listen_with(listening)
    assert listening.fns == []  # nothing held: no call per stored message
    ch = FakeChannel()
    assert svc.hold(ch, "a", "T", 0, 5, 10_000, None) is None
    assert svc.hold(ch, "b", "T", 1, 5, 10_000, None) is None
    assert listening.fns == [svc.notify_message_arriving]
    svc.notify_message_arriving("T", 0, 5, 0)  # wakes one of two
    assert listening.fns == [svc.notify_message_arriving]
    svc.notify_message_arriving("T", 1, 5, 0)
    assert listening.fns == []
    assert svc.hold(ch, "c", "T", 0, 6, 1, None) is None  # expires after 1 ms
    assert listening.fns == [svc.notify_message_arriving]
    await wait_until_async(lambda: svc.held_count == 0, timeout=2, message="the 1 ms hold expires")
    assert listening.fns == []


async def test_listen_with_registers_when_pulls_are_held_already() -> None:
    svc = make_service([])
    assert svc.hold(FakeChannel(), "a", "T", 0, 5, 10_000, None) is None
    listening = Listening()
    svc.listen_with(listening)
    assert listening.fns == [svc.notify_message_arriving]
    svc.shutdown()
    assert listening.fns == []
