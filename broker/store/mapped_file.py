"""One memory-mapped file of fixed size, named by the offset of its first byte.

Owns the mmap, its file descriptor and the write position: only the file's own append methods move
the position (``append_messages`` with a format callback, as RocketMQ's
``MappedFile.appendMessages(callback)``, and ``write`` / ``pack_into`` for fixed units), and
recovery places it once with ``recover_position``. Opening, flushing and destroying block on the
disk and run in store
threads only; writing and reading (memoryview slices) run on the loop.
A file whose views are still held cannot be unmapped: ``destroy`` reports that so cleanup retries.

Pages that will be written are cached in base pages (4 KiB), never in the large folios read-ahead
builds (up to 2 MiB on kernels whose file system caches files in large folios: XFS, ext4 since
6.16): a write through the mapping dirties its whole folio, and the next flush writes all of it, so
one 1 KiB append made durable wrote 2 MiB (``docs/design.md`` §5, "Base pages"). A file is mapped
with ``MADV_RANDOM`` (page faults do not read ahead) unless it is opened for a sequential read
(``readahead=True``: the commitlog files recovery scans); ``base_pages_from`` drops the large
folios a recovered file may hold from its write position on.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import mmap
import os
import struct
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger("rocketpy.store")

OFFSET_NAME_DIGITS = 20
#: The largest page-cache folio a page of a store file may sit in (x86-64's PMD size; read-ahead
#: builds folios up to it). A range that must be cached in base pages starts this far back.
LARGE_FOLIO_BYTES = 2 << 20
SYNC_FILE_RANGE_WAIT_BEFORE, SYNC_FILE_RANGE_WRITE, SYNC_FILE_RANGE_WAIT_AFTER = 1, 2, 4
MADV_POPULATE_READ = 22  # Linux >= 5.14: fault pages in readable (page cache filled, not dirtied)
MADV_POPULATE_WRITE = 23  # Linux >= 5.14: fault pages in writable, as a write would
PREFAULT_CHUNK_BYTES = 4 << 20
MS_SYNC = 4
_libc = None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
except (OSError, AttributeError):  # no madvise: pages fault in on first write instead
    _libc = None
_sync_file_range = None
try:
    _sync_file_range = ctypes.CDLL(None, use_errno=True).sync_file_range
    _sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
except (OSError, AttributeError):  # not Linux: write-back is started by fsync only
    _sync_file_range = None


_B = TypeVar("_B")
_R = TypeVar("_R")
# Writes a batch in a file's own format (RocketMQ's AppendMessageCallback):
# ``(mm, base_offset, pos, room, batch) -> (bytes written at mm[pos:], result)``.
AppendCallback = Callable[[mmap.mmap, int, int, int, _B], tuple[int, _R]]


class WriteBackPacer:
    """Writes file ranges back in slices, one at a time, before they are synced (flush threads).

    A sync of a file with many dirty pages puts all of them in the device's queue at once, and a
    group commit's ``fdatasync`` coming meanwhile waits behind them. Written back slice by slice
    first (each slice's writes waited for, ``pause`` called before each), the sync finds little
    left, and the queue never holds more than one slice.

    Args:
        slice_bytes: file bytes per slice.
        pause: called before each slice (e.g. waits while a group commit runs).
    """

    def __init__(self, slice_bytes: int, pause: Callable[[], None]) -> None:
        assert slice_bytes > 0 and slice_bytes % mmap.PAGESIZE == 0
        self.slice_bytes = slice_bytes
        self.pause = pause

    def write_back(self, mf: MappedFile, start: int, end: int) -> None:
        """Write ``mf``'s dirty pages in ``[start, end)`` back, slice by slice (blocking)."""
        pos = start - start % mmap.PAGESIZE
        while pos < end:
            self.pause()
            mf.write_back(pos, min(pos + self.slice_bytes, end), wait=True)
            pos += self.slice_bytes


def offset_to_name(offset: int) -> str:
    """The 20-digit zero-padded file name of a file starting at ``offset``."""
    return f"{offset:0{OFFSET_NAME_DIGITS}d}"


def list_offset_files(directory: str) -> list[tuple[int, str]]:
    """``(start offset, path)`` of the 20-digit-named files in ``directory``, sorted (blocking)."""
    if not os.path.isdir(directory):
        return []
    out = []
    for name in os.listdir(directory):
        if len(name) == OFFSET_NAME_DIGITS and name.isdigit():
            out.append((int(name), os.path.join(directory, name)))
    out.sort()
    return out


def reserve_blocks(fd: int, size: int) -> None:
    """Allocate a new file's disk blocks now (blocking: store threads).

    A write into a mapped page whose block cannot be allocated is not an error the writer can
    catch: the kernel sends SIGBUS and the broker dies. Reserving the blocks when the file is
    created turns a full disk into ENOSPC here, in the allocating thread, where the store reports
    it and stops taking writes. A file system that cannot reserve (EOPNOTSUPP) keeps the file sparse.

    A reservation that cannot fit is refused before it is tried: a failing ``fallocate`` takes every
    free block before it gives them back (measured on tmpfs: a disk 91 % used reads 100 % meanwhile),
    and the store's own disk guard sampling then would see a full disk and force-delete the oldest
    commitlog file, while other writers on the disk fail. Retried every ``cleanResourceInterval``.

    Raises:
        OSError: ENOSPC (or another error) reserving the blocks.
    """
    needed = size - os.fstat(fd).st_blocks * 512  # a short file may already hold some blocks
    st = os.fstatvfs(fd)
    free = st.f_bavail * st.f_frsize
    if needed > free:
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)}: {needed} bytes needed, {free} free")
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise


