"""HalfWindow: what is known about the half messages not yet behind the progress offset.

Owns the in-memory state of the transactions of one broker (pure: no I/O, no clock):

* ``progress``: every half message below this half-queue offset is resolved (committed, rolled
  back or discarded); it only moves forward, over a leading run of resolved offsets.
* the offsets at or above ``progress`` that have op records: a decided one is an entry of
  ``decided`` (offset -> outcome code, plain ints: a window held open by one old undecided half
  message may hold millions, and plain ints are nothing for the garbage collector to scan, where
  an object per offset made every full collection walk them all); an undecided one with a check
  or a claim has an ``Entry`` (its checks, its claim).
* ``op_floor``: the smallest op-queue offset of an op record about an offset at or above
  ``progress``; replaying the op queue from there at start rebuilds the window exactly (every op
  record about such an offset is at or after it). Kept in a heap of (op offset, half offset)
  pairs, pruned as ``progress`` passes them: no scan of the window.
* ``recent``: the outcomes of the last ``RECENT_MAX`` resolved offsets behind ``progress``, so that a
  late duplicate decision gets a precise remark (refilled at start from the op records just
  before the floor, ``RECENT_REPLAY`` of them).

An outcome is claimed (``claim``) before the decision's records are written and confirmed or
released after, so two decisions racing for one half message cannot both write.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from enum import Enum

#: Resolved offsets behind ``progress`` whose outcome is remembered for remarks.
RECENT_MAX = 65_536
#: Op records before the floor replayed at start into ``recent``.
RECENT_REPLAY = 4096


class Outcome(Enum):
    """How a half message was resolved (the op record's ``TRAN_OP`` property)."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    DISCARD = "DISCARD"


#: Outcomes by their code in ``HalfWindow.decided`` (the code is the index).
_OUTCOMES = tuple(Outcome)
_CODE = {outcome: code for code, outcome in enumerate(_OUTCOMES)}


class Entry:
    """An undecided half offset with a check or a decision under way."""

    __slots__ = ("checks", "claimed")

    def __init__(self) -> None:
        self.claimed: Outcome | None = None
        self.checks = 0


class HalfWindow:
    """Transaction state above the progress offset (see the module docstring).

    Args:
        progress: the half-queue offset below which every half message is resolved.
    """

    def __init__(self, progress: int = 0) -> None:
        self.progress = progress
        self.entries: dict[int, Entry] = {}
        self.decided: dict[int, int] = {}
        self._op_heap: list[tuple[int, int]] = []  # (op offset, half offset); stale below progress
        # an OrderedDict: dropping the oldest of a plain dict (``del d[next(iter(d))]``) scans the
        # holes its earlier deletions left, ~19 µs a decision once full; popitem(last=False) is O(1)
        self.recent: OrderedDict[int, Outcome] = OrderedDict()

    def outcome(self, offset: int) -> Outcome | None:
        """How ``offset`` was resolved, None while undecided (or too old to remember)."""
        code = self.decided.get(offset)
        if code is not None:
            return _OUTCOMES[code]
        return self.recent.get(offset)

    def claimed(self, offset: int) -> Outcome | None:
        """The outcome a decision being written claims for ``offset``, None when there is none."""
        entry = self.entries.get(offset)
        return entry.claimed if entry is not None else None

    def resolved(self, offset: int) -> bool:
        """True when ``offset`` is resolved or a decision on it is being written."""
        if offset < self.progress or offset in self.decided:
            return True
        entry = self.entries.get(offset)
        return entry is not None and entry.claimed is not None

    def checks(self, offset: int) -> int:
        """How many checks were sent for ``offset``."""
        entry = self.entries.get(offset)
        return entry.checks if entry is not None else 0

    def _entry(self, offset: int) -> Entry:
        entry = self.entries.get(offset)
        if entry is None:
            entry = self.entries[offset] = Entry()
        return entry

    def _note_op(self, offset: int, op_offset: int) -> None:
        """An op record about ``offset`` is (or will be) at ``op_offset``."""
        heapq.heappush(self._op_heap, (op_offset, offset))

    def claim(self, offset: int, outcome: Outcome, op_offset: int) -> bool:
        """Reserve ``offset`` for ``outcome`` (op record expected at or after ``op_offset``).

        Returns False when it is resolved or claimed already (nothing changes).
        """
        if self.resolved(offset):
            return False
        self._entry(offset).claimed = outcome
        self._note_op(offset, op_offset)
        return True

    def release(self, offset: int) -> None:
        """The claimed decision was not written: ``offset`` is undecided again."""
        entry = self.entries.get(offset)
        if entry is not None:
            entry.claimed = None

    def apply(self, offset: int, outcome: Outcome, op_offset: int) -> None:
        """An op record at ``op_offset`` resolved ``offset`` (written now, or replayed at start; one
        behind ``progress`` is only remembered in ``recent``)."""
        if offset < self.progress:
            self._remember(offset, outcome)
            return
        if self.entries.pop(offset, None) is None:
            # with an entry, its claim or check already noted an op offset at or before this one
            self._note_op(offset, op_offset)
        self.decided[offset] = _CODE[outcome]
        if offset == self.progress:
            self.advance()

    def note_check(self, offset: int, op_offset: int) -> None:
        """A check of ``offset`` was recorded at ``op_offset``."""
        if offset < self.progress:
            return
        if offset not in self.decided:  # a check replayed after its decision counts for nothing
            self._entry(offset).checks += 1
        self._note_op(offset, op_offset)

    def advance(self) -> None:
        """Move ``progress`` over the leading run of resolved offsets."""
        decided = self.decided
        while True:
            code = decided.pop(self.progress, None)
            if code is None:
                return
            self._remember(self.progress, _OUTCOMES[code])
            self.progress += 1

    def _remember(self, offset: int, outcome: Outcome) -> None:
        recent = self.recent
        if offset not in recent and len(recent) >= RECENT_MAX:
            recent.popitem(last=False)
        recent[offset] = outcome

    def skip_to(self, offset: int) -> None:
        """Move ``progress`` to ``offset`` when the half messages below it are gone (cleaned up)."""
        if offset <= self.progress:
            return
        self.entries = {k: e for k, e in self.entries.items() if k >= offset}
        self.decided = {k: c for k, c in self.decided.items() if k >= offset}
        self.progress = offset
        self.advance()

    def op_floor(self, op_next_offset: int) -> int:
        """Where replaying the op queue must start to rebuild this window (``op_next_offset`` when
        no op record is about an offset at or above ``progress``)."""
        heap = self._op_heap
        while heap and heap[0][1] < self.progress:
            heapq.heappop(heap)
        return heap[0][0] if heap else op_next_offset
