"""TimerMessageService: timer messages from send to delivery (RocketMQ 5 ``TimerMessageStore``).

Owns the three steps and their persistence:
- **put**: the absolute time (``TIMER_DELIVER_MS``, or now + ``TIMER_DELAY_SEC``) is checked against
  ``timerMaxDelaySec`` and the message stored once in ``rmq_sys_wheel_timer`` queue 0 with that time
  in its consume-queue tag slot and its real place in ``REAL_TOPIC``/``REAL_QID``.
- **enqueue**: a routine reads the timer queue's new units and links each into the wheel slot of its
  second (one log entry, one slot write); a time beyond ``timerRollWindowSlot`` seconds is linked at
  the window's end and re-linked ("rolled") when that slot comes.
- **tick**: once per second the routine takes the slot of the new second (a list walk over that
  second's entries only: the cost per tick does not depend on how many messages wait), keeps those
  entries in a small heap until their millisecond, and re-puts them into their real queue in order.

**Recall** (RocketMQ 5's RecallMessage): ``recall(phys, unique_key)`` cancels a message still
waiting, found by its record's commitlog offset (the send's offset msg id) and checked by its
unique key; the offset goes to ``config/timerrecall.json`` (written before the recall is
answered) and the tick drops it when its time comes. A message whose second is being delivered
or is past cannot be recalled.

``config/timercheck.json`` holds a consistent point (log end, timer-queue offset enqueued, last
fully delivered second, waiting count), written in a thread after the log and wheel are synced. A
restart scans the log past that end (entries appended since, still in the page cache after a
kill) and processes the slots after that second: nothing waiting is lost; after a kill a second
that was being delivered is delivered again (at least once); a graceful stop finishes the current
second first (exactly once).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os

from rocketpy.broker.persistence import JsonTable
from rocketpy.broker.schedule.records import put_in_order, real_message, to_waiting_topic
from rocketpy.broker.store import BrokerMessage, PutMessageResult, PutMessageStatus, Store
from rocketpy.broker.timer.log import TimerLog
from rocketpy.broker.timer.wheel import TimerWheel
from rocketpy.config import StoreConfig
from rocketpy.message import MessageConst
from rocketpy.record import decode_record

log = logging.getLogger("rocketpy.broker.timer")

TIMER_TOPIC = "rmq_sys_wheel_timer"
ENQUEUE_BATCH = 1024  # units linked per step (then the loop gets a turn)
DELIVER_BATCH = 512
#: Recalled messages waiting for their time at once (a recall past it is refused).
MAX_RECALLED = 100_000


class TimerMessageService:
    """The timer of one broker.

    Args:
        store: the started message store (its clock is the timer's clock).
        config: store settings (``timerMaxDelaySec``, ``timerRollWindowSlot``, ...).
        config_dir: the broker's ``config`` directory (``timercheck.json``).
    """

    def __init__(self, store: Store, config: StoreConfig, config_dir: str) -> None:
        self.store = store
        self.clock = store.clock
        self.max_delay_ms = config.timer_max_delay_sec * 1000
        self.roll_window = config.timer_roll_window_slot
        self.flush_interval_s = config.timer_flush_interval_ms / 1000.0
        root = config.store_path_root_dir
        self.log = TimerLog(os.path.join(root, "timerlog"), config.mapped_file_size_timer_log)
        self.wheel = TimerWheel(os.path.join(root, "timerwheel"))
        self.check = JsonTable(os.path.join(config_dir, "timercheck.json"), lambda: self._consistent)
        #: recalled timer records' commitlog offsets -> their delivery ms (dropped when due)
        self.recalled: dict[int, int] = {}
        self.recall_table = JsonTable(
            os.path.join(config_dir, "timerrecall.json"),
            lambda: {str(k): v for k, v in self.recalled.items()},
        )
        self.enqueue_offset = 0
        self.processed_sec = 0  # slots up to here were taken out of the wheel
        self.waiting = 0  # messages stored and not yet delivered
        self._due: list[tuple[int, int, int, int]] = []  # this second's (deliver_ms, seq, phys, size)
        self._seq = 0
        self._consistent: dict[str, int] = {}
        self._enqueue_wanted = asyncio.Event()
        self._tick_wanted = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Map the wheel and log, recover (thread), then start the routines."""
        await asyncio.to_thread(self._load)
        self._stopping = False  # a broker that becomes master again (controller mode) restarts it
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(r)
            for r in (self._enqueue_routine(), self._tick_routine(), self._persist_routine())
        ]
        self._enqueue_wanted.set()

    def _load(self) -> None:
        self.recalled = {int(k): int(v) for k, v in (self.recall_table.load() or {}).items()}
        doc = self.check.load() or {}
        self.wheel.open()
        found = self.log.open(int(doc.get("logEnd", 0)))
        self.enqueue_offset = int(doc.get("enqueueOffset", 0))
        self.waiting = int(doc.get("waiting", 0))
        for e in found:  # linked after the checkpoint: count the messages, not their re-links
            if e.queue_offset >= self.enqueue_offset:
                self.waiting += 1
        self.enqueue_offset = max([self.enqueue_offset] + [e.queue_offset + 1 for e in found])
        self.processed_sec = int(doc.get("completedSec", 0)) or int(self.clock()) - 1
        self._mark_consistent()
        log.info(
            "timer: %d waiting, log end %d, resuming after second %d",
            self.waiting,
            self.log.end,
            self.processed_sec,
        )

    async def shutdown(self) -> None:
        """Finish the current second's deliveries, stop the routines and write the checkpoint."""
        self._stopping = True
        self._enqueue_wanted.set()
        self._tick_wanted.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._persist(force=True)
        await self.recall_table.persist()
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        self.log.close()
        self.wheel.close()

    def _mark_consistent(self) -> None:
        """Remember the current state as the restart point (only when no second is half delivered)."""
        self._consistent = {
            "logEnd": self.log.end,
            "enqueueOffset": self.enqueue_offset,
            "completedSec": self.processed_sec,
            "waiting": self.waiting,
        }
        self.check.mark_dirty()

    async def _persist(self, force: bool = False) -> None:
        if not force and not self.check.dirty:
            return
        doc = dict(self._consistent)
        await asyncio.to_thread(self._sync_files, doc["completedSec"])
        await self.check.persist(force=True)

    def _sync_files(self, completed_sec: int) -> None:
        self.log.flush()
        self.wheel.flush()
        self.log.delete_files_done(completed_sec - 1)

    async def _persist_routine(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.flush_interval_s)
            await self._persist()

    # -- put ------------------------------------------------------------------------------------
    async def put(self, msg: BrokerMessage, props: dict[str, str]) -> PutMessageResult:
        """Store a timer message for delivery at its time (refused beyond ``timerMaxDelaySec``)."""
        now_ms = int(self.clock() * 1000)
        at = props.pop(MessageConst.TIMER_DELIVER_MS, None)
        delay_s = props.pop(MessageConst.TIMER_DELAY_SEC, None)
        if at is not None and at.isdigit():
            deliver_ms = int(at)
        elif delay_s is not None and delay_s.isdigit():
            deliver_ms = now_ms + int(delay_s) * 1000
        else:
            return _refuse(f"TIMER_DELIVER_MS={at!r} / TIMER_DELAY_SEC={delay_s!r} is not a whole number")
        if deliver_ms - now_ms > self.max_delay_ms:
            return _refuse(
                f"the delivery time is {(deliver_ms - now_ms) / 1000:.0f} s ahead; this broker's "
                f"timerMaxDelaySec is {self.max_delay_ms // 1000}; deliver sooner or raise timerMaxDelaySec"
            )
        props[MessageConst.TIMER_DELIVER_MS] = str(deliver_ms)
        result = await self.store.put_message(to_waiting_topic(msg, props, TIMER_TOPIC, 0, deliver_ms))
        if result.ok:
            self._enqueue_wanted.set()
        return result

    # -- enqueue --------------------------------------------------------------------------------
    async def _enqueue_routine(self) -> None:
        while not self._stopping:
            self._enqueue_wanted.clear()
            try:
                n = await self._enqueue_batch()
            except Exception:
                log.exception("timer: enqueue failed; trying again in 1 s")
                n = 0
                await asyncio.sleep(1.0)
            if n == 0:
                await self._enqueue_wanted.wait()
            else:
                await asyncio.sleep(0)

    async def _enqueue_batch(self) -> int:
        """Link the next timer-queue units into the wheel; returns how many."""
        store = self.store
        if store.get_max_offset_in_queue(TIMER_TOPIC, 0) <= self.enqueue_offset:
            return 0
        await self._room(ENQUEUE_BATCH)
        units = store.read_queue_units(TIMER_TOPIC, 0, self.enqueue_offset, ENQUEUE_BATCH)
        n = len(units) // 3
        now_sec = int(self.clock())
        for i in range(n):
            phys, size, deliver_ms = units[3 * i : 3 * i + 3]
            self._link(deliver_ms, phys, size, self.enqueue_offset, now_sec)
            self.enqueue_offset += 1
            self.waiting += 1
        if not self._due:
            self._mark_consistent()
        self._tick_wanted.set()  # a message due in the current second is delivered at the next tick
        return n

    async def _room(self, count: int) -> None:
        if not self.log.has_room(count + self.log.per_file // 2):
            await asyncio.to_thread(self.log.prepare, count)

    def _link(self, deliver_ms: int, phys: int, size: int, queue_offset: int, now_sec: int) -> None:
        """Append an entry and make it the newest of its slot: the second it is due, at the latest
        the roll window's end, at the earliest the next second not taken out yet."""
        sec = min(deliver_ms // 1000, max(now_sec, self.processed_sec) + self.roll_window)
        sec = max(sec, self.processed_sec + 1)
        prev = self.wheel.last(sec)
        pos = self.log.append(deliver_ms, phys, size, prev, queue_offset, sec)
        self.wheel.set_last(sec, pos)

    # -- tick -----------------------------------------------------------------------------------
    async def _tick_routine(self) -> None:
        while True:
            try:
                await self._tick()
            except Exception:
                log.exception("timer: delivery failed; trying again in 1 s")
                await asyncio.sleep(1.0)
            if self._stopping and not self._due:
                return
            now = self.clock()
            wake = self._due[0][0] / 1000.0 if self._due else float(int(now) + 1)
            self._tick_wanted.clear()
            try:
                async with asyncio.timeout(max(0.0, min(wake, int(now) + 1) - now)):
                    await self._tick_wanted.wait()
            except TimeoutError:
                pass

    async def _tick(self) -> None:
        """Take out the slots of every second that began, then deliver what is due."""
        while self.processed_sec < int(self.clock()) and not self._stopping:
            await self._take_slot(self.processed_sec + 1)
            await self._deliver_due()
            if self.processed_sec % 1024 == 0:
                await asyncio.sleep(0)  # catching up after a long stop: let requests in
        await self._deliver_due()
        if not self._due:
            self._mark_consistent()

    async def _take_slot(self, sec: int) -> None:
        """Move the entries of second ``sec`` to the due heap (re-linking those not due yet)."""
        pos = self.wheel.last(sec)
        self.processed_sec = sec  # before any re-link: those go to later seconds
        if pos < 0:
            return
        entries = []
        while pos >= 0 and (e := self.log.read(pos)) is not None and e.link_sec == sec:
            entries.append(e)
            pos = e.prev
        entries.reverse()  # the list is newest first; deliver in link order
        now_sec = int(self.clock())
        for k in range(0, len(entries), ENQUEUE_BATCH):
            await self._room(ENQUEUE_BATCH)
            for e in entries[k : k + ENQUEUE_BATCH]:
                if e.deliver_ms // 1000 > sec:  # rolled: link again nearer its time
                    self._link(e.deliver_ms, e.phys, e.size, -1, now_sec)
                else:
                    self._seq += 1
                    heapq.heappush(self._due, (e.deliver_ms, self._seq, e.phys, e.size))

    async def _deliver_due(self) -> None:
        """Re-put the heap's messages whose millisecond has come, in time order."""
        due = self._due
        while due and due[0][0] <= int(self.clock() * 1000):
            batch: list[tuple[int, int, int, int]] = []
            while due and due[0][0] <= int(self.clock() * 1000) and len(batch) < DELIVER_BATCH:
                batch.append(heapq.heappop(due))
            msgs: list[BrokerMessage | None] = []
            for _ms, _seq, phys, _size in batch:
                if self.recalled.pop(phys, None) is not None:  # recalled: taken without a re-put
                    self.recall_table.mark_dirty()
                    msgs.append(None)
                    continue
                view = self.store.record_view(phys)
                msgs.append(real_message(view) if view is not None else None)
            taken = await put_in_order(self.store, msgs, lambda n: None)
            self.waiting -= taken
            if taken < len(batch):  # refused (disk full, stopping): try again next second
                await self._room(len(batch))
                now_sec = int(self.clock())
                for deliver_ms, _seq, phys, size in batch[taken:]:
                    self._link(deliver_ms, phys, size, -1, now_sec)
                return

    # -- recall ---------------------------------------------------------------------------------
    async def recall(self, phys: int, unique_key: str) -> str | None:
        """Cancel the timer message stored at commitlog offset ``phys`` with ``unique_key``.

        Returns None when it is recalled (also when it was already), else why it cannot be.
        """
        view = self.store.record_view(phys)
        if view is None:
            return "no timer message at that offset on this broker (deleted by cleanup?)"
        record = decode_record(view)
        props = record.properties
        deliver = props.get(MessageConst.TIMER_DELIVER_MS, "")
        if (
            record.topic != TIMER_TOPIC
            or props.get(MessageConst.UNIQ_KEY) != unique_key
            or not deliver.isdigit()
        ):
            return "the handle names no timer message of this broker"
        if phys in self.recalled:
            return None
        if int(deliver) // 1000 <= self.processed_sec:
            return "the message is delivered already (or being delivered)"
        if len(self.recalled) >= MAX_RECALLED:
            return f"{MAX_RECALLED} recalled messages wait for their time already; retry later"
        self.recalled[phys] = int(deliver)
        self.recall_table.mark_dirty()
        await self.recall_table.persist()
        return None


def _refuse(remark: str) -> PutMessageResult:
    return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark)
