"""The commitlog: one append-only log of records in fixed-size files named by their start offset.

Owns the list of mapped commitlog files and the single-writer append (on the event loop), modelled on
RocketMQ's ``CommitLog.putMessages``: ``append(batch)`` hands the batch to the last file's
``append_messages`` with ``append_records`` as the callback, which packs each record through
``rocketpy.record.pack_record`` or, when the batch does not fit, seals the file with a blank record;
``append`` then rolls to the next file, pre-created by the allocate thread so a roll never creates a
file on the loop, and appends there. Invariant: a record (and a batch) never spans two files; every
file but the last is full (its tail is a blank record or exactly filled).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import queue
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from mmap import mmap
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.broker.store.allocate import AllocateService
from rocketpy.broker.store.consume_queue import ConsumeQueue
from rocketpy.broker.store.faults import DiskFaults
from rocketpy.broker.store.mapped_file import MappedFile, offset_to_name
from rocketpy.broker.store.message import BrokerMessage
from rocketpy.broker.store.results import PutMessageResult, PutMessageStatus
from rocketpy.record import END_FILE_MIN_BLANK_BYTES, pack_blank, pack_record
from rocketpy.waits import wait_done

# Bytes of a new file faulted in by the allocator thread when the whole file is not warmed: the
# first write fault into a new file is the costly one (block allocation, inode update).
HEAD_PREFAULT_BYTES = 4 << 20
# The rolling prefault: while the writer fills a file, the allocator thread faults in (readable,
# so nothing extra is written back) the next PREFAULT_STEP_BYTES whenever less than
# PREFAULT_AHEAD_BYTES are faulted in ahead of the write position. A write fault into a fresh page
# is mostly the kernel zero-filling a new page-cache page (measured on these VMs: up to a quarter
# of the broker's CPU under batch sends); done ahead, it leaves the event loop.
PREFAULT_STEP_BYTES = 4 << 20
PREFAULT_AHEAD_BYTES = 8 << 20
PAGE_BYTES = 4096
_NEVER = 1 << 62

log = logging.getLogger("rocketpy.store")


# One append: messages of one topic and queue, checked, with their properties encoded. A plain
# tuple (built once per put, unpacked once by ``append_records``): a class instance here cost a
# Python ``__init__`` call per single put. Fields, in order:
#   msgs         the messages (one for a single put)
#   topic_b      TOPICLEN + TOPIC (``rocketpy.record.topic_part``)
#   props        each message's encoded properties
#   total        bytes of all the records
#   cq           the consume queue the messages go to; the append numbers them from its next offset
#   store_ts     store timestamp in ms of every record
#   store_host8  packed store host written into every record
RecordBatch = tuple[list[BrokerMessage], bytes, list[bytes], int, ConsumeQueue, int, bytes]


# The callback's answer when the batch did not fit: the file was sealed with a blank tail.
_END_OF_FILE = PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, "end of file")
_PUT_OK = PutMessageStatus.PUT_OK


@twin
def append_records(
    mm: mmap, base_offset: int, pos: int, room: int, batch: RecordBatch
) -> tuple[int, PutMessageResult]:
    """The commitlog's append callback: ``batch`` as records back to back at ``mm[pos:]``.

    When the batch and a minimal blank record do not fit the ``room`` left, the room is filled with
    a blank record instead (END_OF_FILE): the file is full and the caller rolls. Otherwise the
    result is the put's one result (PUT_OK, where the records went, each record's size).
    """
    msgs, topic_b, props, total, cq, store_ts, host8 = batch
    if total + END_FILE_MIN_BLANK_BYTES > room:
        if room >= END_FILE_MIN_BLANK_BYTES:
            pack_blank(mm, pos, room)
        return room, _END_OF_FILE
    # Numbered here, in the one synchronous step that writes them (RocketMQ's doAppend does the same).
    queue_offset = cq.next_offset
    start = pos
    sizes = []
    for i, m in enumerate(msgs):  # enumerate, not zip(strict=True): no keyword parsing per put
        size = pack_record(
            mm, pos, topic_b, props[i], m.body, m.queue_id, m.flag, queue_offset + i, base_offset + pos,
            m.sys_flag, m.born_timestamp, m.born_host8, store_ts, host8, m.reconsume_times,
            m.prepared_transaction_offset,
        )  # fmt: skip
        sizes.append(size)
        pos += size
    assert pos - start == total, "batch size does not match its records"
    return total, PutMessageResult(
        _PUT_OK, "", base_offset + start, total, queue_offset, store_ts, len(sizes), host8, sizes
    )


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
        self.faults = DiskFaults()
        #: the first failed flush: the log is not flushed again (see ``flush``)
        self.flush_error: OSError | None = None
        #: the rolling prefault: the file it covers, the offset faulted in up to, and the write
        #: position past which the next step is asked for (``_NEVER``: off)
        self._prefault_file: MappedFile | None = None
        self._prefaulted = 0
        self._prefault_due = 0
        self._rolling_prefault = True  # turned off by the thread if the kernel cannot
        #: told of a failed flush (flush thread): the store turns read-only
        self.on_flush_error: Callable[[OSError], None] | None = None
        #: ``[when the running flush began]`` (``time.monotonic()``; 0.0: none runs), written by the
        #: flush thread, also from C with the GIL released (``flush.group_commit_sync``)
        self.sync_started = array("d", [0.0])
        #: makes ``synced``'s compare-and-raise of ``flushed_offset`` atomic (flush thread and loop)
        self._synced_lock = threading.Lock()

    # -- positions ---------------------------------------------------------------------------
    @property
    def flush_started(self) -> float:
        """When the running flush began (``time.monotonic()``; 0.0: none runs); read by the broker's
        send queue as RocketMQ reads the commitlog lock time (osPageCacheBusyTimeOutMills)."""
        return self.sync_started[0]

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
        if not await wait_done(fut, timeout_s):  # on the put path, outside a task (eager)
            return False
        return self._next_error is None

    def retry_next(self) -> None:
        """Ask again for the next file after its creation failed (on the loop)."""
        self._request_next()

    def take_error(self) -> BaseException | None:
        """The last allocation error (cleared)."""
        err, self._next_error = self._next_error, None
        return err

    # -- append ------------------------------------------------------------------------------
    def append(self, batch: RecordBatch) -> PutMessageResult | None:
        """Append ``batch`` contiguously, rolling to the next file when the last one is full.

        The caller checked that the batch fits one file. Returns the put's result (PUT_OK), or None
        when a roll is needed but the next file is not ready yet (nothing of the batch was written;
        the last file may have been sealed): await ``wait_next_file`` and append again.
        """
        mf = self.files[-1]
        result = mf.append_messages(append_records, batch)
        if result is _END_OF_FILE:
            nxt = self._roll()
            if nxt is None:
                return None
            mf = nxt
            result = mf.append_messages(append_records, batch)
            assert result is not _END_OF_FILE, "a batch larger than a commitlog file"
        if mf.base_offset + mf.wrote > self._prefault_due:
            self._prefault_ahead(mf)
        return result

    def note_written(self, mf: MappedFile) -> None:
        """A raw write (a replica's) moved the last file's write position: keep faulting in ahead."""
        if mf.base_offset + mf.wrote > self._prefault_due:
            self._prefault_ahead(mf)

    def _prefault_ahead(self, mf: MappedFile) -> None:
        """Ask the allocator thread to fault in the next step of ``mf`` (the last file) ahead of its
        write position (on the loop)."""
        allocator = self._allocator
        if allocator is None or allocator.stopped or self.warm_files or not self._rolling_prefault:
            self._prefault_due = _NEVER  # no thread to do it, or whole files are warmed already
            return
        if mf is not self._prefault_file:  # a new last file: its head is faulted in at creation
            self._prefault_file = mf
            head = mf.base_offset + HEAD_PREFAULT_BYTES
            wrote = mf.base_offset + mf.wrote  # a recovered file: from its write position on
            self._prefaulted = max(head, wrote - wrote % PAGE_BYTES)
        start = self._prefaulted - mf.base_offset
        if start >= mf.size:
            self._prefault_due = mf.end_offset  # the next file's first append comes back here
            return
        try:
            allocator.run_in_order(functools.partial(self._populate, mf, start))
        except queue.Full:  # the thread is far behind (a stuck disk): the writer faults pages itself
            return
        self._prefaulted += PREFAULT_STEP_BYTES
        self._prefault_due = self._prefaulted - PREFAULT_AHEAD_BYTES

    def _populate(self, mf: MappedFile, start: int) -> None:
        """One rolling prefault step (allocator thread); turns the rolling prefault off when the
        kernel cannot (no MADV_POPULATE_READ: Linux < 5.14)."""
        if not mf.prefault(PREFAULT_STEP_BYTES, start, write=False) and not mf.closed:
            log.info("the commitlog's rolling prefault is off: madvise(MADV_POPULATE_READ) is not available")
            self._rolling_prefault = False

    def _roll(self) -> MappedFile | None:
        """Make the pre-created next file the last one (None when it is not ready yet)."""
        nxt = self._next
        if nxt is None:
            self._request_next()
            return None
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
        if target <= self.flushed_offset or self.flush_error is not None:
            # After a failed msync/fdatasync the kernel may have dropped the dirty pages and a retry
            # would "succeed" without them: nothing past the flushed offset is reported durable again.
            return self.flushed_offset
        self.sync_started[0] = time.monotonic()
        try:
            flushed = self.flushed_offset
            for mf in list(self.files):
                if mf.end_offset > flushed and mf.base_offset < target:
                    self.faults.on_flush(mf.path, min(target, mf.end_offset) - max(flushed, mf.base_offset))
                    mf.flush()
        except OSError as e:
            self.flush_failed(e)
            raise
        finally:
            self.sync_started[0] = 0.0
        self.synced(target)
        return target

    def group_commit_file(self) -> MappedFile | None:
        """The file a group commit may make durable alone (flush thread): the last one, when every
        byte before it is flushed, it has a descriptor, and no flush failed or is to fail (faults)."""
        files = self.files
        mf = files[-1] if files else None
        if (mf is None or mf.fd < 0 or self.flushed_offset < mf.base_offset or self.flush_error is not None
                or self.faults.flush_armed):  # fmt: skip
            return None
        return mf

    def synced(self, target: int) -> None:
        """A flush made the log durable up to ``target`` (flush thread, or the loop when it hears of
        a group commit before the thread has said so): ``flushed_offset`` only ever rises, whichever
        of the two comes first (the lock is held for one compare and one store)."""
        with self._synced_lock:
            if target > self.flushed_offset:
                self.flushed_offset = target

    def flush_failed(self, e: OSError) -> None:
        """A flush failed: no later one reports anything durable (flush thread)."""
        self.flush_error = e
        if self.on_flush_error is not None:
            self.on_flush_error(e)

    def close(self) -> None:
        """Unmap every file and delete a pre-created next file never written to (blocking)."""
        for mf in self.files:
            mf.close()
        if self._next is not None:  # never used: do not leave an empty file behind
            self._next.destroy(force=True)
            self._next = None

    # -- replicas (replica.py) ------------------------------------------------------------------
    def roll_to_next(self) -> MappedFile | None:
        """Make the pre-created next file the last one for a raw append (None: not ready yet)."""
        return self._roll()


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.store import _speedups

    same_signature(append_records)(_speedups.append_records)
    same_signature(_speedups.append_records)(append_records)
