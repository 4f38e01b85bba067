"""Consume queues: per (topic, queue id), 20-byte units pointing into the commitlog.

Owns the unit layout ``commitlog offset i64 | size i32 | tag code i64`` (big-endian) and the files of
one queue, named by the byte offset of their first unit. Logical offset n lives at byte ``n * 20``.
Units are written on the loop right after the commitlog append. A missing file is created by the
allocate thread; until it is ready, units wait in a small in-memory tail (``_pending``) that reads
also see, so the loop never creates a file. Zeroed units (size 0) mark the end of a queue.
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING, Protocol

from rocketpy.broker.store.mapped_file import MappedFile, WriteBackPacer, offset_to_name

if TYPE_CHECKING:
    from rocketpy.broker.store.allocate import AllocateService

UNIT = struct.Struct(">qiq")  # commitlog offset | record size | tag hash code (or delivery time)
UNIT_SIZE = UNIT.size
assert UNIT_SIZE == 20
_pack_unit = UNIT.pack
MAX_PENDING_UNITS = 1 << 20
PREFAULT_BYTES = 4096  # the first write fault of a file is the costly one: take it in the allocator

_multi_units: dict[int, struct.Struct] = {}


def units_struct(n: int) -> struct.Struct:
    """A cached struct unpacking ``n`` units at once."""
    s = _multi_units.get(n)
    if s is None:
        s = _multi_units[n] = struct.Struct(">" + "qiq" * n)
    return s


class PendingTracker(Protocol):
    """Told when a queue's units start / stop waiting in memory for a file."""

    def pending_started(self, phys: int) -> None:
        """A unit pointing at commitlog offset ``phys`` waits in memory."""
        ...

    def pending_ended(self) -> None:
        """A queue's waiting units are all in its file now."""
        ...


