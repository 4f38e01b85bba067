"""Message trace in the SDK: the records a traced producer or consumer writes, and their sender.

Owns ``TraceDispatcher`` (one per traced producer or consumer, RocketMQ's ``AsyncTraceDispatcher``):
records are written on the event loop as they happen, straight into the body of the trace message
being filled (``write_pub``, ``write_before``, ``write_after``: RocketMQ's layout, UTF-8), with the
message's KEYS beside it (each traced id once, and the traced messages' own keys, so the broker's
index finds them); they never wait for anything. A full buffer (``buffer_size`` records written and
not yet sent) drops a hook's records and counts them (``TraceStats.dropped``), so tracing never
slows a send or a listener. A trace message is sealed when it holds ``batch_records`` records
(``BATCH_RECORDS`` for a producer's, ``CONSUME_BATCH_RECORDS`` for a consumer's), ``BATCH_BODY_BYTES``
of body, or as much KEYS as ``BATCH_KEYS_CHARS`` allows; a background task sends sealed messages at
once and the one being filled every ``flush_interval_s``, through an inner producer (group
``_INNER_TRACE_PRODUCER-<group>``, RocketMQ's name; zlib level ``TRACE_COMPRESS_LEVEL``, off the
loop: ``client/deflate.py``), at most ``MAX_SENDS_IN_FLIGHT`` at once.

The record layouts are ``rocketpy.trace``'s (a unit test checks the hooks' records equal
``rocketpy.trace.encode_record``); the three writers are twins, compiled in ``_traceenc.pyx`` (the
same bytes and KEYS, with no Python object made per record).
``ProducerTracer`` and ``ConsumeTracer`` are the hooks the producer and the listener runner call;
with ``opentelemetry-api`` installed they also end OpenTelemetry spans (``client/trace_otel.py``).
"""

from __future__ import annotations

import asyncio
import functools
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


def _chunk_hex(i: int) -> str:
    """The chunk part of the request id of a listener runner call's ``i``-th chunk (its records'
    request id is ``_REQUEST_PREFIX``, the call's number in 12 hex digits, then this)."""
    return _CHUNK_HEX[i] if i < 1024 else f"{i:04X}"


