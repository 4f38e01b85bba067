"""The Spark connector's pure parts: option parsing, offset specs, canonical JSON, ranges, caps."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.spark.offsets import (
    OffsetRangeError,
    QueueRange,
    cap_offsets,
    check_range,
    offsets_from_json,
    offsets_to_json,
    parse_spec,
    resolve_spec,
    split_ranges,
)
from rocketpy.spark.options import SparkOptionError, parse_read_options, parse_write_options

NS = "127.0.0.1:9876"
Q0, Q1 = ("T", "broker-a", 0), ("T", "broker-a", 1)


def test_read_options_case_insensitive_and_defaults() -> None:
    o = parse_read_options({"NAMESRVADDR": NS, "Topics": "B, A,A", "maxoffsetspertrigger": "30"})
    assert o.topics == ("A", "B")
    assert o.max_offsets_per_trigger == 30
    assert (o.pull_batch_size, o.min_partitions, o.fail_on_data_loss, o.tags) == (256, 1, True, "*")
    assert o.starting_offsets is None and o.ending_offsets is None and not o.ending_given


def test_unknown_option_suggests_the_nearest() -> None:
    with pytest.raises(SparkOptionError, match=r"'startingOfsets'.*did you mean 'startingOffsets'"):
        parse_read_options({"namesrvAddr": NS, "topic": "T", "startingOfsets": "earliest"})
    with pytest.raises(SparkOptionError, match="did you mean 'topic'"):
        parse_write_options({"namesrvAddr": NS, "topik": "T"})


def test_write_options_transactional_by_default() -> None:
    o = parse_write_options({"namesrvAddr": NS, "topic": "T"})
    assert (o.transactional, o.transaction_timeout_s, o.producer_group) == (True, 3600, "SPARK_WRITER")
    o = parse_write_options({"namesrvAddr": NS, "Transactional": "FALSE", "transactiontimeoutms": "1500"})
    assert (o.transactional, o.transaction_timeout_s) == (False, 2)  # whole seconds, rounded up
    with pytest.raises(SparkOptionError, match="transactional='maybe' must be true or false"):
        parse_write_options({"namesrvAddr": NS, "transactional": "maybe"})
    with pytest.raises(SparkOptionError, match="transactionTimeoutMs=10 must be between 1000"):
        parse_write_options({"namesrvAddr": NS, "transactionTimeoutMs": "10"})


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"topic": "T", "topics": "T"}, "exactly one of"),
        ({}, "exactly one of"),
        ({"topic": "bad topic"}, "not a topic name"),
        ({"topic": "T", "minPartitions": "x"}, "minPartitions='x' must be an integer"),
        ({"topic": "T", "pullBatchSize": "0"}, "between 1 and"),
        ({"topic": "T", "failOnDataLoss": "yes"}, "true or false"),
        ({"topic": "T", "startingOffsets": "latest", "startingTimestamp": "1"}, "at most one of"),
    ],
)
def test_bad_read_options(opts: dict[str, str], match: str) -> None:
    with pytest.raises(SparkOptionError, match=match):
        parse_read_options({"namesrvAddr": NS, **opts})


def test_namesrv_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(SparkOptionError, match="namesrvAddr"):
        parse_read_options({"topic": "T"})


def test_specs_and_resolution() -> None:
    assert parse_spec(None, "startingOffsets", ["T"], "earliest") == "earliest"
    assert parse_spec(" LATEST ", "startingOffsets", ["T"], "earliest") == "latest"
    spec = parse_spec('{"T": {"broker-a:0": 5, "broker-a:1": -2}}', "startingOffsets", ["T"], "x")
    assert spec == {Q0: 5, Q1: -2}
    bounds = {Q0: (2, 10), Q1: (3, 20)}
    assert resolve_spec(spec, "startingOffsets", [Q0, Q1], bounds, -1) == {Q0: 5, Q1: 3}
    assert resolve_spec({Q0: -1}, "endingOffsets", [Q0, Q1], bounds, -1) == {Q0: 10, Q1: 20}
    assert resolve_spec("earliest", "startingOffsets", [Q0, Q1], bounds, -1) == {Q0: 2, Q1: 3}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "is not earliest, latest or JSON"),
        ("[1]", "JSON object"),
        ('{"T": {"broker-a": 1}}', "brokerName:queueId"),
        ('{"T": {"broker-a:0": -3}}', "integer >= -2"),
        ('{"T": {"broker-a:0": "1"}}', "integer >= -2"),
        ('{"Other": {"broker-a:0": 1}}', "topics that are not read: Other"),
    ],
)
def test_bad_specs(text: str, match: str) -> None:
    with pytest.raises(SparkOptionError, match=match):
        parse_spec(text, "startingOffsets", ["T"], "earliest")


def test_unknown_queue_and_bad_range() -> None:
    with pytest.raises(SparkOptionError, match="queues the topic does not have: T/broker-a:7"):
        resolve_spec({("T", "broker-a", 7): 1}, "startingOffsets", [Q0], {Q0: (0, 5)}, -2)
    with pytest.raises(OffsetRangeError, match="endingOffsets 3 of T/broker-a:0 is before its starting"):
        check_range({Q0: 4}, {Q0: 3}, {Q0: (0, 5)})
    with pytest.raises(OffsetRangeError, match="past the queue's max offset 5"):
        check_range({Q0: 0}, {Q0: 6}, {Q0: (0, 5)})


def test_json_is_canonical_and_round_trips() -> None:
    a = offsets_to_json({Q1: 7, ("S", "b", 0): 1, Q0: 3})
    b = offsets_to_json({Q0: 3, ("S", "b", 0): 1, Q1: 7})
    assert a == b == '{"S":{"b:0":1},"T":{"broker-a:0":3,"broker-a:1":7}}'
    assert offsets_from_json(a) == {Q0: 3, Q1: 7, ("S", "b", 0): 1}
    assert offsets_from_json(json.loads(a)) == offsets_from_json(a)


queues = st.lists(st.integers(0, 15), min_size=1, max_size=8, unique=True)


@given(queues, st.data(), st.integers(1, 50))
def test_split_ranges_cover_exactly(qids: list[int], data: st.DataObject, min_parts: int) -> None:
    start = {("T", "b", q): data.draw(st.integers(0, 100)) for q in qids}
    end = {q: s + data.draw(st.integers(0, 300)) for q, s in start.items()}
    ranges = split_ranges(start, end, min_parts)
    for q in start:
        mine = sorted((r for r in ranges if r.queue == q), key=lambda r: r.start)
        covered = [o for r in mine for o in range(r.start, r.end)]
        assert covered == list(range(start[q], end[q]))
        assert all(len(r) > 0 for r in mine)
    total = sum(end[q] - start[q] for q in start)
    assert len(ranges) >= min(min_parts, total)


@given(queues, st.data(), st.one_of(st.none(), st.integers(1, 500)))
def test_cap_is_exact_and_never_overshoots(qids: list[int], data: st.DataObject, limit: int | None) -> None:
    start = {("T", "b", q): data.draw(st.integers(0, 100)) for q in qids}
    latest = {q: s + data.draw(st.integers(0, 200)) for q, s in start.items()}
    end = cap_offsets(start, latest, limit)
    admitted = sum(end[q] - start[q] for q in start)
    backlog = sum(latest[q] - start[q] for q in start)
    assert admitted == (backlog if limit is None else min(limit, backlog))
    assert all(start[q] <= end[q] <= latest[q] for q in start)
    assert cap_offsets(start, latest, limit) == end  # deterministic


def test_cap_spreads_by_backlog() -> None:
    assert cap_offsets({Q0: 0, Q1: 0}, {Q0: 300, Q1: 100}, 40) == {Q0: 30, Q1: 10}


def test_queue_range_len() -> None:
    assert len(QueueRange("T", "b", 0, 5, 9)) == 4
