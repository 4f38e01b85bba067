"""The counters behind /metrics: latency buckets (Prometheus ``le``), request counts and their bounds,
per-topic and per-(group, topic) traffic counters and their bound."""

from __future__ import annotations

import time

import pytest

from rocketpy.broker import stats as broker_stats
from rocketpy.broker.stats import BrokerStats
from rocketpy.latency import LATENCY_BOUNDS_S, LatencyHistogram
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting import request_stats
from rocketpy.remoting.request_stats import UNKNOWN_CODE, RequestStats


def test_latency_buckets_are_le_and_cumulative() -> None:
    h = LatencyHistogram()
    for seconds in (0.0001, 0.00011, 0.001, 10.0, 11.0):
        h.observe(seconds)
    cumulative = dict(h.cumulative())
    assert cumulative["0.0001"] == 1  # a value equal to a bound is in that bound's bucket
    assert cumulative["0.00025"] == 2
    assert cumulative["0.001"] == 3
    assert cumulative["10.0"] == 4
    assert cumulative["+Inf"] == 5 == h.count
    assert len(cumulative) == len(LATENCY_BOUNDS_S) + 1
    assert h.sum_s == pytest.approx(21.00121)
    merged = LatencyHistogram()
    merged.add(h)
    merged.add(h)
    assert merged.count == 10 and merged.sum_s == pytest.approx(2 * h.sum_s)


def test_request_stats_count_by_code_and_response_code() -> None:
    stats = RequestStats()
    started = time.perf_counter()
    for _ in range(3):
        stats.observe(RequestCode.SEND_MESSAGE_V2, ResponseCode.SUCCESS, started)
    stats.observe(RequestCode.SEND_MESSAGE_V2, ResponseCode.TOPIC_NOT_EXIST, started)
    assert stats.responses[(RequestCode.SEND_MESSAGE_V2, ResponseCode.SUCCESS)] == 3
    assert stats.responses[(RequestCode.SEND_MESSAGE_V2, ResponseCode.TOPIC_NOT_EXIST)] == 1
    assert stats.latency[RequestCode.SEND_MESSAGE_V2].count == 4
    stats.count(RequestCode.PULL_MESSAGE, ResponseCode.PULL_NOT_FOUND)  # a held pull: no latency
    stats.count(RequestCode.PULL_MESSAGE, ResponseCode.PULL_NOT_FOUND)
    assert stats.responses[(RequestCode.PULL_MESSAGE, ResponseCode.PULL_NOT_FOUND)] == 2
    assert RequestCode.PULL_MESSAGE not in stats.latency


def test_request_stats_bound_codes_from_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = RequestStats()
    started = time.perf_counter()
    for code in range(1000, 1100):  # codes nobody serves: one key
        stats.observe(code, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, started)
    assert stats.responses == {(UNKNOWN_CODE, ResponseCode.REQUEST_CODE_NOT_SUPPORTED): 100}
    assert set(stats.latency) == {UNKNOWN_CODE}
    monkeypatch.setattr(request_stats, "MAX_KEYS", 3)
    for code in (10, 11, 12, 13):
        stats.observe(code, ResponseCode.SUCCESS, started)
    assert len(stats.responses) == 4 and stats.responses[(UNKNOWN_CODE, ResponseCode.SUCCESS)] == 2


def test_traffic_counters_per_topic_and_group(monkeypatch: pytest.MonkeyPatch) -> None:
    s = BrokerStats()
    s.on_put("A", 2, 200)
    s.on_put("A", 1, 50)
    s.on_get("g", "A", 3, 300)
    assert s.topic_puts == {"A": [3, 250, 2]} and s.put_msgs_total == 3 and s.put_bytes_total == 250
    assert s.group_topic_gets == {("g", "A"): [3, 300, 1]} and s.group_get_msgs == {"g": 3}
    monkeypatch.setattr(broker_stats, "MAX_KEYED_COUNTERS", 1)
    s.on_put("B", 1, 10)  # past the bound: only the totals count it
    assert "B" not in s.topic_puts and s.put_msgs_total == 4
