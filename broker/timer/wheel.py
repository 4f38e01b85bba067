"""TimerWheel: one slot per second over ``WHEEL_SLOTS`` seconds (7 days, as RocketMQ 5), mmap'd.

Owns the slot layout: ``(epoch second, last entry number + 1)`` as two big-endian int64 (16 bytes);
slot ``sec % WHEEL_SLOTS`` belongs to ``sec`` only while it holds ``sec``: an older second's slot is
free (its entries were processed, since nothing is linked further ahead than the roll window). The
entries of one slot form a list through their ``prev`` field, newest first.
"""

from __future__ import annotations

import mmap
import os
import struct

WHEEL_SLOTS = 7 * 86_400
SLOT = struct.Struct(">qq")


class TimerWheel:
    """The wheel file ``{storePathRootDir}/timerwheel``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.mm: mmap.mmap | None = None

    def open(self) -> None:
        """Create or map the file (thread)."""
        size = WHEEL_SLOTS * SLOT.size
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def last(self, sec: int) -> int:
        """The newest entry linked into second ``sec``, -1 for none."""
        assert self.mm is not None
        s, last1 = SLOT.unpack_from(self.mm, (sec % WHEEL_SLOTS) * SLOT.size)
        return last1 - 1 if s == sec else -1

    def set_last(self, sec: int, pos: int) -> None:
        """Make entry ``pos`` the newest of second ``sec``."""
        assert self.mm is not None
        SLOT.pack_into(self.mm, (sec % WHEEL_SLOTS) * SLOT.size, sec, pos + 1)

    def flush(self) -> None:
        """msync (thread)."""
        if self.mm is not None:
            self.mm.flush()

    def close(self) -> None:
        """Unmap."""
        if self.mm is not None:
            self.mm.close()
            self.mm = None
