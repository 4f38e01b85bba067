"""The put path of the message store: validation, the append into the commitlog mmap, dispatch.

Owns the single-writer append (on the event loop; nothing interleaves inside ``_append``), the
input checks that refuse a message before any byte is written, and the SYNC_FLUSH wait.
A mixin of ``MessageStore`` (which owns the parts it uses).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketpy.broker.store.mapped_file import MappedFile
from rocketpy.broker.store.message import BrokerMessage
from rocketpy.broker.store.results import PutMessageResult, PutMessageStatus
from rocketpy.record import HEAD_SIZE, MAX_PROPERTIES_BYTES, MAX_TOPIC_BYTES, MESSAGE_MAGIC, RECORD_HEAD, U16

if TYPE_CHECKING:
    from rocketpy.broker.store.allocate import AllocateService
    from rocketpy.broker.store.commitlog import CommitLog
    from rocketpy.broker.store.dispatch import Dispatcher
    from rocketpy.broker.store.flush import FlushService
    from rocketpy.config import StoreConfig

NEXT_FILE_WAIT_S = 5.0
YIELD_EVERY_PUTS = 16  # while files are being created, puts yield to the loop this often
MAX_CACHED_TOPICS = 100_000
_BAD = PutMessageStatus


class PutMixin:
    """``put_message`` / ``put_messages`` of ``MessageStore``."""

    config: StoreConfig
    commitlog: CommitLog
    dispatcher: Dispatcher
    running: bool
    disk_full_remark: str
    last_store_ts: int
    put_total: int
    _allocator: AllocateService | None
    _cq_allocator: AllocateService | None
    _flush: FlushService | None
    _host8: bytes
    _max_body_bytes: int
    _sync_flush: bool
    _topic_parts: dict[str, bytes]
    _puts_since_yield: int = 0

    clock: Callable[[], float]

    def _allocations_in_flight(self) -> bool:
        """True while a file creation's callback has not run yet (puts then yield to the loop)."""
        a, b = self._allocator, self._cq_allocator
        return bool((a is not None and a.in_flight) or (b is not None and b.in_flight))

    # -- put ------------------------------------------------------------------------------------
    def _check(self, msg: BrokerMessage) -> PutMessageResult | bytes:
        """Validate one message; returns its topic part (len byte + topic) or a refusal."""
        if not self.running:
            return PutMessageResult(_BAD.SERVICE_NOT_AVAILABLE, "the message store is not running")
        if self.disk_full_remark:
            return PutMessageResult(_BAD.SERVICE_NOT_AVAILABLE, self.disk_full_remark)
        part = self._topic_parts.get(msg.topic)
        if part is None:
            tb = msg.topic.encode()
            if len(tb) > MAX_TOPIC_BYTES or not tb:
                return PutMessageResult(
                    _BAD.MESSAGE_ILLEGAL,
                    f"topic must be 1..{MAX_TOPIC_BYTES} bytes, got {len(tb)}; use a shorter topic name",
                )
            part = bytes((len(tb),)) + tb
            if len(self._topic_parts) < MAX_CACHED_TOPICS:
                self._topic_parts[msg.topic] = part
        if len(msg.body) > self.config.max_message_size:
            return self._body_too_large(len(msg.body))
        return part

    def _body_too_large(self, body_len: int) -> PutMessageResult:
        return PutMessageResult(
            _BAD.MESSAGE_ILLEGAL,
            f"message body is {body_len} bytes, more than "
            f"maxMessageSize {self.config.max_message_size}; send smaller messages",
        )

    async def put_message(self, msg: BrokerMessage) -> PutMessageResult:
        """Append one message, dispatch it and (SYNC_FLUSH) wait for the flush (hot path)."""
        part = self._topic_parts.get(msg.topic)
        body = msg.body
        if part is None or self.disk_full_remark or not self.running or len(body) > self._max_body_bytes:
            return await self.put_messages([msg])  # the slow path explains the refusal
        props_b = msg.properties.encode()
        if len(props_b) > MAX_PROPERTIES_BYTES:
            return await self.put_messages([msg])
        total = HEAD_SIZE + len(body) + len(part) + 2 + len(props_b)
        mf = self.commitlog.writable_file(total)
        if mf is None:
            return await self.put_messages([msg])  # waits for the next file
        d = self.dispatcher
        cq = d.cqs.get((msg.topic, msg.queue_id)) or d.cq(msg.topic, msg.queue_id)
        queue_offset = cq.next_offset
        pos = mf.wrote
        phys = mf.base_offset + pos
        store_ts = int(self.clock() * 1000)
        mm = mf.mm
        RECORD_HEAD.pack_into(
            mm, pos, total, MESSAGE_MAGIC, zlib.crc32(body), msg.queue_id, msg.flag, queue_offset, phys,
            msg.sys_flag, msg.born_timestamp, msg.born_host8, store_ts, self._host8, msg.reconsume_times,
            msg.prepared_transaction_offset, len(body),
        )  # fmt: skip
        b = pos + HEAD_SIZE
        e = b + len(body)
        mm[b:e] = body
        tail = part + U16.pack(len(props_b)) + props_b
        mm[e : e + len(tail)] = tail
        mf.wrote = pos + total
        props = msg.properties
        tags_code = msg.tags_code
        if tags_code is None:
            tags_code = d.tags_code(msg.topic, props, store_ts) if props else 0
        # dispatch, inlined from Dispatcher.dispatch (hot path)
        cq.put(phys, total, tags_code, queue_offset)
        d.dirty_cqs.add(cq)
        if d.index is not None:  # also without keys: the index header tracks the last dispatched record
            d.index.put_props(msg.topic, props, phys, store_ts)
        if d.listeners:
            d.notify(cq, queue_offset, tags_code, store_ts)
        d.dispatched_to = phys + total
        self.last_store_ts = store_ts
        self.put_total += 1
        result = PutMessageResult(_BAD.PUT_OK, "", phys, total, queue_offset, store_ts, 1, self._host8)
        if self._sync_flush and msg.wait_store_msg_ok:
            await self._wait_flush(result, phys + total)
        else:
            self._puts_since_yield += 1
            if self._puts_since_yield >= YIELD_EVERY_PUTS and self._allocations_in_flight():
                self._puts_since_yield = 0
                await asyncio.sleep(0)  # let allocation callbacks run even when puts never suspend
        return result

    async def _wait_flush(self, result: PutMessageResult, end_offset: int) -> None:
        assert self._flush is not None
        if not await self._flush.wait_flushed(end_offset, self.config.sync_flush_timeout / 1000):
            result.status = _BAD.FLUSH_DISK_TIMEOUT
            result.remark = f"not flushed to disk within syncFlushTimeout {self.config.sync_flush_timeout} ms"

    def _encode_batch(self, msgs: list[BrokerMessage]) -> PutMessageResult | tuple[bytes, list[bytes], int]:
        """Check a batch once (store state, topic) and per message (queue, body, properties).

        Returns:
            ``(topic part, encoded properties per message, total bytes)`` or the refusal.
        """
        first = msgs[0]
        part = self._check(first)
        if isinstance(part, PutMessageResult):
            return part
        topic, queue_id, max_body = first.topic, first.queue_id, self.config.max_message_size
        fixed = HEAD_SIZE + len(part) + 2
        props_list: list[bytes] = []
        total = 0
        for m in msgs:
            if m.topic != topic or m.queue_id != queue_id:
                return PutMessageResult(_BAD.MESSAGE_ILLEGAL, "a batch must have one topic and one queue")
            if len(m.body) > max_body:
                return self._body_too_large(len(m.body))
            props_b = m.properties.encode() if m.properties else b""
            if len(props_b) > MAX_PROPERTIES_BYTES:
                return PutMessageResult(
                    _BAD.PROPERTIES_SIZE_EXCEEDED,
                    f"properties are {len(props_b)} bytes, "
                    f"more than {MAX_PROPERTIES_BYTES}; use fewer/shorter properties",
                )
            props_list.append(props_b)
            total += fixed + len(m.body) + len(props_b)
        return part, props_list, total

    async def put_messages(self, msgs: list[BrokerMessage]) -> PutMessageResult:
        """Append a batch of one topic and queue, all or nothing, contiguously in one file.

        The batch is checked once, then appended and dispatched in one synchronous loop with one
        store timestamp, one consume-queue lookup and (SYNC_FLUSH) one flush wait for all of it.
        """
        if not msgs:
            return PutMessageResult(_BAD.MESSAGE_ILLEGAL, "empty batch")
        encoded = self._encode_batch(msgs)
        if isinstance(encoded, PutMessageResult):
            return encoded
        part, props_list, total = encoded
        if total + 8 > self.commitlog.file_size:
            return PutMessageResult(
                _BAD.MESSAGE_ILLEGAL,
                f"{total} bytes do not fit one commitlog file of "
                f"{self.commitlog.file_size} bytes; send smaller batches",
            )
        mf = self.commitlog.writable_file(total)
        if mf is None:
            mf_or_refusal = await self._wait_writable(total)
            if isinstance(mf_or_refusal, PutMessageResult):
                return mf_or_refusal
            mf = mf_or_refusal
        result = self._append(mf, msgs, part, props_list, total)
        if self._allocations_in_flight():
            await asyncio.sleep(0)  # let allocation callbacks run even when puts never suspend
        if self._sync_flush and msgs[0].wait_store_msg_ok:
            await self._wait_flush(result, result.wrote_offset + total)
        return result

    async def _wait_writable(self, total: int) -> MappedFile | PutMessageResult:
        """Wait (bounded) for the next commitlog file; the file where ``total`` bytes fit, or a refusal."""
        deadline = asyncio.get_running_loop().time() + NEXT_FILE_WAIT_S
        mf = None
        while mf is None:
            left_s = deadline - asyncio.get_running_loop().time()
            if left_s <= 0 or not await self.commitlog.wait_next_file(left_s):
                err = self.commitlog.take_error()
                return PutMessageResult(
                    _BAD.CREATE_MAPPED_FILE_FAILED,
                    f"cannot create the next commitlog "
                    f"file: {err or 'timed out'}; check disk space and permissions",
                )
            if not self.running:
                return PutMessageResult(_BAD.SERVICE_NOT_AVAILABLE, "the message store is shutting down")
            mf = self.commitlog.writable_file(total)
        return mf

    def _append(
        self, mf: MappedFile, msgs: list[BrokerMessage], part: bytes, props_list: list[bytes], total: int
    ) -> PutMessageResult:
        """Copy the records into ``mf`` and dispatch them (synchronous: nothing interleaves)."""
        host8 = self._host8
        store_ts = int(self.clock() * 1000)
        first = msgs[0]
        topic = first.topic
        d = self.dispatcher
        cq = d.cqs.get((topic, first.queue_id)) or d.cq(topic, first.queue_id)
        queue_offset = cq.next_offset
        mm = mf.mm
        pos = mf.wrote
        base = mf.base_offset
        phys0 = base + pos
        offsets: list[int] | None = [] if len(msgs) > 1 else None
        index = d.index
        pack_head = RECORD_HEAD.pack_into
        for i, m in enumerate(msgs):
            body = m.body
            props_b = props_list[i]
            size = HEAD_SIZE + len(body) + len(part) + 2 + len(props_b)
            phys = base + pos
            pack_head(
                mm, pos, size, MESSAGE_MAGIC, zlib.crc32(body), m.queue_id, m.flag, queue_offset + i, phys,
                m.sys_flag, m.born_timestamp, m.born_host8, store_ts, host8, m.reconsume_times,
                m.prepared_transaction_offset, len(body),
            )  # fmt: skip
            b = pos + HEAD_SIZE
            e = b + len(body)
            mm[b:e] = body
            tail = part + U16.pack(len(props_b)) + props_b
            mm[e : e + len(tail)] = tail
            pos += size
            mf.wrote = pos  # before the dispatch: whatever a listener does sees the record
            if offsets is not None:
                offsets.append(phys)
            props = m.properties
            tags_code = m.tags_code
            if tags_code is None:
                tags_code = d.tags_code(topic, props, store_ts) if props else 0
            cq.put(phys, size, tags_code, queue_offset + i)
            if index is not None:  # also without keys: the index header tracks the last record
                index.put_props(topic, props, phys, store_ts)
            if d.listeners:
                d.notify(cq, queue_offset + i, tags_code, store_ts)
        d.dirty_cqs.add(cq)
        d.dispatched_to = base + pos
        self.last_store_ts = store_ts
        self.put_total += len(msgs)
        return PutMessageResult(
            _BAD.PUT_OK,
            wrote_offset=phys0,
            wrote_bytes=total,
            queue_offset=queue_offset,
            store_timestamp=store_ts,
            msg_num=len(msgs),
            host8=host8,
            offsets=offsets,
        )
