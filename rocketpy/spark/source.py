"""The ``rocketpy`` Spark data source: registration, schema, batch reads and task-side reading.

Owns ``RocketpyDataSource`` (Spark's entry point: options in, readers and writers out),
``BatchReader`` (plans queue ranges on the driver; ``PushdownBatchReader`` adds Spark's
``pushFilters`` for ``tags``) and ``read_range``, which both batch and stream readers run in
Spark's Python workers: one ``BrokerSession`` per task, pipelined pulls, one ``pyarrow.RecordBatch``
per chunk (decoded column-wise; tags re-checked exactly). Readers and partitions hold plain values
only: Spark pickles them to other processes; connections are made inside ``read``.

Spark refuses a reader that implements ``pushFilters`` when ``spark.sql.python.filterPushdown.enabled``
is false (its default), and a data source cannot see that setting; and Spark 4.3 reuses the read a
pushdown planned for a later query on the same DataFrame that pushes no filter. So pushdown is
``PushdownDataSource`` (same name), registered only by ``register(spark, pushdown=True)``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from rocketpy.record_columns import Buffer
from rocketpy.spark.brokers import BrokerSession, BrokerUnavailableError, TopicNotFoundError
from rocketpy.spark.convert import keep_tags, to_record_batch
from rocketpy.spark.filters import push_tag_filters
from rocketpy.spark.offsets import QueueRange, queue_name
from rocketpy.spark.options import ReadOptions, SparkOptionError, parse_read_options
from rocketpy.spark.plan import plan_batch, session_for
from rocketpy.spark.pull import RangeReader
from rocketpy.spark.schema import ARROW_SCHEMA, SCHEMA_DDL

log = logging.getLogger("rocketpy.spark")

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


def _broker_alive(session: BrokerSession, broker_name: str) -> bool:
    """True when ``broker_name`` is registered now (so its topic's missing route means deleted)."""

    async def go() -> bool:
        info = await session.api.get_broker_cluster_info(session.timeout_s)
        return broker_name in (info.get("brokerAddrTable") or {})

    return session.run(go)


def read_range(opts: ReadOptions, r: QueueRange) -> Iterator[pa.RecordBatch]:
    """The messages of ``r`` as RecordBatches (runs in a Spark worker).

    A topic of a ``topicPattern`` read deleted since the plan (no route while its broker is
    registered) yields nothing (logged); any other missing route fails the task, retriable.
    """
    session = session_for(opts)
    try:

        async def locate(fresh: bool) -> list[str]:
            return await session.members(r.topic, r.broker_name, fresh)

        reader = RangeReader(session.api, locate, r, opts)
        chunks = reader.chunks()

        async def next_chunk() -> list[Buffer] | None:
            return await anext(chunks, None)

        budget = opts.timeout_s * CHUNK_BUDGET_CALLS
        try:
            while (body := session.run(next_chunk, budget)) is not None:
                batch = to_record_batch(body, r.broker_name)
                if reader.tags is not None:
                    batch = keep_tags(batch, reader.tags)
                if batch.num_rows:
                    yield batch
        except TopicNotFoundError as e:
            if opts.topic_pattern is None or not _broker_alive(session, r.broker_name):
                raise BrokerUnavailableError(f"cannot read {queue_name(r.queue)}: {e}") from e
            q = queue_name(r.queue)
            log.warning("%s: the topic was deleted; offsets [%d, %d) are not read", q, r.start, r.end)
        finally:
            session.run(chunks.aclose)
    finally:
        session.close()


class BatchReader(DataSourceReader):
    """``spark.read.format("rocketpy")``: one partition per queue range."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.nothing = False  # pushed filters no row can pass

    def partitions(self) -> list[InputPartition]:
        """Plan the read (asks the NameServer and brokers; plan-time errors are raised here)."""
        if self.nothing:
            return []
        return [RangePartition(r) for r in plan_batch(self.opts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one queue range."""
        if not isinstance(partition, RangePartition):
            return iter(())  # nothing to read (empty plan): Spark still runs one placeholder task
        return read_range(self.opts, partition.range)


class PushdownBatchReader(BatchReader):
    """A batch reader that takes Spark's ``tags = ...`` / ``tags IN (...)`` filters to the broker."""

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        """Narrow the read's tags by the tag filters; return the filters Spark must still apply."""
        allowed, kept = push_tag_filters(self.opts, filters)
        if allowed is not None:
            self.nothing = not allowed
            self.opts = dataclasses.replace(self.opts, tags="||".join(sorted(allowed)) or "*")
        return kept


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
        """A micro-batch stream reader (batch-only options are refused here)."""
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


class PushdownDataSource(RocketpyDataSource):
    """``RocketpyDataSource`` whose batch reader takes tag filters (``register(spark, pushdown=True)``)."""

    def reader(self, schema: StructType) -> BatchReader:
        """A batch reader with ``pushFilters``."""
        check_schema(schema)
        return PushdownBatchReader(parse_read_options(self.options))
