"""Queue locks for orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

Owns group -> message queue -> (client id, last lock time). A lock held by one client is
refused to others until it expires ``REBALANCE_LOCK_MAX_LIVE_TIME_MS`` (60 s) after its last
renewal; the holder renews by locking again. The clock is injected for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000
MAX_LOCKS_PER_GROUP = 100_000
MAX_LOCK_GROUPS = 100_000

MessageQueueKey = tuple[str, str, int]  # (topic, broker_name, queue_id)


@dataclass(slots=True)
class _LockEntry:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    """Orderly-consumption queue locks with a TTL.

    Args:
        clock_ms: milliseconds clock (injected for tests).
        ttl_ms: lock lifetime after the last renewal.
    """

    def __init__(
        self, clock_ms: Callable[[], int] | None = None, ttl_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS
    ) -> None:
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.ttl_ms = ttl_ms
        self._table: dict[str, dict[MessageQueueKey, _LockEntry]] = {}

    def _is_locked_by(self, entry: _LockEntry | None, client_id: str, now_ms: int) -> bool:
        return (
            entry is not None and entry.client_id == client_id and now_ms - entry.last_update_ms < self.ttl_ms
        )

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueueKey], client_id: str
    ) -> set[MessageQueueKey]:
        """Lock (or renew) each queue for ``client_id``; returns the queues it now holds."""
        now = self._clock_ms()
        locks = self._table.get(group)
        if locks is None:
            if len(self._table) >= MAX_LOCK_GROUPS:
                return set()
            locks = self._table[group] = {}
        locked: set[MessageQueueKey] = set()
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None or now - entry.last_update_ms >= self.ttl_ms or entry.client_id == client_id:
                if entry is None and len(locks) >= MAX_LOCKS_PER_GROUP:
                    continue
                locks[mq] = _LockEntry(client_id, now)
                locked.add(mq)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueueKey], client_id: str) -> None:
        """Release the queues ``client_id`` holds (others' locks are left alone)."""
        locks = self._table.get(group)
        if not locks:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
        if not locks:
            del self._table[group]

    def is_locked(self, group: str, mq: MessageQueueKey, client_id: str) -> bool:
        """True when ``client_id`` holds an unexpired lock on ``mq``."""
        return self._is_locked_by(self._table.get(group, {}).get(mq), client_id, self._clock_ms())
