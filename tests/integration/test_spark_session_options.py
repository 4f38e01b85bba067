"""The Spark connector's newer options inside the shared real local[2] SparkSession, real daemons:
time ranges, sqlFilter and tag pushdown, topic patterns, trigger pacing, lag in ``lastProgress``,
plan-time errors, ACL clusters (and the secret kept out of plans, logs and errors), and a stream that
goes on from the slave when its master dies.

Skipped with the reason when pyspark or java is missing (see ``spark_session.skip_reason``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DaemonPool
from tests.integration.spark_session import jvm_log, spark_or_skip
from tests.integration.test_acl import ACL_YML, ADMIN, USER, start_acl_cluster
from tests.integration.test_ha import HA_FAST
from tests.waiting import wait_until

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_or_skip()
    yield session
    session.stop()


@pytest.fixture(scope="module")
def ns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One NameServer and broker for the module's tests (each test has its own topics)."""
    pool = DaemonPool(tmp_path_factory.mktemp("spark_session_options"))
    try:
        namesrv = pool.namesrv()
        pool.broker(namesrv.addr, enablePropertyFilter=True)
        yield str(namesrv.addr)
    finally:
        pool.stop_all()


def send(
    ns: str,
    topic: str,
    bodies: range,
    queues: int = 2,
    keys: tuple[str, str] | None = None,
    *,
    at_once: bool = False,
) -> None:
    """Send ``bodies`` to ``topic`` (created with ``queues``), one by one; ``at_once``: as one batch
    (one queue, one append: a reader sees all of them or none)."""
    from rocketpy import Admin, Message, Producer

    account = {"access_key": keys[0], "secret_key": keys[1]} if keys else {}
    admin_account = {"access_key": ADMIN[0], "secret_key": ADMIN[1]} if keys else {}

    async def go() -> None:
        async with Admin(ns, **admin_account) as admin:  # type: ignore[arg-type]
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)
        async with Producer("pg_spark_session_opt", namesrv_addr=ns, **account) as p:  # type: ignore[arg-type]
            msgs = [
                Message(topic, b"%d" % i, tags="even" if i % 2 == 0 else "odd", properties={"n": str(i)})
                for i in bodies
            ]
            if at_once:
                await p.send_batch(msgs)
                return
            for msg in msgs:
                await p.send(msg)

    asyncio.run(go())


def reader(spark: Any, ns: str, **opts: Any) -> Any:
    r = spark.read.format("rocketpy").option("namesrvAddr", ns)
    for k, v in opts.items():
        r = r.option(k, v)
    return r


def stream(spark: Any, ns: str, **opts: Any) -> Any:
    r = spark.readStream.format("rocketpy").option("namesrvAddr", ns)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def bodies(df: Any) -> list[int]:
    return sorted(int(r.body) for r in df.select("body").collect())


