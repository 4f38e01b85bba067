"""The revive service: POP messages whose invisible time passed unacknowledged come back.

Owns what happens at a ck's deadline (RocketMQ's ``PopReviveService``):

- a ck of a plain pop: each offset still in flight under it is copied to the group's POP retry
  topic ``%RETRY%{group}_{topic}`` (queue 0, created on demand) with ``reconsume_times + 1``,
  ``RETRY_TOPIC``/``ORIGIN_MESSAGE_ID`` kept and ``1ST_POP_TIME`` set — or to ``%DLQ%{group}``
  once its reconsume times reached the group's ``retryMaxTimes`` (the send-back's rule,
  ``broker/retry.py``) — and then acknowledged with an ack record of reason ``revived`` /
  ``dead letter``. Only after the copy is stored is the original done: a crash in between
  redelivers it twice, never zero times. While a ck is being revived its offsets stay in flight
  (the low-water mark holds) but acks of them change nothing (``AckOutcome.REVIVING``).
- a ck of an orderly pop: its unacked offsets become poppable again in place (same queue, same
  order; ``attempts`` + 1), except those handed out ``retryMaxTimes + 1`` times, which go to the
  DLQ first. Waiting pops of the queue are woken.

The routine wakes at the earliest deadline (at most every ``MAX_IDLE_MS``) and works through due
cks ``CKS_PER_STEP`` at a time, yielding to the loop between steps; copies go to the store in
batches of at most ``COPY_BATCH`` messages / ``COPY_BATCH_BYTES`` bytes per topic. A ck whose
copies the store refused is tried again after ``RETRY_AFTER_MS``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketpy.broker.pop.durable import ReviveLog
from rocketpy.broker.pop.ledger import Ck, PopLedger, PopQueue
from rocketpy.broker.pop.revive_log import ACK_PROPERTIES, REASON_DEAD_LETTER, REASON_REVIVED, encode_acks
from rocketpy.broker.retry import FailedRecord, ensure_dlq_topic, read_failed_record, send_back_message
from rocketpy.broker.store import BrokerMessage, MessageStore
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager, TopicLimitError
from rocketpy.message import MessageConst
from rocketpy.perm import PERM_RW
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic

log = logging.getLogger("rocketpy.broker.pop")

CKS_PER_STEP = 64
COPY_BATCH = 256
COPY_BATCH_BYTES = 1024 * 1024
MAX_IDLE_MS = 200
RETRY_AFTER_MS = 1000
DEFAULT_MAX_RECONSUME = 16


@dataclass(slots=True)
class _Revival:
    """One ck's offsets in this step: copied to the retry topic (or gone), and dead-lettered."""

    ck: Ck
    revived: list[int] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)


@dataclass
class _Plan:
    """The copies of one step: per target topic, ``(ck, message)``; and each ck's revival by seq."""

    copies: dict[str, list[tuple[Ck, BrokerMessage]]] = field(default_factory=dict)
    offsets: dict[int, _Revival] = field(default_factory=dict)


