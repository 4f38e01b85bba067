"""ScheduleMessageService: one routine per delay level re-puts due messages into their real topic.

Owns the delivery of ``SCHEDULE_TOPIC_XXXX``: queue ``level - 1`` holds the level's messages in store
order, each unit's tag field is its delivery time (written by the store), so a level's routine reads
units from its offset, stops at the first one not yet due and sleeps until it is (never early), and
puts the due ones into their real topic and queue, in order, batching runs of the same real queue.
Reads are of mapped store memory on the event loop, as pulls are; the routine yields to the loop
after every batch. Progress is kept in ``DelayOffsetTable`` (persisted by ``DeliveryTimeService``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from rocketpy.broker.schedule.offsets import DelayOffsetTable
from rocketpy.broker.schedule.records import put_in_order, real_message
from rocketpy.broker.store import BrokerMessage, Store
from rocketpy.broker.topic_config import SCHEDULE_TOPIC

log = logging.getLogger("rocketpy.broker.schedule")

SCAN_UNITS = 256  # units read per step (one batch put at most)
RETRY_AFTER_FAILURE_S = 1.0  # a refused re-put (disk full, store stopping) is tried again after this


class ScheduleMessageService:
    """Delivers the delay levels' messages when due.

    Args:
        store: the message store.
        levels_ms: delay of each level in ms (level 1 first).
        offsets: per-level progress.
        clock: seconds clock (the store's: delivery times are store time + delay).
    """

    def __init__(
        self,
        store: Store,
        levels_ms: list[int],
        offsets: DelayOffsetTable,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.levels_ms = levels_ms
        self.offsets = offsets
        self.clock = clock
        self._events = {level: asyncio.Event() for level in range(1, len(levels_ms) + 1)}
        self._idle = dict.fromkeys(self._events, False)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    def start(self) -> None:
        """Start one routine per level (on the running loop)."""
        loop = asyncio.get_running_loop()
        self._stopping = False  # a broker that becomes master again (controller mode) restarts it
        self._tasks = [loop.create_task(self._run(level)) for level in self._events]

    def wake(self, level: int) -> None:
        """A message was stored at ``level``: an idle routine (empty queue) looks again."""
        if self._idle.get(level):
            self._events[level].set()

    async def shutdown(self) -> None:
        """Stop the routines between batches (never in the middle of a put)."""
        self._stopping = True
        for ev in self._events.values():
            ev.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def waiting(self, level: int) -> int:
        """Messages of ``level`` stored and not yet delivered."""
        return max(0, self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1) - self.offsets.get(level))

    async def _run(self, level: int) -> None:
        ev = self._events[level]
        while not self._stopping:
            ev.clear()
            try:
                wait_s = await self.deliver_due(level)
            except Exception:
                log.exception("delay level %d: delivery failed; trying again in %.0f s", level, 10)
                wait_s = 10.0
            self._idle[level] = wait_s is None
            if self._stopping:
                return
            try:
                async with asyncio.timeout(wait_s):
                    await ev.wait()
            except TimeoutError:
                pass

    async def deliver_due(self, level: int) -> float | None:
        """Put every due message of ``level`` into its real topic.

        Returns:
            Seconds until the next message is due, or None when the level has none waiting.
        """
        qid = level - 1
        delay_ms = self.levels_ms[level - 1]
        store = self.store
        while not self._stopping:
            next_offset = store.get_max_offset_in_queue(SCHEDULE_TOPIC, qid)
            if next_offset == 0:
                return None  # nothing was ever stored at this level
            # cleanup may have removed some
            offset = max(self.offsets.get(level), store.get_min_offset_in_queue(SCHEDULE_TOPIC, qid))
            count = min(next_offset - offset, SCAN_UNITS)
            if count <= 0:
                self.offsets.set(level, offset)
                return None
            units = store.read_queue_units(SCHEDULE_TOPIC, qid, offset, count)
            if not units:
                return 0.01  # the unit is not readable yet (its file is being created)
            now_ms = int(self.clock() * 1000)
            due, wait_ms = self._due_messages(units, now_ms, delay_ms)
            taken = await self._put_runs(level, offset, due)
            if taken < len(due):
                return RETRY_AFTER_FAILURE_S
            if wait_ms is not None:
                return wait_ms / 1000.0
            await asyncio.sleep(0)  # a long backlog: let requests in between batches
        return None

    def _due_messages(
        self, units: tuple[int, ...], now_ms: int, delay_ms: int
    ) -> tuple[list[BrokerMessage | None], int | None]:
        """The messages of the leading due units (None for a unit whose record is gone) and the
        ms until the first unit not due (None when all are due)."""
        out: list[BrokerMessage | None] = []
        for i in range(0, len(units), 3):
            phys, _size, deliver_ms = units[i], units[i + 1], units[i + 2]
            # RocketMQ's correction: a time further ahead than the level's delay means the clock went
            # back; deliver it now rather than hold it for as long as the clock was off.
            if now_ms < deliver_ms <= now_ms + delay_ms:
                return out, deliver_ms - now_ms
            view = self.store.record_view(phys)
            msg = real_message(view) if view is not None else None
            if view is not None and msg is None:
                log.warning("schedule record at %d has no REAL_TOPIC/REAL_QID; skipped", phys)
            out.append(msg)
        return out, None

    async def _put_runs(self, level: int, offset: int, msgs: list[BrokerMessage | None]) -> int:
        """Put ``msgs`` in order; the level's offset advances after each stored run."""
        return await put_in_order(self.store, msgs, lambda n: self.offsets.set(level, offset + n))