class MappedFile:
    """A fixed-size file mapped read/write.

    Attributes:
        path: file path.
        base_offset: logical offset of the file's first byte.
        size: mapped size in bytes.
        mm: the mmap (write with ``pack_into`` / slice assignment on the loop thread).
        view: a memoryview of the whole mapping (slice it to read).
        wrote: bytes written so far (the write position; read-only).
    """

    __slots__ = ("_wrote", "base_offset", "closed", "fd", "mm", "path", "size", "view")

    def __init__(self, path: str, base_offset: int, size: int, fd: int, mm: mmap.mmap) -> None:
        self.path = path
        self.base_offset = base_offset
        self.size = size
        self.fd = fd
        self.mm = mm
        self.view = memoryview(mm)
        self._wrote = 0
        self.closed = False

    @classmethod
    def open(
        cls, path: str, base_offset: int, size: int, keep_fd: bool = True, readahead: bool = False
    ) -> MappedFile:
        """Open (creating if needed) and map ``size`` bytes of ``path``; extends a short file (blocking).

        ``readahead``: page faults read ahead (a sequential scan); otherwise each fault brings in
        one base page (``MADV_RANDOM``), as every file the store writes needs.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        actual = -1
        try:
            actual = os.fstat(fd).st_size
            if actual < size:
                os.ftruncate(fd, size)
                reserve_blocks(fd, size)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            if not readahead:
                mm.madvise(mmap.MADV_RANDOM)
        except BaseException:
            os.close(fd)
            if actual == 0:  # not left behind as a sparse file a later start would write into
                with contextlib.suppress(OSError):
                    os.unlink(path)
            raise
        if not keep_fd:  # the mmap holds its own descriptor; thousands of queues need few fds
            os.close(fd)
            fd = -1
        return cls(path, base_offset, size, fd, mm)

    def prefault(self, length: int | None = None, start: int = 0, write: bool = True) -> bool:
        """Fault the pages of ``[start, start + length)`` in ahead of the writer (blocking; the GIL
        is released).

        Keeps page faults (and file block allocation) off the event loop's hot path, like
        RocketMQ's warm-up of a new mapped file. ``length`` limits it (None: to the end of the file):
        the first write fault into a new file is the costly one (inode update; measured ~3-4 ms of
        kernel CPU here). ``write``: the pages become writable, dirty zeros (written back once);
        else readable (MADV_POPULATE_READ): page-cache pages are allocated and zero-filled but
        stay clean, and the writer's first write to each only makes it writable. False when the
        kernel lacks the advice or the file was closed meanwhile.
        """
        if _libc is None or self.closed:
            return False
        try:
            buf = ctypes.c_char.from_buffer(self.mm)
        except ValueError:  # unmapped meanwhile (shutdown)
            return False
        advice = MADV_POPULATE_WRITE if write else MADV_POPULATE_READ
        try:
            addr = ctypes.addressof(buf)
            end = self.size if length is None else min(start + length, self.size)
            for pos in range(start, end, PREFAULT_CHUNK_BYTES):
                n = min(PREFAULT_CHUNK_BYTES, end - pos)
                if _libc.madvise(addr + pos, n, advice) != 0:
                    return False
        finally:
            del buf
        return True

    def base_pages_from(self, pos: int) -> None:
        """Cache the pages from ``pos`` on (rounded down to a large folio) in base pages from now on
        (blocking: recovery thread, before the file is written again).

        A recovered file was mapped for a sequential scan, and the page cache may hold large folios
        past its write position (read ahead by the scan, or by an older process); the appends to
        come would dirty them whole. Their dirty pages are written (and waited for), the mapping's
        pages there unmapped (``MADV_DONTNEED`` keeps a shared mapping's data in the page cache),
        the clean folios dropped (``POSIX_FADV_DONTNEED``) and the range advised ``MADV_RANDOM``, so
        the pages come back one base page at a time. A folio still dirty or in use stays as it is:
        it only costs time.
        """
        start = pos - pos % LARGE_FOLIO_BYTES
        if start >= self.size or self.closed:
            return
        length = self.size - start
        fd = self.fd if self.fd >= 0 else os.open(self.path, os.O_RDONLY)
        try:
            if _sync_file_range is not None:
                flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER
                _sync_file_range(fd, start, length, flags)
            self.mm.madvise(mmap.MADV_DONTNEED, start, length)
            os.posix_fadvise(fd, start, length, os.POSIX_FADV_DONTNEED)
            self.mm.madvise(mmap.MADV_RANDOM, start, length)
        finally:
            if fd != self.fd:
                os.close(fd)

    # -- the write position (loop; recovery thread before serving) ---------------------------------
    @property
    def wrote(self) -> int:
        """Bytes written so far: the write position."""
        return self._wrote

    def append_messages(self, callback: AppendCallback[_B, _R], batch: _B) -> _R:
        """Let ``callback`` write ``batch`` at the write position, then move the position past it."""
        pos = self._wrote
        wrote, result = callback(self.mm, self.base_offset, pos, self.size - pos, batch)
        self._wrote = pos + wrote
        return result

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` to ``pos``; the write position becomes its end (fixed-size units)."""
        end = pos + len(data)
        self.mm[pos:end] = data
        self._wrote = end

    def pack_into(self, st: struct.Struct, pos: int, *values: int) -> None:
        """Pack ``values`` with ``st`` in place at ``pos``; the write position becomes its end."""
        st.pack_into(self.mm, pos, *values)
        self._wrote = pos + st.size

    def recover_position(self, pos: int) -> None:
        """Place the write position where recovery (or a truncation) found the data to end."""
        assert 0 <= pos <= self.size, f"write position {pos} outside {self.path}"
        self._wrote = pos

    @property
    def end_offset(self) -> int:
        """Logical offset one past the file's last byte."""
        return self.base_offset + self.size

    def flush(self) -> None:
        """Write dirty pages to disk (blocking; the GIL is released)."""
        if self.fd >= 0:
            os.fdatasync(self.fd)
        elif not self.closed:
            self._msync()

    def write_back(self, start: int = 0, end: int | None = None, wait: bool = False) -> None:
        """Write the dirty pages of ``[start, end)`` to disk (blocking: flush threads; the GIL is
        released). ``wait``: until those writes completed; else only start them.

        ``sync_file_range``: no cache flush of the device and no journal commit, so it does not
        hold up another file's ``fdatasync`` the way a flush does; nothing is durable until a
        ``flush``. A no-op where the call does not exist.
        """
        if _sync_file_range is None or self.closed:
            return
        end = self.size if end is None else min(end, self.size)
        if end <= start:
            return
        flags = SYNC_FILE_RANGE_WRITE
        if wait:
            flags |= SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WAIT_AFTER
        fd = self.fd if self.fd >= 0 else os.open(self.path, os.O_RDONLY)
        try:
            if _sync_file_range(fd, start, end - start, flags) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"sync_file_range of {self.path} failed: {os.strerror(err)}")
        finally:
            if fd != self.fd:
                os.close(fd)

    def _msync(self) -> None:
        # mmap.flush() keeps the GIL during msync (stalling the event loop for the whole write);
        # msync through ctypes releases it.
        if _libc is None:
            self.mm.flush()
            return
        buf = ctypes.c_char.from_buffer(self.mm)
        addr = ctypes.addressof(buf)
        del buf
        if _libc.msync(addr, self.size, MS_SYNC) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"msync of {self.path} failed: {os.strerror(err)}")

    def close(self) -> bool:
        """Unmap and close; False (nothing changed) while views of the mapping are still held."""
        if self.closed:
            return True
        try:
            self.view.release()
            self.mm.close()
        except BufferError:
            return False
        self.closed = True
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        return True

    def destroy(self, force: bool = False) -> bool:
        """Close and delete the file (blocking). With ``force`` delete even while views are held.

        Returns:
            True when the file is gone; False when it is still read and should be retried later.
        """
        if not self.close():
            if not force:
                return False
            if self.fd >= 0:
                os.close(self.fd)  # the mapping stays valid for the views still held
                self.fd = -1
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        return True

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote}, size={self.size})"
