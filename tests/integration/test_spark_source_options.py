"""The Spark data source's newer read options, called directly (no JVM) against real daemons:
time ranges, topic patterns, trigger pacing, SQL92 filters, ACL accounts, reads across a master's death.

Spark calls these same methods in its planner, streaming runner and workers (``test_spark_source.py``
explains the split); ``test_spark_session_options.py`` runs the options through a real SparkSession.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the Spark connector needs the extra: pip install -e '.[spark]'")

from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadMaxRows, ReadMinRows

from rocketpy import Admin, Message, Producer
from rocketpy.errors import MQClientError
from rocketpy.spark.auth import ACCESS_KEY_ENV, SECRET_KEY_ENV
from rocketpy.spark.source import RocketpyDataSource, spark_schema
from tests.conftest import DaemonPool
from tests.integration.test_acl import ADMIN, USER, start_acl_cluster
from tests.integration.test_ha import HA_FAST
from tests.waiting import wait_until

T = "SparkOpt"
#: Topics of the tests that share the module's cluster (each its own, so counts stay exact).
SHARED_TOPICS = {T, "SoTime", "SoLatest", "SoPace", "SoSql"}


def send(
    ns: str, topic: str, bodies: range, queues: int = 2, keys: tuple[str, str] | None = None
) -> list[Any]:
    """Create ``topic`` (as ADMIN when ``keys``) and send one message per body number; the results."""
    account = {"access_key": keys[0], "secret_key": keys[1]} if keys else {}

    async def go() -> list[Any]:
        async with Admin(ns, **({"access_key": ADMIN[0], "secret_key": ADMIN[1]} if keys else {})) as admin:
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)
        async with Producer("pg_spark_opt", namesrv_addr=ns, **account) as p:  # type: ignore[arg-type]
            return [
                await p.send(
                    Message(topic, b"%d" % i, tags="even" if i % 2 == 0 else "odd", properties={"n": str(i)})
                )
                for i in bodies
            ]

    return asyncio.run(go())


def source(ns: str, **opts: str) -> RocketpyDataSource:
    return RocketpyDataSource(CaseInsensitiveDict({"namesrvAddr": ns, **opts}))


def batch(ns: str, **opts: str) -> list[dict[str, Any]]:
    reader = source(ns, **opts).reader(spark_schema())
    return [row for p in reader.partitions() for b in reader.read(p) for row in b.to_pylist()]


def bodies(rows: list[dict[str, Any]]) -> list[int]:
    return sorted(int(r["body"]) for r in rows)


@pytest.fixture(scope="module")
def ns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One NameServer and broker for the module's tests (each test has its own topics)."""
    pool = DaemonPool(tmp_path_factory.mktemp("spark_source_options"))
    try:
        namesrv = pool.namesrv()
        pool.broker(namesrv.addr, enablePropertyFilter=True)
        yield str(namesrv.addr)
    finally:
        pool.stop_all()


def two_waves(ns: str, topic: str) -> int:
    """Bodies 0..39, then (a store-time millisecond later) 40..79; returns the time between them."""
    first = send(ns, topic, range(40))
    last_ms = max(r["store_timestamp"] for r in batch(ns, topic=topic)).timestamp() * 1000
    wait_until(lambda: time.time() * 1000 > last_ms + 2, 5.0, message="the clock passes the first wave")
    mid = int(time.time() * 1000)
    send(ns, topic, range(40, 80))
    assert len(first) == 40
    return mid


def test_time_ranges(ns: str) -> None:
    topic = "SoTime"
    mid = two_waves(ns, topic)
    assert bodies(batch(ns, topic=topic, startingTimestamp=str(mid))) == list(range(40, 80))
    assert bodies(batch(ns, topic=topic, endingTimestamp=str(mid))) == list(range(40))
    by_queue = json.dumps({topic: {"broker-a:0": mid}})
    rows = batch(ns, topic=topic, startingOffsetsByTimestamp=by_queue)  # queue 1 unnamed: from its earliest
    assert {r["queue_id"] for r in rows if int(r["body"]) < 40} == {1}
    assert len([r for r in rows if int(r["body"]) >= 40]) == 40
    rows = batch(ns, topic=topic, endingOffsetsByTimestamp=by_queue)  # queue 1 unnamed: to its latest
    assert {r["queue_id"] for r in rows if int(r["body"]) >= 40} == {1}
    queue_1_end = json.dumps({topic: {"broker-a:1": mid}})
    both = batch(ns, topic=topic, startingTimestamp=str(mid), endingOffsetsByTimestamp=queue_1_end)
    assert {r["queue_id"] for r in both} == {0} and all(int(r["body"]) >= 40 for r in both)


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"startingOffsetsByTimestamp": '{"SparkOpt": {"broker-a:7": 1}}'},
         "option startingOffsetsByTimestamp names queues the topic does not have: SparkOpt/broker-a:7"),
        ({"endingOffsetsByTimestamp": '{"SparkOpt": {"broker-b:0": 1}}'}, "endingOffsetsByTimestamp names"),
        ({"startingTimestamp": "99999999999999"}, "option startingTimestamp: no message stored at or after"),
        ({"startingOffsetsByTimestamp": '{"SparkOpt": {"broker-a:0": 99999999999999}}'},
         "startingOffsetsByTimestampStrategy=latest"),
    ],
)  # fmt: skip
def test_time_range_errors(ns: str, opts: dict[str, str], match: str) -> None:
    send(ns, T, range(10))
    with pytest.raises(MQClientError, match=match):
        source(ns, topic=T, **opts).reader(spark_schema()).partitions()


