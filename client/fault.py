"""Latency fault tolerance for producers: which brokers to avoid for a while.

Owns the per-broker fault items of RocketMQ's ``LatencyFaultToleranceImpl`` / ``MQFaultStrategy``
(reference §5, 5.x tables). After each send the producer reports the broker's latency; a slow or
failed broker becomes "not available" for the duration the tables give, and queue selection skips
it while others are available. Pure: the clock is injected (seconds, monotonic), so tests drive it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Latency thresholds (ms) and the matching not-available durations (ms), RocketMQ 5.x.
LATENCY_MAX_MS: tuple[int, ...] = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION_MS: tuple[int, ...] = (0, 0, 2000, 5000, 6000, 10000, 30000)
#: Latency charged to a broker whose send raised (connection refused, timeout, retryable broker error).
ISOLATION_LATENCY_MS = 10_000
#: Upper bound on tracked brokers (a cluster never has this many broker names).
MAX_FAULT_ITEMS = 4096

assert len(LATENCY_MAX_MS) == len(NOT_AVAILABLE_DURATION_MS)


def not_available_duration_ms(latency_ms: float) -> int:
    """How long a broker with this send latency is avoided (largest threshold <= latency wins)."""
    for i in range(len(LATENCY_MAX_MS) - 1, -1, -1):
        if latency_ms >= LATENCY_MAX_MS[i]:
            return NOT_AVAILABLE_DURATION_MS[i]
    return 0


class FaultItem:
    """The last observed latency of one broker and when it becomes available again."""

    __slots__ = ("available_at", "broker_name", "latency_ms")

    def __init__(self, broker_name: str, latency_ms: float, available_at: float) -> None:
        self.broker_name = broker_name
        self.latency_ms = latency_ms
        self.available_at = available_at

    def __repr__(self) -> str:
        return (
            f"FaultItem({self.broker_name!r}, latency_ms={self.latency_ms}, available_at={self.available_at})"
        )


class LatencyFaultTolerance:
    """Tracks brokers that failed or were slow and says which ones to avoid.

    Args:
        clock: returns the current time in seconds (monotonic); injected for tests.
        enabled: when False every broker is always available (RocketMQ's sendLatencyFaultEnable=false).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, enabled: bool = True) -> None:
        self._clock = clock
        self.enabled = enabled
        self._items: dict[str, FaultItem] = {}

    def update(self, broker_name: str, latency_ms: float, *, isolation: bool = False) -> None:
        """Record a send to ``broker_name`` that took ``latency_ms`` (or failed, when ``isolation``)."""
        if not self.enabled or (
            not isolation and latency_ms < LATENCY_MAX_MS[2] and broker_name not in self._items
        ):
            return  # fast, healthy send to a broker with no fault history: nothing to record
        if isolation:
            latency_ms = ISOLATION_LATENCY_MS
        duration_s = not_available_duration_ms(latency_ms) / 1000.0
        item = self._items.get(broker_name)
        available_at = self._clock() + duration_s
        if item is None:
            if duration_s == 0:
                return  # healthy broker: nothing to remember
            if len(self._items) >= MAX_FAULT_ITEMS:
                self._evict_oldest()
            self._items[broker_name] = FaultItem(broker_name, latency_ms, available_at)
        else:
            item.latency_ms = latency_ms
            item.available_at = available_at

    def quiet(self, broker_name: str, latency_ms: float) -> bool:
        """True when ``update(broker_name, latency_ms)`` would record nothing (disabled, or a fast
        send to a broker with no fault history)."""
        return not self.enabled or (latency_ms < LATENCY_MAX_MS[2] and broker_name not in self._items)

    def is_available(self, broker_name: str) -> bool:
        """True unless the broker is inside its not-available window."""
        item = self._items.get(broker_name)
        return item is None or self._clock() >= item.available_at

    def remove(self, broker_name: str) -> None:
        """Forget a broker (e.g. it left the route)."""
        self._items.pop(broker_name, None)

    def least_bad(self, candidates: list[str]) -> str | None:
        """Among ``candidates``, the broker that becomes available soonest (lowest latency on ties)."""
        if not candidates:
            return None

        def rank(name: str) -> tuple[float, float]:
            item = self._items.get(name)
            return (0.0, 0.0) if item is None else (item.available_at, item.latency_ms)

        return min(candidates, key=rank)

    def items(self) -> list[FaultItem]:
        """A snapshot of the tracked brokers (for diagnostics and tests)."""
        return list(self._items.values())

    def _evict_oldest(self) -> None:
        oldest = min(self._items.values(), key=lambda it: it.available_at)
        del self._items[oldest.broker_name]
