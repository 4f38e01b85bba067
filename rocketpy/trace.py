"""Message trace records: RocketMQ's trace data layout (``TraceDataEncoder``), written and read.

A trace message (topic ``RMQ_SYS_TRACE_TOPIC`` by default, or ``rmq_sys_TRACE_DATA_<region>`` as
RocketMQ's cloud channel and its C++ client name it) carries one or more records in its body. Each
record ends with ``FIELD_SPLITOR`` (``\\x02``); its fields are separated by ``CONTENT_SPLITOR``
(``\\x01``); absent text fields are written ``null`` (Java's ``StringBuilder.append(null)``), so a
record written here and one written by RocketMQ's Java or C++ client read the same. The message's
KEYS are the traced messages' ids and keys, so the broker's index finds a message's records.

Layouts (field order; ``*`` fields are missing in records of older clients)::

    Pub            timestamp regionId group topic msgId tags keys storeHost bodyLength costTime
                   msgType offsetMsgId* success [clientHost*]
    SubBefore      timestamp regionId group requestId msgId retryTimes keys
    SubAfter       requestId msgId costTime success keys contextCode* timestamp* group*
    EndTransaction timestamp regionId group topic msgId tags keys storeHost msgType transactionId
                   transactionState fromTransactionCheck

rocketpy's broker writes two more kinds (``traceTopicEnable``; RocketMQ's decoder skips kinds it
does not know)::

    Deliver        timestamp brokerName group topic queueId queueOffset msgId clientHost retryTimes
    SendBack       timestamp brokerName group msgId retryTimes targetTopic

Decoding never raises on content: a field that is missing or does not parse is None, and the
record is kept with what it has (older clients wrote fewer fields). Pure: no I/O, no network.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields

from rocketpy.topic import SYSTEM_TOPIC_PREFIX, TRACE_TOPIC

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
#: RocketMQ's default region id (a broker's ``MSG_REGION``).
DEFAULT_REGION = "DefaultRegion"
#: ``rmq_sys_TRACE_DATA_<region>``: the trace topic of RocketMQ's cloud channel and C++ client.
TRACE_TOPIC_PREFIX = SYSTEM_TOPIC_PREFIX + "TRACE_DATA_"
#: The inner producer group of a traced client is this prefix + ``-`` + the client's group.
TRACE_GROUP_PREFIX = "_INNER_TRACE_PRODUCER"
NULL = "null"

#: ``MessageType`` ordinals of RocketMQ (Pub and EndTransaction ``msgType``).
MSG_TYPE_NAMES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg")
NORMAL_MSG, TRANS_MSG_HALF, TRANS_MSG_COMMIT, DELAY_MSG, ORDER_MSG = range(5)
#: ``ConsumeReturnType`` ordinals (SubAfter ``contextCode``).
CONTEXT_NAMES = ("SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED")
CTX_SUCCESS, CTX_TIME_OUT, CTX_EXCEPTION, CTX_RETURNNULL, CTX_FAILED = range(5)

KINDS = ("Pub", "SubBefore", "SubAfter", "EndTransaction", "Deliver", "SendBack")


@dataclass(slots=True)
class TraceRecord:
    """One decoded (or to be encoded) trace record; fields a kind does not carry stay None."""

    kind: str
    timestamp: int | None = None
    region_id: str | None = None
    group: str | None = None
    request_id: str | None = None
    topic: str | None = None
    msg_id: str | None = None
    tags: str | None = None
    keys: str | None = None
    store_host: str | None = None
    body_length: int | None = None
    cost_ms: int | None = None
    msg_type: int | None = None
    offset_msg_id: str | None = None
    success: bool | None = None
    client_host: str | None = None
    retry_times: int | None = None
    context_code: int | None = None
    transaction_id: str | None = None
    transaction_state: str | None = None
    from_transaction_check: bool | None = None
    broker_name: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    target_topic: str | None = None

    def as_dict(self) -> dict[str, object]:
        """The fields that are set (JSON output)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


