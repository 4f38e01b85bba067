"""The Spark connector's newer options, without a JVM or a broker: accounts, time ranges, patterns,
pacing, SQL92 filters, tag pushdown and the lag figures."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.spark.auth import ACCESS_KEY_ENV, SECRET_KEY_ENV, Credentials, refused
from rocketpy.spark.lag import (
    MAX_TIME_SAMPLES,
    Pacer,
    behind,
    offsets_behind,
    seconds_behind,
    time_samples,
)
from rocketpy.spark.offsets import check_queues, parse_offsets_json
from rocketpy.spark.options import SparkOptionError, parse_read_options, parse_write_options
from rocketpy.spark.topics import match_topics, reserved_names

NS = "127.0.0.1:9876"
SECRET = "s3cr3t-value-never-shown"
Q0, Q1 = ("T", "broker-a", 0), ("T", "broker-a", 1)


def read(**opts: str) -> object:
    return parse_read_options({"namesrvAddr": NS, **opts})


# -- accounts --------------------------------------------------------------------------------------


def test_credentials_from_options_keep_the_secret_out_of_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ACCESS_KEY_ENV, raising=False)
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    o = parse_read_options({"namesrvAddr": NS, "topic": "T", "accessKey": "ak1", "SECRETKEY": SECRET})
    assert o.credentials.resolved() == Credentials("ak1", SECRET)
    assert SECRET not in repr(o) and SECRET not in str(o)
    assert pickle.loads(pickle.dumps(o)).credentials.secret_key == SECRET  # travels to the workers
    w = parse_write_options({"namesrvAddr": NS, "accessKey": "ak1", "secretKey": SECRET})
    assert SECRET not in repr(w) and w.credentials.sdk_kwargs() == {"access_key": "ak1", "secret_key": SECRET}


def test_credentials_from_the_environment_where_they_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    o = parse_read_options({"namesrvAddr": NS, "topic": "T"})
    monkeypatch.delenv(ACCESS_KEY_ENV, raising=False)
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    assert o.credentials.signer() is None
    monkeypatch.setenv(ACCESS_KEY_ENV, "envkey")
    monkeypatch.setenv(SECRET_KEY_ENV, SECRET)
    assert o.credentials.resolved() == Credentials("envkey", SECRET)  # resolved later, not in the options
    assert repr(o.credentials.signer()) == "RequestSigner(access_key='envkey')"
    monkeypatch.delenv(SECRET_KEY_ENV)
    with pytest.raises(SparkOptionError, match="option secretKey is missing") as err:
        o.credentials.resolved()
    assert SECRET_KEY_ENV in str(err.value)


def test_a_refusal_names_the_options_never_the_secret() -> None:
    from rocketpy.errors import AccessDeniedError

    denied = AccessDeniedError(16, "access denied: signature mismatch for account ak1")
    text = str(refused(denied, Credentials("ak1", SECRET)))
    assert "signature mismatch" in text and "accessKey ('ak1')" in text and SECRET not in text
    assert "give the options accessKey and secretKey" in str(refused(denied, Credentials()))


# -- time ranges, patterns, pacing, filters: option checks -----------------------------------------


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"topic": "T", "topicPattern": "T.*"}, "exactly one of the options topic"),
        ({"topicPattern": "T(["}, r"option topicPattern: 'T\(\[' is not a regular expression"),
        ({"topic": "T", "startingTimestamp": "1", "startingOffsetsByTimestamp": '{"T": {"broker-a:0": 1}}'},
         "at most one of the options startingOffsets, startingTimestamp"),
        ({"topic": "T", "endingOffsets": "latest", "endingTimestamp": "5"}, "at most one of the options end"),
        ({"topic": "T", "startingOffsetsByTimestamp": '{"T": {"broker-a:0": -1}}'}, "integer >= 0"),
        ({"topic": "T", "endingOffsetsByTimestamp": '{"U": {"broker-a:0": 1}}'}, "does not cover: U"),
        ({"topicPattern": "Or.*", "startingOffsetsByTimestamp": '{"Pay": {"broker-a:0": 1}}'},
         "topicPattern 'Or.*' does not cover: Pay"),
        ({"topic": "T", "startingOffsetsByTimestampStrategy": "earliest"}, "must be one of error, latest"),
        ({"topic": "T", "maxTriggerDelay": "5m"}, "give that too"),
        ({"topic": "T", "minOffsetsPerTrigger": "10", "maxTriggerDelay": "soon"}, "duration such as 15m"),
        ({"topic": "T", "minOffsetsPerTrigger": "100", "maxOffsetsPerTrigger": "10"}, "above maxOffsets"),
        ({"topic": "T", "sqlFilter": "a >"}, "option sqlFilter"),
        ({"topic": "T", "sqlFilter": "a > 1", "tags": "x"}, "tags or sqlFilter, not both"),
    ],
)  # fmt: skip
def test_bad_new_options(opts: dict[str, str], match: str) -> None:
    with pytest.raises(SparkOptionError, match=match):
        read(**opts)


def test_new_options_parsed() -> None:
    o = read(
        topicPattern="Or.*", minOffsetsPerTrigger="50", maxTriggerDelay="30s", sqlFilter="a BETWEEN 1 AND 3"
    )
    assert (o.topics, o.topic_pattern, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (
        (),
        "Or.*",
        50,
        30_000,
    )
    assert o.reads_topic("Orders") and not o.reads_topic("XOrders") and o.filtered
    o = read(topic="T", endingTimestamp="17", startingOffsetsByTimestampStrategy="LATEST")
    assert (o.ending_timestamp_ms, o.timestamp_strategy, o.ending_given) == (17, "latest", True)
    assert read(topic="T", minOffsetsPerTrigger="5").max_trigger_delay_ms == 15 * 60_000  # Kafka's default
    assert read(topic="T", minOffsetsPerTrigger="5", maxTriggerDelay="250").max_trigger_delay_ms == 250


def test_timestamp_json_and_unknown_queues() -> None:
    assert parse_offsets_json('{"T": {"broker-a:1": 1700000000000}}', "x", 0) == {Q1: 1700000000000}
    with pytest.raises(SparkOptionError, match="queues the topic does not have: T/broker-b:0"):
        check_queues({("T", "broker-b", 0): 5}, "startingOffsetsByTimestamp", [Q0, Q1])
    check_queues({Q0: 5}, "startingOffsetsByTimestamp", [Q0, Q1])


def test_patterns_skip_system_retry_dlq_and_broker_names() -> None:
    names = ["Orders", "OrdersEU", "XOrders", "TBW102", "RMQ_SYS_TRACE_TOPIC", "%RETRY%g", "%DLQ%g",
             "DefaultCluster", "broker-a", "SCHEDULE_TOPIC_XXXX"]  # fmt: skip
    info = {"clusterAddrTable": {"DefaultCluster": ["broker-a"]}, "brokerAddrTable": {"broker-a": {}}}
    assert reserved_names(info) == {"DefaultCluster", "broker-a"}
    assert match_topics("Orders.*", names, reserved_names(info)) == ["Orders", "OrdersEU"]
    assert match_topics(".*", names, reserved_names(info)) == ["Orders", "OrdersEU", "XOrders"]


# -- tag pushdown ------------------------------------------------------------------------------------


def test_tag_filters_are_pushed_exactly_or_kept() -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThan, In

    from rocketpy.spark.filters import push_tag_filters

    eq, among, other = EqualTo(("tags",), "a"), In(("tags",), ("a", "b")), GreaterThan(("queue_id",), 1)
    assert push_tag_filters(read(topic="T"), [eq, among, other]) == (frozenset({"a"}), [other])
    assert push_tag_filters(read(topic="T", tags="b||c"), [among]) == (frozenset({"b"}), [])
    assert push_tag_filters(read(topic="T", tags="c"), [eq]) == (frozenset(), [])  # nothing can match
    odd = [
        EqualTo(("tags",), "a||b"),
        EqualTo(("tags",), " a"),
        EqualTo(("tags",), None),
        In(("tags",), ("*",)),
    ]
    assert push_tag_filters(read(topic="T"), odd) == (None, odd)  # not a tag expression exactly: Spark's
    sql = read(topic="T", sqlFilter="a = 'x'")
    assert push_tag_filters(sql, [eq]) == (None, [eq])


# -- lag and pacing -----------------------------------------------------------------------------------


def test_lag_metrics_are_kafkas() -> None:
    lag = behind({Q0: 10, Q1: 40}, {Q0: 10, Q1: 50, ("T", "broker-a", 2): 9})
    assert lag == {Q0: 0, Q1: 10}
    assert offsets_behind(lag) == {
        "minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "10", "avgOffsetsBehindLatest": "5.0"
    }  # fmt: skip
    assert offsets_behind({}) == {}
    assert time_samples(lag, {Q0: 10, Q1: 40}) == {Q1: 40}
    many = {("T", "b", i): i for i in range(200)}
    assert len(time_samples(many, many)) == MAX_TIME_SAMPLES and ("T", "b", 199) in time_samples(many, many)
    assert seconds_behind({Q1: 1_000, Q0: 4_000}, 6_500) == {"maxSecondsBehindLatest": "5.500"}
    assert seconds_behind({}, 6_500) == {"maxSecondsBehindLatest": "0.000"}


def test_pacer_waits_for_rows_but_not_past_the_delay() -> None:
    now = [100.0]
    pacer = Pacer(min_rows=50, max_delay_ms=10_000, clock=lambda: now[0])
    assert pacer.should_wait(10)  # too few, delay not over
    now[0] += 5
    assert not pacer.should_wait(50)  # enough: a batch, the delay restarts
    now[0] += 9.9
    assert pacer.should_wait(49)
    now[0] += 0.1
    assert not pacer.should_wait(0)  # the delay is over: a batch whatever the count


@given(
    st.dictionaries(st.integers(0, 20), st.tuples(st.integers(0, 1000), st.integers(0, 1000)), max_size=30)
)
def test_behind_is_never_negative(queues: dict[int, tuple[int, int]]) -> None:
    end = {("T", "b", q): a for q, (a, _) in queues.items()}
    latest = {("T", "b", q): b for q, (_, b) in queues.items()}
    lag = behind(end, latest)
    assert all(v >= 0 for v in lag.values())
    metrics = offsets_behind(lag)
    if lag:
        assert int(metrics["minOffsetsBehindLatest"]) <= float(metrics["avgOffsetsBehindLatest"])
        assert float(metrics["avgOffsetsBehindLatest"]) <= int(metrics["maxOffsetsBehindLatest"])
