"""Message trace in the SDK: the records a traced producer or consumer writes, and their sender.

Owns ``TraceDispatcher`` (one per traced producer or consumer, RocketMQ's ``AsyncTraceDispatcher``):
records are appended in O(1) on the event loop and never wait for anything; a full buffer
(``buffer_size`` records) drops the record and counts it (``TraceStats.dropped``), so tracing
never slows a send or a listener. The hooks do not encode: they buffer a tuple of what a record
needs (one per sent message; one per listener runner call for all its messages, as RocketMQ's
consume hook gives one ``TraceContext`` with a list of ``TraceBean`` per batch). A background task
takes what is buffered every ``flush_interval_s`` (or at once past a trace message's worth) and sends
it as trace messages of at most ``batch_records`` records (``BATCH_RECORDS`` for a producer's,
``CONSUME_BATCH_RECORDS`` for a consumer's) and ``BATCH_BODY_BYTES`` to the trace topic through an
inner producer (group ``_INNER_TRACE_PRODUCER-<group>``, RocketMQ's name), at most
``MAX_SENDS_IN_FLIGHT`` at once. Records are encoded there, when a trace message's worth is taken
(``_take_batch``). Each trace message's KEYS are the traced messages' ids and keys, so the broker's
index finds them.

The record layouts are ``rocketpy.trace``'s; the hot kinds (Pub, SubBefore, SubAfter) are written
here with one f-string each by ``_encode_pub``, ``_encode_before`` and ``_encode_after`` (a unit
test checks they equal ``rocketpy.trace.encode_record``), compiled twins in ``_traceenc.pyx`` (the
same texts, ids and keyed entries, without an interpreter step per record).
``ProducerTracer`` and ``ConsumeTracer`` are the hooks the producer and the listener runner call;
with ``opentelemetry-api`` installed they also end OpenTelemetry spans (``client/trace_otel.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rocketpy._accel import twin
from rocketpy.client.listener import SKIPPED
from rocketpy.client.results import SendResult, SendStatus
from rocketpy.message import Message, MessageConst, MessageExt
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.record import TRANSACTION_PREPARED_TYPE
from rocketpy.topic import TRACE_TOPIC
from rocketpy.trace import (
    CTX_EXCEPTION,
    CTX_FAILED,
    CTX_RETURNNULL,
    CTX_SUCCESS,
    DEFAULT_REGION,
    DELAY_MSG,
    NORMAL_MSG,
    NULL,
    TRACE_GROUP_PREFIX,
    TRANS_MSG_HALF,
)

if TYPE_CHECKING:
    from rocketpy.client.instance import ClientSettings
    from rocketpy.client.producer import Producer

_SEND_OK = SendStatus.SEND_OK

log = logging.getLogger("rocketpy.client.trace")

#: Records buffered at most per dispatcher; past it new records are dropped (and counted).
DEFAULT_BUFFER_SIZE = 20_000
#: Records of one trace message of a producer: a Pub record each names one message, whose id (32
#: characters and a space) goes to KEYS, so 900 of them fill ``BATCH_KEYS_CHARS`` (fewer, larger
#: trace messages: the broker's cost of one is mostly fixed, not per record).
BATCH_RECORDS = 900
#: Records of one trace message of a consumer: a message's SubBefore and SubAfter share its id, so
#: 1,600 records name ~800 ids, leaving room for the ids whose other record is in the next message
#: (a listener call's records are cut anywhere); past ``BATCH_KEYS_CHARS`` the message is cut there.
CONSUME_BATCH_RECORDS = 1600
#: Body characters of one trace message (before compression; ~120-200 a consume or Pub record):
#: far under the broker's ``maxMessageSize`` (4 MiB), and ~20 times smaller compressed.
BATCH_BODY_BYTES = 400_000
#: Characters of index keys (the KEYS property: traced ids and their messages' own keys, a space
#: each) one trace message takes at most: a record's properties field holds 32,767 bytes, and 512
#: records of messages with long user keys would pass it (the send refused, the records lost).
BATCH_KEYS_CHARS = 30_000
#: Trace messages being sent at once by one dispatcher.
MAX_SENDS_IN_FLIGHT = 4
#: zlib level of trace message bodies: level 1 is a third of the default 5's CPU on trace records
#: (0.16 against 0.56 µs a record) for a body ~13 % larger; any level decodes the same.
TRACE_COMPRESS_LEVEL = 1
#: How long a shutdown waits for buffered records to be sent.
SHUTDOWN_FLUSH_S = 3.0

_request_ids = itertools.count(1)
_REQUEST_PREFIX = f"{os.getpid():08X}{int(time.time()):08X}"


#: The chunk part of request ids (most runner calls have fewer chunks).
_CHUNK_HEX = tuple(f"{i:04X}" for i in range(1024))


def _request_ids_of(seq: int, chunks: int) -> list[str]:
    """The process-unique ids linking each listener call's SubBefore and SubAfter records: ``seq``
    numbers the runner's call (``ConsumeTracer.before``), the chunk index the listener call in it."""
    base = f"{_REQUEST_PREFIX}{seq:012X}"
    return [base + (_CHUNK_HEX[i] if i < 1024 else f"{i:04X}") for i in range(chunks)]