#: A sealed trace message: its body, its KEYS (in order, each once) and how many records it holds.
Sealed = tuple[bytearray, list[str], int]


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
    """Holds the trace messages being written and sends them to the trace topic in the background.

    The open message (the one records are written to) is ``_body`` / ``_keys`` / ``_records``;
    sealed ones wait in ``_sealed``. The writers (``write_pub``, ``write_before``, ``write_after``)
    fill them; ``_take`` hands the next one to send.

    Args:
        group: the traced producer's or consumer's group (the inner producer's group is derived).
        namesrv_addr: the NameServers.
        trace_topic: where records go (None: ``RMQ_SYS_TRACE_TOPIC``).
        client_options: ``access_key``, ``secret_key``, ``serialize_type``, ``instance_name`` of the
            traced client, given to the inner producer.
        buffer_size: most records waiting; more are dropped.
        flush_interval_s: how long a record may wait for company before it is sent.
        batch_records: most records of one trace message (a full one is sent at once).
    """

    # (slots: the compiled writers read and write the fields a hook touches in place)
    __slots__ = (
        "_body",
        "_count",
        "_in_flight",
        "_keys",
        "_keys_chars",
        "_open",
        "_producer",
        "_records",
        "_sealed",
        "_task",
        "_wake",
        "batch_records",
        "buffer_size",
        "client_options",
        "flush_interval_s",
        "group",
        "namesrv_addr",
        "stats",
        "trace_topic",
    )

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
        #: the open trace message: its body, its KEYS (each once, in order), their characters with
        #: a space each, and its records
        self._body = bytearray()
        self._keys: dict[str, None] = {}
        self._keys_chars = 0
        self._records = 0
        #: sealed trace messages waiting to be sent
        self._sealed: deque[Sealed] = deque()
        #: records in the open and sealed messages
        self._count = 0
        self._producer: Producer | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._open = False

    def append(self, record: str, keys: str) -> None:
        """Write one encoded record (``\\x02``-terminated) and its index keys (space-separated);
        never waits (dropped and counted when the buffer is full)."""
        if self._takes(1):
            _put(self, record.encode(), keys.split(" "))

    def _takes(self, n: int) -> bool:
        """Whether ``n`` more records fit the buffer (counted as appended), else they are dropped
        (counted)."""
        if not self._open or self._count + n > self.buffer_size:
            self.stats.dropped += n
            return False
        self._count += n
        self.stats.appended += n
        return True

    def _seal(self) -> None:
        """Close the open trace message (when it holds records) and wake the sender."""
        if self._records:
            self._sealed.append((self._body, list(self._keys), self._records))
            self._body = bytearray()
            self._keys = {}
            self._keys_chars = 0
            self._records = 0
            self._wake.set()

    def _take(self) -> Sealed | None:
        """The next trace message to send: the oldest sealed one, else the open one (sealed now);
        None when no record is waiting."""
        if not self._sealed:
            self._seal()
            if not self._sealed:
                return None
        sealed = self._sealed.popleft()
        self._count -= sealed[2]
        return sealed

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
                while (sealed := self._take()) is not None:
                    await self._send_batch(sealed)
                if self._in_flight:
                    await asyncio.gather(*self._in_flight, return_exceptions=True)
        except TimeoutError:
            log.warning("trace: %d record(s) not sent at shutdown (timeout)", self._count)
        self.stats.dropped += self._count
        self._sealed.clear()
        self._body, self._keys, self._keys_chars, self._records = bytearray(), {}, 0, 0
        self._count = 0
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.shutdown()

    async def _routine(self) -> None:
        """Send each trace message as soon as it is sealed, and the open one once every
        ``flush_interval_s``; at most ``MAX_SENDS_IN_FLIGHT`` at once. A partial message waits for
        company until the interval is up; no send starts with nothing to send."""
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
            while (self._sealed or (flush_all and self._records)) and len(in_flight) < MAX_SENDS_IN_FLIGHT:
                sealed = self._take()
                if sealed is None:
                    break
                task = loop.create_task(self._send_batch(sealed))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            if len(in_flight) >= MAX_SENDS_IN_FLIGHT:
                await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            elif flush_all or not self._count:  # all sent (or none to send): the next interval starts
                due = loop.time() + self.flush_interval_s

    async def _send_batch(self, sealed: Sealed) -> None:
        """Send one trace message (its records counted either way)."""
        body, keys, records = sealed
        if self._producer is None:
            self.stats.failed_records += records
            return
        # KEYS as the property itself (none empty, each once; the property check refuses \x01 and
        # \x02): the per-key copy and check of ``keys=`` took ~0.1 ms a trace message of ~800 keys
        msg = Message(
            self.trace_topic, bytes(body), properties={MessageConst.KEYS: " ".join(keys)} if keys else None
        )
        try:
            await self._producer.send(msg)
        except Exception as e:  # a trace is best effort: count it, never fail the traced client
            self.stats.failed_records += records
            log.warning("trace: %d record(s) to %s not sent: %s", records, self.trace_topic, e)
            return
        self.stats.sent_records += records
        self.stats.sent_messages += 1


def _put(d: TraceDispatcher, record: bytes, keys: Sequence[str]) -> None:
    """Write one record and its index keys (its traced id first, then the message's own) to the
    open trace message of ``d``, counted already (``_takes``). The message is sealed first when the
    keys new to it would pass ``BATCH_KEYS_CHARS`` (the record waits for the next one; an empty
    message takes it anyway, so an oversized record is sent, refused and counted, never kept),
    and after when it is full (``batch_records`` records or ``BATCH_BODY_BYTES`` of body)."""
    fresh = [k for k in dict.fromkeys(keys) if k]  # each once, none empty
    new = [k for k in fresh if k not in d._keys]
    chars = sum(map(len, new)) + len(new)
    if d._records and d._keys_chars + chars > BATCH_KEYS_CHARS:
        d._seal()
        new = fresh
        chars = sum(map(len, new)) + len(new)
    d._body += record
    for k in new:
        d._keys[k] = None
    d._keys_chars += chars
    d._records += 1
    if d._records >= d.batch_records or len(d._body) >= BATCH_BODY_BYTES:
        d._seal()


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


