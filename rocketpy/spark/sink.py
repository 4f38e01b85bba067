"""Writing DataFrames to topics: ``df.write.format("rocketpy")`` and ``writeStream``.

Owns the batch and stream writers and their delivery. Each Spark task converts its rows
(``rocketpy.spark.rows``) and sends them with the SDK's ``Producer`` on a private event loop:
rows without routing go out as batch sends of up to ``BATCH_ROWS`` per topic, rows with
``queue_id`` or ``orderKey`` as single sends to the chosen queue; at most ``MAX_IN_FLIGHT``
sends are unfinished at a time. A task returns a ``SentPartition`` commit message.

Delivery is **at-least-once and not atomic**: rows are visible as soon as their task sends them;
a failed job or task retry may leave rows of the failed attempt in the topic, and a replayed
streaming micro-batch is sent again. ``PlainDelivery`` is the one place that decides this: its
``send_partition`` / ``commit`` / ``abort`` are the hooks a transactional delivery (half
messages per task, END_TRANSACTION commit or rollback from the driver, keyed on the job id and
streaming batch id the commit messages already carry) replaces without touching the writers.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import uvloop
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from rocketpy.client.producer import Producer
from rocketpy.client.selector import select_by_hash
from rocketpy.errors import MQClientError
from rocketpy.message import Message, MessageQueue
from rocketpy.spark.options import WriteOptions, parse_write_options
from rocketpy.spark.rows import WriteLayout, check_layout, to_message

log = logging.getLogger("rocketpy.spark")

BATCH_ROWS = 256
MAX_IN_FLIGHT = 64


@dataclass
class SentPartition(WriterCommitMessage):
    """What one task sent (travels from the task to the driver's commit or abort)."""

    job_id: str
    partition_id: int
    attempt: int
    rows: int
    batch_id: int | None = None


def _select_queue_id(queues: list[MessageQueue], msg: Message, queue_id: Any) -> MessageQueue:
    for mq in queues:
        if mq.queue_id == int(queue_id):
            return mq
    raise MQClientError(
        f"topic {msg.topic!r} has no writable queue {queue_id} (queues 0..{len(queues) - 1}): fix queue_id"
    )


async def _send_rows(opts: WriteOptions, layout: WriteLayout, rows: Iterator[Any]) -> int:
    """Send every row; returns how many (raises on the first failed send)."""
    in_flight: deque[asyncio.Future[Any]] = deque()
    buffers: dict[str, list[Message]] = {}
    selector = _select_queue_id if layout.routing == "queue_id" else select_by_hash
    count = 0
    async with Producer(opts.producer_group, opts.namesrv_addr, send_timeout=opts.timeout_s) as producer:

        async def launch(fut: asyncio.Future[Any]) -> None:
            in_flight.append(fut)
            if len(in_flight) >= MAX_IN_FLIGHT:
                await in_flight.popleft()

        try:
            for count, row in enumerate(rows, 1):
                msg, route = to_message(layout, row, count - 1)
                if route is not None:
                    await launch(producer.send_async(msg, selector=selector, arg=route))
                    continue
                buf = buffers.setdefault(msg.topic, [])
                buf.append(msg)
                if len(buf) >= BATCH_ROWS:
                    await launch(asyncio.ensure_future(producer.send_batch(buf)))
                    buffers[msg.topic] = []
            for buf in buffers.values():
                if buf:
                    await launch(asyncio.ensure_future(producer.send_batch(buf)))
            while in_flight:
                await in_flight.popleft()
        finally:
            for fut in in_flight:
                fut.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)
    return count


class PlainDelivery:
    """At-least-once delivery: plain sends in the tasks; commit and abort only report."""

    def send_partition(
        self, opts: WriteOptions, layout: WriteLayout, job_id: str, rows: Iterator[Any], batch_id: int | None
    ) -> SentPartition:
        """Send one task's rows (in a Spark worker)."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition_id, attempt = (ctx.partitionId(), ctx.attemptNumber()) if ctx else (0, 0)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            sent = runner.run(_send_rows(opts, layout, rows))
        return SentPartition(job_id, partition_id, attempt, sent, batch_id)

    def commit(self, messages: list[Any], job_id: str) -> None:
        """Every task succeeded: the rows are already visible."""
        rows = sum(m.rows for m in messages if isinstance(m, SentPartition))
        log.info("rocketpy write %s: %d rows sent by %d tasks", job_id, rows, len(messages))

    def abort(self, messages: list[Any], job_id: str) -> None:
        """The job failed: rows its tasks already sent stay in the topic (at-least-once)."""
        rows = sum(m.rows for m in messages if isinstance(m, SentPartition))
        log.warning(
            "rocketpy write %s aborted: %d rows already sent stay visible (writes are at-least-once)",
            job_id,
            rows,
        )


def _layout(schema: StructType, opts: WriteOptions) -> WriteLayout:
    return check_layout([(f.name, f.dataType.simpleString()) for f in schema.fields], opts.topic)


class BatchWriter(DataSourceWriter):
    """``df.write.format("rocketpy").mode("append")``: each task sends its rows."""

    def __init__(self, schema: StructType, options: Any) -> None:
        self.opts = parse_write_options(options)
        self.layout = _layout(schema, self.opts)
        self.job_id = uuid.uuid4().hex  # pickled with the writer: the same in tasks, commit, abort
        self.delivery = PlainDelivery()

    def write(self, iterator: Iterator[Any]) -> SentPartition:
        """Send one partition."""
        return self.delivery.send_partition(self.opts, self.layout, self.job_id, iterator, None)

    def commit(self, messages: list[Any]) -> None:
        """All tasks succeeded."""
        self.delivery.commit(messages, self.job_id)

    def abort(self, messages: list[Any]) -> None:
        """A task failed for good."""
        self.delivery.abort(messages, self.job_id)


class StreamWriter(DataSourceStreamWriter):
    """``writeStream.format("rocketpy")``: each micro-batch's tasks send their rows."""

    def __init__(self, schema: StructType, options: Any) -> None:
        self.opts = parse_write_options(options)
        self.layout = _layout(schema, self.opts)
        self.job_id = uuid.uuid4().hex
        self.delivery = PlainDelivery()

    def write(self, iterator: Iterator[Any]) -> SentPartition:
        """Send one partition of a micro-batch."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        raw = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
        batch_id = int(raw) if raw is not None else None
        return self.delivery.send_partition(self.opts, self.layout, self.job_id, iterator, batch_id)

    def commit(self, messages: list[Any], batchId: int) -> None:
        """The micro-batch is done."""
        self.delivery.commit(messages, f"{self.job_id}/batch {batchId}")

    def abort(self, messages: list[Any], batchId: int) -> None:
        """The micro-batch failed."""
        self.delivery.abort(messages, f"{self.job_id}/batch {batchId}")
