"""The held CK records (``broker/pop/ck_buffer.py``) against a model, with a ``kill -9`` at any step.

A hypothesis state machine pops plain batches (some offsets filtered out), acks them one by one
and in batches, changes invisible times, lets buffer windows and invisible times pass (revives),
takes snapshots, and appends exactly the records the service would (``CkBuffer.records_*``) to a
log. At any step a crash rebuilds a fresh ledger the way a restarted broker does (the last
snapshot, the log from its ``reviveOffset``: ``restore.committed_offsets`` and ``rebuild``); then:

- every acked (or revived) message stays done: not in flight, and never read again by a pop;
- every message in flight comes back: in flight again under the same pop, or read again by the
  next pops (its CK record was still held: an early redelivery, §14.2's cost of a lost CK);
- nothing done or never popped is in flight, and no offset past what was read is skipped.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rocketpy.broker.pop.ck_buffer import CkBuffer, acks_records
from rocketpy.broker.pop.ledger import AckOutcome, PopLedger, PopQueue
from rocketpy.broker.pop.restore import committed_offsets, rebuild
from rocketpy.broker.pop.revive_log import REASON_REVIVED, Replay, decode, encode_ck

KEYS = [("g", "T", 0), ("g", "T", 1), ("g2", "T", 0)]
WINDOW_MS = 20


class BufferMachine(RuleBasedStateMachine):
    """The ledger, the ck buffer and the records they write, beside a model of each offset."""

    def __init__(self) -> None:
        super().__init__()
        self.ledger = PopLedger()
        self.buffer = CkBuffer(WINDOW_MS)
        self.now = 1_000_000
        self.log: list[bytes] = []  # revive-log bodies; a body's index is its queue offset
        self.model: dict[tuple[Any, int], tuple[str, int]] = {}  # (key, offset) -> (state, pop time)
        self.snapshot: dict[str, Any] = {"reviveOffset": 0, "queues": {}}
        for key in KEYS:
            q = self.ledger.add_queue(key, 0)
            assert q is not None
            self.snapshot["queues"][key] = (0, 0)

    def q(self, key: Any) -> PopQueue:
        q = self.ledger.queue(key)
        assert q is not None
        return q

    def _commit(self, q: PopQueue) -> None:
        q.committed = q.low_water()

    def _in_flight(self) -> list[tuple[tuple[Any, int], tuple[str, int]]]:
        return sorted((k, v) for k, v in self.model.items() if v[0] == "in")

    # -- rules ------------------------------------------------------------------------------------
    @rule(
        key=st.sampled_from(KEYS),
        span=st.integers(1, 8),
        keep=st.lists(st.booleans(), min_size=8, max_size=8),
        invisible=st.integers(1, 80),
    )
    def pop(self, key: Any, span: int, keep: list[bool], invisible: int) -> None:
        q = self.q(key)
        start = q.next_offset
        offsets = [start + i for i in range(span) if keep[i]]
        if not offsets:  # all filtered out: the reader moves on, no ck
            q.next_offset = start + span
            self._commit(q)
            return
        ck = self.ledger.pop(q, offsets, start + span, self.now, invisible, len(self.log))
        self._commit(q)
        self.log += self.buffer.records_for_pops([(ck, None)], self.now)
        for o in offsets:
            self.model[(key, o)] = ("in", self.now)

    @precondition(lambda self: any(s == "in" for s, _ in self.model.values()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        (key, offset), (_, pop_time) = data.draw(st.sampled_from(self._in_flight()))
        q = self.q(key)
        outcome, ck = self.ledger.ack(q, offset, pop_time)
        assert outcome is AckOutcome.ACKED and ck is not None
        self._commit(q)
        self.log += self.buffer.records_for_acks(self.ledger, [(q, ck.seq, [offset])])
        self.model[(key, offset)] = ("done", pop_time)

    @precondition(lambda self: any(s == "in" for s, _ in self.model.values()))
    @rule(data=st.data())
    def ack_batch(self, data: st.DataObject) -> None:
        """A BATCH_ACK of one or two pops (possibly all of their offsets: a pop acked in full)."""
        done: list[tuple[PopQueue, int, list[int]]] = []
        for _ in range(data.draw(st.integers(1, 2))):
            live = self._in_flight()
            if not live:
                break
            (key, _), (_, pop_time) = data.draw(st.sampled_from(live))
            mine = sorted(o for (k, o), (s, t) in live if k == key and t == pop_time)
            some = st.lists(st.sampled_from(mine), min_size=1, unique=True)
            chosen = data.draw(st.one_of(st.just(mine), some))
            q = self.q(key)
            by_seq = self.ledger.ack_many(q, chosen, pop_time)
            assert sorted(o for offs in by_seq.values() for o in offs) == sorted(chosen)
            self._commit(q)
            done += [(q, seq, offs) for seq, offs in by_seq.items()]
            for o in chosen:
                self.model[(key, o)] = ("done", pop_time)
        if done:
            self.log += self.buffer.records_for_acks(self.ledger, done)

    @precondition(lambda self: any(s == "in" for s, _ in self.model.values()))
    @rule(data=st.data(), invisible=st.integers(1, 80))
    def change(self, data: st.DataObject, invisible: int) -> None:
        (key, offset), (_, pop_time) = data.draw(st.sampled_from(self._in_flight()))
        q = self.q(key)
        outcome, new = self.ledger.change(q, offset, pop_time, self.now, invisible, len(self.log))
        assert outcome is AckOutcome.ACKED and new is not None
        self.log += self.buffer.records_before(q)
        self.log.append(encode_ck(q.key, new.seq, offset, offset + 1, new.pop_time, invisible, [offset]))
        self.model[(key, offset)] = ("in", new.pop_time)

    @rule(dt=st.integers(1, 40))
    def tick(self, dt: int) -> None:
        """Time passes: held cks whose window ended are written, expired cks revive."""
        self.now += dt
        self.log += self.buffer.due_records(self.now)
        for ck in self.ledger.due(self.now):
            offsets = self.ledger.begin_revive(ck)
            q = ck.queue
            self.log += acks_records([(q, ck.seq, offsets)], REASON_REVIVED)  # copies stored first
            self.ledger.finish_revive(ck, offsets)
            self._commit(q)
            for o in offsets:
                self.model[(q.key, o)] = ("done", ck.pop_time)

    @rule()
    def take_snapshot(self) -> None:
        self.snapshot = {
            "reviveOffset": self.ledger.replay_floor(len(self.log)),
            "queues": {q.key: (q.committed, self.buffer.hold_back(q)) for q in self.ledger.queues.values()},
        }

    @rule()
    def crash_and_restore(self) -> None:
        replay = Replay()
        for offset in range(self.snapshot["reviveOffset"], len(self.log)):
            replay.apply(decode(self.log[offset]), offset)
        snap = self.snapshot["queues"]
        committed = committed_offsets(snap, replay, lambda *_: -1)
        ledger = PopLedger()
        rebuild(ledger, snap, replay, committed, lambda _: True)
        for key in KEYS:
            live, restored = self.q(key), ledger.queue(key)
            assert restored is not None
            # offsets below where the restarted queue reads again were all popped before
            assert restored.next_offset <= live.next_offset
            for o in range(restored.committed, live.next_offset):
                state, pop_time = self.model.get((key, o), ("filtered", 0))
                read_again = o >= restored.next_offset and o not in restored.acked_ahead
                ck = restored.inflight.get(o)
                if state == "done":
                    assert ck is None and not read_again, f"acked {key} {o} comes back"
                elif state == "in":
                    held = ck is not None and ck.pop_time == pop_time
                    assert held or read_again, f"in-flight {key} {o} is lost"
                else:
                    assert ck is None, f"never handed out {key} {o} in flight"
            assert all(self.model[(key, o)][0] == "in" for o in restored.inflight)
            assert all(self.model[(key, o)][0] == "done" for o in restored.acked_ahead)
            assert restored.committed <= live.committed or not live.inflight

    # -- invariants ---------------------------------------------------------------------------------
    @invariant()
    def in_flight_matches_the_model(self) -> None:
        for key in KEYS:
            q = self.q(key)
            assert set(q.inflight) == {o for (k, o), (s, _) in self.model.items() if k == key and s == "in"}

    @invariant()
    def held_cks_are_not_written_yet(self) -> None:
        seqs = {decode(b).seq for b in self.log if b[0] == 1}  # type: ignore[union-attr]
        for q in self.ledger.queues.values():
            for ck in set(q.inflight.values()):
                assert ck.unwritten != (ck.seq in seqs), ck


TestBuffer = BufferMachine.TestCase
TestBuffer.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)


def test_a_pop_acked_within_the_window_writes_only_its_acks() -> None:
    ledger, buffer = PopLedger(), CkBuffer(100)
    q = ledger.add_queue(("g", "T", 0), 0)
    assert q is not None
    ck = ledger.pop(q, [0, 1, 2], 3, 1000, 60_000, 0)
    assert buffer.records_for_pops([(ck, None)], 0) == [] and ck.unwritten
    assert buffer.hold_back(q) == 0
    done = ledger.ack_many(q, [0, 1, 2], 1000)
    q.committed = q.low_water()
    (body,) = buffer.records_for_acks(ledger, [(q, seq, offs) for seq, offs in done.items()])
    (record,) = decode(body)  # type: ignore[misc]
    assert record.offsets == [0, 1, 2] and record.committed == 3
    assert buffer.due_records(100) == [] and buffer.skipped == 1 and buffer.written == 0
    assert buffer.hold_back(q) == 3 and len(buffer) == 0


def test_a_partial_ack_writes_the_held_cks_of_its_queue_first() -> None:
    ledger, buffer = PopLedger(), CkBuffer(100)
    q = ledger.add_queue(("g", "T", 0), 0)
    assert q is not None
    older = ledger.pop(q, [0, 1], 2, 1000, 60_000, 0)
    newer = ledger.pop(q, [2, 3], 4, 1001, 60_000, 0)
    assert buffer.records_for_pops([(older, None), (newer, None)], 0) == []
    ledger.ack(q, 3, 1001)
    q.committed = q.low_water()
    bodies = buffer.records_for_acks(ledger, [(q, newer.seq, [3])])
    records = [decode(b) for b in bodies]
    assert [(r.seq, r.offsets) for r in records[:2]] == [(older.seq, [0, 1]), (newer.seq, [2])]  # type: ignore[union-attr]
    assert not older.unwritten and not newer.unwritten and buffer.due_records(100) == []


def test_the_buffer_is_bounded() -> None:
    ledger, buffer = PopLedger(), CkBuffer(100, max_held=2)
    q = ledger.add_queue(("g", "T", 0), 0)
    assert q is not None
    cks = [ledger.pop(q, [i], i + 1, 1000, 60_000, 0) for i in range(3)]
    bodies = buffer.records_for_pops([(ck, None) for ck in cks], 0)
    assert [decode(b).seq for b in bodies] == [ck.seq for ck in cks]  # type: ignore[union-attr]
    assert len(buffer) == 2 and not any(ck.unwritten for ck in cks)
