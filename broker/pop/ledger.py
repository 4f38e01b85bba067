"""The bookkeeping of POP consumption: what is in flight, per queue, and until when.

Owns one ``PopQueue`` per (group, topic, queue id) a group pops, and the ``Ck`` (checkpoint) of
every pop batch still open. Pure: no I/O, no clock (times are passed in, in ms), so the
model-based test drives it directly.

Invariants (asserted where they are cheap):

- A queue's offsets below ``next_offset`` were read by a pop; each is either *in flight* (a key
  of ``inflight``, mapped to the ck it is in flight under) or *done* (acked, revived, dead-lettered
  or filtered out by the subscription). Offsets are handed out in increasing order, so the
  *low-water mark* (``low_water``: the smallest in-flight offset, else ``next_offset``) is the
  group's committed consumer offset: everything below it is done.
- A ck is *open* while an offset is in flight under it (``open`` counts them). Its ``floor`` is
  the revive log's queue offset when it was made: every record about it lies at or after its
  floor, so a restart replays the log from the oldest open ck's floor (``replay_floor``).
- ``inflight_total`` is the sum of every queue's ``len(inflight)``.

Orderly queues hand out one batch at a time: ``blocked`` while a batch is in flight. An expired
orderly batch is *released*: its unacked offsets become poppable again from
the smallest of them (``attempts`` counts how often each was handed out); offsets acked out of
order meanwhile are remembered in ``acked_ahead`` and skipped by the next pop.

Bounds: queues (``MAX_POP_QUEUES``), messages in flight in total (the service's limit, checked
before ``pop``), the timer heap (rebuilt once stale entries outnumber open cks).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Iterable
from enum import Enum
from typing import TYPE_CHECKING, Any

from rocketpy._accel import twin

#: Most (group, topic, queue) combinations under POP on one broker.
MAX_POP_QUEUES = 200_000
#: The timer heap is rebuilt when it holds this many more entries than open cks.
HEAP_SLACK = 4096

QueueKey = tuple[str, str, int]


class Ck:
    """One pop batch of one queue (RocketMQ's PopCheckPoint), or one message's invisible-time change.

    Attributes:
        queue: the queue it belongs to.
        seq: unique, increasing per broker (the revive log names cks by it).
        pop_time: when it was handed out (ms); receipt handles carry it.
        invisible_ms: how long it stays invisible; ``deadline = pop_time + invisible_ms``.
        start_offset: the offset the pop read from (receipt handles carry it).
        end_offset: the offset the pop read up to (its CK record carries it).
        offsets: the offsets it handed out, increasing.
        open: how many of them are still in flight under it.
        floor: the revive log's queue offset when it was made.
        reviving: its expired offsets are being copied to the retry topic now.
        order: an orderly pop.
        unwritten: held by the service's ck buffer, its CK record not written (yet).
    """

    __slots__ = (
        "deadline",
        "end_offset",
        "floor",
        "invisible_ms",
        "offsets",
        "open",
        "order",
        "pop_time",
        "queue",
        "reviving",
        "seq",
        "start_offset",
        "unwritten",
    )

    def __init__(
        self,
        queue: PopQueue,
        seq: int,
        pop_time: int,
        invisible_ms: int,
        start_offset: int,
        offsets: list[int],
        floor: int,
        order: bool,
    ) -> None:
        self.queue = queue
        self.seq = seq
        self.pop_time = pop_time
        self.invisible_ms = invisible_ms
        self.deadline = pop_time + invisible_ms
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.offsets = offsets
        self.open = 0
        self.floor = floor
        self.reviving = False
        self.order = order
        self.unwritten = False

    def in_flight(self) -> list[int]:
        """Its offsets still in flight under it."""
        inflight = self.queue.inflight
        return [o for o in self.offsets if inflight.get(o) is self]

    def __repr__(self) -> str:
        return f"Ck(seq={self.seq}, {self.queue.key}, offsets={self.offsets}, open={self.open})"


class PopQueue:
    """One (group, topic, queue id) under POP."""

    __slots__ = (
        "_order",
        "acked_ahead",
        "attempts",
        "committed",
        "inflight",
        "key",
        "next_offset",
        "orderly",
    )

    def __init__(self, key: QueueKey, next_offset: int) -> None:
        self.key = key
        self.next_offset = next_offset
        #: the low-water mark last written to the offset table (the service keeps it)
        self.committed = next_offset
        self.inflight: dict[int, Ck] = {}
        self._order: deque[int] = deque()
        self.orderly = False
        self.attempts: dict[int, int] = {}
        self.acked_ahead: set[int] = set()

    @property
    def group(self) -> str:
        """The consumer group."""
        return self.key[0]

    @property
    def topic(self) -> str:
        """The topic (a POP retry topic for redelivered messages)."""
        return self.key[1]

    @property
    def queue_id(self) -> int:
        """The queue id."""
        return self.key[2]

    def low_water(self) -> int:
        """The smallest offset still in flight, else ``next_offset``: everything below is done."""
        order = self._order
        drop_done(order, self.inflight)
        low = order[0] if order else self.next_offset
        ahead = self.acked_ahead
        if ahead and min(ahead) < low:  # acked offsets below the mark are never read again
            self.acked_ahead = {o for o in ahead if o >= low}
        return low

    def oldest_pop_time(self) -> int | None:
        """When the longest-waiting message in flight was handed out (None: nothing in flight)."""
        return min((ck.pop_time for ck in set(self.inflight.values())), default=None)

    def rebuild_order(self) -> None:
        """Re-sort the low-water bookkeeping (after a restart put offsets back in any order)."""
        self._order = deque(sorted(self.inflight))

    def blocked(self) -> bool:
        """An orderly queue with a batch in flight: nothing more to pop until it is acked, or expired
        and released by the revive service (which wakes the queue's waiting pops)."""
        return self.orderly and bool(self.inflight)

    def reset(self, next_offset: int) -> None:
        """Start over at ``next_offset`` (an admin reset the offset); nothing stays in flight."""
        assert not self.inflight
        self.next_offset = self.committed = next_offset
        self._order.clear()
        self.attempts.clear()
        self.acked_ahead.clear()


class AckOutcome(Enum):
    """What an ack (or an invisible-time change) found."""

    ACKED = "ACKED"
    NOT_IN_FLIGHT = "NOT_IN_FLIGHT"  # acked before, revived, dead-lettered, or never popped
    STALE = "STALE"  # in flight under another pop (an older handle after a change)
    REVIVING = "REVIVING"  # its invisible time passed; being redelivered now


class PopLedger:
    """Every POP queue of a broker, the open cks in creation order and their deadlines."""

    def __init__(self) -> None:
        self.queues: dict[QueueKey, PopQueue] = {}
        self.inflight_total = 0
        self._open: OrderedDict[int, Ck] = OrderedDict()
        self._heap: list[tuple[int, int, Ck]] = []
        self.next_seq = 1

    # -- queues ------------------------------------------------------------------------------------
    def queue(self, key: QueueKey) -> PopQueue | None:
        """The queue's state (None: the group never popped it since the start)."""
        return self.queues.get(key)

    def add_queue(self, key: QueueKey, next_offset: int) -> PopQueue | None:
        """A new queue state starting at ``next_offset`` (None: ``MAX_POP_QUEUES`` reached)."""
        assert key not in self.queues
        if len(self.queues) >= MAX_POP_QUEUES:
            return None
        q = self.queues[key] = PopQueue(key, next_offset)
        return q

    @property
    def open_count(self) -> int:
        """Cks with an offset in flight."""
        return len(self._open)

    def open_ck(self, seq: int) -> Ck | None:
        """The ck ``seq`` while it has offsets in flight (None: done, or never made)."""
        return self._open.get(seq)

    def earliest_deadline(self) -> int | None:
        """The earliest deadline of the timer heap (None: empty); may be a stale entry's."""
        return self._heap[0][0] if self._heap else None

    def replay_floor(self, default: int) -> int:
        """Where a restart must start replaying the revive log: the oldest open ck's floor."""
        for ck in self._open.values():
            return min(ck.floor, default)
        return default

    # -- pops ----------------------------------------------------------------------------------------
    def pop(
        self,
        q: PopQueue,
        offsets: list[int],
        end_offset: int,
        pop_time: int,
        invisible_ms: int,
        floor: int,
        *,
        order: bool = False,
        start_offset: int | None = None,
        seq: int | None = None,
    ) -> Ck:
        """Record a pop of ``offsets`` (increasing, read up to ``end_offset``) as in flight.

        ``seq`` is given when a restart replays a ck; otherwise the next one is taken.
        """
        if seq is None:
            seq = self.next_seq
        self.next_seq = max(self.next_seq, seq + 1)
        start = q.next_offset if start_offset is None else start_offset
        ck = Ck(q, seq, pop_time, invisible_ms, start, offsets, floor, order)
        ck.end_offset = end_offset
        q.orderly = q.orderly or order
        q.next_offset = max(q.next_offset, end_offset)
        self._hold(q, ck, offsets)
        return ck

    def _hold(self, q: PopQueue, ck: Ck, offsets: list[int] | tuple[int, ...]) -> None:
        inflight, order = q.inflight, q._order
        if not order or offsets[0] > order[-1]:  # a pop's fresh offsets, above all in flight (hot path)
            inflight.update(dict.fromkeys(offsets, ck))
            order.extend(offsets)
            ck.open += len(offsets)
            self.inflight_total += len(offsets)
        else:
            self._hold_each(q, ck, offsets)
        if ck.open:
            self._open[ck.seq] = ck
            heapq.heappush(self._heap, (ck.deadline, ck.seq, ck))
            self._maybe_compact()

    def _hold_each(self, q: PopQueue, ck: Ck, offsets: Iterable[int]) -> None:
        inflight, order = q.inflight, q._order
        added = 0
        for o in offsets:
            previous = inflight.get(o)
            if previous is not None:  # a change, or a replayed one: the later ck takes it over
                self._release_one(previous)
            else:
                order.append(o)
                added += 1
            inflight[o] = ck
            ck.open += 1
        self.inflight_total += added

    def _release_one(self, ck: Ck) -> None:
        ck.open -= 1
        assert ck.open >= 0, ck
        if ck.open == 0:
            self._open.pop(ck.seq, None)

    def _resolve(self, q: PopQueue, offset: int, ck: Ck) -> None:
        del q.inflight[offset]
        self.inflight_total -= 1
        self._release_one(ck)
        q.attempts.pop(offset, None)

    # -- acks and changes -----------------------------------------------------------------------------
    def find(self, q: PopQueue, offset: int, pop_time: int) -> tuple[AckOutcome, Ck | None]:
        """What an ack of ``offset`` popped at ``pop_time`` finds (nothing changes)."""
        ck = q.inflight.get(offset)
        if ck is None:
            return AckOutcome.NOT_IN_FLIGHT, None
        if ck.pop_time != pop_time:
            return AckOutcome.STALE, ck
        if ck.reviving:
            return AckOutcome.REVIVING, ck
        return AckOutcome.ACKED, ck

    def ack(self, q: PopQueue, offset: int, pop_time: int) -> tuple[AckOutcome, Ck | None]:
        """Acknowledge ``offset`` popped at ``pop_time``: done when it is in flight under that pop."""
        outcome, ck = self.find(q, offset, pop_time)
        if outcome is AckOutcome.ACKED:
            assert ck is not None
            self._resolve(q, offset, ck)
            if q.orderly and offset > q.low_water():
                q.acked_ahead.add(offset)
        return outcome, ck

    def ack_many(self, q: PopQueue, offsets: Iterable[int], pop_time: int) -> dict[int, list[int]]:
        """Acknowledge each of ``offsets`` popped at ``pop_time`` that is in flight under that pop
        (a batch ack; the others are skipped, as RocketMQ's batch ack skips them); returns the
        acknowledged offsets by ck seq."""
        inflight = q.inflight
        offs = list(offsets)
        first = take_run(inflight, offs, pop_time)
        if first is not None:  # the common case: every offset in flight under one pop, increasing
            first.open -= len(offs)
            if not first.open:
                self._open.pop(first.seq, None)
            done = {first.seq: offs}
        else:
            done = self._ack_each(inflight, offs, pop_time)
        n = sum(map(len, done.values()))
        self.inflight_total -= n
        if q.orderly and n:
            low = q.low_water()
            for acked in done.values():
                q.acked_ahead.update(o for o in acked if o > low)
                for o in acked:
                    q.attempts.pop(o, None)
        return done

    def _ack_each(self, inflight: dict[int, Ck], offsets: list[int], pop_time: int) -> dict[int, list[int]]:
        done: dict[int, list[int]] = {}
        for o in offsets:
            ck = inflight.get(o)
            if ck is None or ck.pop_time != pop_time or ck.reviving:
                continue
            del inflight[o]
            ck.open -= 1
            if not ck.open:
                self._open.pop(ck.seq, None)
            done.setdefault(ck.seq, []).append(o)
        return done

    def change(
        self, q: PopQueue, offset: int, pop_time: int, now_ms: int, invisible_ms: int, floor: int
    ) -> tuple[AckOutcome, Ck | None]:
        """Keep ``offset`` invisible ``invisible_ms`` from ``now_ms``: a new one-message ck takes it.

        The new ck's pop time is after the old one's, so the old receipt handle stops matching.
        """
        outcome, ck = self.find(q, offset, pop_time)
        if outcome is not AckOutcome.ACKED:
            return outcome, ck
        assert ck is not None
        new_time = max(now_ms, ck.pop_time + 1)
        new = Ck(q, self.next_seq, new_time, invisible_ms, offset, [offset], floor, ck.order)
        new.end_offset = offset + 1
        self.next_seq += 1
        self._hold(q, new, (offset,))
        return AckOutcome.ACKED, new

    # -- expiry ----------------------------------------------------------------------------------------
    def due(self, now_ms: int) -> list[Ck]:
        """Open cks whose deadline passed (removed from the timer heap; stale entries dropped)."""
        out: list[Ck] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            deadline, _, ck = heapq.heappop(heap)
            if ck.open and deadline == ck.deadline and not ck.reviving:
                out.append(ck)
        return out

    def begin_revive(self, ck: Ck) -> list[int]:
        """Mark ``ck`` as being redelivered; its offsets still in flight under it."""
        ck.reviving = True
        return ck.in_flight()

    def finish_revive(self, ck: Ck, offsets: list[int]) -> None:
        """The offsets' copies are stored (retry topic or DLQ): they are done."""
        q = ck.queue
        for o in offsets:
            if q.inflight.get(o) is ck:
                self._resolve(q, o, ck)
        ck.reviving = False

    def retry_later(self, ck: Ck, at_ms: int) -> None:
        """The redelivery failed (store refused): try again at ``at_ms``."""
        ck.reviving = False
        ck.deadline = at_ms
        if ck.open:
            heapq.heappush(self._heap, (at_ms, ck.seq, ck))

    def release_orderly(self, ck: Ck) -> list[int]:
        """An orderly batch expired: its unacked offsets can be popped again (returned, increasing)."""
        q = ck.queue
        released = ck.in_flight()
        for o in released:
            attempts = q.attempts.get(o, 0) + 1
            self._resolve(q, o, ck)
            q.attempts[o] = attempts
        if released:
            q.next_offset = min(q.next_offset, released[0])
            q.acked_ahead = {o for o in q.acked_ahead if o > released[0]}
        return released

    def forget(self, q: PopQueue) -> dict[int, list[int]]:
        """Drop everything in flight of ``q`` (its offset was reset); ``{ck seq: offsets}`` dropped."""
        dropped: dict[int, list[int]] = {}
        for o, ck in sorted(q.inflight.items()):
            dropped.setdefault(ck.seq, []).append(o)
            self._resolve(q, o, ck)
        return dropped

    def _maybe_compact(self) -> None:
        if len(self._heap) > 2 * len(self._open) + HEAP_SLACK:
            self._heap = [e for e in self._heap if e[2].open and e[0] == e[2].deadline]
            heapq.heapify(self._heap)


@twin
def take_run(inflight: dict[int, Any], offsets: list[int], pop_time: int) -> Any:
    """A batch ack's common case: when ``offsets`` are strictly increasing and every one is in
    flight (``inflight``: offset -> ck) under one ck popped at ``pop_time`` that is not being
    revived, remove them from ``inflight`` and return that ck; otherwise change nothing and return
    None (the caller acks them one by one). Its ``open`` count is the caller's to lower."""
    if not offsets:
        return None
    first = inflight.get(offsets[0])
    if first is None or first.pop_time != pop_time or first.reviving:
        return None
    previous = offsets[0] - 1
    for o in offsets:
        if o <= previous or inflight.get(o) is not first:
            return None
        previous = o
    for o in offsets:
        del inflight[o]
    return first


@twin
def drop_done(order: deque[int], inflight: dict[int, Any]) -> None:
    """Drop the offsets no longer in flight from the front of ``order`` (a queue's offsets in the
    order they were handed out): its first offset is then the queue's low-water mark."""
    while order and order[0] not in inflight:
        order.popleft()


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.pop import _speedups

    same_signature(take_run)(_speedups.take_run)
    same_signature(_speedups.take_run)(take_run)
    same_signature(drop_done)(_speedups.drop_done)
    same_signature(_speedups.drop_done)(drop_done)
