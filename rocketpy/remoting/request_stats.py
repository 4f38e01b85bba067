"""``RequestStats``: requests answered by one server, per request code and response code, and the
time each request code took from dispatch to response.

Owned by a ``ProcessorTable`` (one per server); every ``Channel`` of that server calls ``observe``
when it writes a response (oneway requests included); a pull answered after a hold is counted
through ``Channel.count_response``, without a latency (its time is the hold's). The fast path is a
clock read, one dict increment and one bucket increment. Bounds: request codes come from clients,
so a code the table does not serve is counted under ``UNKNOWN_CODE`` (its response is
REQUEST_CODE_NOT_SUPPORTED), and the tables stop growing at ``MAX_KEYS`` keys (later new keys go to
``UNKNOWN_CODE``).
"""

from __future__ import annotations

from time import perf_counter

from rocketpy.latency import LATENCY_BOUNDS_S, LatencyHistogram, bucket_of
from rocketpy.protocol.codes import ResponseCode

#: The request code counted for codes this server does not serve.
UNKNOWN_CODE = -1
MAX_KEYS = 4096


class RequestStats:
    """Response counts by ``(request code, response code)`` and latency histograms by request code."""

    __slots__ = ("latency", "responses")

    def __init__(self) -> None:
        self.responses: dict[tuple[int, int], int] = {}
        self.latency: dict[int, LatencyHistogram] = {}

    def observe(self, code: int, response_code: int, started: float) -> None:
        """Count a response to a request with ``code`` dispatched at ``perf_counter()`` ``started``."""
        elapsed = perf_counter() - started
        try:
            self.responses[(code, response_code)] += 1
            histogram = self.latency[code]
        except KeyError:
            self._first(code, response_code, elapsed)
            return
        histogram.buckets[bucket_of(LATENCY_BOUNDS_S, elapsed)] += 1  # LatencyHistogram.observe, inlined
        histogram.sum_s += elapsed

    def count(self, code: int, response_code: int) -> None:
        """Count a response without its latency (a held pull, answered long after its dispatch)."""
        key = (code, response_code)
        if key in self.responses:
            self.responses[key] += 1
        else:
            self._count_first(code, response_code)

    def _count_first(self, code: int, response_code: int) -> int:
        """The first response of a key (bounded; unserved codes share one key); returns the code used."""
        if response_code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED or len(self.responses) >= MAX_KEYS:
            code = UNKNOWN_CODE
        key = (code, response_code)
        self.responses[key] = self.responses.get(key, 0) + 1
        return code

    def _first(self, code: int, response_code: int, elapsed: float) -> None:
        """Slow path of ``observe``: the first response of a key."""
        code = self._count_first(code, response_code)
        histogram = self.latency.get(code)
        if histogram is None:
            histogram = self.latency[code] = LatencyHistogram()
        histogram.observe(elapsed)
