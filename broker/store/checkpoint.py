"""The checkpoint file: where flushing had got to (RocketMQ's StoreCheckpoint layout, one 4 KiB page).

Layout (big-endian i64): physicMsgTimestamp @0, logicsMsgTimestamp @8, indexMsgTimestamp @16,
masterFlushedOffset @24 (unused), confirmPhyOffset @32 (here: the commitlog flushed offset), and
rocketpy's fields: dispatchedOffset @40 (every record before it had its consume-queue unit in a
file), durableDispatchedOffset @48 (every record before it had its unit and index entries synced to
disk) and bootId @56 (16 bytes: the kernel boot the file was last written in; zeros: unknown).

Two kinds of writes, from the flush threads (``flush.py``): ``write_physic`` (often) only writes
the page: a killed broker's page cache survives it, so the next start reads it; ``write_durable``
(at the consume queues' durable flush and at shutdown) syncs it. After a reboot (power loss, kernel
crash) the page on disk may be any version written; every field is a point recovery may safely
start from, except dispatchedOffset, whose units lived in the page cache: recovery then takes the
durable one (``rebooted``).
"""

from __future__ import annotations

import os
import struct

CHECKPOINT_SIZE = 4096
_FIELDS = struct.Struct(">qqqqqqq16s")
_I64 = struct.Struct(">q")
POS_PHYSIC_TS, POS_LOGICS_TS, POS_INDEX_TS, POS_FLUSHED_OFFSET, POS_DISPATCHED_OFFSET = 0, 8, 16, 32, 40
POS_DURABLE_DISPATCHED_OFFSET, POS_BOOT_ID = 48, 56
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
_NO_BOOT_ID = bytes(16)


def current_boot_id(path: str = BOOT_ID_PATH) -> bytes:
    """This kernel boot's id (16 bytes; zeros where the system does not tell)."""
    try:
        with open(path, encoding="ascii") as f:
            return bytes.fromhex(f.read().strip().replace("-", ""))[:16].ljust(16, b"\0")
    except (OSError, ValueError):
        return _NO_BOOT_ID


class Checkpoint:
    """Flush timestamps, the flushed commitlog offset and the dispatch points (blocking I/O: threads only).

    Args:
        path: the checkpoint file.
        boot_id: this boot's id (tests pass their own; default: the kernel's).
    """

    def __init__(self, path: str, boot_id: bytes | None = None) -> None:
        self.path = path
        self.physic_ts = 0
        self.logics_ts = 0
        self.index_ts = 0
        self.flushed_offset = 0
        self.dispatched_offset = 0
        self.durable_dispatched_offset = 0
        #: the boot the file was last written in, as read at ``open`` (zeros: unknown)
        self.written_boot_id = _NO_BOOT_ID
        self.boot_id = current_boot_id() if boot_id is None else boot_id
        self._fd = -1

    def open(self) -> None:
        """Open (creating) and read the file."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        raw = os.pread(self._fd, _FIELDS.size, 0)
        if len(raw) == _FIELDS.size:
            (self.physic_ts, self.logics_ts, self.index_ts, _, self.flushed_offset, self.dispatched_offset,
             self.durable_dispatched_offset, self.written_boot_id) = _FIELDS.unpack(raw)  # fmt: skip
        else:
            os.ftruncate(self._fd, CHECKPOINT_SIZE)

    @property
    def rebooted(self) -> bool:
        """True when the file was last written in another boot of this machine: whatever the page
        cache held then is gone (a file from before the boot id was recorded reads False)."""
        return self.written_boot_id != _NO_BOOT_ID and self.written_boot_id != self.boot_id

    @property
    def min_timestamp(self) -> int:
        """RocketMQ's ``getMinTimestamp``: min(physic, logics) - 3 s, at least 0."""
        return max(0, min(self.physic_ts, self.logics_ts) - 3000)

    def claim_boot(self) -> None:
        """Record this boot as the file's (recovery thread, after recovery read the old one)."""
        self.written_boot_id = self.boot_id
        os.pwrite(self._fd, self.boot_id, POS_BOOT_ID)
        os.fdatasync(self._fd)

    def write_physic(self, ts: int, flushed_offset: int, dispatched_offset: int) -> None:
        """Record a commitlog flush and the dispatch point (flush thread; not synced: see the module)."""
        self.physic_ts, self.flushed_offset, self.dispatched_offset = ts, flushed_offset, dispatched_offset
        os.pwrite(self._fd, _I64.pack(ts), POS_PHYSIC_TS)
        os.pwrite(self._fd, _I64.pack(flushed_offset) + _I64.pack(dispatched_offset), POS_FLUSHED_OFFSET)

    def write_durable(self, logics_ts: int, index_ts: int, durable_dispatched_offset: int) -> None:
        """Record a durable consume-queue / index flush and sync the file (flush thread)."""
        self.logics_ts, self.index_ts = logics_ts, index_ts
        self.durable_dispatched_offset = durable_dispatched_offset
        os.pwrite(self._fd, _I64.pack(logics_ts) + _I64.pack(index_ts), POS_LOGICS_TS)
        os.pwrite(self._fd, _I64.pack(durable_dispatched_offset), POS_DURABLE_DISPATCHED_OFFSET)
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Close the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