class ReviveService:
    """Brings back expired POP messages (see the module docstring).

    Args:
        ledger: the POP bookkeeping.
        store: where originals are read and copies put.
        topics: the topic table (retry and DLQ topics are created in it).
        groups: the group table (``retryMaxTimes``).
        revive_log: where ack records go.
        clock_ms: wall clock, ms.
        on_changed: called with a queue whose low-water mark may have moved.
        notify: ``(topic, queue_id)``: wake pops waiting on a queue that became poppable.
    """

    def __init__(
        self,
        ledger: PopLedger,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        revive_log: ReviveLog,
        clock_ms: Callable[[], int],
        on_changed: Callable[[PopQueue], None],
        notify: Callable[[str, int], None],
    ) -> None:
        self.ledger = ledger
        self.store = store
        self.topics = topics
        self.groups = groups
        self.revive_log = revive_log
        self.clock_ms = clock_ms
        self._on_changed = on_changed
        self._notify = notify
        self.revived_count = 0
        self.dead_letter_count = 0
        self.released_count = 0
        #: (group, topic) -> messages revived, for the metrics (bounded like BrokerStats' tables)
        self.revived_by: dict[tuple[str, str], int] = {}

    async def routine(self) -> None:
        """Revive due cks until cancelled."""
        while True:
            await self.run_once()
            now = self.clock_ms()
            earliest = self.ledger.earliest_deadline()
            wait_ms = MAX_IDLE_MS if earliest is None else min(MAX_IDLE_MS, max(1, earliest - now))
            await asyncio.sleep(wait_ms / 1000)

    async def run_once(self) -> int:
        """Revive every ck due now; returns how many cks were handled."""
        due = self.ledger.due(self.clock_ms())
        for i in range(0, len(due), CKS_PER_STEP):
            await self._step(due[i : i + CKS_PER_STEP])
            if i + CKS_PER_STEP < len(due):
                await asyncio.sleep(0)
        return len(due)

    def _max_times(self, group: str) -> int:
        cfg = self.groups.find(group)
        return cfg.retry_max_times if cfg is not None else DEFAULT_MAX_RECONSUME

    async def _step(self, cks: list[Ck]) -> None:
        plan = _Plan()
        released: list[Ck] = []
        for ck in cks:
            if ck.order and not self._plan_orderly(ck, plan):
                released.append(ck)
            elif not ck.order:
                self._plan_copies(ck, plan)
        for ck in released:
            self._release(ck, [])
        failed = await self._put_copies(plan)
        await self._finish(plan, failed)

    def _plan_orderly(self, ck: Ck, plan: _Plan) -> bool:
        """Plan the DLQ copies of an expired orderly batch's exhausted offsets; False: none."""
        q = ck.queue
        limit = self._max_times(q.group)
        over = [o for o in ck.in_flight() if q.attempts.get(o, 0) + 1 > limit]
        if not over:
            return False
        self.ledger.begin_revive(ck)
        plan.offsets[ck.seq] = _Revival(ck)
        for o in over:
            failed = self._original(q, o)
            if failed is None:
                plan.offsets[ck.seq].revived.append(o)
                continue
            self._add_copy(plan, ck, o, failed, dead=True, max_times=limit)
        return True

    def _plan_copies(self, ck: Ck, plan: _Plan) -> None:
        q = ck.queue
        limit = self._max_times(q.group)
        offsets = self.ledger.begin_revive(ck)
        plan.offsets[ck.seq] = _Revival(ck)
        for o in offsets:
            failed = self._original(q, o)
            if failed is None:  # cleaned up meanwhile: nothing to bring back
                plan.offsets[ck.seq].revived.append(o)
                continue
            failed.properties.setdefault(MessageConst.FIRST_POP_TIME, str(ck.pop_time))
            self._add_copy(plan, ck, o, failed, dead=failed.reconsume_times >= limit, max_times=limit)

    def _add_copy(
        self, plan: _Plan, ck: Ck, offset: int, failed: FailedRecord, *, dead: bool, max_times: int
    ) -> None:
        q = ck.queue
        try:
            if dead:
                target = ensure_dlq_topic(self.topics, q.group).topic_name
            else:
                target = (
                    q.topic
                    if q.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                    else pop_retry_topic(q.group, q.topic)
                )
                self.topics.create_system_group_topic(target, 1, PERM_RW)
        except TopicLimitError as e:
            log.error("cannot revive %s offset %d: %s", q.key, offset, e)
            return  # stays in flight; retried with the ck
        msg = send_back_message(failed, target, 0, "", max_times)
        plan.copies.setdefault(target, []).append((ck, msg))
        revival = plan.offsets[ck.seq]
        (revival.dead if dead else revival.revived).append(offset)

    def _original(self, q: PopQueue, offset: int) -> FailedRecord | None:
        phys = self.store.get_commit_log_offset_in_queue(q.topic, q.queue_id, offset)
        record = self.store.lookup_message_by_offset(phys) if phys >= 0 else None
        if record is None:
            return None
        return read_failed_record(record, phys, self.store.store_host)

    async def _put_copies(self, plan: _Plan) -> set[int]:
        """Store the planned copies; the seqs of cks a refused batch held."""
        failed: set[int] = set()
        for target, copies in plan.copies.items():
            for batch in _batches(copies):
                result = await self.store.put_messages([m for _, m in batch])
                if not result.ok:
                    log.warning("revive copies to %s refused (%s); retrying later", target, result.remark)
                    failed.update(ck.seq for ck, _ in batch)
        return failed

    async def _finish(self, plan: _Plan, failed: set[int]) -> None:
        """Ack records for what was copied, then mark it done (or try the ck again later)."""
        bodies: list[bytes] = []
        done: list[_Revival] = []
        now = self.clock_ms()
        for seq, revival in plan.offsets.items():
            ck, revived, dead = revival.ck, revival.revived, revival.dead
            if seq in failed:
                self.ledger.retry_later(ck, now + RETRY_AFTER_MS)
                continue
            q = ck.queue  # its committed offset as it is: these offsets are not done yet
            for offsets, reason in ((revived, REASON_REVIVED), (dead, REASON_DEAD_LETTER)):
                if offsets:
                    bodies += encode_acks(q.group, q.topic, [(q.queue_id, seq, q.committed, offsets)], reason)
            done.append(revival)
        if bodies:
            result = await self.revive_log.append(bodies, ACK_PROPERTIES)
            if not result.ok:
                log.warning("revive acks not written (%s): a restart may redeliver them again", result.remark)
        for r in done:
            ck, revived, dead = r.ck, r.revived, r.dead
            self.ledger.finish_revive(ck, revived + dead)
            if ck.order:
                self._release(ck, dead)
            elif ck.open:  # a copy could not be planned (topic limit): the rest later
                self.ledger.retry_later(ck, now + RETRY_AFTER_MS)
            self._count(ck.queue, len(revived), len(dead))
            self._on_changed(ck.queue)

    def _release(self, ck: Ck, dead: list[int]) -> None:
        q = ck.queue
        released = self.ledger.release_orderly(ck)
        q.acked_ahead.update(o for o in dead if o > q.next_offset)
        self.released_count += len(released)
        self._on_changed(q)
        self._notify(q.topic, q.queue_id)

    def _count(self, q: PopQueue, revived: int, dead: int) -> None:
        self.revived_count += revived
        self.dead_letter_count += dead
        key = (q.group, q.topic)
        if key in self.revived_by or len(self.revived_by) < 100_000:
            self.revived_by[key] = self.revived_by.get(key, 0) + revived + dead


def _batches(copies: list[tuple[Ck, BrokerMessage]]) -> list[list[tuple[Ck, BrokerMessage]]]:
    """``copies`` cut into store batches of at most ``COPY_BATCH`` messages and ``COPY_BATCH_BYTES``."""
    out: list[list[tuple[Ck, BrokerMessage]]] = []
    batch: list[tuple[Ck, BrokerMessage]] = []
    size = 0
    for item in copies:
        n = len(item[1].body)
        if batch and (len(batch) >= COPY_BATCH or size + n > COPY_BATCH_BYTES):
            out.append(batch)
            batch, size = [], 0
        batch.append(item)
        size += n
    if batch:
        out.append(batch)
    return out
