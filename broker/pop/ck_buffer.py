"""CK records held back for a short window: a pop batch acked within it never writes its CK.

Owns ``CkBuffer`` (RocketMQ's ``PopBufferMergeService`` idea, in the form the low-water-mark
bookkeeping of docs/design.md §14.2 allows). A plain pop's ck is not written to the revive log
when it is made: it is *held* for ``window_ms`` (``popCkStayBufferTime``). When all of its offsets
are acked within the window no CK record is ever written for it (its acks are ACKS records, which
stand alone: ``revive_log.py``); otherwise it is written when the window ends, naming only the
offsets still in flight. Orderly pops and invisible-time changes are not held.

Why no guarantee of §14.2 is given up (``tests/unit/test_pop_buffer.py`` checks it against a
model, crash at any step):

- A CK record also says "the queue was read up to ``end``": after a restart, what lies below the
  furthest end and is in flight under no replayed ck is done. So a ck is never written before an
  older held ck of its queue that still has offsets in flight: the window ends in creation order
  (``due``), and a ck written early (an ack that leaves some of its offsets in flight, an
  invisible-time change) takes every held ck of its queue with it (``take_queue``). For the same
  reason the snapshot's next offset of a queue stops at its oldest held ck (``hold_back``).
  An unwritten ck's offsets are then at or past where the restarted queue reads again: a crash
  within the window brings its unacked messages back at once, instead of after their invisible
  time (what a CK record lost to a machine crash did before).
- An acked message stays acked: the ack's ACKS record names the offsets done whether or not a CK
  record ever named them, and carries the queue's committed offset.

Bounds: at most ``max_held`` cks held (the caller writes a ck at once past it); the creation-order
queue holds each ck once, until its window ends, and the per-queue view only cks not yet written.
"""

from __future__ import annotations

from collections import deque

from rocketpy.broker.pop.ledger import Ck, PopLedger, PopQueue, QueueKey
from rocketpy.broker.pop.revive_log import MAX_RECORD_OFFSETS, AckEntry, encode_acks, encode_ck

#: Most cks held at once (about a window's worth of pops at tens of thousands of pops per second).
MAX_HELD_CKS = 65_536


