"""A Spark driver on ``local[2,2]`` (a failed task is tried again) whose first partition's first
attempt fails after handing Spark part of its rows; the retried attempt reads the range again.

python -m tests.integration.spark_retry_worker NAMESRV TOPIC MARKER_DIR OUT

Reads TOPIC twice through the failing source, a batch ``collect()`` and an availableNow stream
into parquet at OUT, and prints each read's sorted ``[queue_id, queue_offset]`` pairs as JSON lines
(``batch [...]``, ``stream [...]``). An attempt that fails writes a file in MARKER_DIR first, so
the test can check that a retry really happened.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from rocketpy.spark.local import local_session
from rocketpy.spark.source import BatchReader, RangePartition, RocketpyDataSource, read_range
from rocketpy.spark.stream import StreamReader

#: Where a failing first attempt leaves its marker (set before the session starts: the workers
#: inherit the driver's environment).
MARKER_ENV = "ROCKETPY_TEST_RETRY_MARKERS"


def fail_first_attempt(kind: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``; on partition 0's first attempt, the first one only, then a task failure."""
    ctx = TaskContext.get()
    if ctx is None or ctx.partitionId() != 0 or ctx.attemptNumber() != 0:
        yield from batches
        return
    yield next(batches)
    Path(os.environ[MARKER_ENV], f"{kind}-stage{ctx.stageId()}-failed").touch()
    raise RuntimeError("the first attempt of partition 0 fails on purpose (task retry test)")


class FailingBatchReader(BatchReader):
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return fail_first_attempt("batch", read_range(self.opts, partition.range))


class FailingStreamReader(StreamReader):
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return fail_first_attempt("stream", read_range(self.opts, partition.range))


class FailingSource(RocketpyDataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketpy_failing"

    def reader(self, schema: StructType) -> BatchReader:
        return FailingBatchReader(super().reader(schema).opts)

    def streamReader(self, schema: StructType) -> Any:
        return FailingStreamReader(super().streamReader(schema).opts)


def main() -> None:
    ns, topic, markers, out = sys.argv[1:5]
    os.environ[MARKER_ENV] = markers
    spark = local_session("rocketpy-retry-test", master="local[2,2]")
    spark.dataSource.register(FailingSource)
    try:
        df = spark.read.format("rocketpy_failing").option("namesrvAddr", ns).option("topic", topic).load()
        rows = df.select("queue_id", "queue_offset").collect()
        print("batch " + json.dumps(sorted([r.queue_id, r.queue_offset] for r in rows)), flush=True)
        q = (
            spark.readStream.format("rocketpy_failing").option("namesrvAddr", ns).option("topic", topic)
            .option("startingOffsets", "earliest").load().select("queue_id", "queue_offset")
            .writeStream.format("parquet").option("path", out).option("checkpointLocation", out + "-cp")
            .trigger(availableNow=True).start()
        )  # fmt: skip
        q.awaitTermination(300)
        rows = spark.read.parquet(out).collect()
        print("stream " + json.dumps(sorted([r.queue_id, r.queue_offset] for r in rows)), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
