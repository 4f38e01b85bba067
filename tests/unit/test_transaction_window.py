"""HalfWindow against a plain model of its contract, and the shape of what it holds while one old
undecided half message keeps ``progress`` from moving."""

from __future__ import annotations

import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.broker.transaction.window import HalfWindow, Outcome


class ModelWindow:
    """The contract, written the obvious way: a record per offset with op records, scanned."""

    def __init__(self) -> None:
        self.progress = 0
        self.outcomes: dict[int, Outcome] = {}
        self.claims: dict[int, Outcome] = {}
        self.checks: dict[int, int] = {}
        self.first_op: dict[int, int] = {}

    def resolved(self, offset: int) -> bool:
        return offset < self.progress or offset in self.outcomes or offset in self.claims

    def note_op(self, offset: int, op: int) -> None:
        self.first_op[offset] = min(op, self.first_op.get(offset, op))

    def claim(self, offset: int, outcome: Outcome, op: int) -> bool:
        if self.resolved(offset):
            return False
        self.claims[offset] = outcome
        self.note_op(offset, op)
        return True

    def release(self, offset: int) -> None:
        self.claims.pop(offset, None)

    def apply(self, offset: int, outcome: Outcome, op: int) -> None:
        if offset < self.progress:
            return
        self.claims.pop(offset, None)
        self.outcomes[offset] = outcome
        self.note_op(offset, op)
        while self.progress in self.outcomes:
            self.progress += 1

    def note_check(self, offset: int, op: int) -> None:
        if offset < self.progress:
            return
        if offset not in self.outcomes:
            self.checks[offset] = self.checks.get(offset, 0) + 1
        self.note_op(offset, op)

    def skip_to(self, offset: int) -> None:
        if offset <= self.progress:
            return
        self.progress = offset
        while self.progress in self.outcomes:
            self.progress += 1

    def op_floor(self, op_next: int) -> int:
        floors = [op for off, op in self.first_op.items() if off >= self.progress]
        return min(floors, default=op_next)


_OFFSETS = st.integers(0, 40)
_OUTCOME = st.sampled_from(list(Outcome))
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("claim"), _OFFSETS, _OUTCOME),
        st.tuples(st.just("release"), _OFFSETS),
        st.tuples(st.just("apply"), _OFFSETS, _OUTCOME),
        st.tuples(st.just("check"), _OFFSETS),
        st.tuples(st.just("skip"), _OFFSETS),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_window_behaves_as_its_model(ops: list[tuple]) -> None:
    w, m = HalfWindow(), ModelWindow()
    op_offset = 100
    for op in ops:
        op_offset += 1
        kind, offset = op[0], op[1]
        if kind == "claim":
            assert w.claim(offset, op[2], op_offset) == m.claim(offset, op[2], op_offset)
        elif kind == "release":
            w.release(offset)
            m.release(offset)
        elif kind == "apply":
            w.apply(offset, op[2], op_offset)
            m.apply(offset, op[2], op_offset)
        elif kind == "check":
            w.note_check(offset, op_offset)
            m.note_check(offset, op_offset)
        else:
            w.skip_to(offset)
            m.skip_to(offset)
        assert w.progress == m.progress
        assert w.op_floor(10_000) == m.op_floor(10_000)
        for o in range(m.progress, 42):
            assert w.resolved(o) == m.resolved(o), o
            assert w.outcome(o) == m.outcomes.get(o), o
            assert w.claimed(o) == m.claims.get(o), o
            if o not in m.outcomes:
                assert w.checks(o) == m.checks.get(o, 0), o


def test_decisions_behind_a_stuck_half_hold_no_object_per_offset() -> None:
    """One undecided half message keeps ``progress`` at 0 while 100,000 later ones are decided:
    the window keeps their outcomes as plain ints (nothing per offset for a full garbage collection
    to walk), and ``op_floor`` stays right without scanning them."""
    w = HalfWindow()
    w.note_check(0, 1)  # the stuck one: checked, never decided
    for offset in range(1, 100_001):
        assert w.claim(offset, Outcome.COMMIT, 1 + offset)
        w.apply(offset, Outcome.COMMIT, 1 + offset)
    assert w.progress == 0 and len(w.decided) == 100_000 and len(w.entries) == 1
    gc.collect()
    assert not gc.is_tracked(w.decided)  # ints only: the collector skips the whole table
    assert w.op_floor(10**9) == 1
    w.apply(0, Outcome.ROLLBACK, 200_000)
    assert w.progress == 100_001 and not w.decided and not w.entries
    assert w.op_floor(10**9) == 10**9
    assert w.outcome(100_000) is Outcome.COMMIT  # remembered behind progress (the last RECENT_MAX)
