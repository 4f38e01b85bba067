"""The checkpoint file: where flushing had got to (RocketMQ's StoreCheckpoint layout, one 4 KiB page).

Layout (big-endian i64): physicMsgTimestamp @0, logicsMsgTimestamp @8, indexMsgTimestamp @16,
masterFlushedOffset @24 (unused), confirmPhyOffset @32 (here: the commitlog flushed offset), and
rocketpy's dispatchedOffset @40 (every record before it had its consume-queue unit in a file).
Written by the flush threads with pwrite + fdatasync; read once by recovery.
"""

from __future__ import annotations

import os
import struct

CHECKPOINT_SIZE = 4096
_FIELDS = struct.Struct(">qqqqqq")
_I64 = struct.Struct(">q")
POS_PHYSIC_TS, POS_LOGICS_TS, POS_INDEX_TS, POS_FLUSHED_OFFSET, POS_DISPATCHED_OFFSET = 0, 8, 16, 32, 40


class Checkpoint:
    """Flush timestamps and the flushed commitlog offset (blocking I/O: threads only)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.physic_ts = 0
        self.logics_ts = 0
        self.index_ts = 0
        self.flushed_offset = 0
        self.dispatched_offset = 0
        self._fd = -1

    def open(self) -> None:
        """Open (creating) and read the file."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        raw = os.pread(self._fd, _FIELDS.size, 0)
        if len(raw) == _FIELDS.size:
            fields = _FIELDS.unpack(raw)
            self.physic_ts, self.logics_ts, self.index_ts, _, self.flushed_offset, self.dispatched_offset = (
                fields
            )
        else:
            os.ftruncate(self._fd, CHECKPOINT_SIZE)

    @property
    def min_timestamp(self) -> int:
        """RocketMQ's ``getMinTimestamp``: min(physic, logics) - 3 s, at least 0."""
        return max(0, min(self.physic_ts, self.logics_ts) - 3000)

    def write_physic(self, ts: int, flushed_offset: int, dispatched_offset: int) -> None:
        """Record a commitlog flush and the crash-safe dispatch point (flush thread)."""
        self.physic_ts, self.flushed_offset, self.dispatched_offset = ts, flushed_offset, dispatched_offset
        os.pwrite(self._fd, _I64.pack(ts), POS_PHYSIC_TS)
        os.pwrite(self._fd, _I64.pack(flushed_offset) + _I64.pack(dispatched_offset), POS_FLUSHED_OFFSET)
        os.fdatasync(self._fd)

    def write_logics(self, logics_ts: int, index_ts: int) -> None:
        """Record a consume-queue / index flush (flush thread)."""
        self.logics_ts, self.index_ts = logics_ts, index_ts
        os.pwrite(self._fd, _I64.pack(logics_ts) + _I64.pack(index_ts), POS_LOGICS_TS)
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Close the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