def test_latest_strategy_starts_late_queues_at_their_end(ns: str) -> None:
    send(ns, "SoLatest", range(10))
    opts = {"startingOffsetsByTimestamp": json.dumps({"SoLatest": {"broker-a:0": 99999999999999}})}
    rows = batch(ns, topic="SoLatest", startingOffsetsByTimestampStrategy="latest", **opts)
    assert {r["queue_id"] for r in rows} == {1} and len(rows) == 5


def test_topic_pattern_batch_and_stream(ns: str) -> None:
    send(ns, "PatA", range(10))
    send(ns, "PatB", range(100, 110))
    send(ns, "OtherPat", range(500, 505))
    assert bodies(batch(ns, topicPattern="Pat.*")) == [*range(10), *range(100, 110)]
    assert batch(ns, topicPattern="Nothing.*") == []
    everything = {r["topic"] for r in batch(ns, topicPattern=".*")} - SHARED_TOPICS
    assert everything == {"PatA", "PatB", "OtherPat"}  # no system, cluster or broker-name topics

    reader = source(ns, topicPattern="Pat.*", startingOffsets="earliest").streamReader(spark_schema())
    start = reader.initialOffset()
    assert sorted(start) == ["PatA", "PatB"]
    send(ns, "PatC", range(200, 207))  # created while the query runs
    end = reader.latestOffset(start, ReadMaxRows(1000))
    assert end["PatC"] == {"broker-a:0": 0, "broker-a:1": 0}  # joins at its earliest offsets
    rows = [r for p in reader.partitions(start, end) for b in reader.read(p) for r in b.to_pylist()]
    assert bodies(rows) == [*range(10), *range(100, 110)]
    later = reader.latestOffset(end, ReadMaxRows(1000))
    rows = [r for p in reader.partitions(end, later) for b in reader.read(p) for r in b.to_pylist()]
    assert bodies(rows) == list(range(200, 207))

    async def delete() -> None:
        async with Admin(ns) as admin:
            await admin.delete_topic("PatB")

    asyncio.run(delete())
    after = wait_until(lambda: "PatB" not in (e := reader.latestOffset(later, ReadMaxRows(1000))) and e, 10.0)
    assert sorted(after) == ["PatA", "PatC"]  # PatB left the query; nothing failed


def test_min_offsets_per_trigger_waits_then_the_delay_fires(ns: str) -> None:
    topic = "SoPace"
    send(ns, topic, range(10))
    reader = source(
        ns, topic=topic, startingOffsets="earliest", minOffsetsPerTrigger="30", maxTriggerDelay="2s"
    ).streamReader(spark_schema())
    assert reader.getDefaultReadLimit() == ReadMinRows(30)
    start = reader.initialOffset()
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) == start  # 10 new rows: wait
    send(ns, topic, range(10, 40))
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert sum(end[topic].values()) == 40  # 40 >= 30: a micro-batch
    send(ns, topic, range(40, 45))
    assert reader.latestOffset(end, reader.getDefaultReadLimit()) == end
    t0 = time.monotonic()
    fired = wait_until(
        lambda: reader.latestOffset(end, reader.getDefaultReadLimit()) != end, 20.0, interval=0.2
    )
    assert fired and time.monotonic() - t0 > 1.0  # maxTriggerDelay (2 s since the last batch) passed
    with pytest.raises(MQClientError, match=r"minOffsetsPerTrigger .* which Trigger\.AvailableNow cannot"):
        reader.prepareForTriggerAvailableNow()


