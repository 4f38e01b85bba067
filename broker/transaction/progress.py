"""``config/transactionOffset.json``: where a restart resumes the transactions.

Owns the document ``{"halfOffset": progress, "opOffset": op floor}``: every half message below
``halfOffset`` is resolved, and replaying the op queue from ``opOffset`` rebuilds what is known of
the others (``HalfWindow.op_floor``). Both numbers are taken in one snapshot on the event loop, so
they always agree; the file is written atomically in a worker thread by ``JsonTable``. A file
older than the store only costs a longer replay: progress is re-derived from the op records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketpy.broker.persistence import JsonTable
from rocketpy.broker.transaction.window import HalfWindow


class TransactionProgress:
    """The persisted resume point of one broker's transactions.

    Args:
        path: the file (``{storePathRootDir}/config/transactionOffset.json``).
        window: the live state the snapshot reads.
        op_next_offset: returns the op queue's next offset.
    """

    def __init__(self, path: str, window: HalfWindow, op_next_offset: Callable[[], int]) -> None:
        self.window = window
        self.op_next_offset = op_next_offset
        self.file = JsonTable(path, self.snapshot)

    def load(self) -> tuple[int, int]:
        """``(halfOffset, opOffset)`` from the file, ``(0, 0)`` when absent (sync: call from a thread)."""
        doc = self.file.load() or {}
        return int(doc.get("halfOffset", 0)), int(doc.get("opOffset", 0))

    def snapshot(self) -> dict[str, Any]:
        """The JSON document."""
        return {"halfOffset": self.window.progress, "opOffset": self.window.op_floor(self.op_next_offset())}
