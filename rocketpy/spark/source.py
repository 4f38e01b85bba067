"""The ``rocketpy`` Spark data source: registration, schema, batch reads and task-side reading.

Owns ``RocketpyDataSource`` (Spark's entry point: options in, readers and writers out),
``BatchReader`` (plans queue ranges on the driver) and ``read_range``, which both batch and
stream readers run in Spark's Python workers: one ``BrokerSession`` per task, pipelined pulls,
one ``pyarrow.RecordBatch`` per chunk (decoded column-wise; tags re-checked exactly). Readers
and partitions hold plain values only: Spark pickles them to other processes; connections are
made inside ``read``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from rocketpy.errors import MQClientError
from rocketpy.spark.brokers import BrokerSession
from rocketpy.spark.convert import keep_tags, to_record_batch
from rocketpy.spark.offsets import QueueRange, queue_name
from rocketpy.spark.options import ReadOptions, SparkOptionError, parse_read_options
from rocketpy.spark.plan import plan_batch
from rocketpy.spark.pull import BrokerUnavailableError, RangeReader
from rocketpy.spark.schema import ARROW_SCHEMA, SCHEMA_DDL

#: Budget of one chunk of a read (many pulls), in call timeouts.
CHUNK_BUDGET_CALLS = 6


class RangePartition(InputPartition):
    """One Spark input partition: a queue range."""

    def __init__(self, r: QueueRange) -> None:
        super().__init__(r)

    @property
    def range(self) -> QueueRange:
        """The queue range to read."""
        assert isinstance(self.value, QueueRange)
        return self.value


def spark_schema() -> StructType:
    """The read schema as a StructType (built without a JVM)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(ARROW_SCHEMA)


def check_schema(schema: StructType) -> None:
    """Refuse a user schema (``.schema(...)``) that is not the source's own."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if not to_arrow_schema(schema, timezone="UTC").equals(ARROW_SCHEMA):
        raise SparkOptionError(
            f"a rocketpy read has the fixed schema `{SCHEMA_DDL}`: drop .schema(...) and select or cast"
            " columns afterwards"
        )


def read_range(opts: ReadOptions, r: QueueRange) -> Iterator[pa.RecordBatch]:
    """The messages of ``r`` as RecordBatches (runs in a Spark worker)."""
    session = BrokerSession(opts.namesrv_addr, opts.timeout_s)
    try:
        try:
            addr = session.run(lambda: session.broker_addr(r.topic, r.broker_name))
        except MQClientError as e:
            if e.retriable:
                raise
            raise BrokerUnavailableError(f"cannot read {queue_name(r.queue)}: {e}") from e
        reader = RangeReader(session.api, addr, r, opts)
        chunks = reader.chunks()

        async def next_chunk() -> bytes | None:
            return await anext(chunks, None)

        budget = opts.timeout_s * CHUNK_BUDGET_CALLS
        try:
            while (body := session.run(next_chunk, budget)) is not None:
                batch = to_record_batch(body, r.broker_name)
                if reader.tags is not None:
                    batch = keep_tags(batch, reader.tags)
                if batch.num_rows:
                    yield batch
        finally:
            session.run(chunks.aclose)
    finally:
        session.close()


class BatchReader(DataSourceReader):
    """``spark.read.format("rocketpy")``: one partition per queue range."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        """Plan the read (asks the NameServer and brokers; plan-time errors are raised here)."""
        return [RangePartition(r) for r in plan_batch(self.opts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one queue range."""
        if not isinstance(partition, RangePartition):
            return iter(())  # nothing to read (empty plan): Spark still runs one placeholder task
        return read_range(self.opts, partition.range)


class RocketpyDataSource(DataSource):
    """Topics of a rocketpy cluster as a Spark data source (``format("rocketpy")``)."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "rocketpy"

    def schema(self) -> str:
        """One row per message (see ``rocketpy.spark.schema``)."""
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> BatchReader:
        """A batch reader (options are checked here)."""
        check_schema(schema)
        return BatchReader(parse_read_options(self.options))

    def streamReader(self, schema: StructType) -> Any:
        """A micro-batch stream reader."""
        from rocketpy.spark.stream import StreamReader

        check_schema(schema)
        return StreamReader(parse_read_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """A batch writer (``mode("append")``)."""
        from rocketpy.spark.sink import BatchWriter

        return BatchWriter(schema, self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """A streaming writer."""
        from rocketpy.spark.sink import StreamWriter

        return StreamWriter(schema, self.options)