def test_sql_filter_is_pushed_to_the_broker(ns: str) -> None:
    send(ns, "SoSql", range(60))
    rows = batch(ns, topic="SoSql", sqlFilter="n BETWEEN 10 AND 19 AND TAGS = 'odd'", pullBatchSize="4")
    assert bodies(rows) == [11, 13, 15, 17, 19]


def test_sql_filter_needs_enable_property_filter(daemons: DaemonPool) -> None:
    namesrv = daemons.namesrv()
    daemons.broker(namesrv.addr)  # enablePropertyFilter=false
    send(namesrv.addr, T, range(5))
    with pytest.raises(
        MQClientError, match=r"option sqlFilter: broker broker-a .* enablePropertyFilter=true"
    ):
        source(namesrv.addr, topic=T, sqlFilter="n > 1").reader(spark_schema()).partitions()
    reader = source(namesrv.addr, topic=T, sqlFilter="n > 1").streamReader(spark_schema())
    with pytest.raises(MQClientError, match="option sqlFilter"):
        reader.initialOffset()


# -- ACL ----------------------------------------------------------------------------------------------


SECRET_PROBE = "wrong-secret-value-0451"


def test_acl_reads_with_options_env_and_refusals(
    daemons: DaemonPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ACCESS_KEY_ENV, raising=False)
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    ns, _ = start_acl_cluster(daemons, tmp_path / "plain_acl.yml")
    send(ns, "TopicA", range(20), keys=USER)
    assert bodies(batch(ns, topic="TopicA", accessKey=USER[0], secretKey=USER[1])) == list(range(20))
    with pytest.raises(MQClientError, match=r"access denied.*give the options accessKey and secretKey"):
        batch(ns, topic="TopicA")
    with pytest.raises(
        MQClientError, match=r"access denied.*check the options accessKey \('producer01'\)"
    ) as e:
        batch(ns, topic="TopicA", accessKey=USER[0], secretKey=SECRET_PROBE)
    assert SECRET_PROBE not in str(e.value)
    monkeypatch.setenv(ACCESS_KEY_ENV, USER[0])
    monkeypatch.setenv(SECRET_KEY_ENV, USER[1])
    assert bodies(batch(ns, topic="TopicA")) == list(range(20))  # the workers' environment
    send(ns, "TopicC", range(0), keys=ADMIN)
    with pytest.raises(MQClientError, match="access denied"):  # a topic the account may not read
        batch(ns, topic="TopicC")


# -- failover -------------------------------------------------------------------------------------------


def ha_pair(daemons: DaemonPool) -> tuple[str, Any, Any]:
    ns = daemons.namesrv()
    conf = {**HA_FAST, "syncFlushTimeout": 3000}
    master = daemons.broker(ns.addr, brokerName="broker-a", brokerRole="SYNC_MASTER", **conf)
    slave = daemons.broker(ns.addr, brokerName="broker-a", brokerId=1, brokerRole="SLAVE", **conf)
    return str(ns.addr), master, slave


def slave_holds(ns: str, slave_addr: str, topic: str, count: int) -> bool:
    from rocketpy.spark.brokers import BrokerSession

    with BrokerSession(ns, 3.0) as session:

        async def total() -> int:
            queues = await session.queues([topic])
            return sum([await session.api.get_max_offset(slave_addr, q[0], q[2], 3.0) for q in queues])

        try:
            return session.run(total) >= count
        except MQClientError:
            return False


def test_a_read_goes_on_from_the_slave_when_the_master_dies(daemons: DaemonPool) -> None:
    ns, master, slave = ha_pair(daemons)
    send(ns, T, range(6000), queues=1)
    wait_until(lambda: slave_holds(ns, slave.addr, T, 6000), 30.0, message="the slave holds every message")
    reader = source(ns, topic=T, requestTimeoutMs="2000").reader(spark_schema())
    (part,) = reader.partitions()
    batches = reader.read(part)
    got = [r for r in next(batches).to_pylist()]  # the first chunk came from the master
    assert 0 < len(got) < 6000
    master.kill()
    got += [r for b in batches for r in b.to_pylist()]
    assert bodies(got) == list(range(6000))  # in order from the slave, nothing twice
    assert [r["queue_offset"] for r in got] == list(range(6000))
    # a retried task: the same planned range read anew while the master is gone
    again = [r for b in reader.read(part) for r in b.to_pylist()]
    assert bodies(again) == list(range(6000))
    # and a stream plans its next micro-batch from the slave
    stream = source(ns, topic=T, startingOffsets="earliest").streamReader(spark_schema())
    assert stream.latestOffset(stream.initialOffset(), ReadMaxRows(10_000)) == {T: {"broker-a:0": 6000}}
