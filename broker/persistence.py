"""JSON persistence of the broker's config tables (topics, offsets, subscription groups).

Owns ``JsonTable``: one ``config/*.json`` file written atomically (temp + rename, ``.bak`` kept, by
``broker.store.json_file``) in a worker thread, never on the event loop. Writes of one file are
serialized by an ``asyncio.Lock``; a write is skipped when nothing changed since the last one.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from rocketpy.broker.store.json_file import read_json_with_backup, write_json_atomic

log = logging.getLogger("rocketpy.broker.persistence")


class JsonTable:
    """One persisted JSON document: load once at start, persist when dirty.

    Args:
        path: the file (``{storePathRootDir}/config/topics.json`` ...).
        snapshot: returns the JSON-able document to write (called on the event loop).
    """

    def __init__(self, path: str, snapshot: Callable[[], Any]) -> None:
        self.path = path
        self._snapshot = snapshot
        self._lock = asyncio.Lock()
        self._dirty_count = 0
        self._written_count = 0

    def mark_dirty(self) -> None:
        """Record that the table changed and should be written at the next ``persist``."""
        self._dirty_count += 1

    @property
    def dirty(self) -> bool:
        """True when a change has not been written yet."""
        return self._dirty_count != self._written_count

    def load(self) -> Any:
        """Read the document (sync: call from a thread or before the loop serves); None if absent."""
        if not os.path.exists(self.path) and not os.path.exists(self.path + ".bak"):
            return None
        return read_json_with_backup(self.path)

    async def persist(self, force: bool = False) -> None:
        """Write the current snapshot in a worker thread if dirty (or ``force``)."""
        async with self._lock:
            if not force and not self.dirty:
                return
            target = self._dirty_count
            doc = self._snapshot()
            write = asyncio.get_running_loop().run_in_executor(None, _write, self.path, doc)
            try:
                await asyncio.shield(write)
            finally:
                if not write.done():
                    # Cancelled while the thread writes: a thread cannot be stopped, so keep the lock
                    # until its rename is done (a second writer would race on the same temp file).
                    await asyncio.wait({write})
            self._written_count = target


def _write(path: str, doc: Any) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_json_atomic(path, doc)