#: Field order per kind (RocketMQ's, then rocketpy's broker kinds).
LAYOUTS: dict[str, tuple[str, ...]] = {
    "Pub": (
        "timestamp", "region_id", "group", "topic", "msg_id", "tags", "keys", "store_host", "body_length",
        "cost_ms", "msg_type", "offset_msg_id", "success", "client_host",
    ),
    "SubBefore": ("timestamp", "region_id", "group", "request_id", "msg_id", "retry_times", "keys"),
    "SubAfter": (
        "request_id", "msg_id", "cost_ms", "success", "keys", "context_code", "timestamp", "group",
    ),
    "EndTransaction": (
        "timestamp", "region_id", "group", "topic", "msg_id", "tags", "keys", "store_host", "msg_type",
        "transaction_id", "transaction_state", "from_transaction_check",
    ),
    "Deliver": (
        "timestamp", "broker_name", "group", "topic", "queue_id", "queue_offset", "msg_id", "client_host",
        "retry_times",
    ),
    "SendBack": ("timestamp", "broker_name", "group", "msg_id", "retry_times", "target_topic"),
}  # fmt: skip
#: How many fields (after the kind) each kind is written with (Pub: 13, without the old clientHost).
WRITTEN = {"Pub": 13, **{k: len(v) for k, v in LAYOUTS.items() if k != "Pub"}}
_INTS = frozenset(
    {"timestamp", "body_length", "cost_ms", "msg_type", "retry_times", "context_code", "queue_id",
     "queue_offset"}
)  # fmt: skip
_BOOLS = frozenset({"success", "from_transaction_check"})


def _text(value: object) -> str:
    if value is None:
        return NULL
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def encode_record(record: TraceRecord) -> str:
    """One record as RocketMQ writes it, ending with ``FIELD_SPLITOR``."""
    names = LAYOUTS[record.kind][: WRITTEN[record.kind]]
    parts = [record.kind, *(_text(getattr(record, n)) for n in names)]
    return CONTENT_SPLITOR.join(parts) + FIELD_SPLITOR


def _parse(name: str, raw: str) -> object:
    if name in _INTS:
        try:
            return int(raw)
        except ValueError:
            return None
    if name in _BOOLS:
        low = raw.lower()
        return True if low == "true" else False if low == "false" else None
    return None if raw in (NULL, "") else raw


def decode_record(text: str) -> TraceRecord | None:
    """One record (without its ``FIELD_SPLITOR``); None for an unknown kind or an empty text."""
    parts = text.split(CONTENT_SPLITOR)
    kind = parts[0].strip()
    layout = LAYOUTS.get(kind)
    if layout is None:
        return None
    values = parts[1:]
    if kind == "Pub" and len(values) == 12:  # an old client: no offsetMsgId before success
        values = [*values[:11], NULL, values[11]]
    record = TraceRecord(kind)
    for name, raw in zip(layout, values, strict=False):
        setattr(record, name, _parse(name, raw))
    return record


def decode_body(body: str | bytes) -> list[TraceRecord]:
    """Every record of a trace message body (unknown kinds and empty parts are skipped)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray | memoryview) else body
    out = []
    for part in text.split(FIELD_SPLITOR):
        if part.strip():
            record = decode_record(part)
            if record is not None:
                out.append(record)
    return out


def record_keys(record: TraceRecord) -> Iterator[str]:
    """The index keys of a record: its message id and the message's own keys (RocketMQ's TransKey)."""
    if record.msg_id:
        yield record.msg_id
    if record.keys:
        yield from (k for k in record.keys.split(" ") if k)


def is_trace_topic(topic: str) -> bool:
    """True for the default trace topic and RocketMQ's ``rmq_sys_TRACE_DATA_*`` topics."""
    return topic == TRACE_TOPIC or topic.startswith(TRACE_TOPIC_PREFIX)
