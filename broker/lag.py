"""Lag in seconds: how long the oldest unconsumed message of a group has waited in a queue.

RocketMQ 5's ``rocketmq_consumer_lag_latency``: for a group's committed offset ``c`` in a queue
whose end is ``m``, the age of the message at ``c`` (now minus its store time) when ``c < m``, else 0.
When cleanup already removed the message at ``c``, the queue's oldest stored message stands in.

Cost: finding a store time is one consume-queue unit and 8 bytes of the commitlog (no decode), and
``LagClock`` remembers it per (group, topic, queue) until the committed offset moves: a queue whose
group keeps up, or that nobody consumes, costs a dict lookup per pass. The cache holds the queues of
the last pass only (``begin_pass`` / ``end_pass``), so it never outgrows the offset table.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rocketpy.broker.store import Store

_Key = tuple[str, str, int]


def wall_ms() -> int:
    """Wall-clock milliseconds (store times are wall-clock)."""
    return int(time.time() * 1000)


class LagClock:
    """Store times of the oldest unconsumed messages, cached per committed offset.

    Args:
        store: the message store.
        clock_ms: wall-clock milliseconds (injected for tests).
    """

    def __init__(self, store: Store, clock_ms: Callable[[], int] = wall_ms) -> None:
        self.store = store
        self.clock_ms = clock_ms
        self._cache: dict[_Key, tuple[int, int]] = {}
        self._seen: dict[_Key, tuple[int, int]] | None = None
        #: store-time lookups done (cache misses), for the benchmark
        self.lookups = 0

    def begin_pass(self) -> None:
        """Start a pass over every queue (a scrape): entries not touched by it are dropped at its end."""
        self._seen = {}

    def end_pass(self) -> None:
        """End the pass: keep only the queues it touched."""
        if self._seen is not None:
            self._cache, self._seen = self._seen, None

    def oldest_store_time(self, group: str, topic: str, queue_id: int, offset: int, max_offset: int) -> int:
        """Store time (ms) of the oldest message ``group`` has not consumed in the queue; 0: none waits."""
        if offset >= max_offset:
            return 0
        key = (group, topic, queue_id)
        hit = self._cache.get(key)
        if hit is None or hit[0] != offset:
            self.lookups += 1
            ts = self.store.get_message_store_time(topic, queue_id, max(offset, 0))
            if ts < 0:  # removed by cleanup: the oldest message still stored waits longest
                ts = max(self.store.get_earliest_message_time(topic, queue_id), 0)
            hit = (offset, ts)
            self._cache[key] = hit
        if self._seen is not None:
            self._seen[key] = hit
        return hit[1]

    def latency_ms(self, group: str, topic: str, queue_id: int, offset: int, max_offset: int) -> int:
        """How long (ms) the oldest unconsumed message has waited; 0 when the group is caught up."""
        ts = self.oldest_store_time(group, topic, queue_id, offset, max_offset)
        return max(0, self.clock_ms() - ts) if ts > 0 else 0
