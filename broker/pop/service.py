"""PopService: POP consumption on one broker, behind an async API the transports call.

The remoting processors (``broker/processors/pop.py``, ``ack.py``) are thin wrappers over this
class, and RocketMQ 5's gRPC API (ReceiveMessage, AckMessage, ChangeInvisibleDuration) calls it
directly. The API (times in ms; refusals raise ``PopError(code, remark)``):

- ``await pop(PopRequest) -> PopResult``: hand out up to ``max_msgs`` messages, each invisible to
  the group for ``invisible_ms`` unless acked; waits up to ``poll_ms`` when there is nothing
  (status NO_MESSAGE / POLLING_FULL then). ``PopResult.handles()`` gives each message's receipt
  handle; ``body()`` the stored records. It is ``pop_first`` (the checks and one read, a plain
  call) then ``await pop_rest`` (the records to write, the waits and reads again): the remoting
  processor answers a pop that found messages with nothing to write after ``pop_first`` alone.
- ``await ack(group, topic, queue_id, offset, extra_info) -> AckResult``: one message is consumed.
  ``topic`` is the topic it is stored in (its POP retry topic when redelivered). An ack of a
  message no longer in flight (acked before, or redelivered since) changes nothing and answers
  ``done=False`` with a remark, as RocketMQ answers SUCCESS there.
- ``await ack_batch(acks: list[BatchAck], broker_name) -> (acked, asked)``: BATCH_ACK_MESSAGE.
- ``await change_invisible(group, topic, queue_id, offset, extra_info, invisible_ms) -> AckResult``:
  keep a message invisible ``invisible_ms`` from now; the result's ``pop_time`` / ``invisible_ms``
  make its new handle (the old one stops matching). A message no longer in flight: NO_MESSAGE.
- ``peek(group, topic, queue_id, max_msgs) -> PopResult``: what a pop would take next (no state).
- ``await notification(group, topic, queue_id, poll_ms, order) -> (has_msg, polling_full)``.
- ``polling_info(group, topic, queue_id) -> int``: pops waiting on that queue now.
- ``inflight(group, topic) -> {queue_id: (in flight, next offset)}``: for tooling.

Durability (docs/design.md "POP"): a queue's committed consumer offset is the low-water mark of
what is in flight, written to the offset table as it moves; pops (cks) and acks are records of
the revive log (``durable.py``, ``revive_log.py``); a plain pop's CK record is held back for
``popCkStayBufferTime`` and never written when the pop is acked within it (``ck_buffer.py``);
``config/popState.json`` says where a restart replays from. Everything runs on the event loop; a
pop's read and bookkeeping are one step.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.pop.acks import apply_batch_acks, commit_queues
from rocketpy.broker.pop.checks import PopChecks
from rocketpy.broker.pop.ck_buffer import CkBuffer, ck_records
from rocketpy.broker.pop.durable import PopStateFile, ReviveLog
from rocketpy.broker.pop.ledger import AckOutcome, PopLedger, PopQueue
from rocketpy.broker.pop.polling import PollingFull, PopWaiters
from rocketpy.broker.pop.reader import Limits, PopReader
from rocketpy.broker.pop.restore import restore
from rocketpy.broker.pop.revive import ReviveService
from rocketpy.broker.pop.revive_log import (
    ACK_PROPERTIES,
    CK_PROPERTIES,
    CK_WITH_ACK_PROPERTIES,
    KIND_CK,
    encode_ck,
)
from rocketpy.broker.pop.types import AckResult, PopError, PopRequest, PopResult, PopStatus
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import MessageStore, PutMessageResult
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.perm import PERM_RW
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.pop import BatchAck
from rocketpy.topic import pop_retry_topic, revive_topic

log = logging.getLogger("rocketpy.broker.pop")

#: Longest a POP or NOTIFICATION is held (its pollTime is capped to this).
MAX_POLL_MS = 120_000
#: Messages in flight on one broker at most (besides ``popInflightMessageThreshold`` per queue).
MAX_INFLIGHT_TOTAL = 2_000_000
#: A failed revive-log write is logged at most this often.
LOG_EVERY_S = 10.0
#: The ck buffer's routine wakes at most this often (held cks are written this late at most).
CK_TICK_MS = 10

#: Revive-log records a pop asks to write before it is answered: (bodies, their properties).
Records = tuple[list[bytes], str]


def wall_ms() -> int:
    """Wall-clock milliseconds (pop times are wall time, as receipt handles carry them)."""
    return time.time_ns() // 1_000_000


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class PopService:
    """POP consumption of one broker (see the module docstring for the API)."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        stats: BrokerStats,
        config_dir: str,
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        bc = broker_config
        self.broker_config = bc
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.stats = stats
        self.clock_ms = clock_ms
        self.checks = PopChecks(bc, topics, groups)
        self.ledger = PopLedger()
        self.waiters = PopWaiters(bc.pop_polling_size, bc.max_pop_polling_size)
        self.revive_log = ReviveLog(
            store, revive_topic(bc.broker_cluster_name), lambda: store.store_host, clock_ms
        )
        limits = Limits(
            bc.pop_inflight_message_threshold,
            MAX_INFLIGHT_TOTAL,
            store_config.max_transfer_bytes_on_message_in_memory,
        )
        self.reader = PopReader(
            self.ledger, store, topics, offsets, lambda: bc.broker_name, self.revive_log.floor, limits
        )
        self.revive = ReviveService(
            self.ledger, store, topics, groups, self.revive_log, clock_ms, self.commit, self._wake
        )
        self.buffer = CkBuffer(bc.pop_ck_stay_buffer_time)
        self.state_file = PopStateFile(os.path.join(config_dir, "popState.json"), self.snapshot)
        self._tasks: list[asyncio.Task[None]] = []
        self._last_log = 0.0
        #: (group, topic) -> [messages popped, acked, invisible-time changes] (bounded, for the metrics)
        self.counts: dict[tuple[str, str], list[int]] = {}

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Create the revive topic, restore what was in flight, start revive and persistence."""
        self.topics.create_system_group_topic(self.revive_log.topic, 1, PERM_RW)
        doc = await asyncio.to_thread(self.state_file.load)
        await restore(self, doc)
        self.waiters.listen_with(self.store.listen_to_dispatches)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self.revive.routine(), name="rocketpy-pop-revive"),
            loop.create_task(self._persist_routine(), name="rocketpy-pop-persist"),
        ]
        if self.buffer.window_ms:
            self._tasks.append(loop.create_task(self._ck_routine(), name="rocketpy-pop-ck-buffer"))

    async def shutdown(self) -> None:
        """Answer waiting pops, stop the routines, write the held cks and ``popState.json``
        (before the store stops)."""
        self.waiters.shutdown()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        held = [body for ck in self.buffer.take_all() for body in ck_records(ck)]
        if held:  # a clean restart keeps them invisible until their deadline
            await self._append(held, CK_PROPERTIES)
        await self.state_file.persist(force=True)

    async def _persist_routine(self) -> None:
        while True:
            await asyncio.sleep(self.broker_config.flush_consumer_offset_interval / 1000)
            await self.state_file.persist()

    async def _ck_routine(self) -> None:
        """Write the held cks whose window ended with offsets still in flight."""
        while True:
            due = self.buffer.next_due_ms()
            wait_ms = self.buffer.window_ms if due is None else max(due - _monotonic_ms(), CK_TICK_MS)
            await asyncio.sleep(wait_ms / 1000)
            bodies = self.buffer.due_records(_monotonic_ms())
            if bodies:
                await self._append(bodies, CK_PROPERTIES)

    def snapshot(self) -> dict[str, Any]:
        """``popState.json``: taken in one loop step, so offsets and the replay start agree (a
        queue's next offset stops at its oldest held ck, whose CK record may never be written)."""
        floor = self.ledger.replay_floor(self.revive_log.floor())
        hold_back = self.buffer.hold_back
        queues = [[*q.key, q.committed, hold_back(q)] for q in self.ledger.queues.values()]
        return {"reviveOffset": floor, "nextCkSeq": self.ledger.next_seq, "queues": queues}

    # -- pop ------------------------------------------------------------------------------------------
    async def pop(self, req: PopRequest) -> PopResult:
        """See the module docstring.

        Raises:
            PopError: a refusal (topic, group, permission, subscription, queue id).
        """
        started = asyncio.get_running_loop().time()
        flt, result, writes = self.pop_first(req)
        return await self.pop_rest(req, flt, result, writes, started)

    def pop_first(self, req: PopRequest) -> tuple[Any, PopResult, list[Records]]:
        """A pop's first step, in one go: the checks, then one read. Returns the filter, the result
        and the records to write before answering (``pop_rest`` writes them); when there are none and
        the result is final (messages found, or no ``poll_ms`` to wait), the caller may answer at once.

        Raises:
            PopError: a refusal (topic, group, permission, subscription, queue id); nothing changed.
        """
        self.checks.consumer(req.group, req.topic, req.queue_id, pop=True)
        flt = self.checks.message_filter(req.topic, req.expression_type, req.expression)
        result, writes = self.read_once(req, flt)
        return flt, result, writes

    async def pop_rest(
        self, req: PopRequest, flt: Any, result: PopResult, writes: list[Records], started: float
    ) -> PopResult:
        """The rest of a pop whose first step (``pop_first``) began at ``started`` (the loop's time):
        write its records, then, while nothing was found and ``poll_ms`` allows, wait and read again."""
        loop = asyncio.get_running_loop()
        deadline = started + min(req.poll_ms, MAX_POLL_MS) / 1000
        key = (req.group, req.topic, req.queue_id)
        watched = (req.topic, pop_retry_topic(req.group, req.topic))
        while True:
            for bodies, properties in writes:
                await self._append(bodies, properties)
            remaining = deadline - loop.time()
            if result.status is PopStatus.FOUND or remaining <= 0:
                return result
            try:
                await self.waiters.wait(key, watched, flt, remaining)
            except PollingFull:
                result.status = PopStatus.POLLING_FULL
                return result
            result, writes = self.read_once(req, flt)

    def read_once(self, req: PopRequest, flt: Any) -> tuple[PopResult, list[Records]]:
        """One read and its bookkeeping, in one step; the records it asks to write, in order (the
        ACKS records of what it filtered out, then the CK records of cks it could not hold)."""
        read = self.reader.read(req, flt, self.clock_ms())
        commit_queues(self, read.touched)
        writes: list[Records] = []
        if read.acks:
            writes.append((read.acks, ACK_PROPERTIES))
        if read.cks:
            bodies = self.buffer.records_for_pops(read.cks, _monotonic_ms())
            if bodies:
                writes.append((bodies, CK_PROPERTIES))
        result = read.result
        if result.status is PopStatus.FOUND:
            self.stats.on_get(req.group, req.topic, result.count, result.size)
            self._count(req.group, req.topic, 0, result.count)
        return result, writes

    def peek(self, group: str, topic: str, queue_id: int, max_msgs: int) -> PopResult:
        """What the group would pop next (nothing changes).

        Raises:
            PopError: as ``pop``.
        """
        self.checks.consumer(group, topic, queue_id)
        return self.reader.peek(group, topic, queue_id, max_msgs, self.clock_ms())

    # -- acks -----------------------------------------------------------------------------------------
    async def ack(self, group: str, topic: str, queue_id: int, offset: int, extra_info: str) -> AckResult:
        """See the module docstring.

        Raises:
            PopError: unknown topic or queue, an offset outside the queue, a malformed or foreign
                handle, or a store that refused the ack record.
        """
        self._check_message(topic, queue_id, offset)
        h = self.checks.handle(extra_info, topic, queue_id, offset)
        q = self.ledger.queue((group, topic, queue_id))
        if q is None:
            return AckResult(False, _not_in_flight(group, topic, queue_id, offset))
        outcome, ck = self.ledger.ack(q, offset, h.pop_time)
        if outcome is not AckOutcome.ACKED:
            return AckResult(False, _remark(outcome, group, topic, queue_id, offset))
        assert ck is not None
        self.commit(q)
        self._count(group, topic, 1, 0)
        self._maybe_unblocked(q)
        bodies = self.buffer.records_for_acks(self.ledger, [(q, ck.seq, [offset])])
        _raise_unless_stored(await self._append(bodies, _ack_properties(bodies)))
        return AckResult(True)

    async def ack_batch(self, acks: list[BatchAck], broker_name: str | None) -> tuple[int, int]:
        """BATCH_ACK_MESSAGE: ``(acked, asked)``; offsets not in flight are skipped (RocketMQ's rule).

        Raises:
            PopError: the body names another broker, or the store refused the ack records.
        """
        if broker_name and broker_name != self.checks.broker_name:
            raise PopError(
                ResponseCode.INVALID_PARAMETER,
                f"the acks name broker {broker_name!r}, this is "
                f"{self.checks.broker_name!r}: ack where they came from",
            )
        done, acked, asked = apply_batch_acks(self, acks)
        if done:
            bodies = self.buffer.records_for_acks(self.ledger, done)
            _raise_unless_stored(await self._append(bodies, _ack_properties(bodies)))
        return acked, asked

    async def change_invisible(
        self, group: str, topic: str, queue_id: int, offset: int, extra_info: str, invisible_ms: int
    ) -> AckResult:
        """See the module docstring.

        Raises:
            PopError: as ``ack``, and NO_MESSAGE when the message is not in flight under that handle.
        """
        self._check_message(topic, queue_id, offset)
        h = self.checks.handle(extra_info, topic, queue_id, offset)
        q = self.ledger.queue((group, topic, queue_id))
        if q is None:
            raise PopError(ResponseCode.NO_MESSAGE, _not_in_flight(group, topic, queue_id, offset))
        floor = self.revive_log.floor()
        outcome, ck = self.ledger.change(q, offset, h.pop_time, self.clock_ms(), invisible_ms, floor)
        if outcome is not AckOutcome.ACKED:
            raise PopError(ResponseCode.NO_MESSAGE, _remark(outcome, group, topic, queue_id, offset))
        assert ck is not None
        attempts = [q.attempts.get(offset, 0)] if ck.order else None
        bodies = self.buffer.records_before(q)  # the change's CK says the queue was read past them
        bodies.append(
            encode_ck(q.key, ck.seq, offset, offset + 1, ck.pop_time, invisible_ms, [offset], attempts)
        )
        self._count(group, topic, 0, 0, changes=1)
        # durable before its ack can come
        _raise_unless_stored(await self._append(bodies, [CK_WITH_ACK_PROPERTIES] * len(bodies)))
        return AckResult(True, pop_time=ck.pop_time, invisible_ms=invisible_ms, revive_qid=h.revive_qid)

    # -- notification -----------------------------------------------------------------------------------
    async def notification(
        self, group: str, topic: str, queue_id: int, poll_ms: int, order: bool = False
    ) -> tuple[bool, bool]:
        """``(has_msg, polling_full)``: whether the group has something to pop (waits up to ``poll_ms``).

        Raises:
            PopError: as ``pop``.
        """
        self.checks.consumer(group, topic, queue_id)
        has = self.reader.has_message(group, topic, queue_id, order, self.clock_ms())
        if has or poll_ms <= 0:
            return has, False
        try:
            woken = await self.waiters.wait(
                (group, topic, queue_id),
                (topic, pop_retry_topic(group, topic)),
                None,
                min(poll_ms, MAX_POLL_MS) / 1000,
            )
        except PollingFull:
            return False, True
        return woken and self.reader.has_message(group, topic, queue_id, order, self.clock_ms()), False

    def polling_info(self, group: str, topic: str, queue_id: int) -> int:
        """POPs of ``group`` waiting on ``topic``'s queue ``queue_id`` now.

        Raises:
            PopError: as ``pop``.
        """
        self.checks.consumer(group, topic, queue_id)
        return self.waiters.waiting(group, topic, queue_id)

    def inflight(self, group: str, topic: str) -> dict[int, tuple[int, int, int | None]]:
        """``{queue_id: (messages in flight, next offset to pop, pop time of the oldest in flight)}``
        of ``group`` on ``topic`` (queues the group never popped since the start are absent)."""
        return {
            q.queue_id: (len(q.inflight), q.next_offset, q.oldest_pop_time())
            for q in self.ledger.queues.values()
            if q.group == group and q.topic == topic
        }

    # -- helpers -------------------------------------------------------------------------------------------
    def _check_message(self, topic: str, queue_id: int, offset: int) -> None:
        self.checks.queue_of_message(topic, queue_id)
        lo = self.store.get_min_offset_in_queue(topic, queue_id)
        hi = self.store.get_max_offset_in_queue(topic, queue_id)
        if not lo <= offset <= hi:
            raise PopError(
                ResponseCode.NO_MESSAGE,
                f"offset {offset} is outside {topic}:{queue_id}'s "
                f"[{lo}, {hi}]: the message is gone or never was",
            )

    def commit(self, q: PopQueue) -> None:
        """Write ``q``'s low-water mark to the offset table when it moved."""
        lw = q.low_water()
        if lw != q.committed:
            q.committed = lw
            self.offsets.commit_offset(q.group, q.topic, q.queue_id, lw)

    def _maybe_unblocked(self, q: PopQueue) -> None:
        if q.orderly and not q.inflight:
            self._wake(q.topic, q.queue_id)

    def _wake(self, topic: str, queue_id: int) -> None:
        self.waiters.notify(topic, queue_id)

    async def _append(self, bodies: list[bytes], properties: str | list[str]) -> PutMessageResult:
        result = await self.revive_log.append(bodies, properties)
        if not result.ok and time.monotonic() - self._last_log > LOG_EVERY_S:
            self._last_log = time.monotonic()
            log.warning(
                "POP records not stored (%s: %s): a restart may deliver popped messages again",
                result.status.name,
                result.remark,
            )
        return result

    def _count(self, group: str, topic: str, acks: int, pops: int, changes: int = 0) -> None:
        key = (group, topic)
        row = self.counts.get(key)
        if row is None:
            if len(self.counts) >= 100_000:
                return
            row = self.counts[key] = [0, 0, 0]
        row[0] += pops
        row[1] += acks
        row[2] += changes


def _ack_properties(bodies: list[bytes]) -> list[str]:
    """The properties of an ack's records: CK records before its ACKS records wait for the flush too."""
    return [ACK_PROPERTIES if b[0] != KIND_CK else CK_WITH_ACK_PROPERTIES for b in bodies]


def _not_in_flight(group: str, topic: str, queue_id: int, offset: int) -> str:
    return (
        f"message {topic}:{queue_id} offset {offset} is not in flight for group {group}: it was acknowledged "
        "before, or its invisible time passed and it was delivered again (ack that copy with its own "
        "handle); nothing changed"
    )


def _remark(outcome: AckOutcome, group: str, topic: str, queue_id: int, offset: int) -> str:
    if outcome is AckOutcome.STALE:
        return (
            f"the receipt handle of {topic}:{queue_id} offset {offset} was replaced by an invisible-time "
            "change: use the handle that change returned; nothing changed"
        )
    if outcome is AckOutcome.REVIVING:
        return (
            f"message {topic}:{queue_id} offset {offset} reached its invisible time and is being "
            f"delivered again to group {group}; ack that copy with its own handle; nothing changed"
        )
    return _not_in_flight(group, topic, queue_id, offset)


def _raise_unless_stored(result: PutMessageResult) -> None:
    if result.ok:
        return
    code = (
        ResponseCode.SERVICE_NOT_AVAILABLE
        if result.status.name == "SERVICE_NOT_AVAILABLE"
        else ResponseCode.SYSTEM_ERROR
    )
    raise PopError(
        code,
        f"the ack is applied but the broker could not store it ({result.status.name}: "
        f"{result.remark}); a restart may deliver the message again",
    )
