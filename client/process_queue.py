"""In-flight messages of one assigned queue: what was pulled and is not yet consumed.

Owns the per-queue cache that bounds pulling (flow control by count and bytes) and that decides
the offset that may be committed: never past a message still being consumed, i.e. the smallest
offset still held, or one past the largest offset ever pulled when nothing is held.

Only touched from the event loop thread (consume results come back to the loop before they are
applied), so it needs no lock. Pulled offsets arrive in ascending order, so an insertion-ordered
map keeps the smallest offset first.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from rocketpy.message import MessageExt

#: An orderly queue's broker lock counts as lost this long after its last renewal (RocketMQ: 30 s).
LOCK_MAX_LIVE_S = 30.0


class ProcessQueue:
    """Messages pulled from one queue and not yet acknowledged by the listener.

    Attributes:
        dropped: set when the queue was released (rebalance, shutdown); its pull loop stops.
        locked: orderly consumption only: the broker lock is held.
        last_lock_time: monotonic time of the last successful lock.
        last_pull_time: monotonic time of the last pull.
        last_consume_time: monotonic time the listener last finished with messages of this queue.
    """

    __slots__ = (
        "_bytes",
        "_consuming",
        "_msgs",
        "dropped",
        "last_consume_time",
        "last_lock_time",
        "last_pull_time",
        "locked",
        "max_offset_seen",
    )

    def __init__(self) -> None:
        self._msgs: OrderedDict[int, MessageExt] = OrderedDict()
        self._consuming: OrderedDict[int, MessageExt] = OrderedDict()
        self._bytes = 0
        self.max_offset_seen = -1
        self.dropped = False
        self.locked = False
        self.last_lock_time = 0.0
        self.last_pull_time = self.last_consume_time = time.monotonic()

    @property
    def msg_count(self) -> int:
        """Messages held (waiting or being consumed)."""
        return len(self._msgs) + len(self._consuming)

    @property
    def msg_bytes(self) -> int:
        """Body bytes held."""
        return self._bytes

    def is_full(self, max_count: int, max_bytes: int) -> bool:
        """True when pulling must pause (flow control)."""
        return self.msg_count >= max_count or self._bytes >= max_bytes

    def put(self, msgs: list[MessageExt]) -> None:
        """Add pulled messages (ascending offsets, past everything already held)."""
        held = self._msgs
        added = 0
        for msg in msgs:
            offset = msg.queue_offset
            if offset <= self.max_offset_seen:
                continue  # a duplicate pull after a seek/reset; the held copy stays
            held[offset] = msg
            added += len(msg.body)
            self.max_offset_seen = offset
        self._bytes += added

    def offset_range(self) -> tuple[int, int]:
        """Smallest and largest offset held (``(0, 0)`` when nothing is)."""
        offsets = list(self._consuming) + list(self._msgs)
        return (min(offsets), max(offsets)) if offsets else (0, 0)

    def remove(self, msgs: list[MessageExt]) -> int:
        """Drop consumed messages; return the offset that may now be committed (-1: nothing yet)."""
        self.last_consume_time = time.monotonic()
        pop = self._msgs.pop
        removed = 0
        for msg in msgs:
            held = pop(msg.queue_offset, None)
            if held is not None:
                removed += len(held.body)
        self._bytes -= removed
        return self.commit_offset()

    def commit_offset(self) -> int:
        """Smallest held offset, or one past the largest pulled when empty (-1 if none pulled)."""
        first = next(iter(self._consuming), None)
        if first is None:
            first = next(iter(self._msgs), None)
        if first is not None:
            return int(first)
        return self.max_offset_seen + 1 if self.max_offset_seen >= 0 else -1

    # --- orderly consumption: take in order, then commit or put back ---

    def take(self, count: int) -> list[MessageExt]:
        """Move up to ``count`` smallest-offset messages into the consuming set (orderly)."""
        taken: list[MessageExt] = []
        while self._msgs and len(taken) < count:
            offset, msg = self._msgs.popitem(last=False)
            self._consuming[offset] = msg
            taken.append(msg)
        return taken

    def commit_taken(self) -> int:
        """The taken messages were consumed; return the committable offset."""
        self.last_consume_time = time.monotonic()
        self._bytes -= sum(len(msg.body) for msg in self._consuming.values())
        self._consuming.clear()
        return self.commit_offset()

    def put_back_taken(self) -> None:
        """The taken messages must be consumed again, before everything else held."""
        again = OrderedDict(self._consuming)
        again.update(self._msgs)
        self._msgs = again
        self._consuming.clear()

    def holds_lock(self) -> bool:
        """Orderly: the broker lock is held and was renewed within ``LOCK_MAX_LIVE_S``."""
        return self.locked and time.monotonic() - self.last_lock_time < LOCK_MAX_LIVE_S

    def has_waiting(self) -> bool:
        """True when messages wait to be taken (orderly)."""
        return bool(self._msgs)

    def clear(self) -> None:
        """Forget everything held (the queue was dropped or seeked)."""
        self._msgs.clear()
        self._consuming.clear()
        self._bytes = 0
