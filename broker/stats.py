"""Broker statistics: message counters and TPS for GET_BROKER_RUNTIME_INFO and consume stats.

Owns monotonically growing counters (put messages/bytes in total and per topic, got messages/bytes
in total, per group and per (group, topic)) and a ring of one-second samples (bounded:
``SAMPLE_SLOTS``) from which TPS over a window is computed. ``sample()`` is called once per second
by the controller; counting is plain integer adds (a per-key ``[messages, bytes, requests]``
triple, created once per key up to ``MAX_KEYED_COUNTERS`` keys; past that only the totals count).
The metrics endpoint reads these tables at scrape time.

RocketMQ's named stats (VIEW_BROKER_STATS_DATA: ``TOPIC_PUT_NUMS``, ``GROUP_GET_NUMS``, ...) come
from ``StatsWindows`` (``broker/stats_windows.py``): ``sample()`` hands it the tables and it keeps
snapshots of them every 10 s, 10 min and hour (RocketMQ's minute, hour and day rings); nothing
on the send or pull path does more than the adds above.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from rocketpy.broker.stats_windows import StatsWindows

K = TypeVar("K")

SAMPLE_SLOTS = 62
MAX_GROUP_COUNTERS = 100_000
#: Bound on the per-topic and per-(group, topic) counter tables (names come from clients).
MAX_KEYED_COUNTERS = 100_000


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
        #: requests that stored messages / pulls that handed some out (RocketMQ's stats "times")
        self.put_requests_total = 0
        self.get_requests_total = 0
        #: topic -> [messages, bytes, requests] stored (keys are never removed: ``StatsWindows``
        #: relies on the insertion order)
        self.topic_puts: dict[str, list[int]] = {}
        #: (group, topic) -> [messages, bytes, pulls] handed out (keys never removed)
        self.group_topic_gets: dict[tuple[str, str], list[int]] = {}
        #: RocketMQ's minute / hour / day figures of the tables above
        self.windows = StatsWindows(self, clock)
        self.boot_timestamp_ms = int(time.time() * 1000)
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=SAMPLE_SLOTS)
        self._group_samples: deque[tuple[float, dict[str, int]]] = deque(maxlen=SAMPLE_SLOTS)
        self.sample()

    def on_put(self, topic: str, msgs: int, size_bytes: int) -> None:
        """Count messages stored to ``topic``."""
        self.put_msgs_total += msgs
        self.put_bytes_total += size_bytes
        self.put_requests_total += 1
        pair = self.topic_puts.get(topic) or _new_pair(self.topic_puts, topic)
        pair[0] += msgs
        pair[1] += size_bytes
        pair[2] += 1

    def on_get(self, group: str, topic: str, msgs: int, size_bytes: int) -> None:
        """Count messages of ``topic`` handed to a consumer group."""
        self.get_msgs_total += msgs
        self.get_bytes_total += size_bytes
        self.get_requests_total += 1
        if group in self.group_get_msgs or len(self.group_get_msgs) < MAX_GROUP_COUNTERS:
            self.group_get_msgs[group] = self.group_get_msgs.get(group, 0) + msgs
        key = (group, topic)
        pair = self.group_topic_gets.get(key) or _new_pair(self.group_topic_gets, key)
        pair[0] += msgs
        pair[1] += size_bytes
        pair[2] += 1

    def sample(self) -> None:
        """Record a sample of the totals (call about once a second)."""
        now = self._clock()
        self._samples.append((now, self.put_msgs_total, self.get_msgs_total))
        self._group_samples.append((now, dict(self.group_get_msgs)))
        self.windows.maybe_roll()

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


_DISCARDED = [0, 0, 0]  # counts past the table bound land here (and are never read)


def _new_pair(table: dict[K, list[int]], key: K) -> list[int]:
    """A new zeroed ``[messages, bytes, requests]`` triple in ``table``, or a discarded one past the
    bound."""
    if len(table) >= MAX_KEYED_COUNTERS:
        return _DISCARDED
    pair = table[key] = [0, 0, 0]
    return pair
