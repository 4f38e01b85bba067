"""Metric families built from counters the daemons keep anyway (read at scrape time, on the loop).

Owns the label spelling of request and response codes (their RocketMQ names, the number for a
code without one) and the families every daemon's RPC server has: connections, responses by
request and response code, and latency per request code.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from rocketpy.latency import LatencyHistogram
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.request_stats import UNKNOWN_CODE
from rocketpy.remoting.server import RemotingServer

PREFIX = "rocketpy_"


@lru_cache(maxsize=1024)
def request_label(code: int) -> str:
    """``SEND_MESSAGE`` for 10; ``unknown`` for codes the server does not serve; else the number."""
    if code == UNKNOWN_CODE:
        return "unknown"
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


@lru_cache(maxsize=1024)
def response_label(code: int) -> str:
    """``SUCCESS`` for 0, ``TOPIC_NOT_EXIST`` for 17; else the number."""
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


def histogram(
    name: str, documentation: str, labelnames: list[str], rows: Iterable[tuple[list[str], LatencyHistogram]]
) -> HistogramMetricFamily:
    """A histogram family with one child per ``(label values, LatencyHistogram)`` row."""
    family = HistogramMetricFamily(PREFIX + name, documentation, labels=labelnames, unit="")
    for values, h in rows:
        family.add_metric(values, h.cumulative(), h.sum_s)
    return family


def merged(histograms: dict[int, LatencyHistogram], codes: Iterable[int]) -> LatencyHistogram:
    """One histogram adding up those of ``codes`` (e.g. all send codes)."""
    out = LatencyHistogram()
    for code in codes:
        h = histograms.get(code)
        if h is not None:
            out.add(h)
    return out


def gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    """A gauge family with one unlabelled sample."""
    return GaugeMetricFamily(PREFIX + name, documentation, value=value)


def counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    """A counter family with one unlabelled sample (``name`` without ``_total``)."""
    return CounterMetricFamily(PREFIX + name, documentation, value=value)


def remoting_families(server: RemotingServer) -> Iterator[Metric]:
    """Connections, responses by request and response code, and latency per request code."""
    yield gauge("connections", "Open client connections to the RPC port.", len(server.channels))
    stats = server.request_stats
    responses = CounterMetricFamily(
        PREFIX + "requests",
        "Requests answered, by request code and response code (oneway requests included).",
        labels=["code", "response_code"],
    )
    for (code, response_code), n in list(stats.responses.items()):
        responses.add_metric([request_label(code), response_label(response_code)], n)
    yield responses
    yield histogram(
        "request_latency_seconds",
        "Time from reading a request to writing its response, by request code (held pulls excluded).",
        ["code"],
        [([request_label(code)], h) for code, h in list(stats.latency.items())],
    )
