"""The read side of a pop: which queues, from which offset, and what the answer carries.

Owns ``PopReader.read``: one synchronous step (nothing can interleave) that visits the queues a
pop may take from — the group's POP retry topic first one time in five (RocketMQ's ``needRetry``)
or after the topic when the answer is not full, then the requested queue or every read queue from
a rotating start — reads each from its next offset through ``MessageStore.get_message`` (views of
the commitlog), records what it hands out in the ledger and returns the answer plus the cks it
made (the service holds or writes them, ``ck_buffer.py``) and the records to append now. Records
of the topic go out as stored; records of the retry topic are written again under the subscribed
topic with their ``POP_CK`` set (RocketMQ's default ``popResponseReturnActualRetryTopic=false``),
so every client sees the topic it subscribed to.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.pop.ledger import Ck, PopLedger, PopQueue
from rocketpy.broker.pop.plain import read_plain
from rocketpy.broker.pop.revive_log import encode_acks
from rocketpy.broker.pop.types import PoppedQueue, PopRequest, PopResult, PopStatus
from rocketpy.broker.store import GetMessageResult, GetMessageStatus, MessageStore
from rocketpy.broker.subscription import MessageFilter
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.message import MessageConst, properties_to_string, string_to_properties
from rocketpy.perm import is_readable
from rocketpy.protocol.headers.pop import ConsumeInitMode
from rocketpy.protocol.receipt import NORMAL_TOPIC, RETRY_TOPIC, ReceiptHandle
from rocketpy.record import HEAD_SIZE, RECORD_HEAD, pack_record, topic_part
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic

_S = GetMessageStatus
#: Statuses saying the offset is outside the queue now (cleanup, or a re-created topic).
_MOVED = frozenset({_S.OFFSET_TOO_SMALL, _S.OFFSET_OVERFLOW_BADLY, _S.OFFSET_FOUND_NULL})


@dataclass(slots=True)
class PopRead:
    """What one read did: the answer, the cks it made (each with an orderly pop's attempt counts;
    the service holds or writes them), the ACKS records to append, the queues whose state changed."""

    result: PopResult
    cks: list[tuple[Ck, list[int] | None]]
    acks: list[bytes]
    touched: list[PopQueue]


@dataclass(slots=True)
class Limits:
    """What one pop may take (``popInflightMessageThreshold`` per queue; the broker-wide total)."""

    per_queue: int
    total: int
    max_bytes: int


class PopReader:
    """Reads pops (see the module docstring)."""

    def __init__(
        self,
        ledger: PopLedger,
        store: MessageStore,
        topic_config: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        broker_name: Callable[[], str],
        revive_floor: Callable[[], int],
        limits: Limits,
    ) -> None:
        self.ledger = ledger
        self.store = store
        self.topic_config = topic_config
        self.offsets = offsets
        self._broker_name = broker_name
        self._revive_floor = revive_floor
        self.limits = limits
        self._rotor = random.randrange(1 << 16)

    def read(self, req: PopRequest, message_filter: MessageFilter | None, now_ms: int) -> PopRead:
        """Take up to ``req.max_msgs`` messages, changing the ledger in this one step."""
        result = PopResult(PopStatus.NO_MESSAGE, self._broker_name(), now_ms, req.invisible_ms, req.order)
        out = PopRead(result, [], [], [])
        self._rotor += 1
        retry_first = not req.order and self._rotor % 5 == 0
        retry = pop_retry_topic(req.group, req.topic)
        if retry_first:
            self._read_topic(req, retry, -1, None, out)
        if message_filter is None and not req.order:
            read_plain(self, req, out)  # the common case, compiled (``plain.py``)
        else:
            self._read_topic(req, req.topic, req.queue_id, message_filter, out)
        if not req.order and not retry_first and result.count < req.max_msgs:
            self._read_topic(req, retry, -1, None, out)
        if result.queues:
            result.status = PopStatus.FOUND
        return out

    def peek(self, group: str, topic: str, queue_id: int, max_msgs: int, now_ms: int) -> PopResult:
        """What a pop of ``group`` would take next from ``topic`` (queue -1: any), nothing changed."""
        result = PopResult(PopStatus.NO_MESSAGE, self._broker_name(), now_ms)
        retry = pop_retry_topic(group, topic)
        for t, qid in [*self._queues_of(topic, queue_id), *self._queues_of(retry, -1)]:
            r = self.store.get_message(
                group,
                t,
                qid,
                self._peek_offset(group, t, qid),
                max_msgs - result.count,
                self.limits.max_bytes,
            )
            result.rest_num += max(0, r.max_offset - r.next_begin_offset)
            if r.status is _S.FOUND and result.count < max_msgs:
                parts = (
                    r.buffers
                    if t == topic
                    else [rewrite_record(m, topic_part(topic), {}) for m in _split(r.buffers)]
                )
                kind = NORMAL_TOPIC if t == topic else RETRY_TOPIC
                result.add(PoppedQueue(kind, qid, r.queue_offsets[0], list(r.queue_offsets)), parts)
        if result.queues:
            result.status = PopStatus.FOUND
        return result

    def has_message(self, group: str, topic: str, queue_id: int, order: bool, now_ms: int) -> bool:
        """True when a pop of ``group`` would find something in ``topic`` (queue -1: any) or its
        retry topic now (an orderly queue with a batch in flight has nothing)."""
        retry = pop_retry_topic(group, topic)
        for t, qid in [*self._queues_of(topic, queue_id), *self._queues_of(retry, -1)]:
            q = self.ledger.queue((group, t, qid))
            if order and q is not None and q.blocked():
                continue
            if self.store.get_max_offset_in_queue(t, qid) > self._peek_offset(group, t, qid):
                return True
        return False

    def _queues_of(self, topic: str, queue_id: int) -> list[tuple[str, int]]:
        tc = self.topic_config.get(topic)
        if tc is None or not is_readable(tc.perm):
            return []
        return [(topic, queue_id)] if queue_id >= 0 else [(topic, i) for i in range(tc.read_queue_nums)]

    def _peek_offset(self, group: str, topic: str, queue_id: int) -> int:
        q = self.ledger.queue((group, topic, queue_id))
        if q is not None:
            return q.next_offset
        stored = self.offsets.query_offset(group, topic, queue_id)
        return stored if stored >= 0 else self.store.get_min_offset_in_queue(topic, queue_id)

    def _read_topic(
        self,
        req: PopRequest,
        topic: str,
        queue_id: int,
        message_filter: MessageFilter | None,
        out: PopRead,
    ) -> None:
        tc = self.topic_config.get(topic)
        if tc is None or not is_readable(tc.perm) or tc.read_queue_nums <= 0:
            return
        n = tc.read_queue_nums
        qids = [queue_id] if queue_id >= 0 else [(self._rotor + i) % n for i in range(n)]
        result = out.result
        for i, qid in enumerate(qids):
            if result.count >= req.max_msgs:  # full: only count what the other queues hold
                result.rest_num += self._rest(req.group, topic, qids[i:])
                return
            self._read_queue(req, topic, qid, message_filter, out)

    def _rest(self, group: str, topic: str, qids: list[int]) -> int:
        """Messages left in ``topic``'s queues ``qids`` past where ``group`` pops them next."""
        queues, cqs = self.ledger.queues, self.store.dispatcher.cqs  # the store's max offsets, read directly
        rest = 0
        for qid in qids:
            q = queues.get((group, topic, qid))
            if q is not None:
                cq = cqs.get((topic, qid))
                if cq is not None and cq.next_offset > q.next_offset:
                    rest += cq.next_offset - q.next_offset
        return rest

    def queue_state(
        self, group: str, topic: str, queue_id: int, init_mode: int, acks: list[bytes] | None = None
    ) -> PopQueue | None:
        """The ledger's state of a queue, made (from the committed offset, else ``init_mode``) on
        first use. An offset an admin changed since (the offset table no longer holds the
        low-water mark this service wrote) restarts the queue there: what was in flight is
        forgotten, with ack records for it added to ``acks``. None: too many queues."""
        key = (group, topic, queue_id)
        q = self.ledger.queue(key)
        stored = self.offsets.query_offset(group, topic, queue_id)
        if q is None:
            start = stored if stored >= 0 else self._init_offset(topic, queue_id, init_mode)
            return self.ledger.add_queue(key, start)
        if stored >= 0 and stored != q.committed and acks is not None:
            dropped = self.ledger.forget(q)
            if dropped:
                acks += encode_acks(group, topic, [(queue_id, seq, -1, o) for seq, o in dropped.items()])
            q.reset(stored)
        return q

    def _init_offset(self, topic: str, queue_id: int, init_mode: int) -> int:
        """Where a group without an offset starts: MIN (and retry topics) the first stored message,
        MAX the end of the queue, or 0 for a queue that still starts at 0 (RocketMQ's young queue)."""
        lo = self.store.get_min_offset_in_queue(topic, queue_id)
        if init_mode == ConsumeInitMode.MIN or lo == 0 or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return lo
        return self.store.get_max_offset_in_queue(topic, queue_id)

    def _read_queue(
        self,
        req: PopRequest,
        topic: str,
        qid: int,
        message_filter: MessageFilter | None,
        out: PopRead,
    ) -> None:
        result = out.result
        need = req.max_msgs - result.count
        q = self.queue_state(req.group, topic, qid, req.init_mode, out.acks)
        if q is None:
            return
        if self._held_back(q, req, result.pop_time):
            result.rest_num += max(0, self.store.get_max_offset_in_queue(topic, qid) - q.next_offset)
            return
        r = self._get(req.group, q, need, message_filter)
        result.rest_num += max(0, r.max_offset - r.next_begin_offset)
        if r.status is not _S.FOUND:
            if r.next_begin_offset > q.next_offset and r.status is not _S.OFFSET_OVERFLOW_ONE:
                q.next_offset = r.next_begin_offset  # filtered out or gone: nothing handed out
                out.touched.append(q)
            return
        out.touched.append(q)
        self._take(req, q, r, out)

    def _held_back(self, q: PopQueue, req: PopRequest, now_ms: int) -> bool:
        """True when ``q`` may not hand anything out now (orderly batch in flight, or too many in flight)."""
        if req.order and q.blocked():
            return True
        return len(q.inflight) >= self.limits.per_queue or self.ledger.inflight_total >= self.limits.total

    def _get(
        self, group: str, q: PopQueue, need: int, message_filter: MessageFilter | None
    ) -> GetMessageResult:
        topic, qid = q.topic, q.queue_id
        flt = None if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else message_filter
        r = self.store.get_message(group, topic, qid, q.next_offset, need, self.limits.max_bytes, flt)
        if (
            r.status is not _S.FOUND
            and r.status in _MOVED
            and not q.inflight
            and r.next_begin_offset != q.next_offset
        ):
            q.reset(r.next_begin_offset)  # cleaned up, or the topic was re-created: start over there
            r.release()
            r = self.store.get_message(group, topic, qid, q.next_offset, need, self.limits.max_bytes, flt)
        return r

    def _take(self, req: PopRequest, q: PopQueue, r: GetMessageResult, out: PopRead) -> None:
        result = out.result
        start = q.next_offset
        offsets = r.queue_offsets
        parts: list[bytes | memoryview] = r.buffers
        skip = q.acked_ahead
        if skip and any(o in skip for o in offsets):  # an orderly redelivery: leave out what was acked
            parts, offsets = _without(_split(r.buffers), offsets, skip)
        if not offsets:
            q.next_offset = max(q.next_offset, r.next_begin_offset)
            return
        counts = [q.attempts.get(o, 0) for o in offsets] if req.order else None
        floor = self._revive_floor()
        ck = self.ledger.pop(
            q,
            list(offsets),
            r.next_begin_offset,
            result.pop_time,
            req.invisible_ms,
            floor,
            order=req.order,
            start_offset=start,
        )
        out.cks.append((ck, counts))
        retry = q.topic != req.topic
        kind = RETRY_TOPIC if retry else NORMAL_TOPIC
        if retry:
            parts = self._as_subscribed(req, q, parts, offsets, start, result)
        result.add(PoppedQueue(kind, q.queue_id, start, list(offsets), counts), parts)

    def _as_subscribed(
        self, req: PopRequest, q: PopQueue, parts: list[bytes | memoryview], offsets: list[int], start: int,
        result: PopResult,
    ) -> list[bytes | memoryview]:  # fmt: skip
        """Retry-topic records written again under ``req.topic`` with their receipt handle set."""
        topic_b = topic_part(req.topic)
        out: list[bytes | memoryview] = []
        for record, offset in zip(_split(parts), offsets, strict=True):
            handle = ReceiptHandle(
                start,
                result.pop_time,
                req.invisible_ms,
                result.revive_qid,
                RETRY_TOPIC,
                result.broker_name,
                q.queue_id,
                offset,
            )
            out.append(rewrite_record(record, topic_b, {MessageConst.POP_CK: handle.encode()}))
        return out