class ConsumeQueue:
    """The units of one (topic, queue id).

    Attributes:
        next_offset: logical offset of the next unit (the queue's max offset).
        min_offset: logical offset of the first unit still pointing at stored data.
        max_phys_end: commitlog offset one past the last record this queue points to.
    """

    __slots__ = (
        "_allocator",
        "_flushed_pos",
        "_pending",
        "_pending_base",
        "_requested",
        "_tracker",
        "_written_back_pos",
        "deleted",
        "directory",
        "file_size",
        "files",
        "max_phys_end",
        "min_offset",
        "next_offset",
        "queue_id",
        "topic",
    )

    def __init__(self, root: str, topic: str, queue_id: int, file_size: int) -> None:
        assert file_size % UNIT_SIZE == 0, "consume queue file size must be a multiple of 20"
        self.topic = topic
        self.queue_id = queue_id
        self.directory = os.path.join(root, topic, str(queue_id))
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self.next_offset = 0
        self.min_offset = 0
        self.max_phys_end = 0
        self._allocator: AllocateService | None = None
        self._pending = bytearray()
        self._pending_base = 0  # byte position of _pending[0]
        self._tracker: PendingTracker | None = None
        self._flushed_pos = 0
        self._written_back_pos = 0
        self._requested = False
        self.deleted = False

    def attach_allocator(self, allocator: AllocateService, tracker: PendingTracker | None = None) -> None:
        """From now on create files through ``allocator`` (before: inline, in the recovery thread).

        ``tracker`` learns when units start and stop waiting in memory (they are lost by a crash).
        """
        self._allocator = allocator
        self._tracker = tracker

    # -- write (loop) ---------------------------------------------------------------------------
    def put(self, phys: int, size: int, tags_code: int, queue_offset: int) -> None:
        """Write the unit of logical ``queue_offset`` (hot path)."""
        pos = queue_offset * UNIT_SIZE
        if not self._pending and self.files:
            mf = self.files[-1]
            rel = pos - mf.base_offset
            if 0 <= rel < mf.size:
                mf.pack_into(UNIT, rel, phys, size, tags_code)  # in place: no bytes object per unit
                self.next_offset = queue_offset + 1
                self.max_phys_end = phys + size
                return
        self._put_slow(pos, phys, size, tags_code)
        self.next_offset = queue_offset + 1
        self.max_phys_end = phys + size

    def _put_slow(self, pos: int, phys: int, size: int, tags_code: int) -> None:
        if not self.files and not self._pending:
            self.min_offset = pos // UNIT_SIZE
        if not self._pending:
            self._pending_base = pos
            if self._tracker is not None:
                self._tracker.pending_started(phys)
        assert pos == self._pending_base + len(self._pending), "consume queue units must be contiguous"
        assert len(self._pending) < MAX_PENDING_UNITS * UNIT_SIZE, "consume queue file allocation stalled"
        self._pending += UNIT.pack(phys, size, tags_code)
        self._request_file()

    def _request_file(self) -> None:
        if self._requested or not self._pending:
            return
        pos = self._pending_base
        base = pos - pos % self.file_size
        if self.files and self.files[-1].base_offset <= pos < self.files[-1].end_offset:
            self._drain()
            return
        path = os.path.join(self.directory, offset_to_name(base))
        if self._allocator is None:  # recovery thread: create inline
            os.makedirs(self.directory, exist_ok=True)
            self._on_file(MappedFile.open(path, base, self.file_size, keep_fd=False), None)
            return
        self._requested = True
        self._allocator.request(path, base, self.file_size, self._on_file, PREFAULT_BYTES, keep_fd=False)

    def retry_file(self) -> None:
        """Ask again for the file waiting units go to, after its creation failed (on the loop)."""
        self._request_file()

    def _on_file(self, mf: MappedFile | None, err: BaseException | None) -> None:
        self._requested = False
        if mf is None:  # reported by the allocator (the store turns read-only); ``retry_file`` asks again
            return
        if self.deleted:  # the topic was deleted meanwhile; its files are removed by the allocate thread
            mf.close()
            return
        self.files.append(mf)
        self._drain()

    def _drain(self) -> None:
        mf = self.files[-1]
        rel = self._pending_base - mf.base_offset
        n = min(len(self._pending), mf.size - rel)
        mf.write(rel, self._pending[:n])
        del self._pending[:n]
        self._pending_base += n
        if not self._pending and self._tracker is not None:
            self._tracker.pending_ended()
        self._request_file()

    # -- read (loop) ----------------------------------------------------------------------------
    def read_units(self, offset: int, max_count: int) -> tuple[memoryview | bytes, int]:
        """Up to ``max_count`` units from logical ``offset`` (within one file): ``(bytes, count)``."""
        max_count = min(max_count, self.next_offset - offset)
        if max_count <= 0:
            return b"", 0
        pos = offset * UNIT_SIZE
        if self._pending and pos >= self._pending_base:
            rel = pos - self._pending_base
            n = min(max_count, (len(self._pending) - rel) // UNIT_SIZE)
            return bytes(self._pending[rel : rel + n * UNIT_SIZE]), n
        mf = self._file_for(pos)
        if mf is None:
            return b"", 0
        rel = pos - mf.base_offset
        n = min(max_count, (mf.size - rel) // UNIT_SIZE)
        return mf.view[rel : rel + n * UNIT_SIZE], n

    def unit(self, offset: int) -> tuple[int, int, int] | None:
        """The unit at logical ``offset``, or None when not stored."""
        raw, n = self.read_units(offset, 1)
        if n == 0:
            return None
        phys, size, tag = UNIT.unpack_from(raw, 0)
        return (phys, size, tag) if size > 0 else None

    def _file_for(self, pos: int) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        idx = (pos - files[0].base_offset) // self.file_size
        if 0 <= idx < len(files):
            return files[idx]
        return None

    # -- maintenance (loop hand-off; blocking parts run in threads) ----------------------------
    def dirty_bytes(self) -> int:
        """Bytes written since the last write-back or flush (any thread; approximate)."""
        return self.next_offset * UNIT_SIZE - self._written_back_pos

    def write_back(self) -> None:
        """Start writing the units written since the last write-back to disk, without waiting for
        them or making them durable (blocking briefly: flush thread; ``MappedFile.write_back``)."""
        target = self.next_offset * UNIT_SIZE
        start = self._written_back_pos
        for mf in list(self.files):
            if mf.end_offset > start and mf.base_offset < target:
                mf.write_back(
                    max(start, mf.base_offset) - mf.base_offset, min(target, mf.end_offset) - mf.base_offset
                )
        self._written_back_pos = target

    def flush(self, pacer: WriteBackPacer | None = None) -> None:
        """Write the dirty units to disk and wait until they are durable (blocking: flush thread);
        ``pacer`` writes them back first."""
        target = self.next_offset * UNIT_SIZE
        for mf in reversed(list(self.files)):  # newest first, down to the last flushed file
            if mf.end_offset <= self._flushed_pos:
                break
            if pacer is not None:
                start = max(self._flushed_pos, mf.base_offset) - mf.base_offset
                pacer.write_back(mf, start, min(target, mf.end_offset) - mf.base_offset)
            mf.flush()
        self._flushed_pos = target
        self._written_back_pos = max(self._written_back_pos, target)

    def truncate_to_phys(self, phys_end: int, dropped: list[MappedFile] | None = None) -> None:
        """Drop units pointing at or past ``phys_end`` (the commitlog was cut there).

        Files wholly past the cut are destroyed (recovery thread), or added to ``dropped`` for the
        caller to destroy in a thread (a running store: ``truncate.py``).
        """
        lo, hi = self.min_offset, self.next_offset
        while lo < hi:  # first unit whose record does not end by phys_end (units grow with the log)
            mid = (lo + hi) // 2
            u = self.unit(mid)
            if u is not None and u[0] + u[1] <= phys_end:
                lo = mid + 1
            else:
                hi = mid
        cut, end = lo * UNIT_SIZE, self.next_offset * UNIT_SIZE
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.base_offset > cut or (mf.base_offset == cut and keep):
                if dropped is None:
                    mf.destroy(force=True)  # entirely past the new end
                else:
                    dropped.append(mf)
                continue
            a, b = max(cut, mf.base_offset), min(end, mf.end_offset)
            if a < b:
                mf.mm[a - mf.base_offset : b - mf.base_offset] = bytes(b - a)
            keep.append(mf)
        self.files = keep
        if keep:
            keep[-1].recover_position(cut - keep[-1].base_offset)
        self.next_offset = lo
        u = self.unit(lo - 1) if lo > self.min_offset else None
        self.max_phys_end = u[0] + u[1] if u else 0

    def close(self) -> None:
        """Unmap every file (blocking)."""
        for mf in self.files:
            mf.close()