class _Encoded:
    """Encoded records: their texts, each one's traced message id, and the traced messages' own
    keys (``(index in texts, keys)``, for the records that have some)."""

    __slots__ = ("ids", "keyed", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.ids: list[str] = []
        self.keyed: list[tuple[int, Sequence[str]]] = []

    def cut(self, n: int) -> _Encoded:
        """Remove and return the first ``n`` records."""
        head = _Encoded()
        head.texts, self.texts = self.texts[:n], self.texts[n:]
        head.ids, self.ids = self.ids[:n], self.ids[n:]
        head.keyed = [(i, k) for i, k in self.keyed if i < n]
        self.keyed = [(i - n, k) for i, k in self.keyed if i >= n]
        return head


#: An encoder: appends the records of what it is given to the ``_Encoded`` it is given.
_Encoder = Callable[[Any, _Encoded], None]
#: Records waiting to be sent: their encoder, what it encodes, and how many records it makes.
_Pending = tuple[_Encoder, Any, int]


def _user_key_chars(enc: _Encoded, n: int) -> int:
    """Characters the traced messages' own keys of ``enc``'s first ``n`` records add to KEYS (at
    most: a key two records name is counted twice)."""
    return sum(len(k) + 1 for i, ks in enc.keyed if i < n for k in ks)


def _new_id_chars(enc: _Encoded, n: int, keys: set[str]) -> int:
    """Characters the traced ids of ``enc``'s first ``n`` records add to a KEYS already holding
    ``keys``: each id not in it once, with its space (a consumed message's SubBefore and SubAfter
    name the same id)."""
    new = set(enc.ids[:n] if n < len(enc.ids) else enc.ids)
    new.difference_update(keys)
    new.discard("")
    return sum(map(len, new)) + len(new)


def _fitting(enc: _Encoded, n: int, body_room: int, keys_room: int, keys: set[str], first: bool) -> int:
    """How many of ``enc``'s first ``n`` records a trace message with ``body_room`` characters of
    body and ``keys_room`` of KEYS left (holding ``keys``) takes (rare: near a limit): while both are
    under their limit, as the record that reaches one is taken; at least one when the message is
    empty (``first``), so an oversized record is sent, refused and counted, not kept forever."""
    own: dict[int, int] = {}
    for i, ks in enc.keyed:
        if i < n:
            own[i] = own.get(i, 0) + sum(len(k) + 1 for k in ks)
    seen: set[str] = set()
    take = 0
    while take < n and body_room > 0 and keys_room > 0:
        body_room -= len(enc.texts[take])
        msg_id = enc.ids[take]
        if msg_id and msg_id not in keys and msg_id not in seen:
            seen.add(msg_id)
            keys_room -= len(msg_id) + 1
        keys_room -= own.get(take, 0)
        if keys_room < 0 and (take or not first):
            break  # this record's keys would pass the property's limit: it waits for the next message
        take += 1
    return max(take, 1) if first else take


def _t(value: str | None) -> str:
    return NULL if value is None else value


class TraceStats:
    """What one dispatcher did (``producer.trace_stats``, ``consumer.trace_stats``).

    Attributes:
        appended: records accepted into the buffer.
        dropped: records refused because the buffer was full (or the dispatcher stopped).
        sent_records: records the broker stored.
        sent_messages: trace messages the broker stored.
        failed_records: records whose trace message could not be sent (not retried).
    """

    __slots__ = ("appended", "dropped", "failed_records", "sent_messages", "sent_records")

    def __init__(self) -> None:
        self.appended = 0
        self.dropped = 0
        self.sent_records = 0
        self.sent_messages = 0
        self.failed_records = 0

    def __repr__(self) -> str:
        return (
            f"TraceStats(appended={self.appended}, dropped={self.dropped}, sent_records={self.sent_records},"
            f" sent_messages={self.sent_messages}, failed_records={self.failed_records})"
        )


class TraceDispatcher:
    """Buffers encoded records and sends them to the trace topic in the background.

    Args:
        group: the traced producer's or consumer's group (the inner producer's group is derived).
        namesrv_addr: the NameServers.
        trace_topic: where records go (None: ``RMQ_SYS_TRACE_TOPIC``).
        client_options: ``access_key``, ``secret_key``, ``serialize_type``, ``instance_name`` of the
            traced client, given to the inner producer.
        buffer_size: most records waiting; more are dropped.
        flush_interval_s: how long a record may wait for company before it is sent.
        batch_records: most records of one trace message (a trace message's worth is sent at once).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None,
        trace_topic: str | None = None,
        client_options: dict[str, Any] | None = None,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        flush_interval_s: float = 0.1,
        batch_records: int = BATCH_RECORDS,
    ) -> None:
        assert buffer_size > 0 and flush_interval_s > 0 and batch_records > 0
        self.group = group
        self.namesrv_addr = namesrv_addr
        self.trace_topic = trace_topic or TRACE_TOPIC
        self.client_options = dict(client_options or {})
        self.buffer_size = buffer_size
        self.flush_interval_s = flush_interval_s
        self.batch_records = batch_records
        self.stats = TraceStats()
        #: records waiting to be encoded (``_Pending``), and encoded ones waiting to be sent
        self._buffer: deque[_Pending] = deque()
        self._ready: _Encoded | None = None
        #: records in both
        self._count = 0
        self._producer: Producer | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._open = False

    def append(self, record: str, keys: str) -> None:
        """Buffer one encoded record and its index keys (space-separated); O(1), never waits."""
        self.add(_encoded, (record, keys), 1)

    def add(self, encoder: _Encoder, what: Any, n: int) -> None:
        """Buffer ``n`` records that ``encoder(what, out)`` writes when they are sent; O(1), never
        waits. All ``n`` are dropped (and counted) when they do not fit."""
        if not self._open or self._count + n > self.buffer_size:
            self.stats.dropped += n
            return
        self._buffer.append((encoder, what, n))
        self._count += n
        self.stats.appended += n
        if self._count >= self.batch_records:
            self._wake.set()

    @property
    def pending(self) -> int:
        """Records buffered and not yet sent."""
        return self._count

    async def start(self) -> None:
        """Start the inner producer and the sending task."""
        from rocketpy.client.producer import Producer  # the producer itself imports this module

        opts = self.client_options
        self._producer = Producer(
            f"{TRACE_GROUP_PREFIX}-{self.group}",
            self.namesrv_addr,
            send_timeout=5.0,
            retry_times=1,
            auto_batch=False,
            compress_level=TRACE_COMPRESS_LEVEL,
            access_key=opts.get("access_key"),
            secret_key=opts.get("secret_key"),
            serialize_type=opts.get("serialize_type"),
            instance_name=opts.get("instance_name", "DEFAULT"),
        )
        await self._producer.start()
        self._open = True
        self._task = asyncio.get_running_loop().create_task(self._routine(), name="rocketpy-trace")

    async def shutdown(self, timeout_s: float = SHUTDOWN_FLUSH_S) -> None:
        """Send what is buffered (within ``timeout_s``), then stop; later records are dropped."""
        self._open = False
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        try:
            async with asyncio.timeout(timeout_s):
                while self._count:
                    await self._send_one_batch()
                if self._in_flight:
                    await asyncio.gather(*self._in_flight, return_exceptions=True)
        except TimeoutError:
            log.warning("trace: %d record(s) not sent at shutdown (timeout)", self._count)
        self.stats.dropped += self._count
        self._buffer.clear()
        self._ready = None
        self._count = 0
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.shutdown()

    async def _routine(self) -> None:
        """Send full trace messages as soon as a message's worth is buffered, and everything
        buffered once every ``flush_interval_s``; at most ``MAX_SENDS_IN_FLIGHT`` at once. Each
        batch is taken here, before its send starts, so no send starts with nothing to send and a
        partial batch waits for company until the interval is up."""
        loop = asyncio.get_running_loop()
        in_flight = self._in_flight
        due = loop.time() + self.flush_interval_s
        while True:
            wait_s = due - loop.time()
            if wait_s > 0:
                try:
                    async with asyncio.timeout(wait_s):
                        await self._wake.wait()
                except TimeoutError:
                    pass
            self._wake.clear()
            flush_all = loop.time() >= due
            while (
                self._count >= (1 if flush_all else self.batch_records)
                and len(in_flight) < MAX_SENDS_IN_FLIGHT
            ):
                records, keys = self._take_batch()
                if not records:
                    break
                task = loop.create_task(self._send_batch(records, keys))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            if len(in_flight) >= MAX_SENDS_IN_FLIGHT:
                await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            elif flush_all or not self._count:  # all sent (or none to send): the next interval starts
                due = loop.time() + self.flush_interval_s

    def _take_batch(self) -> tuple[list[str], set[str]]:
        """The records and index keys of the next trace message (at most ``batch_records`` records;
        records are added while the body is under ``BATCH_BODY_BYTES`` characters, and while their
        KEYS stay within ``BATCH_KEYS_CHARS``: each traced id once, however many records name it),
        encoding buffered records as it needs them; what does not fit waits for the next one."""
        records: list[str] = []
        keys: set[str] = set()
        size = keys_chars = 0
        buf = self._buffer
        most = self.batch_records
        while len(records) < most and size < BATCH_BODY_BYTES and keys_chars < BATCH_KEYS_CHARS:
            enc = self._ready
            if enc is not None:
                self._ready = None
            elif buf:  # encode what this message has room for (one call per buffered entry)
                enc = _Encoded()
                texts, room = enc.texts, most - len(records)
                while buf and len(texts) < room:
                    encoder, what, n = buf.popleft()
                    had = len(texts)
                    encoder(what, enc)
                    self._count -= n - (len(texts) - had)  # an encoder may write fewer, never more
            else:
                break
            take = min(len(enc.texts), most - len(records))
            item_size = sum(map(len, enc.texts[:take]))
            item_keys = _new_id_chars(enc, take, keys) + _user_key_chars(enc, take)
            if size + item_size > BATCH_BODY_BYTES or keys_chars + item_keys > BATCH_KEYS_CHARS:
                take = _fitting(
                    enc, take, BATCH_BODY_BYTES - size, BATCH_KEYS_CHARS - keys_chars, keys, not records
                )
                item_size = sum(map(len, enc.texts[:take]))
                item_keys = _new_id_chars(enc, take, keys) + _user_key_chars(enc, take)
                if take == 0:  # the next record's keys do not fit: it starts the next message
                    self._ready = enc
                    break
            size += item_size
            keys_chars += item_keys
            if take < len(enc.texts):
                self._ready, enc = enc, enc.cut(take)
            records.extend(enc.texts)
            keys.update(enc.ids)
            for _, record_keys in enc.keyed:
                keys.update(record_keys)
        self._count -= len(records)
        keys.discard("")
        return records, keys

    async def _send_one_batch(self) -> None:
        records, keys = self._take_batch()
        await self._send_batch(records, keys)

    async def _send_batch(self, records: list[str], keys: set[str]) -> None:
        """Send one trace message of ``records`` indexed by ``keys`` (counted either way)."""
        if not records:
            return
        if self._producer is None:
            self.stats.failed_records += len(records)
            return
        msg = Message(self.trace_topic, "".join(records).encode(), keys=sorted(keys))
        try:
            await self._producer.send(msg)
        except Exception as e:  # a trace is best effort: count it, never fail the traced client
            self.stats.failed_records += len(records)
            log.warning("trace: %d record(s) to %s not sent: %s", len(records), self.trace_topic, e)
            return
        self.stats.sent_records += len(records)
        self.stats.sent_messages += 1


def new_dispatcher(
    group: str,
    namesrv_addr: str | None,
    trace_topic: str | None,
    settings: ClientSettings,
    batch_records: int = BATCH_RECORDS,
) -> TraceDispatcher:
    """The dispatcher of a traced client: its inner producer signs and encodes as the client does
    (``batch_records``: ``CONSUME_BATCH_RECORDS`` for a consumer's)."""
    options = {
        "access_key": settings.access_key,
        "secret_key": settings.secret_key,
        "serialize_type": settings.serialize_type,
        "instance_name": settings.instance_name,
    }
    return TraceDispatcher(group, namesrv_addr, trace_topic, options, batch_records=batch_records)


def msg_type_of(msg: Message, sys_flag: int) -> int:
    """RocketMQ's ``MessageType`` ordinal of a send: half (transaction), delay, or normal."""
    if sys_flag & TRANSACTION_PREPARED_TYPE:
        return TRANS_MSG_HALF
    if not msg.properties and not msg.delay_level:  # no timer properties either: the usual message
        return NORMAL_MSG
    if msg.delay_level or msg.deliver_time_ms or msg.delay_seconds:
        return DELAY_MSG
    return NORMAL_MSG


def _skip(msg: Message | MessageExt) -> bool:
    """RocketMQ's switch: a message with ``TRACE_ON=false`` is not traced."""
    props = msg.properties
    return bool(props) and props.get(MessageConst.TRACE_SWITCH) == "false"


def _keys_text(keys: Sequence[str] | str | None) -> str | None:
    if not keys:
        return None
    return keys if isinstance(keys, str) else " ".join(keys)


#: ``ip:port`` of an offset msg id's host part (its first 16 hex chars), per store host seen.
_STORE_HOSTS: dict[str, str | None] = {}
_STORE_HOSTS_MAX = 4096


def _store_host(offset_msg_id: str | None) -> str | None:
    """The store host an offset msg id names (None: not an offset msg id)."""
    if not offset_msg_id:
        return None
    host = offset_msg_id[:16]
    try:
        return _STORE_HOSTS[host]
    except KeyError:
        pass
    try:
        ip, port, _ = decode_offset_msg_id(offset_msg_id)
    except ValueError:
        return None
    if len(_STORE_HOSTS) >= _STORE_HOSTS_MAX:
        _STORE_HOSTS.clear()
    text = _STORE_HOSTS[host] = f"{ip}:{port}"
    return text


def _encoded(what: tuple[str, str], out: _Encoded) -> None:
    """An already encoded record and its space-separated keys."""
    record, keys = what
    out.keyed.append((len(out.texts), keys.split(" ")))
    out.texts.append(record)
    out.ids.append("")


@twin
def _encode_pub(what: tuple[Any, ...], out: _Encoded) -> None:
    begin_ms, group, topic, msg_id, tags, keys, omid, body_len, cost_ms, msg_type, ok = what
    if keys:
        out.keyed.append((len(out.texts), keys))
    host = _STORE_HOSTS.get(omid[:16]) if omid else None
    if host is None:
        host = _store_host(omid)
    out.texts.append(
        f"Pub\x01{begin_ms}\x01{DEFAULT_REGION}\x01{group}\x01{topic}\x01{msg_id}\x01"
        f"{NULL if tags is None else tags}\x01{' '.join(keys) if keys else NULL}\x01"
        f"{NULL if host is None else host}\x01{body_len}\x01{cost_ms}\x01{msg_type}\x01"
        f"{NULL if omid is None else omid}\x01{'true' if ok else 'false'}\x02"
    )
    out.ids.append(msg_id)


class ProducerTracer:
    """The producer's hook: one Pub record per sent message (RocketMQ's ``SendMessageTraceHookImpl``).

    Args:
        dispatcher: where records go.
        group: the producer group.
        spans: OpenTelemetry span maker (None: no spans).
    """

    def __init__(self, dispatcher: TraceDispatcher, group: str, spans: Any = None) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self.spans = spans

    def pub(self, msg: Message, result: SendResult, begin_ms: int, cost_ms: int, msg_type: int) -> None:
        """Record one stored message (``begin_ms``: when the send started)."""
        d = self.dispatcher
        topic, props = msg.topic, msg.properties
        if topic == d.trace_topic or (props and props.get(MessageConst.TRACE_SWITCH) == "false"):
            return
        keys = msg.keys
        what = (
            begin_ms, self.group, topic, result.msg_id, msg.tags, tuple(keys) if keys else None,
            result.offset_msg_id, len(msg.body), cost_ms, msg_type, result.status is _SEND_OK,
        )  # fmt: skip
        if d._open and d._count < d.buffer_size:  # ``add`` of one record, without its call
            d._buffer.append((_encode_pub, what, 1))
            d._count += 1
            d.stats.appended += 1
            if d._count >= d.batch_records:
                d._wake.set()
        else:
            d.add(_encode_pub, what, 1)  # dropped and counted there
        if self.spans is not None:
            self.spans.send(self.group, msg, result, begin_ms, cost_ms)

    def end_transaction(
        self,
        msg: Message | MessageExt,
        msg_id: str,
        transaction_id: str | None,
        state: str,
        from_check: bool,
        store_host: str | None,
    ) -> None:
        """Record the end of a transaction (commit, rollback or unknown; ``from_check``: a broker asked)."""
        if _skip(msg):
            return
        keys = _keys_text(msg.keys)
        record = (
            f"EndTransaction\x01{int(time.time() * 1000)}\x01{DEFAULT_REGION}\x01{self.group}\x01{msg.topic}"
            f"\x01{msg_id}\x01{_t(msg.tags)}\x01{_t(keys)}\x01{_t(store_host)}\x011\x01{_t(transaction_id)}"
            f"\x01{state}\x01{'true' if from_check else 'false'}\x02"
        )
        self.dispatcher.append(record, f"{msg_id} {keys}" if keys else msg_id)


def context_code(result: Any, ok: bool) -> int:
    """RocketMQ's ``ConsumeReturnType`` of a listener result (``ok``: it was the success status)."""
    if ok:
        return CTX_SUCCESS
    if result is None:
        return CTX_RETURNNULL
    if isinstance(result, BaseException):
        return CTX_EXCEPTION
    return CTX_FAILED


#: What ``ConsumeTracer.before`` hands to ``after``: the call's number, its traced messages per
#: chunk, how many, their ids in order and their keys (``' '``-joined, None for a message without;
#: None when none has keys), read once for both records.
BeforeToken = tuple[int, list[list[MessageExt]], int, list[str], list[str | None] | None]


def _chunk_hexes(n: int) -> Sequence[str]:
    """The chunk parts of the request ids of a call of ``n`` chunks (``_request_ids_of``)."""
    return _CHUNK_HEX if n <= len(_CHUNK_HEX) else [f"{i:04X}" for i in range(n)]


def _key_texts(msgs: list[MessageExt]) -> list[str | None] | None:
    """Each message's keys as its records write them (None: it has none); None when none has any."""
    if not any(m.keys for m in msgs):
        return None
    return [" ".join(m.keys) if m.keys else None for m in msgs]


def _add_keyed(out: _Encoded, first: int, texts: Sequence[str | None]) -> None:
    """Note the traced messages' own keys of the records from ``first`` on (one per message)."""
    keyed = out.keyed
    for j, text in enumerate(texts):
        if text:
            keyed.append((first + j, text.split(" ")))


# The buffered entries hold plain values (ids, counts, texts), never the consumed messages: a message
# kept alive until its records are encoded would be traversed by every young-generation collection
# meanwhile (the collector runs more often while a buffer grows), which cost more than the encoding.


@twin
def _encode_before(what: tuple[Any, ...], out: _Encoded) -> None:
    now, group, seq, sizes, ids, retries, key_texts = what
    texts = out.texts
    first = len(texts)
    head = f"SubBefore\x01{now}\x01{DEFAULT_REGION}\x01{group}\x01{_REQUEST_PREFIX}{seq:012X}"
    hexes = _chunk_hexes(len(sizes))
    if len(sizes) == len(ids):  # a message per chunk (the default batch size of one)
        chunk_hex: Sequence[str] = hexes
    else:
        chunk_hex = [hexes[i] for i, size in enumerate(sizes) for _ in range(size)]
    if key_texts is None:
        texts.extend([
            f"{head}{h}\x01{msg_id}\x01{r}\x01{NULL}\x02"
            for h, msg_id, r in zip(chunk_hex, ids, retries, strict=False)  # (hexes may be longer)
        ])  # fmt: skip
    else:
        texts.extend([
            f"{head}{h}\x01{msg_id}\x01{r}\x01{NULL if k is None else k}\x02"
            for h, msg_id, r, k in zip(chunk_hex, ids, retries, key_texts, strict=False)
        ])  # fmt: skip
        _add_keyed(out, first, key_texts)
    out.ids.extend(ids)


@twin
def _encode_after(what: tuple[Any, ...], out: _Encoded) -> None:
    group, seq, sizes, divisors, ids, key_texts, results, times, ok_statuses = what
    texts, out_ids = out.texts, out.ids
    base = f"SubAfter\x01{_REQUEST_PREFIX}{seq:012X}"
    hexes = _chunk_hexes(len(sizes))
    r0 = results[0] if results else None
    if (
        divisors is None
        and len(ids) == len(sizes)
        and results.count(r0) == len(results)
        and r0 is not SKIPPED
    ):
        # the usual call: a message per chunk, none filtered, one result for all
        ok = _is_ok(r0, ok_statuses)
        mid = f"\x01{'true' if ok else 'false'}\x01"
        code = f"\x01{context_code(r0, ok)}\x01"
        first = len(texts)
        tail = f"\x01{group}\x02"
        if key_texts is None:
            null = f"{mid}{NULL}{code}"
            texts.extend([
                f"{base}{h}\x01{msg_id}\x01{int((e - b) * 1000)}{null}{int(e * 1000)}{tail}"
                for h, msg_id, b, e in zip(hexes, ids, times[::2], times[1::2], strict=False)
            ])  # fmt: skip
        else:
            texts.extend([
                f"{base}{h}\x01{msg_id}\x01{int((e - b) * 1000)}{mid}{NULL if k is None else k}{code}"
                f"{int(e * 1000)}{tail}"
                for h, msg_id, b, e, k in zip(hexes, ids, times[::2], times[1::2], key_texts, strict=False)
            ])  # fmt: skip
        out_ids.extend(ids)
        if key_texts is not None:
            _add_keyed(out, first, key_texts)
        return
    _encode_after_chunks(out, base, hexes, what)


def _encode_after_chunks(out: _Encoded, base: str, hexes: Sequence[str], what: tuple[Any, ...]) -> None:
    """``_encode_after``'s general case, chunk by chunk (several messages a chunk, filtered or
    skipped chunks, a result per chunk); both twins of ``_encode_after`` call it."""
    group, _seq, sizes, divisors, ids, key_texts, results, times, ok_statuses = what
    texts, out_ids = out.texts, out.ids
    j = 0  # the first message of chunk i in ids and key_texts
    for i, result in enumerate(results):
        n = sizes[i]
        if result is SKIPPED or not n:
            j += n
            continue
        begin, end = times[2 * i], times[2 * i + 1]
        ok = _is_ok(result, ok_statuses)
        cost = int((end - begin) * 1000 / max(1, n if divisors is None else divisors[i]))
        tail = f"\x01{context_code(result, ok)}\x01{int(end * 1000)}\x01{group}\x02"
        mid = f"\x01{cost}\x01{'true' if ok else 'false'}\x01"
        first = len(texts)
        for jj in range(j, j + n):
            k = None if key_texts is None else key_texts[jj]
            texts.append(f"{base}{hexes[i]}\x01{ids[jj]}{mid}{NULL if k is None else k}{tail}")
        out_ids.extend(ids[j : j + n])
        if key_texts is not None:
            _add_keyed(out, first, key_texts[j : j + n])
        j += n


def _is_ok(result: Any, ok_statuses: tuple[Any, ...]) -> bool:
    """The listener's result is a success status (compared by identity)."""
    for s in ok_statuses:
        if result is s:
            return True
    return False


class ConsumeTracer:
    """The listener runner's hook: SubBefore and SubAfter per message of each listener call.

    Each runner call (all its chunks) is buffered as one SubBefore and one SubAfter entry, encoded
    when sent; the retry counts are read at ``before`` (a failed call raises them afterwards), the
    results and times at ``after`` are kept as they are (the runner's own lists, not changed after).

    Args:
        dispatcher: where records go.
        group: the consumer group.
        ok: the listener's success status (``ConsumeStatus.CONSUME_SUCCESS`` or orderly ``SUCCESS``
            are both accepted, compared by identity).
        spans: OpenTelemetry span maker (None: no spans).
    """

    def __init__(
        self, dispatcher: TraceDispatcher, group: str, ok: tuple[Any, ...], spans: Any = None
    ) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self.ok = ok
        self.spans = spans

    def before(self, chunks: list[list[MessageExt]]) -> BeforeToken:
        """SubBefore records for the chunks about to be consumed; returns what ``after`` needs."""
        now = int(time.time() * 1000)
        switch = MessageConst.TRACE_SWITCH
        traced = chunks
        for chunk in chunks:
            for m in chunk:
                props = m.properties
                if props and props.get(switch) == "false":
                    traced = [[m for m in c if not _skip(m)] for c in chunks]
                    break
            else:
                continue
            break
        msgs = [m for c in traced for m in c]
        ids = [m.msg_id for m in msgs]
        key_texts = _key_texts(msgs)
        seq = next(_request_ids)
        if msgs:
            retries = [m.reconsume_times for m in msgs]
            sizes = [len(c) for c in traced]
            what = (now, self.group, seq, sizes, ids, retries, key_texts)
            self.dispatcher.add(_encode_before, what, len(msgs))
        return seq, traced, len(msgs), ids, key_texts

    def after(
        self, chunks: list[list[MessageExt]], token: BeforeToken, results: list[Any], times: list[float]
    ) -> None:
        """SubAfter records: each chunk's result and its cost per message (encoded when sent).

        ``times`` holds a (start, end) ``time.time()`` pair per chunk, in order; a chunk that was
        not handed to the listener (its queue was released meanwhile) has no record.
        """
        seq, traced, n, ids, key_texts = token
        if len(results) != len(traced):
            raise ValueError(f"{len(results)} results for {len(traced)} chunks")
        if SKIPPED in results:  # rare: count the chunks that were consumed
            n = sum(len(c) for c, r in zip(traced, results, strict=True) if r is not SKIPPED)
        if n:
            sizes = [len(c) for c in traced]
            divisors = None if traced is chunks else [len(c) for c in chunks]  # cost: per message given
            what = (self.group, seq, sizes, divisors, ids, key_texts, results, times, self.ok)
            self.dispatcher.add(_encode_after, what, n)
        spans = self.spans
        if spans is not None:
            for i, (chunk, result) in enumerate(zip(traced, results, strict=True)):
                if result is not SKIPPED:
                    ok = _is_ok(result, self.ok)
                    for m in chunk:
                        spans.process(self.group, m, times[2 * i], times[2 * i + 1], ok)


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.client import _traceenc

    same_signature(_encode_pub)(_traceenc._encode_pub)
    same_signature(_traceenc._encode_pub)(_encode_pub)
    same_signature(_encode_before)(_traceenc._encode_before)
    same_signature(_traceenc._encode_before)(_encode_before)
    same_signature(_encode_after)(_traceenc._encode_after)
    same_signature(_traceenc._encode_after)(_encode_after)
