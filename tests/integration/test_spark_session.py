"""The Spark connector inside a real local[2] SparkSession (one for all tests), real daemons.

Skipped with the reason when pyspark or java is missing (see ``spark_session.skip_reason``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.spark_session import spark_or_skip

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_or_skip()
    yield session
    session.stop()


@pytest.fixture
def ns(daemons: Any) -> str:
    namesrv = daemons.namesrv()
    daemons.broker(namesrv.addr)
    return str(namesrv.addr)


def _send(ns: str, topic: str, n: int, first: int = 0, queues: int = 4) -> None:
    from rocketpy import Admin, Message, Producer

    async def go() -> None:
        async with Admin(ns) as admin:
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues)
        async with Producer("pg_spark_session", namesrv_addr=ns) as p:
            for i in range(first, first + n, 25):
                stop = min(i + 25, first + n)
                await p.send_batch([Message(topic, b"%d" % j, tags="t") for j in range(i, stop)])

    asyncio.run(go())


def _reader(spark: Any, ns: str, topic: str) -> Any:
    return spark.read.format("rocketpy").option("namesrvAddr", ns).option("topic", topic)


def test_batch_read_sql_and_plan_errors(spark: Any, ns: str) -> None:
    _send(ns, "SparkBatch", 300)
    df = _reader(spark, ns, "SparkBatch").option("minPartitions", 6).load()
    assert df.count() == 300
    assert df.rdd.getNumPartitions() >= 6
    bodies = {int(r.body) for r in df.select("body").collect()}
    assert bodies == set(range(300))
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW sb USING rocketpy OPTIONS (namesrvAddr '{ns}', topic 'SparkBatch')"
    )
    assert spark.sql("SELECT count(DISTINCT queue_id, queue_offset) AS n FROM sb").first().n == 300
    with pytest.raises(Exception, match="does not exist"):
        _reader(spark, ns, "NoSuchTopic").load().count()
    with pytest.raises(Exception, match="did you mean 'startingOffsets'"):
        _reader(spark, ns, "SparkBatch").option("startingOffset", "earliest").load().count()


def _run_available_now(spark: Any, ns: str, topic: str, out: Path, checkpoint: Path) -> list[Any]:
    q = (
        spark.readStream.format("rocketpy")
        .option("namesrvAddr", ns)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 60)
        .load()
        .selectExpr("queue_id", "queue_offset", "cast(body as string) AS body")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180), "the availableNow query did not finish"
    return [p for p in q.recentProgress if p["numInputRows"] > 0]


def test_stream_available_now_limit_and_resume(spark: Any, ns: str, tmp_path: Path) -> None:
    _send(ns, "SparkStream", 200)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    batches = _run_available_now(spark, ns, "SparkStream", out, checkpoint)
    assert len(batches) == 4 and all(b["numInputRows"] <= 60 for b in batches)
    _send(ns, "SparkStream", 100, first=200)
    _run_available_now(spark, ns, "SparkStream", out, checkpoint)  # resumes from the checkpoint
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(int(r.body) for r in rows) == list(range(300))  # no loss, no duplicate


def test_batch_and_stream_write(spark: Any, ns: str, tmp_path: Path) -> None:
    _send(ns, "SparkIn", 100)
    _send(ns, "SparkOut", 0)
    df = spark.range(40).selectExpr(
        "cast(id as string) AS body", "'w' AS tags", "array('k1', 'k2') AS keys",
        "map('src', 'spark') AS properties", "cast(id % 2 AS int) AS queue_id",
    )  # fmt: skip
    df.write.format("rocketpy").mode("append").option("namesrvAddr", ns).option("topic", "SparkOut").save()
    back = _reader(spark, ns, "SparkOut").load()
    rows = back.collect()
    assert sorted(int(r.body) for r in rows) == list(range(40))
    assert {(r.tags, tuple(r.keys), r.properties["src"]) for r in rows} == {("w", ("k1", "k2"), "spark")}
    assert all(int(r.body) % 2 == r.queue_id for r in rows)
    with pytest.raises(Exception, match="did you mean 'body'"):
        spark.range(1).selectExpr("'x' AS bodi").write.format("rocketpy").mode("append").option(
            "namesrvAddr", ns
        ).option("topic", "SparkOut").save()

    q = (
        spark.readStream.format("rocketpy")
        .option("namesrvAddr", ns)
        .option("topic", "SparkIn")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("body", "'copied' AS tags", "cast(body as string) AS orderKey")
        .writeStream.format("rocketpy")
        .option("namesrvAddr", ns)
        .option("topic", "SparkOut")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180)
    copied = _reader(spark, ns, "SparkOut").load().where("tags = 'copied'").collect()  # a new plan
    assert sorted(int(r.body) for r in copied) == list(range(100))


@pytest.mark.parametrize("transactional", ["true", "false"])
def test_a_replayed_micro_batch_is_written_once(
    spark: Any, ns: str, tmp_path: Path, transactional: str
) -> None:
    src, dst = f"SparkReplay{transactional}", f"SparkReplayOut{transactional}"
    _send(ns, src, 60)
    _send(ns, dst, 0)
    checkpoint = tmp_path / "cp"

    def run() -> list[Any]:
        q = (
            spark.readStream.format("rocketpy").option("namesrvAddr", ns).option("topic", src)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 20).load()
            .select("body").writeStream.format("rocketpy").option("namesrvAddr", ns).option("topic", dst)
            .option("transactional", transactional).option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        assert q.awaitTermination(180), "the availableNow query did not finish"
        return [p["batchId"] for p in q.recentProgress if p["numInputRows"] > 0]

    assert run() == [0, 1, 2]
    # the driver "died" after the sink's commit of batch 2, before Spark's commit log recorded it
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    assert run() == [2]  # Spark replays batch 2 in a new run
    rows = _reader(spark, ns, dst).load().collect()
    assert sorted(int(r.body) for r in rows) == list(range(60))  # each row once


def test_failed_batch_write_leaves_nothing_visible(spark: Any, ns: str) -> None:
    _send(ns, "SparkAtomic", 0)
    df = spark.range(0, 40, 1, 4).selectExpr(
        "CASE WHEN id = 35 THEN raise_error('row 35 is bad') ELSE cast(id AS string) END AS body"
    )  # three tasks succeed, the fourth fails: the job aborts
    with pytest.raises(Exception, match="row 35 is bad"):
        df.write.format("rocketpy").mode("append").option("namesrvAddr", ns).option(
            "topic", "SparkAtomic"
        ).save()
    assert _reader(spark, ns, "SparkAtomic").load().count() == 0  # nothing of the failed job is visible
    ok = spark.range(0, 40, 1, 4).selectExpr("cast(id AS string) AS body")
    ok.write.format("rocketpy").mode("append").option("namesrvAddr", ns).option("topic", "SparkAtomic").save()
    assert sorted(int(r.body) for r in _reader(spark, ns, "SparkAtomic").load().collect()) == list(range(40))