def _split(parts: list[bytes | memoryview]) -> list[memoryview]:
    """One view per record of ``parts`` (a part may hold several records back to back)."""
    out = []
    for part in parts:
        mv = memoryview(part)
        pos = 0
        while pos < len(mv):
            size = int.from_bytes(mv[pos : pos + 4], "big")
            assert size > HEAD_SIZE, size
            out.append(mv[pos : pos + size])
            pos += size
    return out


def _without(
    records: list[memoryview], offsets: list[int], skip: set[int]
) -> tuple[list[bytes | memoryview], list[int]]:
    kept = [(r, o) for r, o in zip(records, offsets, strict=True) if o not in skip]
    return [r for r, _ in kept], [o for _, o in kept]


def rewrite_record(record: memoryview, topic_b: bytes, extra: dict[str, str]) -> bytes:
    """``record`` with its topic replaced by ``topic_b`` (TOPICLEN + TOPIC) and ``extra`` added to
    its properties (kept properties first); physical offset and the other head fields unchanged."""
    head = RECORD_HEAD.unpack_from(record, 0)
    body_len = head[14]
    pos = HEAD_SIZE + body_len
    topic_len = record[pos]
    props_at = pos + 1 + topic_len
    props_len = int.from_bytes(record[props_at : props_at + 2], "big")
    props = string_to_properties(str(record[props_at + 2 : props_at + 2 + props_len], "utf-8"))
    props.update(extra)
    props_b = properties_to_string(props).encode()
    body = bytes(record[HEAD_SIZE:pos])
    buf = bytearray(HEAD_SIZE + body_len + len(topic_b) + 2 + len(props_b))
    (_, _, _, qid, flag, qoff, phys, sys_flag, born_ts, born_host, store_ts, store_host, reconsume, prepared,
     _) = head  # fmt: skip
    pack_record(
        buf,
        0,
        topic_b,
        props_b,
        body,
        qid,
        flag,
        qoff,
        phys,
        sys_flag,
        born_ts,
        born_host,
        store_ts,
        store_host,
        reconsume,
        prepared,
    )
    return bytes(buf)
