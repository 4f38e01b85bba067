"""The put path of the message store: checks, ``CommitLog.append``, ``Dispatcher.dispatch``, flush wait.

Owns the input checks that refuse a message before any byte is written, the single-writer order of
a put (on the event loop; nothing interleaves between taking the queue offset and dispatching), the
bounded wait for the next commitlog file and the SYNC_FLUSH wait. A single put is a batch of one:
``MessageStore.put_message`` and ``put_messages`` both come here (RocketMQ's
``DefaultMessageStore.putMessage`` -> ``CommitLog.putMessage``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.broker.store.commitlog import CommitLog, RecordBatch
from rocketpy.broker.store.dispatch import Dispatcher, dispatch_run
from rocketpy.broker.store.message import WAIT_FALSE_MARK, BrokerMessage
from rocketpy.broker.store.results import PutMessageResult, PutMessageStatus
from rocketpy.broker.store.stats import StoreStats
from rocketpy.record import END_FILE_MIN_BLANK_BYTES, HEAD_SIZE, MAX_PROPERTIES_BYTES, topic_part
from rocketpy.waits import answered

if TYPE_CHECKING:
    from rocketpy.broker.store.flush import FlushService

NEXT_FILE_WAIT_S = 5.0
YIELD_EVERY_PUTS = 16  # while files are being created, puts yield to the loop this often
MAX_CACHED_TOPICS = 100_000
_BAD = PutMessageStatus


class PutService:
    """Appends messages to the commitlog and dispatches them.

    Args:
        commitlog: where records go.
        dispatcher: the consume queues (queue offsets) and what learns of each record.
        stats: put total and last store timestamp.
        clock: seconds clock (store timestamps).
        max_message_size: largest body accepted.
        sync_flush_timeout_ms: SYNC_FLUSH wait before FLUSH_DISK_TIMEOUT.
        allocating: True while a file creation's callback has not run yet.

    Attributes:
        running: puts are accepted (set by the store's lifecycle).
        disk_full_remark: why puts are refused for disk space ("" when not; set by cleanup).
        read_only_remark: why puts are refused after a disk error ("" when not; set by health.py).
        store_host8: packed store host written into records.
        flush: the flush service to wait on under SYNC_FLUSH (None: ASYNC_FLUSH).
    """

    def __init__(
        self,
        commitlog: CommitLog,
        dispatcher: Dispatcher,
        stats: StoreStats,
        clock: Callable[[], float],
        *,
        max_message_size: int,
        sync_flush_timeout_ms: int,
        allocating: Callable[[], bool],
    ) -> None:
        self._commitlog = commitlog
        self._dispatcher = dispatcher
        self._stats = stats
        self._clock = clock
        self._max_body_bytes = max_message_size
        self._sync_flush_timeout_ms = sync_flush_timeout_ms
        self._allocating = allocating
        self._topic_parts: dict[str, bytes] = {}
        self._puts_since_yield = 0
        self.running = False
        self.disk_full_remark = ""
        self.read_only_remark = ""
        self.store_host8 = b""
        self.flush: FlushService | None = None

    async def put(self, msgs: list[BrokerMessage]) -> PutMessageResult:
        """Append messages of one topic and queue, all or nothing, contiguously in one file (hot path).

        Checked once, appended with one store timestamp, dispatched one by one, then (SYNC_FLUSH,
        unless the first message says ``WAIT=false``) one flush wait for all of them.
        """
        batch = self._prepare(msgs)
        if isinstance(batch, PutMessageResult):
            return batch
        r = self._commitlog.append(batch)
        if r is None:
            rolled = await self._append_after_roll(batch)
            if isinstance(rolled, PutMessageResult):
                return rolled
            batch, r = rolled
        phys = self._dispatched(batch, r)
        n = len(msgs)
        if self.flush is not None and msgs[0].wait_store_msg_ok:
            await self._wait_flush(r, phys)
        else:
            self._puts_since_yield += n
            if self._puts_since_yield >= YIELD_EVERY_PUTS:
                self._puts_since_yield = 0
                if self._allocating():
                    await asyncio.sleep(0)  # let allocation callbacks run even when puts never suspend
        return r

    def put_then_flush(
        self, msgs: list[BrokerMessage]
    ) -> tuple[PutMessageResult, asyncio.Future[bool]] | None:
        """``put(msgs)`` of messages that wait for their flush (SYNC_FLUSH, ``WAIT`` not false),
        without its coroutine: appended and dispatched now, with the future of the flush (True:
        durable; False: the wait timed out, see ``flush_outcome``), or a refusal with a done future.
        None, with nothing written, when the put must wait for the next commitlog file (``put``
        does) or does not wait for a flush."""
        flush = self.flush
        if flush is None or not msgs or not msgs[0].wait_store_msg_ok:
            return None
        batch = self._prepare(msgs)
        if isinstance(batch, PutMessageResult):
            return batch, answered(True)  # a refused put: no flush to wait for
        r = self._commitlog.append(batch)
        if r is None:
            return None  # the next file
        phys = self._dispatched(batch, r)
        return r, flush.flushed_future(phys, self._sync_flush_timeout_ms / 1000)

    def _dispatched(self, batch: RecordBatch, r: PutMessageResult) -> int:
        """Dispatch each record of an appended batch (all are written: whatever a listener does sees
        them) and count it; the commitlog offset past its last record."""
        msgs, cq, store_ts = batch[0], batch[4], batch[5]
        assert r.sizes is not None
        phys = dispatch_run(self._dispatcher, cq, r.queue_offset, r.wrote_offset, r.sizes, msgs, store_ts)
        stats = self._stats
        stats.last_store_ts = store_ts
        stats.put_total += len(msgs)
        return phys

    # -- checks -----------------------------------------------------------------------------------
    def _prepare(self, msgs: list[BrokerMessage]) -> RecordBatch | PutMessageResult:
        """The batch to append (stamped, with its queue), or why it is refused.

        Checks the store state once and each message's fields; nothing is written. One combined
        test per message on the hot path; ``_refusal`` says which check failed.
        """
        if not msgs or not self.running or self.disk_full_remark or self.read_only_remark:
            return self._state_refusal(msgs)
        first = msgs[0]
        topic, queue_id, max_body = first.topic, first.queue_id, self._max_body_bytes
        topic_b = self._topic_parts.get(topic) or self._topic_part(topic)
        if isinstance(topic_b, PutMessageResult):
            return topic_b
        fixed = HEAD_SIZE + len(topic_b) + 2
        props: list[bytes] = []
        total = 0
        for m in msgs:
            props_b = m.properties.encode()
            body_len = len(m.body)
            if (body_len > max_body or len(props_b) > MAX_PROPERTIES_BYTES
                    or m.queue_id != queue_id or m.topic != topic):  # fmt: skip
                return self._refusal(m, topic, queue_id, props_b)
            props.append(props_b)
            total += fixed + body_len + len(props_b)
        if total + END_FILE_MIN_BLANK_BYTES > self._commitlog.file_size:
            return PutMessageResult(
                _BAD.MESSAGE_ILLEGAL,
                f"{total} bytes do not fit one commitlog file of "
                f"{self._commitlog.file_size} bytes; send smaller batches",
            )
        d = self._dispatcher
        cq = d.cqs.get((topic, queue_id)) or d.cq(topic, queue_id)
        return msgs, topic_b, props, total, cq, int(self._clock() * 1000), self.store_host8

    def _state_refusal(self, msgs: list[BrokerMessage]) -> PutMessageResult:
        """Why the store takes no put now (or why an empty batch is refused)."""
        if not msgs:
            return PutMessageResult(_BAD.MESSAGE_ILLEGAL, "empty batch")
        if not self.running:
            return PutMessageResult(_BAD.SERVICE_NOT_AVAILABLE, "the message store is not running")
        return PutMessageResult(_BAD.SERVICE_NOT_AVAILABLE, self.read_only_remark or self.disk_full_remark)

    def _topic_part(self, topic: str) -> bytes | PutMessageResult:
        """TOPICLEN + TOPIC of a topic not cached yet (cached now), or why the name is refused."""
        try:
            topic_b = topic_part(topic)
        except ValueError as e:
            return PutMessageResult(_BAD.MESSAGE_ILLEGAL, str(e))
        if len(self._topic_parts) < MAX_CACHED_TOPICS:
            self._topic_parts[topic] = topic_b
        return topic_b

    def _refusal(self, m: BrokerMessage, topic: str, queue_id: int, props_b: bytes) -> PutMessageResult:
        """Which of ``_prepare``'s per-message checks ``m`` fails."""
        if m.topic != topic or m.queue_id != queue_id:
            return PutMessageResult(_BAD.MESSAGE_ILLEGAL, "a batch must have one topic and one queue")
        if len(m.body) > self._max_body_bytes:
            return PutMessageResult(
                _BAD.MESSAGE_ILLEGAL,
                f"message body is {len(m.body)} bytes, more than maxMessageSize {self._max_body_bytes}; "
                f"send smaller messages",
            )
        return PutMessageResult(
            _BAD.PROPERTIES_SIZE_EXCEEDED,
            f"properties are {len(props_b)} bytes, "
            f"more than {MAX_PROPERTIES_BYTES}; use fewer/shorter properties",
        )

    # -- the wait for the next file -------------------------------------------------------------
    async def _append_after_roll(
        self, batch: RecordBatch
    ) -> tuple[RecordBatch, PutMessageResult] | PutMessageResult:
        """Wait (bounded) for the next commitlog file and append there: the batch as appended
        (restamped, its queue looked up again) and where it went, or the refusal."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + NEXT_FILE_WAIT_S
        msgs, topic_b, props, total, _, _, host8 = batch
        first = msgs[0]
        while True:
            left_s = deadline - loop.time()
            if left_s <= 0 or not await self._commitlog.wait_next_file(left_s):
                err = self._commitlog.take_error()
                return PutMessageResult(
                    _BAD.CREATE_MAPPED_FILE_FAILED,
                    f"cannot create the next commitlog "
                    f"file: {err or 'timed out'}; check disk space and permissions",
                )
            if not self.running:
                return PutMessageResult(_BAD.SERVICE_NOT_AVAILABLE, "the message store is shutting down")
            # A new stamp and queue: others may have put while this waited.
            cq = self._dispatcher.cq(first.topic, first.queue_id)
            batch = (msgs, topic_b, props, total, cq, int(self._clock() * 1000), host8)
            r = self._commitlog.append(batch)
            if r is not None:
                return batch, r

    async def _wait_flush(self, result: PutMessageResult, end_offset: int) -> None:
        assert self.flush is not None
        flushed = await self.flush.wait_flushed(end_offset, self._sync_flush_timeout_ms / 1000)
        self.flush_outcome(result, flushed)

    def flush_outcome(self, result: PutMessageResult, flushed: bool) -> PutMessageResult:
        """``result`` once its flush wait ended: FLUSH_DISK_TIMEOUT when it did not flush in time."""
        if not flushed:
            result.status = _BAD.FLUSH_DISK_TIMEOUT
            result.remark = f"not flushed to disk within syncFlushTimeout {self._sync_flush_timeout_ms} ms"
        return result


@twin
def put_now(service: PutService, msgs: list[BrokerMessage]) -> PutMessageResult | None:
    """``service.put(msgs)`` without its coroutine, in the common case (the broker's send runs).

    None, with nothing written, for anything else: ``put`` then does it (a refusal, a SYNC_FLUSH
    wait, the next commitlog file not ready, a topic or queue not seen yet, this put's turn to
    yield to the loop while files are being created). Otherwise ``put``'s checks, append, dispatch
    and counts (compiled twin in ``_storepath``).
    """
    n = len(msgs)
    if not n or not service.running or service.disk_full_remark or service.read_only_remark:
        return None
    first = msgs[0]
    if service.flush is not None and WAIT_FALSE_MARK not in first.properties:
        return None
    since = service._puts_since_yield + n
    if since >= YIELD_EVERY_PUTS:  # put's count, and its yield when due
        if service._allocating():
            return None
        since = 0
    topic, queue_id, max_body = first.topic, first.queue_id, service._max_body_bytes
    topic_b = service._topic_parts.get(topic)
    if topic_b is None:
        return None
    fixed = HEAD_SIZE + len(topic_b) + 2
    props: list[bytes] = []
    total = 0
    for m in msgs:
        props_b = m.properties.encode()
        body_len = len(m.body)
        if (body_len > max_body or len(props_b) > MAX_PROPERTIES_BYTES
                or m.queue_id != queue_id or m.topic != topic):  # fmt: skip
            return None
        props.append(props_b)
        total += fixed + body_len + len(props_b)
    commitlog = service._commitlog
    if total + END_FILE_MIN_BLANK_BYTES > commitlog.file_size:
        return None
    d = service._dispatcher
    cq = d.cqs.get((topic, queue_id))
    if cq is None:
        return None
    store_ts = int(service._clock() * 1000)
    r = commitlog.append((msgs, topic_b, props, total, cq, store_ts, service.store_host8))
    if r is None:
        return None
    assert r.sizes is not None
    dispatch_run(d, cq, r.queue_offset, r.wrote_offset, r.sizes, msgs, store_ts)
    stats = service._stats
    stats.last_store_ts = store_ts
    stats.put_total += n
    service._puts_since_yield = since
    return r


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.store import _storepath

    same_signature(put_now)(_storepath.put_now)
    same_signature(_storepath.put_now)(put_now)
