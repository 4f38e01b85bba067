"""The commitlog: one append-only log of records in fixed-size files named by their start offset.

Owns the list of mapped commitlog files, the single-writer append (on the event loop), the blank
record at a file's tail and the roll to the next file, which is pre-created by the allocate thread so
a roll never creates a file on the loop. Invariant: a record never spans two files; every file but
the last is full (its tail is a blank record or exactly filled).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence

from rocketpy.broker.store.allocate import AllocateService
from rocketpy.broker.store.mapped_file import MappedFile, offset_to_name
from rocketpy.record import BLANK_MAGIC, END_FILE_MIN_BLANK_BYTES, SIZE_MAGIC

# Bytes of a new file faulted in by the allocator thread when the whole file is not warmed: the
# first write fault into a new file is the costly one (block allocation, inode update).
HEAD_PREFAULT_BYTES = 4 << 20

log = logging.getLogger("rocketpy.store")


class CommitLog:
    """Fixed-size commitlog files and the append position.

    Args:
        directory: the commitlog directory.
        file_size: bytes per file (``mappedFileSizeCommitLog``).
    """

    def __init__(self, directory: str, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self.flushed_offset = 0
        self._allocator: AllocateService | None = None
        self._next: MappedFile | None = None
        self._next_requested = False
        self._next_error: BaseException | None = None
        self._waiters: list[asyncio.Future[None]] = []
        # Warm new files (fault every page in ahead of the writer) only when warmMapedFileEnable is
        # set, as in RocketMQ: a warmed file is fully allocated on disk and its zero pages are dirty
        # (written back once; under SYNC_FLUSH that slows every group-commit fsync). Otherwise only
        # the head is faulted in, which takes the costly first write fault off the event loop.
        self.warm_files = False

    # -- positions ---------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        """Offset of the first byte still stored."""
        return self.files[0].base_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """Offset one past the last written byte (where the next record goes)."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.base_offset + last.wrote

    def file_for(self, offset: int) -> MappedFile | None:
        """The file holding ``offset``, or None when it is not stored."""
        files = self.files
        if not files:
            return None
        idx = (offset - files[0].base_offset) // self.file_size
        if 0 <= idx < len(files):
            return files[idx]
        return None

    def view(self, offset: int, size: int) -> memoryview | None:
        """A view of ``size`` bytes at ``offset`` (within one file), or None when not stored."""
        mf = self.file_for(offset)
        if mf is None:
            return None
        pos = offset - mf.base_offset
        if pos + size > mf.wrote:
            return None
        return mf.view[pos : pos + size]

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self, files: Sequence[MappedFile]) -> None:
        """Adopt the files found by recovery (blocking context)."""
        self.files = list(files)

    def ensure_first_file(self, base_offset: int) -> None:
        """Create the first file when the log is empty (blocking: recovery thread)."""
        if not self.files:
            os.makedirs(self.directory, exist_ok=True)
            path = os.path.join(self.directory, offset_to_name(base_offset))
            mf = MappedFile.open(path, base_offset, self.file_size)
            mf.prefault(None if self.warm_files else HEAD_PREFAULT_BYTES)
            self.files.append(mf)

    def attach_allocator(self, allocator: AllocateService) -> None:
        """Start pre-allocating the next file with ``allocator``."""
        self._allocator = allocator
        self._request_next()

    def _request_next(self) -> None:
        if self._allocator is None or self._next_requested or self._next is not None or not self.files:
            return
        base = self.files[-1].end_offset
        self._next_requested = True
        path = os.path.join(self.directory, offset_to_name(base))
        prefault = -1 if self.warm_files else HEAD_PREFAULT_BYTES
        self._allocator.request(path, base, self.file_size, self._on_next_file, prefault=prefault)

    def _on_next_file(self, mf: MappedFile | None, err: BaseException | None) -> None:
        self._next_requested = False
        self._next = mf
        self._next_error = err
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def wait_next_file(self, timeout_s: float) -> bool:
        """Wait until a next-file allocation completes; False on allocation failure or timeout.

        Several putters may wake for one file: the caller retries ``writable_file`` and waits again.
        """
        if self._next is not None:
            return True
        self._request_next()
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return False
        return self._next_error is None

    def take_error(self) -> BaseException | None:
        """The last allocation error (cleared)."""
        err, self._next_error = self._next_error, None
        return err

    # -- append ------------------------------------------------------------------------------
    def writable_file(self, total: int) -> MappedFile | None:
        """The file where ``total`` more bytes fit (rolling with a blank tail if needed).

        Returns None when a roll is needed but the next file is not ready yet (the caller awaits
        ``wait_next_file`` and retries; nothing was written).
        """
        mf = self.files[-1]
        if mf.wrote + total + END_FILE_MIN_BLANK_BYTES <= mf.size:
            return mf
        nxt = self._next
        if nxt is None:
            self._request_next()
            return None
        remaining = mf.size - mf.wrote
        if remaining >= END_FILE_MIN_BLANK_BYTES:
            SIZE_MAGIC.pack_into(mf.mm, mf.wrote, remaining, BLANK_MAGIC)
        mf.wrote = mf.size
        self._next = None
        self.files.append(nxt)
        self._request_next()
        return nxt

    # -- flush / shutdown (threads) -----------------------------------------------------------
    def flush(self) -> int:
        """fdatasync the files between the flushed and the written offset (blocking: flush thread).

        Returns:
            The new flushed offset.
        """
        target = self.max_offset
        if target <= self.flushed_offset:
            return self.flushed_offset
        for mf in list(self.files):
            if mf.end_offset > self.flushed_offset and mf.base_offset < target:
                mf.flush()
        self.flushed_offset = target
        return target

    def close(self) -> None:
        """Unmap every file (blocking)."""
        for mf in self.files:
            mf.close()
        if self._next is not None:
            self._next.close()
            self._next = None
