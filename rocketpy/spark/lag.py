"""How far a stream is behind, and when a micro-batch may start: pure parts of the stream reader.

``offsets_behind`` computes Kafka's source metrics (``minOffsetsBehindLatest``,
``maxOffsetsBehindLatest``, ``avgOffsetsBehindLatest``: per queue, the newest offset minus the end
of the micro-batch, as strings like Kafka's ``metrics`` map); ``seconds_behind`` adds
``maxSecondsBehindLatest``, the age of the oldest message not yet read (from its store time), 0
when the stream has caught up. ``Pacer`` is Kafka's ``minOffsetsPerTrigger`` / ``maxTriggerDelay``
rule with an injected clock: a micro-batch waits until enough rows are new, but not longer than the
delay since the last one (or since the run started).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from rocketpy.spark.offsets import Queue

MIN_BEHIND = "minOffsetsBehindLatest"
MAX_BEHIND = "maxOffsetsBehindLatest"
AVG_BEHIND = "avgOffsetsBehindLatest"
SECONDS_BEHIND = "maxSecondsBehindLatest"
#: Every metric name the stream reports (they are not topic offsets).
METRIC_NAMES = (MIN_BEHIND, MAX_BEHIND, AVG_BEHIND, SECONDS_BEHIND)
#: Lagging queues whose oldest unread message is looked at per trigger (the most lagging first).
MAX_TIME_SAMPLES = 64


def behind(end: Mapping[Queue, int], latest: Mapping[Queue, int]) -> dict[Queue, int]:
    """Per queue read by the stream: offsets written but not yet read (never negative)."""
    return {q: max(0, latest[q] - off) for q, off in end.items() if q in latest}


def offsets_behind(lag: Mapping[Queue, int]) -> dict[str, str]:
    """Kafka's three metrics over the queues' lag (empty when no queue is read)."""
    if not lag:
        return {}
    values = list(lag.values())
    return {
        MIN_BEHIND: str(min(values)),
        MAX_BEHIND: str(max(values)),
        AVG_BEHIND: str(sum(values) / len(values)),
    }


def time_samples(lag: Mapping[Queue, int], end: Mapping[Queue, int]) -> dict[Queue, int]:
    """The first unread offset of the ``MAX_TIME_SAMPLES`` most lagging queues (lagging ones only)."""
    lagging = sorted((q for q, n in lag.items() if n > 0), key=lambda q: (-lag[q], q))
    return {q: end[q] for q in lagging[:MAX_TIME_SAMPLES]}


def seconds_behind(store_ms: Mapping[Queue, int], now_ms: int) -> dict[str, str]:
    """``maxSecondsBehindLatest``: the age of the oldest unread message (0.0 with none)."""
    oldest = min(store_ms.values(), default=now_ms)
    return {SECONDS_BEHIND: f"{max(0, now_ms - oldest) / 1000:.3f}"}


class Pacer:
    """Kafka's ``minOffsetsPerTrigger`` with ``maxTriggerDelay``.

    Args:
        min_rows: new rows a micro-batch waits for.
        max_delay_ms: the longest wait since the last micro-batch (or the pacer's creation).
        clock: seconds, monotonic (tests pass a fake one).
    """

    def __init__(self, min_rows: int, max_delay_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_rows, self.max_delay_ms, self.clock = min_rows, max_delay_ms, clock
        self._last = clock()

    def should_wait(self, new_rows: int) -> bool:
        """True to skip this trigger (too few new rows and the delay not over); else a batch starts."""
        now = self.clock()
        if (now - self._last) * 1000 < self.max_delay_ms and new_rows < self.min_rows:
            return True
        self._last = now
        return False
