"""Raw commitlog bytes in and out: a slave's append path and a master's transfer reads.

Owns the replica append (RocketMQ's ``appendToCommitLog``): bytes a master read from its commitlog at
offset X are copied verbatim into this commitlog at X, which must be where the next byte goes, so
the two logs stay byte-identical. A chunk never spans two files (``read_raw`` cuts at file ends).
After each chunk the complete records past the **confirm offset** are checked as recovery checks
them (``read_record``: magic, length, physical offset, body CRC) and handed to
``Dispatcher.dispatch``, the one way consume queues and the index learn of records; a record cut by
the chunk's end waits for the next chunk; a blank tail moves the confirm offset to the next file.
Invariant: confirm offset <= max offset, and every record before the confirm offset is valid and
dispatched. An invalid record (garbled bytes, a log that diverged from the master's) is never kept:
the bytes past the confirm offset are zeroed, the write position goes back there and
``ReplicaError`` is raised, so the store is always one that recovery accepts. Single writer on the
event loop; nothing here knows of sockets.
"""

from __future__ import annotations

import logging

from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.dispatch import Dispatcher
from rocketpy.broker.store.mapped_file import MappedFile
from rocketpy.broker.store.recovery import read_record, redispatch
from rocketpy.broker.store.results import StoreError
from rocketpy.record import BLANK_MAGIC, SIZE_MAGIC

log = logging.getLogger("rocketpy.store")

NEXT_FILE_WAIT_S = 5.0


class ReplicaError(StoreError):
    """Replicated bytes cannot be appended (wrong offset, garbled data, diverged log)."""


def read_raw(commitlog: CommitLog, offset: int, max_bytes: int) -> bytes | None:
    """Up to ``max_bytes`` written commitlog bytes from ``offset``, never past a file's end.

    None when nothing is written at ``offset`` yet; raises ``ReplicaError`` for an offset before the
    oldest stored byte.
    """
    if offset < commitlog.min_offset:
        raise ReplicaError(
            f"commitlog offset {offset} is no longer stored (oldest is {commitlog.min_offset})"
        )
    mf = commitlog.file_for(offset)
    if mf is None:
        return None
    pos = offset - mf.base_offset
    size = min(max_bytes, mf.wrote - pos)
    if size <= 0:
        return None
    return bytes(mf.view[pos : pos + size])


class ReplicaAppender:
    """Appends replicated bytes to a commitlog and dispatches the records they complete.

    Args:
        commitlog: the recovered commitlog (its max offset is where replication continues).
        dispatcher: consume queues and index.
        check_crc: verify body CRCs of replicated records (``checkCRCOnRecover``).
    """

    def __init__(self, commitlog: CommitLog, dispatcher: Dispatcher, check_crc: bool) -> None:
        self._commitlog = commitlog
        self._dispatcher = dispatcher
        self._check_crc = check_crc
        self.confirm_offset = commitlog.max_offset
        self.records = 0

    async def append(self, offset: int, data: bytes | memoryview) -> int:
        """Write ``data`` at ``offset`` (the current max offset); returns the new max offset.

        Raises:
            ReplicaError: ``offset`` is not the max offset, the chunk crosses a file end, the next file
                cannot be created, or a completed record is invalid (nothing of it is kept).
        """
        cl = self._commitlog
        if offset != cl.max_offset:
            raise ReplicaError(
                f"replicated bytes for offset {offset}, but this commitlog ends at {cl.max_offset}"
            )
        mf = cl.files[-1]
        pos = offset - mf.base_offset
        if pos == mf.size:
            mf = await self._next_file()
            pos = 0
        if pos + len(data) > mf.size:
            raise ReplicaError(
                f"a replicated chunk of {len(data)} bytes at offset {offset} crosses the end of commitlog "
                f"file {mf.path}; master and slave must use the same mappedFileSizeCommitLog"
            )
        mf.write(pos, data)
        cl.note_written(mf)
        self._dispatch_complete()
        return cl.max_offset

    async def _next_file(self) -> MappedFile:
        cl = self._commitlog
        nxt = cl.roll_to_next()
        if nxt is None:
            if not await cl.wait_next_file(NEXT_FILE_WAIT_S):
                raise ReplicaError(f"cannot create the next commitlog file: {cl.take_error() or 'timed out'}")
            nxt = cl.roll_to_next()
        if nxt is None:
            raise ReplicaError("the next commitlog file is not ready")
        return nxt

    def _dispatch_complete(self) -> None:
        """Dispatch every complete record past the confirm offset; roll back an invalid one."""
        cl, end = self._commitlog, self._commitlog.max_offset
        off = self.confirm_offset
        while off < end:
            mf = cl.file_for(off)
            assert mf is not None, f"confirm offset {off} outside the commitlog"
            pos = off - mf.base_offset
            avail = mf.wrote - pos
            if avail == 0 and mf.wrote == mf.size:
                off = mf.end_offset
                continue
            if avail < 8:
                break
            total, magic = SIZE_MAGIC.unpack_from(mf.view, pos)
            if magic == BLANK_MAGIC and total == mf.size - pos:
                if avail < total:
                    break
                off = mf.end_offset
                continue
            if avail < total and 0 < total <= mf.size - pos:
                break  # the rest of this record comes with the next chunk
            rec = read_record(mf.view, pos, mf.size - pos, off, self._check_crc, True)
            if isinstance(rec, int):
                raise self._roll_back(mf, pos, off)
            redispatch(self._dispatcher, rec, off)
            off += rec[0]
            self.records += 1
        self.confirm_offset = off

    def _roll_back(self, mf: MappedFile, pos: int, off: int) -> ReplicaError:
        """Drop the bytes from ``off`` on (this file's only); the error to raise."""
        wrote = mf.wrote
        mf.mm[pos:wrote] = bytes(wrote - pos)
        mf.recover_position(pos)
        self.confirm_offset = off
        return ReplicaError(
            f"replicated bytes at commitlog offset {off} are not a valid record (garbled transfer, or this "
            f"slave's commitlog diverged from the master's); {wrote - pos} bytes dropped, "
            f"the log ends at {off}"
        )
