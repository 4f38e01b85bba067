"""HalfWindow: what is known about the half messages not yet behind the progress offset.

Owns the in-memory state of the transactions of one broker (pure: no I/O, no clock):

* ``progress``: every half message below this half-queue offset is resolved (committed, rolled
  back or discarded); it only moves forward, over a leading run of resolved offsets.
* one ``Entry`` per half offset at or above ``progress`` that has an op record (a decision or a
  check): its outcome, how many checks were sent and the op-queue offset of its first op record.
  ``op_floor`` is the smallest of those: replaying the op queue from there at start rebuilds the
  window exactly (every op record about an offset >= progress is at or after it).
* ``recent``: the outcomes of the last ``RECENT_MAX`` resolved offsets behind ``progress``, so that a
  late duplicate decision gets a precise remark (refilled at start from the op records just
  before the floor, ``RECENT_REPLAY`` of them).

An outcome is claimed (``claim``) before the decision's records are written and confirmed or
released after, so two decisions racing for one half message cannot both write.
"""

from __future__ import annotations

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


class Entry:
    """The state of one half offset with op records (or a decision under way)."""

    __slots__ = ("checks", "claimed", "first_op_offset", "outcome")

    def __init__(self) -> None:
        self.outcome: Outcome | None = None
        self.claimed: Outcome | None = None
        self.checks = 0
        self.first_op_offset = -1

    def note_op(self, op_offset: int) -> None:
        """An op record about this offset is (or will be) at ``op_offset``."""
        if self.first_op_offset < 0 or op_offset < self.first_op_offset:
            self.first_op_offset = op_offset


class HalfWindow:
    """Transaction state above the progress offset (see the module docstring).

    Args:
        progress: the half-queue offset below which every half message is resolved.
    """

    def __init__(self, progress: int = 0) -> None:
        self.progress = progress
        self.entries: dict[int, Entry] = {}
        # an OrderedDict: dropping the oldest of a plain dict (``del d[next(iter(d))]``) scans the
        # holes its earlier deletions left, ~19 µs a decision once full; popitem(last=False) is O(1)
        self.recent: OrderedDict[int, Outcome] = OrderedDict()

    def outcome(self, offset: int) -> Outcome | None:
        """How ``offset`` was resolved, None while undecided (or too old to remember)."""
        entry = self.entries.get(offset)
        if entry is not None:
            return entry.outcome
        return self.recent.get(offset)

    def resolved(self, offset: int) -> bool:
        """True when ``offset`` is resolved or a decision on it is being written."""
        if offset < self.progress:
            return True
        entry = self.entries.get(offset)
        return entry is not None and (entry.outcome is not None or entry.claimed is not None)

    def checks(self, offset: int) -> int:
        """How many checks were sent for ``offset``."""
        entry = self.entries.get(offset)
        return entry.checks if entry is not None else 0

    def _entry(self, offset: int) -> Entry:
        entry = self.entries.get(offset)
        if entry is None:
            entry = self.entries[offset] = Entry()
        return entry

    def claim(self, offset: int, outcome: Outcome, op_offset: int) -> bool:
        """Reserve ``offset`` for ``outcome`` (op record expected at or after ``op_offset``).

        Returns False when it is resolved or claimed already (nothing changes).
        """
        if self.resolved(offset):
            return False
        entry = self._entry(offset)
        entry.claimed = outcome
        entry.note_op(op_offset)
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
        entry = self._entry(offset)
        entry.claimed = None
        entry.outcome = outcome
        entry.note_op(op_offset)
        if offset == self.progress:
            self.advance()

    def note_check(self, offset: int, op_offset: int) -> None:
        """A check of ``offset`` was recorded at ``op_offset``."""
        if offset < self.progress:
            return
        entry = self._entry(offset)
        entry.checks += 1
        entry.note_op(op_offset)

    def advance(self) -> None:
        """Move ``progress`` over the leading run of resolved offsets."""
        entries = self.entries
        while True:
            entry = entries.get(self.progress)
            if entry is None or entry.outcome is None:
                return
            del entries[self.progress]
            self._remember(self.progress, entry.outcome)
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
        self.progress = offset
        self.advance()

    def op_floor(self, op_next_offset: int) -> int:
        """Where replaying the op queue must start to rebuild this window (``op_next_offset`` when
        no op record is about an offset at or above ``progress``)."""
        floors = [e.first_op_offset for e in self.entries.values() if e.first_op_offset >= 0]
        return min(floors, default=op_next_offset)
