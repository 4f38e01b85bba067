"""``config/delayOffset.json``: how far each delay level has been delivered (RocketMQ's file).

Owns the ``{"offsetTable": {level: queue offset}}`` document: loaded once (in a thread), marked
dirty as levels advance, written atomically in a worker thread by ``JsonTable``.
"""

from __future__ import annotations

from typing import Any

from rocketpy.broker.persistence import JsonTable


class DelayOffsetTable:
    """Next schedule-queue offset to deliver, per delay level.

    Args:
        path: the file (``{storePathRootDir}/config/delayOffset.json``).
    """

    def __init__(self, path: str) -> None:
        self.table: dict[int, int] = {}
        self.file = JsonTable(path, self.snapshot)

    def load(self) -> None:
        """Read the file (sync: call from a thread); a missing file means every level starts at 0."""
        doc = self.file.load() or {}
        for level, offset in (doc.get("offsetTable") or {}).items():
            self.table[int(level)] = int(offset)

    def snapshot(self) -> dict[str, Any]:
        """The JSON document."""
        return {"offsetTable": {str(k): v for k, v in sorted(self.table.items())}}

    def get(self, level: int) -> int:
        """The level's next offset to deliver."""
        return self.table.get(level, 0)

    def set(self, level: int, offset: int) -> None:
        """Record progress of a level."""
        if self.table.get(level) != offset:
            self.table[level] = offset
            self.file.mark_dirty()