@twin
def write_pub(
    d: TraceDispatcher,
    group: str,
    msg: Message,
    result: SendResult,
    begin_ms: int,
    cost_ms: int,
    msg_type: int,
) -> bool:
    """Write the Pub record of one stored message to ``d`` (RocketMQ's ``SendMessageTraceHookImpl``;
    ``begin_ms``: when the send started). False when the message is not traced: a trace message
    itself, or one with ``TRACE_ON=false``."""
    topic = msg.topic
    if topic == d.trace_topic or _skip(msg):
        return False
    if not d._takes(1):
        return True
    keys, tags = msg.keys, msg.tags
    key_text = " ".join(keys) if keys else None
    msg_id, omid = result.msg_id, result.offset_msg_id
    host = _store_host(omid)
    record = (
        f"Pub\x01{begin_ms}\x01{DEFAULT_REGION}\x01{group}\x01{topic}\x01{msg_id}\x01"
        f"{NULL if tags is None else tags}\x01{NULL if key_text is None else key_text}\x01"
        f"{NULL if host is None else host}\x01{len(msg.body)}\x01{cost_ms}\x01{msg_type}\x01"
        f"{NULL if omid is None else omid}\x01{'true' if result.status is _SEND_OK else 'false'}\x02"
    )
    _put(d, record.encode(), _index_keys(msg_id, key_text))
    return True


@twin
def write_sent(
    d: TraceDispatcher, group: str, msg: Message, result: SendResult, begin: float, end: float
) -> bool:
    """``write_pub`` of a message ``Producer.send`` stored: sent from ``begin`` to ``end``
    (``time.time()``)."""
    return write_pub(d, group, msg, result, int(begin * 1000), int((end - begin) * 1000), msg_type_of(msg, 0))


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
        #: ``Producer.send``'s hook, ``sent(msg, result, begin, end)`` (``time.time()`` at the send's
        #: start and end): ``write_sent`` itself, bound, when there are no spans to end
        self.sent: Callable[[Message, SendResult, float, float], object] = (
            functools.partial(write_sent, dispatcher, group) if spans is None else self._sent_with_spans
        )

    def pub(self, msg: Message, result: SendResult, begin_ms: int, cost_ms: int, msg_type: int) -> None:
        """Record one stored message (``begin_ms``: when the send started)."""
        traced = write_pub(self.dispatcher, self.group, msg, result, begin_ms, cost_ms, msg_type)
        if traced and self.spans is not None:
            self.spans.send(self.group, msg, result, begin_ms, cost_ms)

    def _sent_with_spans(self, msg: Message, result: SendResult, begin: float, end: float) -> None:
        if write_sent(self.dispatcher, self.group, msg, result, begin, end):
            self.spans.send(self.group, msg, result, int(begin * 1000), int((end - begin) * 1000))

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


#: What ``write_before`` hands to ``write_after``: the call's number, its traced messages per
#: chunk, their ids in order and their keys (``' '``-joined, None for a message without; None when
#: none has keys), read once for both records; and the KEYS of the open trace message when every
#: SubBefore record went to it (None otherwise): while it is still open, the SubAfter records'
#: ids and keys are in it already.
BeforeToken = tuple[int, list[list[MessageExt]], list[str], list[str | None] | None, dict[str, None] | None]


def _key_texts(chunks: list[list[MessageExt]]) -> list[str | None] | None:
    """Each message's keys as its records write them (None: it has none); None when none has any."""
    if not any(m.keys for c in chunks for m in c):
        return None
    return [" ".join(m.keys) if m.keys else None for c in chunks for m in c]


def _index_keys(msg_id: str, key_text: str | None) -> Sequence[str]:
    """A record's index keys: its traced id, then its message's own keys."""
    return (msg_id,) if key_text is None else [msg_id, *key_text.split(" ")]


@twin
def write_before(
    d: TraceDispatcher, group: str, now_ms: int, seq: int, chunks: list[list[MessageExt]]
) -> BeforeToken:
    """Write a SubBefore record per traced message of one listener runner call (``seq``: the
    call's number, ``now_ms``: its start); returns what ``write_after`` needs. The retry counts are
    read here (a failed call raises them afterwards)."""
    traced = chunks
    for chunk in chunks:
        if any(_skip(m) for m in chunk):
            traced = [[m for m in c if not _skip(m)] for c in chunks]
            break
    ids = [m.msg_id for c in traced for m in c]
    key_texts = _key_texts(traced)
    if not ids or not d._takes(len(ids)):
        return (seq, traced, ids, key_texts, None)
    first_keys = d._keys
    head = f"SubBefore\x01{now_ms}\x01{DEFAULT_REGION}\x01{group}\x01{_REQUEST_PREFIX}{seq:012X}"
    j = 0
    for i, chunk in enumerate(traced):
        h = _chunk_hex(i)
        for m in chunk:
            k = None if key_texts is None else key_texts[j]
            record = f"{head}{h}\x01{ids[j]}\x01{m.reconsume_times}\x01{NULL if k is None else k}\x02"
            _put(d, record.encode(), _index_keys(ids[j], k))
            j += 1
    return (seq, traced, ids, key_texts, first_keys if d._keys is first_keys else None)


