"""``LatencyHistogram``: a fixed bucket array for durations, cheap enough for the hot path.

Owns one count per bucket (upper bounds ``LATENCY_BOUNDS_S``, plus +Inf) and the sum of the
observations (their number is the sum of the buckets). ``observe`` is a bisect and two adds — no
lock, no allocation; the hottest callers inline it (``bucket_of``). It is
written by one thread (the event loop, or one flush thread) and read by the metrics endpoint at
scrape time; a read racing a write may see a bucket one ahead of the sum, which a scrape
tolerates (the next scrape is exact). Knows nothing of HTTP or Prometheus: ``rocketpy.metrics``
turns it into a histogram family.
"""

from __future__ import annotations

from bisect import bisect_left

#: ``bucket_of(LATENCY_BOUNDS_S, seconds)``: the index of the bucket ``seconds`` falls in.
bucket_of = bisect_left

#: Upper bounds in seconds (Prometheus ``le``), 100 µs to 10 s.
LATENCY_BOUNDS_S: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip


class LatencyHistogram:
    """Counts of durations per bucket (the last bucket is +Inf)."""

    __slots__ = ("buckets", "sum_s")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BOUNDS_S) + 1)
        self.sum_s = 0.0

    @property
    def count(self) -> int:
        """How many durations were observed."""
        return sum(self.buckets)

    def observe(self, seconds: float) -> None:
        """Count one duration (``le`` buckets: a value equal to a bound falls in that bound's bucket)."""
        self.buckets[bucket_of(LATENCY_BOUNDS_S, seconds)] += 1
        self.sum_s += seconds

    def add(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts to this one (merging per-code histograms at scrape time)."""
        for i, n in enumerate(other.buckets):
            self.buckets[i] += n
        self.sum_s += other.sum_s

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, cumulative count)`` per bucket, ending with ``("+Inf", total)`` (Prometheus' shape)."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, n in zip((*map(repr, LATENCY_BOUNDS_S), "+Inf"), self.buckets, strict=True):
            running += n
            out.append((bound, running))
        return out