def explained(df: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain("formatted")
    return out.getvalue()


@contextlib.contextmanager
def tag_pushdown(spark: Any) -> Iterator[None]:
    """The session with Spark's Python filter pushdown on and the pushdown source registered."""
    import rocketpy.spark

    spark.conf.set(rocketpy.spark.PUSHDOWN_CONF, "true")
    rocketpy.spark.register(spark, pushdown=True)
    try:
        yield
    finally:
        spark.conf.set(rocketpy.spark.PUSHDOWN_CONF, "false")
        rocketpy.spark.register(spark)


def test_time_ranges_sql_filter_tag_pushdown_and_patterns(spark: Any, ns: str) -> None:
    send(ns, "SpTime", range(30))
    last = max(r.store_timestamp for r in reader(spark, ns, topic="SpTime").load().collect()).timestamp()
    wait_until(lambda: time.time() > last + 0.002, 5.0)
    mid = int(time.time() * 1000)
    send(ns, "SpTime", range(30, 50))
    assert bodies(reader(spark, ns, topic="SpTime", endingTimestamp=mid).load()) == list(range(30))
    assert bodies(reader(spark, ns, topic="SpTime", startingTimestamp=mid).load()) == list(range(30, 50))
    per_queue = json.dumps({"SpTime": {"broker-a:0": mid, "broker-a:1": mid}})
    assert bodies(reader(spark, ns, topic="SpTime", startingOffsetsByTimestamp=per_queue).load()) == list(
        range(30, 50)
    )
    sql = reader(spark, ns, topic="SpTime", sqlFilter="n >= 45").load()
    assert bodies(sql) == list(range(45, 50))

    with tag_pushdown(spark):
        even = reader(spark, ns, topic="SpTime").load().where("tags = 'even' AND queue_id >= 0")
        assert "PushedFilters: [EqualTo(tags,even)]" in explained(even)  # Spark does not filter tags again
        assert bodies(even) == list(range(0, 50, 2))
        among = reader(spark, ns, topic="SpTime", tags="odd||even").load().where("tags IN ('odd', 'x')")
        assert bodies(among) == list(range(1, 50, 2))
    spark.sql(
        "CREATE OR REPLACE TEMPORARY VIEW sp_time USING rocketpy"
        f" OPTIONS (namesrvAddr '{ns}', topicPattern 'SpT.*')"
    )
    counts = spark.sql(
        "SELECT tags, count(*) AS n FROM sp_time WHERE tags IN ('odd', 'none') GROUP BY tags"
    ).collect()
    assert [(r.tags, r.n) for r in counts] == [("odd", 25)]


def test_pattern_stream_picks_up_a_new_topic_and_reports_lag(spark: Any, ns: str) -> None:
    send(ns, "LagA", range(60))
    q = (
        stream(spark, ns, topicPattern="Lag.*", startingOffsets="earliest", maxOffsetsPerTrigger=20)
        .select("topic", "body").writeStream.format("memory").queryName("lag_pattern")
        .trigger(processingTime="500 milliseconds").start()
    )  # fmt: skip
    try:
        first = wait_until(lambda: next((p for p in q.recentProgress if p["numInputRows"]), None), 120.0)
        lag = json.loads(first["sources"][0]["latestOffset"])
        assert lag["LagA"] == {"broker-a:0": 30, "broker-a:1": 30}
        assert int(lag["maxOffsetsBehindLatest"]) > 0 and float(lag["avgOffsetsBehindLatest"]) > 0
        assert float(lag["maxSecondsBehindLatest"]) >= 0 and first["sources"][0]["metrics"] == {}
        send(ns, "LagB", range(100, 110))  # created while the query runs

        def rows() -> int:
            return int(spark.sql("SELECT count(*) AS n FROM lag_pattern").first().n)

        wait_until(lambda: rows() == 70, 120.0, interval=0.5, message="LagB's rows read")
        got = spark.sql("SELECT topic, body FROM lag_pattern").collect()
        assert sorted((r.topic, int(r.body)) for r in got) == sorted(
            [("LagA", i) for i in range(60)] + [("LagB", i) for i in range(100, 110)]
        )
        latest = json.loads(q.lastProgress["sources"][0]["latestOffset"])
        assert latest["maxOffsetsBehindLatest"] == "0" and "LagB" in latest
    finally:
        q.stop()


def test_min_offsets_per_trigger_waits_for_rows(spark: Any, ns: str) -> None:
    send(ns, "SpPace", range(20))
    pace = {"minOffsetsPerTrigger": 50, "maxTriggerDelay": "10m"}
    q = (
        stream(spark, ns, topic="SpPace", startingOffsets="earliest", **pace)
        .writeStream.format("memory").queryName("sp_pace").trigger(processingTime="200 milliseconds").start()
    )  # fmt: skip
    try:
        # a trigger ran and planned nothing: 20 new rows are fewer than 50
        wait_until(lambda: q.status["message"] == "Waiting for next trigger", 120.0, interval=0.2)
        assert not [p for p in q.recentProgress if p["numInputRows"]]
        send(ns, "SpPace", range(20, 60), at_once=True)  # a trigger between sends one by one would see 50-59
        batch = wait_until(lambda: next((p for p in q.recentProgress if p["numInputRows"]), None), 120.0)
        assert batch["numInputRows"] == 60  # one micro-batch once 50 were there
    finally:
        q.stop()


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"topic": "SpBad", "topicPattern": "Sp.*"}, "exactly one of the options topic"),
        ({"topicPattern": "Sp(["}, "option topicPattern"),
        ({"topic": "SpBad", "startingOffsetsByTimestamp": '{"SpBad": {"broker-a:5": 1}}'},
         "option startingOffsetsByTimestamp names queues the topic does not have: SpBad/broker-a:5"),
        ({"topic": "SpBad", "sqlFilter": "n >"}, "option sqlFilter"),
    ],
)  # fmt: skip
def test_bad_input_is_an_analysis_error_naming_the_option(
    spark: Any, ns: str, opts: dict[str, str], match: str
) -> None:
    from pyspark.errors import AnalysisException

    send(ns, "SpBad", range(4))
    with pytest.raises(AnalysisException, match=match):
        reader(spark, ns, **opts).load().count()


