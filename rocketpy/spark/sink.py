"""Writing DataFrames to topics: ``df.write.format("rocketpy")`` and ``writeStream``.

Owns the batch and stream writers and their delivery. Each Spark task converts its rows
(``rocketpy.spark.rows``) and sends them with the SDK on a private event loop, at most
``MAX_IN_FLIGHT`` sends unfinished at a time; it returns a ``SentPartition`` commit message.

``TransactionalDelivery`` (default, option ``transactional=true``): a task sends every row as a
transactional **half message** (invisible to consumers) and returns where they are stored; the
driver's ``commit`` commits all of them (END_TRANSACTION COMMIT), its ``abort`` rolls back those of
the tasks that had finished, and a failing task attempt rolls back its own before it fails. A
write is thus all-or-nothing per job (per micro-batch for streams) with two limits: the commit is
many END_TRANSACTIONs, so rows become visible over the commit's duration, not at one instant; and
a driver that dies *during* the commit leaves part committed. Half messages whose driver died
before deciding stay invisible; past ``transactionTimeoutMs`` the broker checks them with a live
producer of the group (a task of a later write), which rolls back halves of any other write
(and answers UNKNOW for its own). ``PlainDelivery`` (``transactional=false``): plain (batch)
sends, visible at once, at-least-once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from array import array
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import uvloop
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from rocketpy.addresses import parse_namesrv_addrs
from rocketpy.client.api import MQClientAPI
from rocketpy.client.producer import Producer
from rocketpy.client.results import SendResult, SendStatus
from rocketpy.client.selector import select_by_hash
from rocketpy.client.transaction import LocalTransactionState
from rocketpy.client.transaction_producer import TransactionProducer
from rocketpy.errors import AccessDeniedError, MQClientError, RocketpyError
from rocketpy.message import Message, MessageConst, MessageExt, MessageQueue
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.remoting.client import RemotingClient
from rocketpy.spark.auth import SparkAccessError, refused
from rocketpy.spark.brokers import BrokerSession, run_on
from rocketpy.spark.ledger import (
    LEDGER_NAMESPACE,
    Decisions,
    parse_job_key,
    read_decisions,
    stream_job_key,
    write_decisions,
)
from rocketpy.spark.options import WriteOptions, parse_write_options
from rocketpy.spark.rows import WriteLayout, check_layout, to_message

log = logging.getLogger("rocketpy.spark")
T = TypeVar("T")

BATCH_ROWS = 256
MAX_IN_FLIGHT = 64
#: Property on every half message of a write: its job key (checks tell writes apart by it).
JOB_PROPERTY = "rocketpySparkJob"

#: Half messages of one task per broker address: flat (commitlog offset, half-queue offset) pairs.
Halves = dict[str, array]


@dataclass(frozen=True)
class StreamBatch:
    """A micro-batch as one run of a streaming query executes it (the ledger's key)."""

    query_id: str
    batch_id: int
    run_id: str

    @property
    def key(self) -> str:
        """The job key of its half messages and producers."""
        return stream_job_key(self.query_id, self.batch_id, self.run_id)

    @classmethod
    def of_task(cls) -> StreamBatch | None:
        """The micro-batch of the running Spark task (None outside a streaming query).

        Spark sets the query id (kept in the checkpoint), the batch id and the run id (new at each
        start of the query, as the job group) as local properties of every task of a micro-batch.
        """
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return None
        query, batch, run = (
            ctx.getLocalProperty(name)
            for name in ("sql.streaming.queryId", "streaming.sql.batchId", "spark.jobGroup.id")
        )
        if not (query and run and batch and batch.isdigit()):
            return None
        return cls(query, int(batch), run)


@dataclass
class SentPartition(WriterCommitMessage):
    """What one task sent (travels from the task to the driver's commit or abort)."""

    job_id: str
    partition_id: int
    attempt: int
    rows: int
    stream: StreamBatch | None = None
    halves: Halves = field(default_factory=dict)  # TransactionalDelivery: what the driver decides
    replay: bool = False  # the micro-batch was already decided: nothing was sent


def _select_queue_id(queues: list[MessageQueue], msg: Message, queue_id: Any) -> MessageQueue:
    for mq in queues:
        if mq.queue_id == int(queue_id):
            return mq
    raise MQClientError(
        f"topic {msg.topic!r} has no writable queue {queue_id} (queues 0..{len(queues) - 1}): fix queue_id"
    )


class InFlight:
    """At most ``MAX_IN_FLIGHT`` unfinished awaitables; the first failure is raised (the rest cancelled)."""

    def __init__(self) -> None:
        self._futs: deque[asyncio.Future[Any]] = deque()

    async def add(self, aw: Awaitable[Any]) -> None:
        self._futs.append(asyncio.ensure_future(aw))
        if len(self._futs) >= MAX_IN_FLIGHT:
            await self._futs.popleft()

    async def drain(self) -> None:
        while self._futs:
            await self._futs.popleft()

    async def settle(self) -> None:
        """Let every unfinished one end (each send is bounded by its timeout); errors are dropped."""
        await asyncio.gather(*self._futs, return_exceptions=True)
        self._futs.clear()

    async def cancel(self) -> None:
        for fut in self._futs:
            fut.cancel()
        await asyncio.gather(*self._futs, return_exceptions=True)
        self._futs.clear()


#: Sends a batch of one topic: to the given queue, or round robin (None).
SendBatch = Callable[[list[Message], MessageQueue | None], Awaitable[Any]]


def _chosen(queues: list[MessageQueue], msg: Message, mq: MessageQueue) -> MessageQueue:
    """The selector of a batch whose queue was chosen per row already (``_dispatch_rows``)."""
    return mq


async def _dispatch_rows(
    layout: WriteLayout,
    rows: Iterator[Any],
    window: InFlight,
    queues_of: Callable[[str], Awaitable[list[MessageQueue]]],
    send: SendBatch,
    mark: Callable[[Message], None] | None = None,
) -> int:
    """Convert every row and send them through ``window`` in batches of ``BATCH_ROWS``: a routed
    row (``queue_id``/``orderKey``) to the queue its selector picks among ``queues_of(topic)``
    (rows of a queue keep their order), the others per topic round robin. ``mark`` may add
    properties first. Returns the row count; raises the first failed send."""
    selector = _select_queue_id if layout.routing == "queue_id" else select_by_hash
    queues: dict[str, list[MessageQueue]] = {}
    buffers: dict[tuple[str, MessageQueue | None], list[Message]] = {}
    count = 0
    for count, row in enumerate(rows, 1):
        msg, route = to_message(layout, row, count - 1)
        if mark is not None:
            mark(msg)
        mq = None
        if route is not None:
            if msg.topic not in queues:
                queues[msg.topic] = await queues_of(msg.topic)
            mq = selector(queues[msg.topic], msg, route)
        buf = buffers.setdefault((msg.topic, mq), [])
        buf.append(msg)
        if len(buf) >= BATCH_ROWS:
            await window.add(send(buf, mq))
            buffers[(msg.topic, mq)] = []
    for (_, mq), buf in buffers.items():
        if buf:
            await window.add(send(buf, mq))
    await window.drain()
    return count


async def _send_rows(opts: WriteOptions, layout: WriteLayout, rows: Iterator[Any]) -> int:
    """Send every row as plain messages; returns how many (raises on the first failed send)."""
    account = opts.credentials.sdk_kwargs()
    producer = Producer(opts.producer_group, opts.namesrv_addr, send_timeout=opts.timeout_s, **account)
    async with producer:

        def send(msgs: list[Message], mq: MessageQueue | None) -> Awaitable[Any]:
            return producer.send_batch(msgs, selector=_chosen if mq else None, arg=mq)

        window = InFlight()
        try:
            return await _dispatch_rows(layout, rows, window, producer.fetch_publish_message_queues, send)
        finally:
            await window.cancel()


class JobListener:
    """The transaction listener of a write's producers (tasks and driver).

    Rows are sent with ``send_half`` and decided by the driver, so only checks come here, for half
    messages past their ``transactionTimeoutMs``: one of this write is still being decided
    (UNKNOW). One of another write was left by a driver that failed or died: a micro-batch that
    the ledger says its run decided is committed (the driver died during the commit), anything
    else is rolled back. When the ledger cannot be read the answer is UNKNOW (asked again later).
    """

    def __init__(self, job_key: str, opts: WriteOptions) -> None:
        self.job_key = job_key
        self.namesrv_addrs = parse_namesrv_addrs(opts.namesrv_addr)
        self.timeout_s = opts.timeout_s
        self.credentials = opts.credentials

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW  # not called: halves are sent with send_half

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        key = msg.properties.get(JOB_PROPERTY, "?")
        if key == self.job_key:
            return LocalTransactionState.UNKNOW
        stream = parse_job_key(key)
        if stream is not None:
            query_id, batch_id, run_id = stream
            try:
                decisions = await self._decisions(query_id)
            except RocketpyError as e:
                log.warning(
                    "cannot read the sink ledger to check a row of %s (%s); the broker asks again", key, e
                )
                return LocalTransactionState.UNKNOW
            if decisions.committed(batch_id, run_id):
                log.warning(
                    "committing an undecided row of micro-batch %s (its driver died during the commit)", key
                )
                return LocalTransactionState.COMMIT_MESSAGE
        log.warning("rolling back an undecided row of rocketpy write %s (its driver never committed it)", key)
        return LocalTransactionState.ROLLBACK_MESSAGE

    async def _decisions(self, query_id: str) -> Decisions:
        remoting = RemotingClient(
            connect_timeout=self.timeout_s, name="rocketpy-spark-check", signer=self.credentials.signer()
        )
        try:
            return await read_decisions(MQClientAPI(remoting, self.namesrv_addrs), query_id, self.timeout_s)
        finally:
            await remoting.close()


def _txn_producer(opts: WriteOptions, job_key: str) -> TransactionProducer:
    listener = JobListener(job_key, opts)
    return TransactionProducer(
        opts.producer_group,
        opts.namesrv_addr,
        send_timeout=opts.timeout_s,
        listener=listener,
        **opts.credentials.sdk_kwargs(),
    )


async def _send_halves(
    opts: WriteOptions, layout: WriteLayout, rows: Iterator[Any], job_key: str
) -> tuple[int, Halves]:
    """Send every row as a half message (batches of ``BATCH_ROWS`` per topic or routed queue);
    returns the count and where they are stored.

    A failure rolls back the halves this attempt stored, then raises (the retry sends its own).
    """
    halves: Halves = {}
    addrs: dict[MessageQueue, str] = {}
    immunity = str(opts.transaction_timeout_s)
    producer = _txn_producer(opts, job_key)
    async with producer:

        async def send(msgs: list[Message], mq: MessageQueue | None) -> None:
            results = await producer.send_half_batch(msgs, selector=_chosen if mq else None, arg=mq)
            for r in results:
                addr = addrs.get(r.message_queue)
                if addr is None:
                    addr = addrs[r.message_queue] = await producer.broker_addr_of(r)
                _record(halves, addr, r)
            if any(r.status is not SendStatus.SEND_OK for r in results):
                raise MQClientError("a row was stored but not durably; the write is retried")

        def mark(msg: Message) -> None:
            msg.properties[JOB_PROPERTY] = job_key
            msg.properties[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = immunity

        window = InFlight()
        try:
            count = await _dispatch_rows(
                layout, rows, window, producer.fetch_publish_message_queues, send, mark
            )
        except BaseException:
            await window.settle()  # not cancelled: a half stored by a cancelled send would be lost
            await _decide(producer, halves, LocalTransactionState.ROLLBACK_MESSAGE)
            raise
    return count, halves


def _record(halves: Halves, addr: str, r: SendResult) -> None:
    _, _, commitlog_offset = decode_offset_msg_id(r.offset_msg_id)
    halves.setdefault(addr, array("q")).extend((commitlog_offset, r.queue_offset))


async def _decide(producer: TransactionProducer, halves: Halves, state: LocalTransactionState) -> int:
    """Decide every half (END_TRANSACTION_BATCH); returns how many the brokers did not confirm.

    Per broker the halves go in half-queue order, one request at a time: the half queue holds them
    in the order they were sent, and the committed copies of a queue must keep that order (rows
    routed by ``orderKey``). Brokers are decided in parallel.
    """

    async def broker(addr: str, flat: array) -> int:
        pairs = sorted(zip(flat[0::2], flat[1::2], strict=True), key=lambda pair: pair[1])
        return await producer.end_transactions(addr, pairs, state)

    return sum(await asyncio.gather(*(broker(addr, flat) for addr, flat in halves.items())))


def _run(coro_fn: Callable[[], Awaitable[Any]], opts: WriteOptions) -> Any:
    """Run a coroutine on a private uvloop event loop (Spark's Python workers have none running).

    An ACL refusal becomes a ``SparkAccessError`` naming the options to fix.
    """

    async def main() -> Any:
        try:
            return await coro_fn()
        except AccessDeniedError as e:
            raise refused(e, opts.credentials) from None

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return run_on(runner, main())


def _task_ids() -> tuple[int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.attemptNumber()) if ctx else (0, 0)


def _ledger(opts: WriteOptions, call: Callable[[MQClientAPI], Coroutine[Any, Any, T]]) -> T:
    """Run one ledger step with a short-lived session (tasks and commits are plain threads)."""
    with BrokerSession(opts.namesrv_addr, opts.timeout_s, opts.credentials) as session:
        return session.run(lambda: call(session.api))


def _replay_partition(opts: WriteOptions, job_id: str, stream: StreamBatch | None) -> SentPartition | None:
    """Task side: the empty ``SentPartition`` of a task whose micro-batch was decided before (it is
    part of Spark's replay and sends nothing), else None (send the rows)."""
    if stream is None:
        return None

    async def check(api: MQClientAPI) -> bool:
        return (await read_decisions(api, stream.query_id, opts.timeout_s)).is_replay(stream.batch_id)

    if not _ledger(opts, check):
        return None
    log.info(
        "micro-batch %d of query %s was already written: this replay sends nothing",
        stream.batch_id,
        stream.query_id,
    )
    partition_id, attempt = _task_ids()
    return SentPartition(job_id, partition_id, attempt, 0, stream, replay=True)


def _stream_of(messages: list[Any]) -> StreamBatch | None:
    """The micro-batch the tasks' messages were sent for (None: a batch write, or no query id)."""
    return next((m.stream for m in messages if isinstance(m, SentPartition) and m.stream), None)


def _record_or_drop(opts: WriteOptions, messages: list[Any]) -> bool:
    """Driver side of a micro-batch's commit: record it in the ledger, or say it is a replay.

    Returns True when the micro-batch was decided before (its rows must not be written again);
    else the decision is stored before anything is committed. Messages without a micro-batch
    (a batch write, or a Spark that sets no query id) are not in the ledger: False.
    """
    stream = _stream_of(messages)
    if stream is None:
        return False

    async def decide(api: MQClientAPI) -> bool:
        decisions = await read_decisions(api, stream.query_id, opts.timeout_s)
        if decisions.is_replay(stream.batch_id):
            return True
        await write_decisions(
            api, stream.query_id, decisions.with_decision(stream.batch_id, stream.run_id), opts.timeout_s
        )
        return False

    try:
        return _ledger(opts, decide)
    except SparkAccessError as e:
        raise SparkAccessError(
            f"{e}; a stream write records each micro-batch in the NameServers' KV table"
            f" ({LEDGER_NAMESPACE}), which an ACL-enabled NameServer lets admin accounts only write"
        ) from None


def _job_key(job_id: str, messages: list[Any]) -> str:
    """The key a commit or abort decides: the micro-batch's (as its tasks sent), else the job's."""
    stream = _stream_of(messages)
    return stream.key if stream is not None else job_id


def _rows(messages: list[Any]) -> int:
    return sum(m.rows for m in messages if isinstance(m, SentPartition))


class Delivery:
    """The task side of a delivery: a task of a micro-batch decided before sends nothing
    (``_replay_partition``); any other sends its rows as the subclass does (``_send``)."""

    def send_partition(
        self,
        opts: WriteOptions,
        layout: WriteLayout,
        job_id: str,
        rows: Iterator[Any],
        stream: StreamBatch | None,
    ) -> SentPartition:
        """Send one task's rows (in a Spark worker), unless its micro-batch is a replay."""
        replay = _replay_partition(opts, job_id, stream)
        if replay is not None:
            return replay
        key = stream.key if stream is not None else job_id
        sent, halves = _run(lambda: self._send(opts, layout, rows, key), opts)
        return SentPartition(job_id, *_task_ids(), sent, stream, halves)

    async def _send(
        self, opts: WriteOptions, layout: WriteLayout, rows: Iterator[Any], key: str
    ) -> tuple[int, Halves]:
        """Send the rows of the write ``key``; returns how many, and the half messages to decide."""
        raise NotImplementedError


class PlainDelivery(Delivery):
    """At-least-once delivery: plain sends in the tasks; commit and abort only report.

    In a stream, a micro-batch is recorded in the ledger at its commit, so a replay of it after a
    restart sends nothing; a driver that dies before that record leaves its rows visible and the
    replay sends them again (at-least-once).
    """

    async def _send(
        self, opts: WriteOptions, layout: WriteLayout, rows: Iterator[Any], key: str
    ) -> tuple[int, Halves]:
        return await _send_rows(opts, layout, rows), {}  # plain messages: nothing left to decide

    def commit(self, opts: WriteOptions, messages: list[Any], job_id: str) -> None:
        """Every task succeeded: the rows are already visible."""
        key = _job_key(job_id, messages)
        if _record_or_drop(opts, messages) and _rows(messages):
            log.warning(
                "rocketpy write %s: %d rows of a replayed micro-batch were sent again", key, _rows(messages)
            )
        log.info("rocketpy write %s: %d rows sent by %d tasks", key, _rows(messages), len(messages))

    def abort(self, opts: WriteOptions, messages: list[Any], job_id: str) -> None:
        """The job failed: rows its tasks already sent stay in the topic (at-least-once)."""
        log.warning(
            "rocketpy write %s aborted: %d rows already sent stay visible (transactional=false)",
            _job_key(job_id, messages),
            _rows(messages),
        )


class TransactionalDelivery(Delivery):
    """All-or-nothing per job: half messages in the tasks, committed or rolled back by the driver.

    In a stream, exactly once: a replayed micro-batch's tasks send nothing, or (when they ran
    before the original's commit was recorded) its driver rolls back what they sent.
    """

    async def _send(
        self, opts: WriteOptions, layout: WriteLayout, rows: Iterator[Any], key: str
    ) -> tuple[int, Halves]:
        return await _send_halves(opts, layout, rows, key)

    def commit(self, opts: WriteOptions, messages: list[Any], job_id: str) -> None:
        """Commit every task's half messages (roll them back when the micro-batch is a replay).

        Raises:
            MQClientError: some were not confirmed (those are checked by their broker later).
        """
        key = _job_key(job_id, messages)
        if _record_or_drop(opts, messages):
            rows, failed = self._decide(opts, messages, key, LocalTransactionState.ROLLBACK_MESSAGE)
            log.info(
                "rocketpy write %s is a replay of a written micro-batch: dropped (%d rows rolled back)",
                key,
                rows,
            )
            if failed:
                raise MQClientError(
                    f"rocketpy write {key}: {failed} rows of a replayed micro-batch could not be rolled back"
                )
            return
        rows, failed = self._decide(opts, messages, key, LocalTransactionState.COMMIT_MESSAGE)
        if failed:
            raise MQClientError(
                f"rocketpy write {key}: {failed} of {rows} rows could not be committed (brokers "
                "unreachable or the rows already rolled back); the others are visible. Rows left "
                "undecided are rolled back by a later write's check after transactionTimeoutMs"
            )
        log.info("rocketpy write %s: %d rows committed (%d tasks)", key, rows, len(messages))

    def abort(self, opts: WriteOptions, messages: list[Any], job_id: str) -> None:
        """Roll back the half messages of the tasks that finished."""
        key = _job_key(job_id, messages)
        rows, failed = self._decide(opts, messages, key, LocalTransactionState.ROLLBACK_MESSAGE)
        log.warning("rocketpy write %s aborted: %d rows rolled back (%d not confirmed)", key, rows, failed)

    @staticmethod
    def _decide(
        opts: WriteOptions, messages: list[Any], key: str, state: LocalTransactionState
    ) -> tuple[int, int]:
        halves: Halves = {}
        for m in messages:
            if isinstance(m, SentPartition):
                for addr, pairs in m.halves.items():
                    halves.setdefault(addr, array("q")).extend(pairs)
        rows = sum(len(p) // 2 for p in halves.values())
        if not rows:
            return 0, 0

        async def go() -> int:
            producer = _txn_producer(opts, key)
            async with producer:
                return await _decide(producer, halves, state)

        return rows, int(_run(go, opts))


def delivery_for(opts: WriteOptions) -> PlainDelivery | TransactionalDelivery:
    return TransactionalDelivery() if opts.transactional else PlainDelivery()


def _layout(schema: StructType, opts: WriteOptions) -> WriteLayout:
    return check_layout([(f.name, f.dataType.simpleString()) for f in schema.fields], opts.topic)


def rows_of(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
    """The rows of Spark's Arrow batches as tuples in column order (what ``to_message`` reads).

    The writers take Arrow (``DataSourceArrowWriter``): Spark hands the worker Arrow batches in
    any case, and building a ``Row`` per row with per-value converters cost more than sending it.
    """
    for batch in batches:
        yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)


def check_account(opts: WriteOptions) -> None:
    """Plan time: the brokers accept the write's ACL account (or its absence), else SparkAccessError."""
    with BrokerSession(opts.namesrv_addr, opts.timeout_s, opts.credentials) as session:
        session.run(lambda: session.check_account(opts.topic))


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("rocketpy").mode("append")``: each task sends its rows."""

    def __init__(self, schema: StructType, options: Any) -> None:
        self.opts = parse_write_options(options)
        self.layout = _layout(schema, self.opts)
        check_account(self.opts)
        self.job_id = uuid.uuid4().hex  # pickled with the writer: the same in tasks, commit, abort
        self.delivery = delivery_for(self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentPartition:
        """Send one partition."""
        return self.delivery.send_partition(self.opts, self.layout, self.job_id, rows_of(iterator), None)

    def commit(self, messages: list[Any]) -> None:
        """All tasks succeeded."""
        self.delivery.commit(self.opts, messages, self.job_id)

    def abort(self, messages: list[Any]) -> None:
        """A task failed for good."""
        self.delivery.abort(self.opts, messages, self.job_id)


class StreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rocketpy")``: each micro-batch's tasks send their rows.

    Spark makes a new writer for every micro-batch and for every commit (in another process), so
    everything a commit needs travels in the tasks' ``SentPartition``s.
    """

    def __init__(self, schema: StructType, options: Any) -> None:
        self.opts = parse_write_options(options)
        self.layout = _layout(schema, self.opts)
        check_account(self.opts)
        self.job_id = uuid.uuid4().hex
        self.delivery = delivery_for(self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentPartition:
        """Send one partition of a micro-batch."""
        stream = StreamBatch.of_task()
        if stream is None:
            log.warning("no streaming query id in this task: a replayed micro-batch would be written again")
        return self.delivery.send_partition(self.opts, self.layout, self.job_id, rows_of(iterator), stream)

    def commit(self, messages: list[Any], batchId: int) -> None:
        """The micro-batch is done."""
        self.delivery.commit(self.opts, messages, f"{self.job_id}/{batchId}")

    def abort(self, messages: list[Any], batchId: int) -> None:
        """The micro-batch failed."""
        self.delivery.abort(self.opts, messages, f"{self.job_id}/{batchId}")
