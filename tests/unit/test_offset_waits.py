"""OffsetWaits: SYNC_MASTER's replica waits as futures, released by offset, expired by one timer."""

from __future__ import annotations

import asyncio

from rocketpy.broker.ha.offset_waits import OffsetWaits


async def test_release_answers_the_waits_it_covers_in_offset_order() -> None:
    waits = OffsetWaits()
    late, early, mid = waits.future(300, 5.0), waits.future(100, 5.0), waits.future(200, 5.0)
    assert waits.release(99) == -1 and not early.done()
    assert waits.release(250) == 200
    assert early.result() is True and mid.result() is True and not late.done()
    assert len(waits) == 1
    assert waits.release(10**9) == 300 and late.result() is True


async def test_a_wait_not_released_in_time_is_answered_false_and_others_keep_waiting() -> None:
    loop = asyncio.get_running_loop()
    waits = OffsetWaits()
    short = waits.future(100, 0.05)
    await asyncio.sleep(0.02)
    longer = waits.future(100, 5.0)
    assert await asyncio.wait_for(short, 1.0) is False
    assert not longer.done()
    start = loop.time()
    waits.release(100)
    assert longer.result() is True and loop.time() - start < 0.5
    assert waits._timer is not None  # still armed for the longer wait's deadline
    waits.end_all()
    assert waits._timer is None


async def test_a_cancelled_wait_is_skipped_and_end_all_answers_the_rest() -> None:
    waits = OffsetWaits()
    gone, kept = waits.future(100, 5.0), waits.future(200, 5.0)
    gone.cancel()  # its send's connection closed
    assert waits.release(150) == -1  # nothing answered: the only wait covered was cancelled
    waits.end_all()
    assert kept.result() is True and len(waits) == 0


async def test_past_the_limit_a_wait_is_answered_false_at_once() -> None:
    waits = OffsetWaits(limit=2)
    first, second = waits.future(1, 5.0), waits.future(2, 5.0)
    third = waits.future(3, 5.0)
    assert third.done() and third.result() is False
    second.cancel()  # a finished wait frees its place
    fourth = waits.future(4, 5.0)
    assert not fourth.done()
    waits.end_all()
    assert first.result() is True


async def test_a_shorter_timeout_after_a_longer_one_still_expires_on_time() -> None:
    """The timeout can change (updateBrokerConfig): the timer follows the earliest deadline."""
    loop = asyncio.get_running_loop()
    waits = OffsetWaits()
    long_wait = waits.future(100, 5.0)
    start = loop.time()
    short = waits.future(200, 0.03)
    assert await asyncio.wait_for(short, 1.0) is False and loop.time() - start < 1.0
    assert not long_wait.done()
    waits.end_all()
