"""The epoch file (RocketMQ's ``EpochFileCache``): which master epoch wrote which part of the commitlog.

Owns ``{storePathRootDir}/epochFile.json``: a list of ``[epoch, start_offset]`` entries, epochs
strictly increasing and start offsets not decreasing. Entry ``i`` covers the commitlog from its start
offset to the next entry's start (the last one: to the log's end). A master appends its epoch when
it takes over, at the offset where its first record will go; a follower adopts its master's entries
before it copies a byte, so every byte a broker holds was written in a known epoch.

``consistent_point`` is the rejoin rule: the newest epoch both logs hold with the same start, ended at
the earlier of the two logs' ends of that epoch. Bytes past it were written by a master whose epoch
the new master does not know (never acknowledged under SYNC semantics), and are truncated, never
spliced. A store from before controller mode (no file, bytes stored) counts as epoch 0 from offset 0.

Written atomically (``json_file.write_json_atomic``: temp, fsync, rename); load and save block on the
disk, so the broker calls them in a thread.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from rocketpy.broker.store.json_file import read_json_with_backup, write_json_atomic

FILE_NAME = "epochFile.json"
#: The epoch of bytes written before controller mode (a store without an epoch file).
LEGACY_EPOCH = 0
#: Entries kept: older ones are dropped (a point that old is far below any rejoin's divergence).
MAX_ENTRIES = 1024

Entry = tuple[int, int]


def check_entries(entries: Sequence[Sequence[int]]) -> list[Entry]:
    """``entries`` as ``(epoch, start)`` tuples, checked: epochs increase, starts do not decrease.

    Raises:
        ValueError: an entry is malformed or out of order.
    """
    out: list[Entry] = []
    for e in entries:
        if len(e) != 2 or not all(isinstance(x, int) and x >= 0 for x in e):
            raise ValueError(f"epoch entry {e!r} is not [epoch, startOffset] with integers >= 0")
        if out and (e[0] <= out[-1][0] or e[1] < out[-1][1]):
            raise ValueError(f"epoch entry {list(e)} does not follow {list(out[-1])}")
        out.append((int(e[0]), int(e[1])))
    return out


def end_of(entries: Sequence[Entry], i: int, log_end: int) -> int:
    """Where entry ``i``'s bytes end: the next entry's start, else ``log_end``."""
    return entries[i + 1][1] if i + 1 < len(entries) else log_end


def consistent_point(
    mine: Sequence[Entry], my_end: int, theirs: Sequence[Entry], their_end: int
) -> int | None:
    """The offset up to which this log and the master's hold the same bytes (None: no common epoch).

    Args:
        mine / my_end: this broker's entries and its commitlog's valid end.
        theirs / their_end: the master's entries and its commitlog's end.
    """
    if my_end == 0:
        return 0
    index = {entry: i for i, entry in enumerate(theirs)}
    for i in range(len(mine) - 1, -1, -1):
        j = index.get(mine[i])
        if j is not None:
            return min(end_of(mine, i, my_end), end_of(theirs, j, their_end))
    return None


class EpochFile:
    """The epoch entries of one store.

    Args:
        root: the store's ``storePathRootDir``.
    """

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, FILE_NAME)
        self.entries: list[Entry] = []

    @property
    def last_epoch(self) -> int:
        """The newest epoch this store holds (0: none)."""
        return self.entries[-1][0] if self.entries else LEGACY_EPOCH

    def load(self, max_offset: int) -> None:
        """Read the file (blocking); a store with bytes and no file holds epoch 0 from offset 0.

        Raises:
            ValueError: the file (and its backup) cannot be read, or its entries are out of order.
        """
        doc = read_json_with_backup(self.path)
        if doc is None:
            self.entries = [(LEGACY_EPOCH, 0)] if max_offset > 0 else []
            return
        self.entries = check_entries(doc.get("entries") or [])

    def save(self) -> None:
        """Write the entries atomically (blocking)."""
        write_json_atomic(self.path, {"entries": [list(e) for e in self.entries[-MAX_ENTRIES:]]})

    def adopt(self, entries: Sequence[Sequence[int]]) -> None:
        """Take a master's entries as this follower's (checked; save afterwards)."""
        self.entries = check_entries(entries)

    def begin(self, epoch: int, start_offset: int) -> None:
        """This broker becomes master of ``epoch`` with its first record at ``start_offset``.

        Entries that start at or past ``start_offset`` are dropped first: this log holds none of
        their bytes (copied from a master it did not catch up with).
        """
        kept = [e for e in self.entries if e[1] < start_offset]
        assert not kept or kept[-1][0] < epoch, f"epoch {epoch} after {kept[-1]}"
        self.entries = [*kept, (epoch, start_offset)]

    def cut(self, offset: int) -> None:
        """The log was truncated to ``offset``: drop entries that start past it."""
        self.entries = [e for e in self.entries if e[1] <= offset]