def test_min_offsets_with_available_now_fails_at_once(spark: Any, ns: str, tmp_path: Path) -> None:
    from pyspark.errors import StreamingQueryException

    send(ns, "SpBad", range(4))
    q = (
        stream(spark, ns, topic="SpBad", minOffsetsPerTrigger=10).writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    )  # fmt: skip
    with pytest.raises(
        StreamingQueryException, match=r"option minOffsetsPerTrigger .* Trigger\.AvailableNow"
    ):
        q.awaitTermination(120)


# -- ACL --------------------------------------------------------------------------------------------

WRONG_SECRET = "not-the-secret-7f3a9"


def test_acl_cluster_read_and_write(spark: Any, daemons: DaemonPool, tmp_path: Path) -> None:
    from pyspark.errors import AnalysisException

    ns, _ = start_acl_cluster(daemons, tmp_path / "plain_acl.yml")
    send(ns, "TopicA", range(12), keys=USER)
    send(ns, "TopicB", range(0), keys=ADMIN)
    account = {"accessKey": USER[0], "secretKey": USER[1]}
    assert bodies(reader(spark, ns, topic="TopicA", **account).load()) == list(range(12))
    with pytest.raises(AnalysisException, match=r"access denied.*give the options accessKey and secretKey"):
        reader(spark, ns, topic="TopicA").load().count()

    rows = spark.range(100, 110).selectExpr("cast(id AS string) AS body")
    writer = rows.write.format("rocketpy").mode("append").option("namesrvAddr", ns)
    writer.option("topic", "TopicA").option("accessKey", USER[0]).option("secretKey", USER[1]).save()
    assert bodies(reader(spark, ns, topic="TopicA", **account).load()) == [*range(12), *range(100, 110)]
    with pytest.raises(AnalysisException, match=r"access denied.*accessKey"):  # refused when Spark plans
        rows.write.format("rocketpy").mode("append").option("namesrvAddr", ns).option(
            "topic", "TopicA"
        ).save()
    with pytest.raises(Exception, match="access denied") as denied:  # TopicB: SUB only, the send is refused
        writer.option("topic", "TopicB").option("accessKey", USER[0]).option("secretKey", USER[1]).save()
    assert "NO_PERMISSION" in str(denied.value) or "access denied" in str(denied.value)


#: producer01's secret in this test's ACL file: text found nowhere else by chance.
DISTINCT = ("producer01", "Sp4rk-secret-Qz81x")


def test_the_secret_is_in_no_plan_log_or_error(spark: Any, daemons: DaemonPool, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl = {"aclEnable": True, "aclFile": acl_file}
    acl_file.write_text(ACL_YML.replace(f"secretKey: {USER[1]}", f"secretKey: {DISTINCT[1]}"))
    namesrv = daemons.namesrv(**acl)
    daemons.broker(namesrv.addr, aclAccessKey=ADMIN[0], aclSecretKey=ADMIN[1], **acl)
    ns = str(namesrv.addr)
    send(ns, "TopicA", range(6), keys=DISTINCT)
    spark.sparkContext.setLogLevel("INFO")  # Spark's own logs of the plans and jobs too
    try:
        seen = secret_uses(spark, ns, tmp_path)
    finally:
        spark.sparkContext.setLogLevel("OFF")
    text = "\n".join(seen) + jvm_log().read_text(errors="replace")
    text += "".join(d.stderr_text() for d in daemons.started)
    text += "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.log"))
    assert "PythonMicroBatchStream" in text  # the logs were written, Spark's INFO lines among them
    for secret in (DISTINCT[1], DISTINCT[1][:-1], WRONG_SECRET):
        assert secret not in text


