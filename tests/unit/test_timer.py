"""Timer messages on a real store with a hand-driven clock: the wheel, rolls, restarts, log cleanup."""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rocketpy.broker.store import BrokerMessage, MessageStore
from rocketpy.broker.timer.service import TIMER_TOPIC, TimerMessageService
from rocketpy.config import StoreConfig
from rocketpy.message import properties_to_string
from rocketpy.record import decode_records
from tests.clock import T0, ManualClock
from tests.waiting import wait_until_async


def config(root: Path, **kw: Any) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=8 << 20,
        flush_interval_commit_log=50,
        timer_flush_interval_ms=50,
        **kw,
    )


class Harness:
    def __init__(self, root: Path, **kw: Any) -> None:
        self.root = root
        self.clock = ManualClock()
        self.cfg = config(root, **kw)
        self.store: MessageStore
        self.timer: TimerMessageService

    async def start(self) -> None:
        self.store = MessageStore(self.cfg, clock=self.clock)
        await self.store.start()
        self.timer = TimerMessageService(self.store, self.cfg, str(self.root / "config"))
        await self.timer.start()

    async def stop(self) -> None:
        await self.timer.shutdown()
        await self.store.shutdown()

    async def put(self, deliver_ms: int, body: bytes, topic: str = "Real", qid: int = 0) -> None:
        props = {"TIMER_DELIVER_MS": str(deliver_ms), "UNIQ_KEY": body.hex()}
        msg = BrokerMessage(topic, qid, body, properties_to_string(props), born_timestamp=int(T0 * 1000))
        result = await self.timer.put(msg, dict(props))
        assert result.ok, result.remark

    async def enqueued(self) -> None:
        cq = self.store.dispatcher.cqs[(TIMER_TOPIC, 0)]
        await wait_until_async(lambda: self.timer.enqueue_offset == cq.next_offset, 10, message="enqueued")

    def delivered(self, topic: str = "Real", qid: int = 0) -> list[Any]:
        n = self.store.get_max_offset_in_queue(topic, qid)
        if n == 0:
            return []
        r = self.store.get_message("g", topic, qid, 0, n, 1 << 30)
        return decode_records(r.join())

    async def advance_to(self, t: float, expect: int | None = None) -> None:
        self.clock.t = t
        self.timer._tick_wanted.set()
        await wait_until_async(lambda: self.timer.processed_sec >= int(t), 10, message="tick ran")
        if expect is not None:
            await wait_until_async(lambda: len(self.delivered()) >= expect, 10, message=f"{expect} delivered")


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(tmp_path)
    await h.start()
    yield h
    await h.stop()


async def test_many_messages_in_one_slot_deliver_in_time_order(h: Harness) -> None:
    base = int(T0 * 1000) + 5000
    times = [base + random.randrange(1000) for _ in range(3000)]  # all in one second's slot
    for i, at in enumerate(times):
        await h.put(at, b"%d-%d" % (at, i))
    await h.put(base + 3000, b"later")
    await h.enqueued()
    assert h.timer.waiting == 3001
    await h.advance_to(T0 + 4.999)
    assert h.delivered() == []
    await h.advance_to(T0 + 6.0, expect=3000)
    got = h.delivered()
    stamps = [int(m.body.split(b"-")[0]) for m in got]
    assert stamps == sorted(times)
    assert all(m.store_timestamp >= s for m, s in zip(got, stamps, strict=True))  # never early
    assert all("TIMER_DELIVER_MS" not in m.properties and m.properties["REAL_TOPIC"] == "Real" for m in got)
    assert h.timer.waiting == 1
    await h.advance_to(T0 + 8.0, expect=3001)
    assert h.timer.waiting == 0


async def test_sub_second_times_wait_for_their_millisecond(h: Harness) -> None:
    at = int(T0 * 1000) + 2700
    await h.put(at, b"x")
    await h.enqueued()
    await h.advance_to(T0 + 2.5)
    assert h.delivered() == []
    h.clock.t = T0 + 2.7
    await wait_until_async(lambda: len(h.delivered()) == 1, 5, message="delivered at .7")


async def test_beyond_the_roll_window_is_rolled_and_delivered_on_time(tmp_path: Path) -> None:
    h = Harness(tmp_path, timer_roll_window_slot=2)
    await h.start()
    try:
        at = int(T0 * 1000) + 10_000
        await h.put(at, b"far")
        await h.enqueued()
        entries = h.timer.log.end
        for sec in range(1, 10):
            await h.advance_to(T0 + sec)
        assert h.delivered() == []
        assert h.timer.log.end > entries + 2  # re-linked nearer its time as the window moved
        await h.advance_to(T0 + 10, expect=1)
        assert h.timer.waiting == 0
    finally:
        await h.stop()


async def test_restart_keeps_waiting_messages_and_delivers_once(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    await h.start()
    for i in range(100):
        await h.put(int(T0 * 1000) + 3000 + i, b"m%d" % i)
    await h.put(int(T0 * 1000) + 1000, b"early")
    await h.enqueued()
    await h.advance_to(T0 + 2, expect=1)
    await h.stop()
    h2 = Harness(tmp_path)
    h2.clock.t = T0 + 2.2
    await h2.start()
    try:
        assert h2.timer.waiting == 100
        await h2.advance_to(T0 + 4, expect=101)
        bodies = [m.body for m in h2.delivered()]
        assert sorted(bodies) == sorted([b"early"] + [b"m%d" % i for i in range(100)])
        assert h2.timer.waiting == 0
    finally:
        await h2.stop()


async def test_processed_log_files_are_deleted(tmp_path: Path) -> None:
    h = Harness(tmp_path, mapped_file_size_timer_log=4096)  # 93 entries per file
    await h.start()
    try:
        for i in range(500):
            await h.put(int(T0 * 1000) + 1000 + i * 4, b"m%d" % i)
        await h.enqueued()
        log_dir = tmp_path / "timerlog"
        per_file = h.timer.log.per_file
        assert min(int(n) for n in os.listdir(log_dir)) == 0
        await h.advance_to(T0 + 4, expect=500)
        # every file before the one being written holds only processed seconds: all deleted
        write_start = h.timer.log.end // per_file * per_file
        await wait_until_async(
            lambda: min(int(n) for n in os.listdir(log_dir)) == write_start, 10, message="files deleted"
        )
    finally:
        await h.stop()


async def test_per_tick_work_is_the_slot_not_the_backlog(h: Harness) -> None:
    """A tick reads only its second's entries: 20,000 far messages cost an empty second nothing."""
    for i in range(20_000):
        await h.put(int(T0 * 1000) + 3_600_000 + i, b"f%d" % i)
    await h.put(int(T0 * 1000) + 1500, b"near")
    await h.enqueued()
    reads = 0
    real_read = h.timer.log.read

    def counting_read(pos: int) -> Any:
        nonlocal reads
        reads += 1
        return real_read(pos)

    h.timer.log.read = counting_read  # type: ignore[method-assign]
    await h.advance_to(T0 + 2, expect=1)
    await h.advance_to(T0 + 5)
    assert reads == 1
    assert h.timer.waiting == 20_000
