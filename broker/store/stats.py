"""Store counters and their throughput (RocketMQ's StoreStatsService, in small).

Owns the put/get totals, the last store timestamp and a ring of per-second samples of the totals,
taken by the store's timer on the loop. Reading the figures changes nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

TPS_WINDOW_S = 10


class StoreStats:
    """Totals of one store and the samples its TPS figures are computed from.

    Args:
        clock: seconds clock (the store's).
    """

    __slots__ = ("_clock", "_samples", "get_total", "last_store_ts", "put_total")

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.put_total = 0
        self.get_total = 0
        self.last_store_ts = 0
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=TPS_WINDOW_S + 1)
        self.sample()

    def sample(self) -> None:
        """Record the totals now (every second, from the store's timer)."""
        self._samples.append((self._clock(), self.put_total, self.get_total))

    def tps(self) -> tuple[float, float] | None:
        """Put and get messages per second since the oldest sample (about the last 10 s); None at once."""
        t0, put0, get0 = self._samples[0]
        elapsed = self._clock() - t0
        if elapsed <= 0:
            return None
        return (self.put_total - put0) / elapsed, (self.get_total - get0) / elapsed