class CkBuffer:
    """Plain pops' cks held unwritten for ``window_ms`` (0: none held).

    Args:
        window_ms: how long a ck is held (``popCkStayBufferTime``).
        max_held: most cks held at once.
    """

    def __init__(self, window_ms: int, max_held: int = MAX_HELD_CKS) -> None:
        assert window_ms >= 0 and max_held > 0
        self.window_ms = window_ms
        self.max_held = max_held
        self._fifo: deque[tuple[int, Ck]] = deque()  # (window end ms, ck), in creation order
        self._by_queue: dict[QueueKey, deque[Ck]] = {}
        #: cks held, written (window ended or taken early), never written (done within the window)
        self.held = self.written = self.skipped = 0

    def __len__(self) -> int:
        return len(self._fifo)

    def hold(self, ck: Ck, now_ms: int) -> bool:
        """Hold ``ck`` (a plain pop's, just made); False when it must be written now instead."""
        if not self.window_ms or len(self._fifo) >= self.max_held:
            return False
        ck.unwritten = True
        self._fifo.append((now_ms + self.window_ms, ck))
        q = self._by_queue.get(ck.queue.key)
        if q is None:
            q = self._by_queue[ck.queue.key] = deque()
        q.append(ck)
        self.held += 1
        return True

    def next_due_ms(self) -> int | None:
        """When the oldest held ck's window ends (None: nothing held)."""
        return self._fifo[0][0] if self._fifo else None

    def due(self, now_ms: int) -> list[Ck]:
        """The cks whose window ended by ``now_ms`` with offsets still in flight, oldest first (now
        counted as written: the caller writes them); cks done within their window are dropped."""
        fifo, out = self._fifo, []
        while fifo and fifo[0][0] <= now_ms:
            ck = fifo.popleft()[1]
            if not ck.unwritten:
                continue  # taken early
            ck.unwritten = False
            self._drop_front(ck.queue.key)
            if ck.open:
                out.append(ck)
            else:
                self.skipped += 1
        self.written += len(out)
        return out

    def take_queue(self, q: PopQueue) -> list[Ck]:
        """Every held ck of ``q`` with offsets in flight, oldest first (now counted as written:
        the caller writes them before any other CK record of ``q``); the done ones are dropped."""
        held = self._by_queue.pop(q.key, None)
        if held is None:
            return []
        out = []
        for ck in held:
            if ck.unwritten:
                ck.unwritten = False
                if ck.open:
                    out.append(ck)
                else:
                    self.skipped += 1
        self.written += len(out)
        return out

    def take_all(self) -> list[Ck]:
        """Every held ck with offsets in flight (at shutdown), oldest first; nothing stays held."""
        out = []
        while self._fifo:
            ck = self._fifo.popleft()[1]
            if ck.unwritten:
                ck.unwritten = False
                if ck.open:
                    out.append(ck)
        self._by_queue.clear()
        self.written += len(out)
        return out

    def hold_back(self, q: PopQueue) -> int:
        """``q``'s next offset for the snapshot: the start of its oldest held ck with offsets in
        flight, else its next offset (what is past it is either in flight under a held ck, or
        done with an ACKS record naming it, found again by the replay)."""
        held = self._by_queue.get(q.key)
        if held is not None:
            for ck in held:
                if ck.unwritten and ck.open:
                    return min(ck.start_offset, q.next_offset)
        return q.next_offset

    # -- the records each event writes (the service appends them; the model test replays them) ------
    def records_for_pops(self, cks: list[tuple[Ck, list[int] | None]], now_ms: int) -> list[bytes]:
        """CK records to write for a pop's new cks (with an orderly pop's attempt counts): none for
        the cks held; a ck not held goes after the held cks of its queue."""
        bodies: list[bytes] = []
        for ck, counts in cks:
            if counts is None and self.hold(ck, now_ms):
                continue
            bodies += self.records_before(ck.queue)
            bodies += ck_records(ck, counts)
        return bodies

    def records_before(self, q: PopQueue) -> list[bytes]:
        """CK records of ``q``'s held cks, to write before any other CK record of ``q``."""
        return [body for ck in self.take_queue(q) for body in ck_records(ck)]

    def records_for_acks(self, ledger: PopLedger, done: list[tuple[PopQueue, int, list[int]]]) -> list[bytes]:
        """The records of acks just applied (``(queue, ck seq, offsets)``, each queue's committed
        offset already moved): the held cks of a queue where an ack left a held ck partly in flight
        (its ack suggests the rest stays out a while; it is written with the ack at no extra put),
        then the ACKS records."""
        bodies: list[bytes] = []
        for q, seq, _ in done:
            ck = ledger.open_ck(seq)
            if ck is not None and ck.unwritten:
                bodies += self.records_before(q)
        return bodies + acks_records(done)

    def due_records(self, now_ms: int) -> list[bytes]:
        """CK records of the held cks whose window ended by ``now_ms`` (``due``)."""
        return [body for ck in self.due(now_ms) for body in ck_records(ck)]

    def _drop_front(self, key: QueueKey) -> None:
        """Drop the cks no longer held from the front of ``key``'s view (its oldest just left)."""
        held = self._by_queue.get(key)
        if held is None:
            return
        while held and not held[0].unwritten:
            held.popleft()
        if not held:
            del self._by_queue[key]


def ck_records(ck: Ck, counts: list[int] | None = None) -> list[bytes]:
    """The CK record bodies of ``ck``: its offsets still in flight (an orderly pop's, just made:
    all of them, with ``counts``, the times each was handed out before)."""
    offsets = ck.offsets if counts is not None else ck.in_flight()
    out = []
    for i in range(0, len(offsets), MAX_RECORD_OFFSETS):
        chunk = slice(i, i + MAX_RECORD_OFFSETS)
        out.append(
            encode_ck(ck.queue.key, ck.seq, ck.start_offset, ck.end_offset, ck.pop_time, ck.invisible_ms,
                      offsets[chunk], counts[chunk] if counts is not None else None)
        )  # fmt: skip
    return out


def acks_records(done: list[tuple[PopQueue, int, list[int]]], reason: int = 0) -> list[bytes]:
    """ACKS records of ``done`` (queue, ck seq, offsets), one per (group, topic), each entry with its
    queue's committed offset as it is now."""
    by_name: dict[tuple[str, str], list[AckEntry]] = {}
    for q, seq, offsets in done:
        group, topic, queue_id = q.key
        entries = by_name.get((group, topic))
        if entries is None:
            entries = by_name[group, topic] = []
        entries.append((queue_id, seq, q.committed, offsets))
    return [body for (g, t), entries in by_name.items() for body in encode_acks(g, t, entries, reason)]