@twin
def write_after(
    d: TraceDispatcher,
    group: str,
    chunks: list[list[MessageExt]],
    token: BeforeToken,
    results: list[Any],
    times: list[float],
    ok_statuses: tuple[Any, ...],
) -> None:
    """Write a SubAfter record per consumed traced message of one listener runner call: its chunk's
    result and cost per message given (none for a chunk that was not handed to the listener).

    ``times`` holds the ``time.time()`` before the first chunk and after each chunk: chunk ``i``
    ran from ``times[i]`` to ``times[i + 1]``.
    """
    _seq, traced, ids, key_texts, indexed = token
    if len(results) != len(traced):
        raise ValueError(f"{len(results)} results for {len(traced)} chunks")
    n = sum(len(c) for c, r in zip(traced, results, strict=True) if r is not SKIPPED)
    if not n or not d._takes(n):
        return
    base = f"SubAfter\x01{_REQUEST_PREFIX}{_seq:012X}"
    j = 0  # the first message of chunk i in ids and key_texts
    for i, chunk in enumerate(traced):
        size, result = len(chunk), results[i]
        if result is SKIPPED or not size:
            j += size
            continue
        end = times[i + 1]
        ok = _is_ok(result, ok_statuses)
        cost = int((end - times[i]) * 1000 / max(1, size if traced is chunks else len(chunks[i])))
        head = f"{base}{_chunk_hex(i)}\x01"
        mid = f"\x01{cost}\x01{'true' if ok else 'false'}\x01"
        tail = f"\x01{context_code(result, ok)}\x01{int(end * 1000)}\x01{group}\x02"
        for jj in range(j, j + size):
            k = None if key_texts is None else key_texts[jj]
            record = f"{head}{ids[jj]}{mid}{NULL if k is None else k}{tail}".encode()
            _put(d, record, () if d._keys is indexed else _index_keys(ids[jj], k))
        j += size


def _is_ok(result: Any, ok_statuses: tuple[Any, ...]) -> bool:
    """The listener's result is a success status (compared by identity)."""
    for s in ok_statuses:
        if result is s:
            return True
    return False


class ConsumeTracer:
    """The listener runner's hook: SubBefore and SubAfter per message of each listener call.

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
        return write_before(self.dispatcher, self.group, int(time.time() * 1000), next(_request_ids), chunks)

    def after(
        self, chunks: list[list[MessageExt]], token: BeforeToken, results: list[Any], times: list[float]
    ) -> None:
        """SubAfter records: each chunk's result and its cost per message.

        ``times`` holds the ``time.time()`` before the first chunk and after each chunk (chunk ``i``
        ran from ``times[i]`` to ``times[i + 1]``); a chunk that was not handed to the listener (its
        queue was released meanwhile) has no record.
        """
        write_after(self.dispatcher, self.group, chunks, token, results, times, self.ok)
        spans = self.spans
        if spans is not None:
            for i, (chunk, result) in enumerate(zip(token[1], results, strict=True)):
                if result is not SKIPPED:
                    ok = _is_ok(result, self.ok)
                    for m in chunk:
                        spans.process(self.group, m, times[i], times[i + 1], ok)


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.client import _traceenc

    same_signature(write_pub)(_traceenc.write_pub)
    same_signature(_traceenc.write_pub)(write_pub)
    same_signature(write_before)(_traceenc.write_before)
    same_signature(_traceenc.write_before)(write_before)
    same_signature(write_after)(_traceenc.write_after)
    same_signature(_traceenc.write_after)(write_after)
    same_signature(write_sent)(_traceenc.write_sent)
    same_signature(_traceenc.write_sent)(write_sent)
