"""TimerLog: the time-indexed log of timer entries (RocketMQ 5 ``TimerLog``), append-only.

Owns the entry layout and its files. An entry (44 bytes, big-endian) is one waiting message linked
into one wheel slot::

    deliver_ms q   when the message is due
    phys       q   commitlog offset of its record in the timer topic
    prev       q   the previous entry of the same slot, -1 for none (slots are linked lists)
    queue_off  q   timer-topic queue offset it came from; -1 for a re-link (roll, failed put)
    link_sec   I   the slot (epoch second) it is linked into
    size       i   record size
    magic      I

Entries are numbered from 0; entry ``n`` lives in file ``n // per_file`` (``{n // per_file * per_file
:020d}``), files of ``mappedFileSizeTimerLog`` bytes created ahead in a thread. A file whose entries all
belong to processed slots is deleted. Appends and reads run on the loop (mapped memory only).
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import NamedTuple

ENTRY = struct.Struct(">qqqqIiI")
ENTRY_SIZE = ENTRY.size
MAGIC = 0x71E3C0DE
assert ENTRY_SIZE == 44


class TimerEntry(NamedTuple):
    """One decoded entry."""

    deliver_ms: int
    phys: int
    prev: int
    queue_offset: int
    link_sec: int
    size: int


class TimerLog:
    """The log files of one store.

    Args:
        directory: ``{storePathRootDir}/timerlog``.
        file_size: bytes per file (``mappedFileSizeTimerLog``).
    """

    def __init__(self, directory: str, file_size: int) -> None:
        self.directory = directory
        self.per_file = file_size // ENTRY_SIZE
        self.file_bytes = self.per_file * ENTRY_SIZE
        self.maps: dict[int, mmap.mmap] = {}
        self.end = 0  # next entry number
        self.max_link_sec: dict[int, int] = {}  # per file: the latest slot any of its entries is in

    # -- files (threads) --------------------------------------------------------------------
    def _path(self, idx: int) -> str:
        return os.path.join(self.directory, f"{idx * self.per_file:020d}")

    def open(self, end_hint: int) -> list[TimerEntry]:
        """Map the existing files and find the end: scans on from ``end_hint`` while entries are valid.

        Returns:
            The valid entries found at and after ``end_hint`` (appended after the last checkpoint).
        """
        os.makedirs(self.directory, exist_ok=True)
        for name in sorted(os.listdir(self.directory)):
            if name.isdigit() and int(name) % self.per_file == 0:
                self._map(int(name) // self.per_file)
        pos = (
            end_hint
            if not self.maps or end_hint >= min(self.maps) * self.per_file
            else min(self.maps) * self.per_file
        )
        found = []
        while (e := self.read(pos)) is not None:
            found.append(e)
            pos += 1
        self.end = pos
        for idx in self.maps:
            self.max_link_sec[idx] = self._scan_max_link(idx)
        return found

    def _scan_max_link(self, idx: int) -> int:
        mm = self.maps[idx]
        last = min(self.per_file, self.end - idx * self.per_file)
        best = 0
        for t in ENTRY.iter_unpack(mm[: max(last, 0) * ENTRY_SIZE]):
            if t[6] == MAGIC and t[4] > best:
                best = t[4]
        return best

    def _map(self, idx: int) -> None:
        fd = os.open(self._path(idx), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != self.file_bytes:
                os.ftruncate(fd, self.file_bytes)
            self.maps[idx] = mmap.mmap(fd, self.file_bytes)
        finally:
            os.close(fd)

    def prepare(self, count: int) -> None:
        """Create the files entries ``end .. end + count`` (and the next one) need (thread)."""
        for idx in range(self.end // self.per_file, (self.end + count) // self.per_file + 2):
            if idx not in self.maps:
                self._map(idx)

    def has_room(self, count: int) -> bool:
        """True when ``count`` more entries can be appended without creating a file."""
        return (self.end + count) // self.per_file in self.maps

    def flush(self) -> None:
        """msync the files (thread)."""
        for mm in list(self.maps.values()):
            mm.flush()

    def delete_files_done(self, completed_sec: int) -> int:
        """Delete, oldest first, files before the write file whose slots are all processed (thread)."""
        deleted = 0
        write_idx = self.end // self.per_file
        for idx in sorted(self.maps):
            if idx >= write_idx or self.max_link_sec.get(idx, 0) > completed_sec:
                break
            self.maps.pop(idx).close()
            self.max_link_sec.pop(idx, None)
            os.unlink(self._path(idx))
            deleted += 1
        return deleted

    def close(self) -> None:
        """Unmap every file."""
        for mm in self.maps.values():
            mm.close()
        self.maps.clear()

    # -- entries (loop) -----------------------------------------------------------------------
    def append(
        self, deliver_ms: int, phys: int, size: int, prev: int, queue_offset: int, link_sec: int
    ) -> int:
        """Write one entry at the end; returns its number (its file must exist: ``has_room``)."""
        pos = self.end
        idx, i = divmod(pos, self.per_file)
        ENTRY.pack_into(
            self.maps[idx], i * ENTRY_SIZE, deliver_ms, phys, prev, queue_offset, link_sec, size, MAGIC
        )
        if link_sec > self.max_link_sec.get(idx, 0):
            self.max_link_sec[idx] = link_sec
        self.end = pos + 1
        return pos

    def read(self, pos: int) -> TimerEntry | None:
        """The entry numbered ``pos``, None when it is not a written entry."""
        idx, i = divmod(pos, self.per_file)
        mm = self.maps.get(idx)
        if mm is None or pos < 0:
            return None
        t = ENTRY.unpack_from(mm, i * ENTRY_SIZE)
        if t[6] != MAGIC:
            return None
        return TimerEntry(*t[:6])
