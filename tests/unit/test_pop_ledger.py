"""The POP bookkeeping against a reference model (hypothesis state machine), and its restart.

``PopLedger`` (``broker/pop/ledger.py``) is driven the way the service drives it — pops of a
queue (some offsets filtered out), acks with right and stale pop times, invisible-time changes,
revives of expired cks, orderly batches released on expiry — while a plain dict per offset says
what must be true. Every record the service would append to the revive log is kept, and at any
step a *crash* rebuilds the in-flight state from the last snapshot plus the records from its
``reviveOffset`` (``Replay``): it must equal the live state, so after a ``kill -9`` every message
popped and not acked is in flight again and no acked one is.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rocketpy.broker.pop.ledger import AckOutcome, Ck, PopLedger, PopQueue
from rocketpy.broker.pop.revive_log import (
    REASON_REVIVED,
    Replay,
    decode,
    encode_ack,
    encode_ck,
)

KEYS = [("g", "T", 0), ("g", "T", 1), ("g2", "T", 0)]
ORDERLY_KEY = ("go", "T", 0)


class LedgerMachine(RuleBasedStateMachine):
    """The ledger and a model of it, step by step."""

    def __init__(self) -> None:
        super().__init__()
        self.ledger = PopLedger()
        self.now = 1_000_000
        self.log: list[bytes] = []  # revive-log bodies; a body's index is its queue offset
        self.model: dict[tuple[Any, int], tuple[str, int]] = {}  # (key, offset) -> ("in"/"done", pop time)
        self.snapshot: dict[str, Any] = {"reviveOffset": 0, "queues": {}}
        for key in [*KEYS, ORDERLY_KEY]:
            q = self.ledger.add_queue(key, 0)
            assert q is not None

    def q(self, key: Any) -> PopQueue:
        q = self.ledger.queue(key)
        assert q is not None
        return q

    def _ck_record(self, q: PopQueue, ck: Ck, start: int, end: int) -> None:
        attempts = [q.attempts.get(o, 0) for o in ck.offsets] if ck.order else None
        self.log.append(
            encode_ck(q.key, ck.seq, start, end, ck.pop_time, ck.invisible_ms, ck.offsets, attempts)
        )

    # -- rules ------------------------------------------------------------------------------------
    @rule(
        key=st.sampled_from(KEYS),
        span=st.integers(1, 8),
        keep=st.lists(st.booleans(), min_size=8, max_size=8),
        invisible=st.integers(1, 50),
    )
    def pop(self, key: Any, span: int, keep: list[bool], invisible: int) -> None:
        q = self.q(key)
        start = q.next_offset
        offsets = [start + i for i in range(span) if keep[i]]
        if not offsets:  # all filtered out: the reader moves on, no ck
            q.next_offset = start + span
            return
        floor = len(self.log)
        ck = self.ledger.pop(q, offsets, start + span, self.now, invisible, floor)
        for o in offsets:
            self.model[(key, o)] = ("in", self.now)
        self._ck_record(q, ck, start, start + span)

    @precondition(lambda self: any(s == "in" for s, _ in self.model.values()))
    @rule(data=st.data(), stale=st.booleans())
    def ack(self, data: st.DataObject, stale: bool) -> None:
        (key, offset), (_, pop_time) = data.draw(
            st.sampled_from(sorted((k, v) for k, v in self.model.items() if v[0] == "in"))
        )
        q = self.q(key)
        outcome, ck = self.ledger.ack(q, offset, pop_time + (7 if stale else 0))
        if stale:
            assert outcome is AckOutcome.STALE
            return
        assert outcome is AckOutcome.ACKED and ck is not None
        self.model[(key, offset)] = ("done", pop_time)
        self.log.append(encode_ack(q.key, ck.seq, [offset]))
        assert self.ledger.ack(q, offset, pop_time)[0] is AckOutcome.NOT_IN_FLIGHT  # a repeated ack

    @precondition(lambda self: any(s == "in" for s, _ in self.model.values()))
    @rule(data=st.data(), extra=st.lists(st.integers(0, 40), max_size=4))
    def ack_batch(self, data: st.DataObject, extra: list[int]) -> None:
        """A batch ack of one queue and pop time: the in-flight offsets of that pop are acked, the
        rest (acked before, another pop's, never popped) skipped."""
        (key, _), (_, pop_time) = data.draw(
            st.sampled_from(sorted((k, v) for k, v in self.model.items() if v[0] == "in"))
        )
        mine = sorted(o for (k, o), (s, t) in self.model.items() if k == key and s == "in" and t == pop_time)
        chosen = data.draw(st.lists(st.sampled_from(mine), min_size=1, unique=True))
        q = self.q(key)
        done = self.ledger.ack_many(q, [*chosen, *extra], pop_time)
        acked = sorted(o for offsets in done.values() for o in offsets)
        expected = {*chosen} | {o for o in extra if self.model.get((key, o)) == ("in", pop_time)}
        assert acked == sorted(expected)
        for seq, offsets in done.items():
            self.log.append(encode_ack(q.key, seq, offsets))
        for o in acked:
            self.model[(key, o)] = ("done", pop_time)
        assert self.ledger.ack_many(q, acked, pop_time) == {}  # a repeated batch ack

    @precondition(lambda self: any(s == "in" for (k, _), (s, _) in self.model.items() if k != ORDERLY_KEY))
    @rule(data=st.data(), invisible=st.integers(1, 50))
    def change(self, data: st.DataObject, invisible: int) -> None:
        (key, offset), (_, pop_time) = data.draw(
            st.sampled_from(
                sorted((k, v) for k, v in self.model.items() if v[0] == "in" and k[0] != ORDERLY_KEY)
            )
        )
        q = self.q(key)
        outcome, new = self.ledger.change(q, offset, pop_time, self.now, invisible, len(self.log))
        assert outcome is AckOutcome.ACKED and new is not None and new.pop_time > pop_time
        self.model[(key, offset)] = ("in", new.pop_time)
        self._ck_record(q, new, offset, offset + 1)
        assert self.ledger.ack(q, offset, pop_time)[0] is AckOutcome.STALE  # the old handle

    @rule(dt=st.integers(1, 30))
    def tick_and_revive(self, dt: int) -> None:
        self.now += dt
        for ck in self.ledger.due(self.now):
            if ck.order:
                released = self.ledger.release_orderly(ck)
                for o in released:
                    self.model[(ck.queue.key, o)] = ("released", 0)
                continue
            offsets = self.ledger.begin_revive(ck)
            assert all(self.ledger.find(ck.queue, o, ck.pop_time)[0] is AckOutcome.REVIVING for o in offsets)
            self.log.append(encode_ack(ck.queue.key, ck.seq, offsets, REASON_REVIVED))
            self.ledger.finish_revive(ck, offsets)
            for o in offsets:
                self.model[(ck.queue.key, o)] = ("done", ck.pop_time)

    @rule(size=st.integers(1, 4), invisible=st.integers(1, 20))
    def pop_orderly(self, size: int, invisible: int) -> None:
        q = self.q(ORDERLY_KEY)
        if q.blocked():
            return
        start = q.next_offset
        offsets = [o for o in range(start, start + size) if o not in q.acked_ahead]
        if not offsets:
            q.next_offset = start + size
            return
        assert all(self.model.get((ORDERLY_KEY, o), ("", 0))[0] != "done" for o in offsets), (
            "acked: redelivered"
        )
        counts_before = {o: q.attempts.get(o, 0) for o in offsets}
        ck = self.ledger.pop(q, offsets, start + size, self.now, invisible, len(self.log), order=True)
        for o in offsets:
            self.model[(ORDERLY_KEY, o)] = ("in", self.now)
        self._ck_record(q, ck, start, start + size)
        assert all(q.attempts.get(o, 0) == counts_before[o] for o in offsets)

    @rule()
    def take_snapshot(self) -> None:
        self.snapshot = {
            "reviveOffset": self.ledger.replay_floor(len(self.log)),
            "queues": {q.key: (q.low_water(), q.next_offset) for q in self.ledger.queues.values()},
        }

    @rule()
    def crash_and_restore(self) -> None:
        replay = Replay()
        for offset in range(self.snapshot["reviveOffset"], len(self.log)):
            replay.apply(decode(self.log[offset]), offset)
        committed = {k: c for k, (c, _) in self.snapshot["queues"].items()}
        restored = {(ck.key, o): ck.pop_time for ck, alive in replay.in_flight(committed) for o in alive}
        live = {(q.key, o): ck.pop_time for q in self.ledger.queues.values() for o, ck in q.inflight.items()}
        # a released orderly batch comes back in flight with its deadline passed: released again at once
        extra = {k for k in restored.keys() - live.keys() if k[0] == ORDERLY_KEY}
        assert all(self.model[k][0] == "released" for k in extra)
        assert {k: v for k, v in restored.items() if k not in extra} == live
        for key, (_, nxt) in self.snapshot["queues"].items():
            if key == ORDERLY_KEY and extra:  # its next offset moves back when the batch is released again
                continue
            restored_next = max(nxt, replay.ends.get(key, 0))
            q = self.q(key)
            # an orderly queue moved back by a release may not have re-read its acked-ahead offsets yet
            skipped = range(q.next_offset, restored_next)
            assert all(self.model.get((key, o), ("", 0))[0] == "done" for o in skipped), (key, skipped)
            assert not any(o in q.inflight for o in range(restored_next, q.next_offset))

    # -- invariants ---------------------------------------------------------------------------------
    @invariant()
    def in_flight_matches_the_model(self) -> None:
        for key in [*KEYS, ORDERLY_KEY]:
            q = self.q(key)
            expected = {o for (k, o), (s, _) in self.model.items() if k == key and s == "in"}
            assert set(q.inflight) == expected
            assert q.low_water() == (min(expected) if expected else q.next_offset)
            assert all(ck.pop_time == self.model[(key, o)][1] for o, ck in q.inflight.items())
        total = sum(len(q.inflight) for q in self.ledger.queues.values())
        assert self.ledger.inflight_total == total

    @invariant()
    def open_cks_are_counted(self) -> None:
        cks = {ck for q in self.ledger.queues.values() for ck in q.inflight.values()}
        assert self.ledger.open_count == len(cks)
        assert all(ck.open == len(ck.in_flight()) for ck in cks)
        assert self.ledger.replay_floor(len(self.log)) <= min((ck.floor for ck in cks), default=len(self.log))

    @invariant()
    def orderly_is_one_batch_at_a_time(self) -> None:
        q = self.q(ORDERLY_KEY)
        assert len({ck.seq for ck in q.inflight.values()}) <= 1


TestLedger = LedgerMachine.TestCase
TestLedger.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)


def test_orderly_release_redelivers_in_order_and_skips_acked() -> None:
    ledger = PopLedger()
    q = ledger.add_queue(("g", "T", 0), 10)
    assert q is not None
    ck = ledger.pop(q, [10, 11, 12, 13], 14, 1000, 5, 0, order=True)
    assert q.blocked()
    assert ledger.ack(q, 12, 1000)[0] is AckOutcome.ACKED
    assert q.acked_ahead == {12}
    assert ledger.due(1004) == [] and ledger.due(1005) == [ck]
    assert ledger.release_orderly(ck) == [10, 11, 13]
    assert q.next_offset == 10 and q.low_water() == 10 and not q.blocked()
    assert q.attempts == {10: 1, 11: 1, 13: 1} and q.acked_ahead == {12}


def test_heap_compacts_when_stale_entries_pile_up() -> None:
    ledger = PopLedger()
    q = ledger.add_queue(("g", "T", 0), 0)
    assert q is not None
    for i in range(20_000):
        ck = ledger.pop(q, [i], i + 1, 1000, 3_600_000, 0)
        ledger.ack(q, i, ck.pop_time)
    assert ledger.open_count == 0 and ledger.inflight_total == 0
    assert len(ledger._heap) <= 4096 * 2 + 2
