"""The Spark data source's readers called directly (no JVM) against a real NameServer and broker.

Spark calls these same methods in its planner, streaming runner and workers; here they run in
the test process, which covers planning, pulls, Arrow conversion and offsets in well under a
second per test. Spark itself is exercised in ``test_spark_session.py``.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import time
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the Spark connector needs the extra: pip install -e '.[spark]'")

from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from rocketpy import Admin, Message, Producer
from rocketpy.errors import MQClientError
from rocketpy.spark.source import RocketpyDataSource, spark_schema

TOPIC = "SparkSrc"


def _send(ns: str, topic: str, n: int, queues: int = 4, first: int = 0, batch: int = 50) -> None:
    async def go() -> None:
        async with Admin(ns) as admin:
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)
        async with Producer("pg_spark_src", namesrv_addr=ns) as p:
            for i in range(first, first + n, batch):
                msgs = [
                    Message(topic, b"m%d" % j, tags="even" if j % 2 == 0 else "odd", keys=[f"k{j}"],
                            properties={"n": str(j)})
                    for j in range(i, min(i + batch, first + n))
                ]  # fmt: skip
                await p.send_batch(msgs)

    asyncio.run(go())


@pytest.fixture
def cluster(daemons: Any) -> str:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    return str(ns.addr)


def _source(ns: str, **opts: str) -> RocketpyDataSource:
    return RocketpyDataSource(CaseInsensitiveDict({"namesrvAddr": ns, "topic": TOPIC, **opts}))


def _rows(reader: Any, parts: list[Any]) -> list[dict[str, Any]]:
    return [row for p in parts for batch in reader.read(p) for row in batch.to_pylist()]


def test_batch_read_all_columns_and_split(cluster: str) -> None:
    _send(cluster, TOPIC, 400)
    reader = _source(cluster, minPartitions="10", pullBatchSize="7").reader(spark_schema())
    parts = reader.partitions()
    assert len(parts) >= 10
    pickle.loads(pickle.dumps(reader))  # Spark pickles the reader and its partitions to workers
    rows = _rows(reader, [pickle.loads(pickle.dumps(p)) for p in parts])
    assert sorted(int(r["body"][1:]) for r in rows) == list(range(400))
    r = next(r for r in rows if r["body"] == b"m7")
    assert (r["topic"], r["broker_name"], r["tags"], r["keys"]) == (TOPIC, "broker-a", "odd", ["k7"])
    assert dict(r["properties"])["n"] == "7" and len(r["msg_id"]) == 32
    assert r["store_timestamp"].tzinfo is not None and r["reconsume_times"] == 0
    assert abs(r["store_timestamp"].timestamp() - time.time()) < 120
    per_queue = {(r["queue_id"], r["queue_offset"]) for r in rows}
    assert len(per_queue) == 400  # no duplicate offsets


def test_json_offsets_tags_and_timestamp(cluster: str) -> None:
    _send(cluster, TOPIC, 200)
    start, end = '{"SparkSrc": {"broker-a:0": 10, "broker-a:1": -2}}', '{"SparkSrc": {"broker-a:0": 20}}'
    reader = _source(cluster, startingOffsets=start, endingOffsets=end).reader(spark_schema())
    rows = _rows(reader, reader.partitions())
    q0 = sorted(r["queue_offset"] for r in rows if r["queue_id"] == 0)
    assert q0 == list(range(10, 20))
    assert sorted(r["queue_offset"] for r in rows if r["queue_id"] == 1) == list(range(50))
    reader = _source(cluster, tags="even").reader(spark_schema())
    rows = _rows(reader, reader.partitions())
    assert len(rows) == 100 and {r["tags"] for r in rows} == {"even"}
    future = str(int(time.time() * 1000) + 60_000)
    reader = _source(cluster, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest")
    assert _rows(reader.reader(spark_schema()), reader.reader(spark_schema()).partitions()) == []
    with pytest.raises(MQClientError, match="no message stored at or after the given time"):
        _source(cluster, startingTimestamp=future).reader(spark_schema()).partitions()  # Kafka's "error"


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"topic": "NoSuchTopic"}, "topic 'NoSuchTopic' does not exist"),
        ({"startingOffsets": '{"SparkSrc": {"broker-a:9": 1}}'}, "queues the topic does not have"),
        ({"startingOffsets": '{"SparkSrc": {"broker-a:0": 5}}',
          "endingOffsets": '{"SparkSrc": {"broker-a:0": 2}}'}, "before its startingOffsets 5"),
        ({"endingOffsets": '{"SparkSrc": {"broker-a:0": 999}}'}, "past the queue's max offset"),
        ({"startingOffsets": "{oops"}, "is not earliest, latest or JSON"),
    ],
)  # fmt: skip
def test_plan_time_errors(cluster: str, opts: dict[str, str], match: str) -> None:
    _send(cluster, TOPIC, 40)
    with pytest.raises(MQClientError, match=match):  # SparkOptionError is one
        _source(cluster, **opts).reader(spark_schema()).partitions()


def test_namesrv_down_fails_fast() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: connections are refused
        t0 = time.monotonic()
        with pytest.raises(MQClientError, match="no NameServer reachable"):
            _source(addr, requestTimeoutMs="2000").reader(spark_schema()).partitions()
    assert time.monotonic() - t0 < 15


def test_stream_offsets_limits_available_now_and_new_queues(cluster: str) -> None:
    _send(cluster, TOPIC, 100, queues=2)
    src = _source(cluster, startingOffsets="earliest", maxOffsetsPerTrigger="30", consumerGroup="spark_g")
    reader = src.streamReader(spark_schema())
    assert reader.getDefaultReadLimit() == ReadMaxRows(30)
    start = reader.initialOffset()
    assert start == {TOPIC: {"broker-a:0": 0, "broker-a:1": 0}}
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {TOPIC: {"broker-a:0": 15, "broker-a:1": 15}}
    reported = reader.reportLatestOffset()
    assert reported is not None and reported[TOPIC] == {"broker-a:0": 50, "broker-a:1": 50}
    assert (reported["minOffsetsBehindLatest"], reported["avgOffsetsBehindLatest"]) == ("35", "35.0")
    assert 0 <= float(reported["maxSecondsBehindLatest"]) < 600  # the oldest unread message's age
    parts = reader.partitions(start, end)
    assert len(_rows(reader, parts)) == 30
    assert reader.latestOffset(start, ReadAllAvailable()) == {TOPIC: {"broker-a:0": 50, "broker-a:1": 50}}

    reader.prepareForTriggerAvailableNow()  # frozen at 50/50: later sends are not part of this run
    _send(cluster, TOPIC, 40, queues=2, first=100)
    e2 = reader.latestOffset(end, ReadMaxRows(1000))
    assert e2 == {TOPIC: {"broker-a:0": 50, "broker-a:1": 50}}
    assert reader.latestOffset(e2, ReadMaxRows(1000)) == e2  # availableNow is done

    reader.commit(e2)
    got = asyncio.run(_committed(cluster, "spark_g", 0))
    assert got == 50

    _send(cluster, TOPIC, 40, queues=4, first=200, batch=10)  # scaled out: queues 2 and 3 appear
    fresh = _source(cluster).streamReader(spark_schema())
    e3 = fresh.latestOffset(e2, ReadAllAvailable())
    assert e3[TOPIC]["broker-a:2"] == 0 and e3[TOPIC]["broker-a:3"] == 0  # joined at earliest
    e4 = fresh.latestOffset(e3, ReadAllAvailable())
    rows = _rows(fresh, fresh.partitions(e2, e3) + fresh.partitions(e3, e4))
    assert sorted(int(r["body"][1:]) for r in rows) == [*range(100, 140), *range(200, 240)]
    assert {r["queue_id"] for r in rows} == {0, 1, 2, 3}  # round robin filled the new queues too


async def _committed(ns: str, group: str, queue_id: int) -> int | None:
    from rocketpy.client.api import MQClientAPI
    from rocketpy.remoting.client import RemotingClient

    async with Admin(ns) as admin:
        route = await admin.topic_route(TOPIC)
        addr = route.broker_datas[0].broker_addrs[0]
    remoting = RemotingClient()
    try:
        return await MQClientAPI(remoting, [ns]).query_consumer_offset(addr, group, TOPIC, queue_id)
    finally:
        await remoting.close()


def test_broker_gone_mid_read_fails_the_task(daemons: Any) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    _send(ns.addr, TOPIC, 200, queues=1)
    reader = _source(ns.addr, requestTimeoutMs="2000").reader(spark_schema())
    parts = reader.partitions()
    broker.kill()
    with pytest.raises(Exception) as err:
        _rows(reader, parts)
    assert getattr(err.value, "retriable", False), err.value  # Spark retries the task
