"""Broker statistics: message counters and TPS for GET_BROKER_RUNTIME_INFO and consume stats.

Owns monotonically growing counters (put messages/bytes, got messages/bytes, per-group gets) and a
ring of one-second samples (bounded: ``SAMPLE_SLOTS``) from which TPS over a window is computed.
``sample()`` is called once per second by the controller; counting is plain integer adds.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

SAMPLE_SLOTS = 62
MAX_GROUP_COUNTERS = 100_000


class BrokerStats:
    """Counters and TPS.

    Args:
        clock: seconds clock (injected for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.put_msgs_total = 0
        self.put_bytes_total = 0
        self.get_msgs_total = 0
        self.get_bytes_total = 0
        self.group_get_msgs: dict[str, int] = {}
        self.boot_timestamp_ms = int(time.time() * 1000)
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=SAMPLE_SLOTS)
        self._group_samples: deque[tuple[float, dict[str, int]]] = deque(maxlen=SAMPLE_SLOTS)
        self.sample()

    def on_put(self, msgs: int, size_bytes: int) -> None:
        """Count stored messages."""
        self.put_msgs_total += msgs
        self.put_bytes_total += size_bytes

    def on_get(self, group: str, msgs: int, size_bytes: int) -> None:
        """Count messages handed to a consumer group."""
        self.get_msgs_total += msgs
        self.get_bytes_total += size_bytes
        if group in self.group_get_msgs or len(self.group_get_msgs) < MAX_GROUP_COUNTERS:
            self.group_get_msgs[group] = self.group_get_msgs.get(group, 0) + msgs

    def sample(self) -> None:
        """Record a sample of the totals (call about once a second)."""
        now = self._clock()
        self._samples.append((now, self.put_msgs_total, self.get_msgs_total))
        self._group_samples.append((now, dict(self.group_get_msgs)))

    def _window(self, window_s: float) -> tuple[float, int, int] | None:
        now = self._clock()
        for sample in self._samples:
            if now - sample[0] <= window_s + 0.5:
                return sample
        return self._samples[-1] if self._samples else None

    def put_tps(self, window_s: float = 10.0) -> float:
        """Messages stored per second over about the last ``window_s`` seconds."""
        start = self._window(window_s)
        if start is None:
            return 0.0
        elapsed = max(self._clock() - start[0], 1e-3)
        return (self.put_msgs_total - start[1]) / elapsed

    def get_tps(self, window_s: float = 10.0) -> float:
        """Messages pulled per second over about the last ``window_s`` seconds."""
        start = self._window(window_s)
        if start is None:
            return 0.0
        elapsed = max(self._clock() - start[0], 1e-3)
        return (self.get_msgs_total - start[2]) / elapsed

    def group_get_tps(self, group: str, window_s: float = 10.0) -> float:
        """Messages pulled per second by ``group`` over about the last ``window_s`` seconds."""
        now = self._clock()
        for ts, counts in self._group_samples:
            if now - ts <= window_s + 0.5:
                elapsed = max(now - ts, 1e-3)
                return (self.group_get_msgs.get(group, 0) - counts.get(group, 0)) / elapsed
        return 0.0