def secret_uses(spark: Any, ns: str, tmp_path: Path) -> list[str]:
    """Plans, progress and errors of reads that carry the secret in their options."""
    from pyspark.errors import AnalysisException

    seen: list[str] = []
    df = reader(spark, ns, topic="TopicA", accessKey=DISTINCT[0], secretKey=DISTINCT[1]).load()
    seen.append(explained(df.where("tags = 'odd'")))
    seen.append(explained(df))
    assert df.count() == 6
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW acl_v USING rocketpy OPTIONS (namesrvAddr '{ns}', topic 'TopicA',"
        f" accessKey '{DISTINCT[0]}', secretKey '{DISTINCT[1]}')"
    )
    seen.append(spark.sql("EXPLAIN EXTENDED SELECT * FROM acl_v").first()[0])
    seen.append(str(spark.sql("SELECT count(*) FROM acl_v").first()[0]))
    account = {"accessKey": DISTINCT[0], "secretKey": DISTINCT[1]}
    q = (
        stream(spark, ns, topic="TopicA", startingOffsets="earliest", **account)
        .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    assert q.awaitTermination(120)
    seen.append("".join(str(p) for p in q.recentProgress))
    for opts in ({"secretKey": WRONG_SECRET}, {"secretKey": DISTINCT[1][:-1]}):
        with pytest.raises(AnalysisException) as err:
            reader(spark, ns, topic="TopicA", accessKey=DISTINCT[0], **opts).load().count()
        seen.append(str(err.value))
        assert "access denied" in str(err.value)
    return seen


# -- failover -------------------------------------------------------------------------------------------


def test_a_stream_goes_on_from_the_slave_when_the_master_dies(spark: Any, daemons: DaemonPool) -> None:
    from tests.integration.test_spark_source_options import slave_holds

    namesrv = daemons.namesrv()
    conf = {**HA_FAST, "syncFlushTimeout": 3000}
    master = daemons.broker(namesrv.addr, brokerName="broker-a", brokerRole="SYNC_MASTER", **conf)
    slave = daemons.broker(namesrv.addr, brokerName="broker-a", brokerId=1, brokerRole="SLAVE", **conf)
    ns = str(namesrv.addr)
    send(ns, "SpHa", range(600))
    wait_until(
        lambda: slave_holds(ns, slave.addr, "SpHa", 600), 30.0, message="the slave holds every message"
    )
    opts = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": 100, "requestTimeoutMs": 3000}
    q = (
        stream(spark, ns, topic="SpHa", **opts)
        .select("queue_id", "queue_offset", "body").writeStream.format("memory").queryName("sp_ha")
        .trigger(processingTime="300 milliseconds").start()
    )  # fmt: skip
    try:
        wait_until(lambda: any(p["numInputRows"] for p in q.recentProgress), 120.0, message="a first batch")
        master.kill()

        def rows() -> int:
            if q.exception() is not None:
                raise AssertionError(f"the query failed: {q.exception()}")
            return int(spark.sql("SELECT count(*) AS n FROM sp_ha").first().n)

        wait_until(lambda: rows() >= 600, 180.0, interval=0.5, message="every row read, from the slave")
        got = spark.sql("SELECT queue_id, queue_offset, body FROM sp_ha").collect()
        assert len({(r.queue_id, r.queue_offset) for r in got}) == len(got) == 600  # none twice
        assert sorted(int(r.body) for r in got) == list(range(600))
    finally:
        q.stop()
