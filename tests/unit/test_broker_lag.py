"""Lag in seconds (``broker/lag.py``): the oldest unconsumed message's age, cached per committed offset."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketpy.broker.lag import LagClock
from rocketpy.broker.store import MessageStore
from tests.unit.test_store_helpers import bmsg, tiny_config


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MessageStore]:
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    yield s
    await s.shutdown()


async def test_age_of_the_oldest_unconsumed_message(store: MessageStore) -> None:
    times = [(await store.put_message(bmsg("T", 0, b"m%d" % i))) for i in range(3)]
    assert all(t.wrote_offset >= 0 for t in times)
    stored = [store.get_message_store_time("T", 0, i) for i in range(3)]
    assert all(s > 0 for s in stored) and store.get_message_store_time("T", 0, 3) == -1
    now = stored[2] + 5_000
    clock = LagClock(store, clock_ms=lambda: now)
    assert clock.latency_ms("g", "T", 0, 1, 3) == now - stored[1]
    assert clock.latency_ms("g", "T", 0, 3, 3) == 0  # caught up
    assert clock.latency_ms("g", "T", 0, 0, 3) == now - stored[0]
    assert clock.latency_ms("g", "NoSuch", 0, 0, 0) == 0


async def test_lookups_are_cached_per_offset_and_dropped_after_a_pass(store: MessageStore) -> None:
    for i in range(2):
        await store.put_message(bmsg("T", 0, b"m%d" % i))
    clock = LagClock(store)
    clock.begin_pass()
    clock.oldest_store_time("g", "T", 0, 0, 2)
    clock.oldest_store_time("g", "T", 0, 0, 2)  # same committed offset: cached
    clock.end_pass()
    assert clock.lookups == 1
    clock.begin_pass()
    clock.oldest_store_time("g", "T", 0, 1, 2)  # the offset moved: looked up again
    clock.end_pass()
    assert clock.lookups == 2
    clock.begin_pass()
    clock.end_pass()  # a pass that did not touch the queue forgets it
    clock.oldest_store_time("g", "T", 0, 1, 2)
    assert clock.lookups == 3
