"""Message, MessageExt and MessageQueue: the message model shared by the SDK and the broker.

Owns the plain ``__slots__`` classes (no pydantic: these sit on the hot path), RocketMQ's property
names (``MessageConst``) and the ``k\\x01v\\x02`` properties string codec. ``Message.keys`` is always a
``list[str]``; on the wire it travels as the space-separated ``KEYS`` property and tags as ``TAGS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import total_ordering
from operator import methodcaller
from socket import inet_ntoa
from typing import TYPE_CHECKING, Any

from rocketpy._accel import twin
from rocketpy.msgid import offset_msg_id_from_packed

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


class MessageConst:
    """RocketMQ's well-known property names (``MessageConst.java``)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT = "WAIT"
    DELAY = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QID = "REAL_QID"
    TRAN_MSG = "TRAN_MSG"
    PGROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_KEY = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIME = "CONSUME_START_TIME"
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    TRANSACTION_ID = "__transactionId__"
    INNER_NUM = "INNER_NUM"
    INNER_BASE = "INNER_BASE"
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    SHARDING_KEY = "__SHARDINGKEY"
    DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
    DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
    PROPERTY_CRC32 = "__CRC32#"
    #: A popped message's receipt handle (``rocketpy.protocol.receipt``), set by the client.
    POP_CK = "POP_CK"
    #: When a POP first handed the message out (ms; kept across its redeliveries).
    FIRST_POP_TIME = "1ST_POP_TIME"
    KEY_SEPARATOR = " "


@twin
def properties_to_string(props: dict[str, str]) -> str:
    """Encode properties as RocketMQ does: ``name\\x01value\\x02`` per pair, trailing separator kept.

    Args:
        props: property names to values; ``None`` values are skipped.

    Returns:
        The encoded string ("" for no properties).
    """
    return "".join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items() if v is not None
    )


@twin
def string_to_properties(s: str) -> dict[str, str]:
    """Decode a RocketMQ properties string (inverse of ``properties_to_string``).

    Pairs without a name/value separator are ignored, as RocketMQ does. Well-formed strings take a
    C-level path (one split, one ``dict``); anything else falls back to the pair-by-pair loop.
    """
    if not s:
        return {}
    items = s.split(PROPERTY_SEPARATOR)
    if not items[-1]:
        items.pop()  # the trailing separator
    try:
        out = dict(map(_split_pair, items))
    except ValueError:  # an item without a name/value separator
        return _string_to_properties_loop(items)
    if "" in out:  # a pair with an empty name: ignored, as the loop does
        return _string_to_properties_loop(items)
    return out


_split_pair = methodcaller("split", NAME_VALUE_SEPARATOR, 1)


def _string_to_properties_loop(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            out[name] = value
    return out


_TIMER_ATTRS = (
    ("deliver_time_ms", MessageConst.TIMER_DELIVER_MS),
    ("delay_seconds", MessageConst.TIMER_DELAY_SEC),
)


def _int_or_none(raw: str | None) -> int | None:
    return int(raw) if raw is not None and raw.isdigit() and raw.isascii() else None


def _set_timer_property(props: dict[str, str], name: str, value: Any) -> None:
    """Store a timer attribute as its property; a bad value is kept as text for the send to refuse."""
    if value is None:
        props.pop(name, None)
    elif isinstance(value, int) and not isinstance(value, bool):
        props[name] = str(value)
    else:
        props[name] = repr(value)


def _keys_list(keys: str | Iterable[str] | None) -> list[str]:
    if keys is None:
        return []
    if isinstance(keys, str):
        return [k for k in keys.split(MessageConst.KEY_SEPARATOR) if k]
    return [str(k) for k in keys if k]


class Message:
    """A message to send.

    Args:
        topic: the topic name.
        body: the payload bytes.
        tags: an optional tag (used for broker-side tag filtering).
        keys: one key (str, space-separated words become several keys) or a list of keys; indexed by
            the broker for ``query_message``.
        properties: user properties (str -> str).
        delay_level: 0 for immediate delivery, 1..18 for RocketMQ's delay levels.
        flag: the user flag integer stored with the message.
        deliver_time_ms: deliver at this epoch time in ms (RocketMQ 5 timer message; the
            ``TIMER_DELIVER_MS`` property), up to the broker's ``timerMaxDelaySec`` ahead.
        delay_seconds: deliver this many seconds after the broker stores it (``TIMER_DELAY_SEC``).

    At most one of ``delay_level``, ``deliver_time_ms`` and ``delay_seconds`` per message; the
    send checks it (``MQClientError``).
    """

    __slots__ = ("body", "delay_level", "flag", "keys", "properties", "tags", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes = b"",
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: dict[str, str] | None = None,
        delay_level: int = 0,
        flag: int = 0,
        deliver_time_ms: int | None = None,
        delay_seconds: int | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        self.tags = tags
        self.keys: list[str] = [] if keys is None else _keys_list(keys)  # (no call for the usual None)
        self.properties: dict[str, str] = dict(properties) if properties else {}
        self.delay_level = delay_level
        self.flag = flag
        if deliver_time_ms is not None:
            self.deliver_time_ms = deliver_time_ms
        if delay_seconds is not None:
            self.delay_seconds = delay_seconds

    # Timer attributes live in ``properties`` (they travel as RocketMQ 5's properties): no slot.
    @property
    def deliver_time_ms(self) -> int | None:
        """Epoch ms to deliver at (``TIMER_DELIVER_MS``), None when not set."""
        return _int_or_none(self.properties.get(MessageConst.TIMER_DELIVER_MS))

    @deliver_time_ms.setter
    def deliver_time_ms(self, value: int | None) -> None:
        _set_timer_property(self.properties, MessageConst.TIMER_DELIVER_MS, value)

    @property
    def delay_seconds(self) -> int | None:
        """Seconds after storing to deliver at (``TIMER_DELAY_SEC``), None when not set."""
        return _int_or_none(self.properties.get(MessageConst.TIMER_DELAY_SEC))

    @delay_seconds.setter
    def delay_seconds(self, value: int | None) -> None:
        _set_timer_property(self.properties, MessageConst.TIMER_DELAY_SEC, value)

    def delivery_time_problem(self) -> str | None:
        """Why the delay settings cannot be sent (None when they can): checked at send."""
        props = self.properties
        given = [attr for attr, name in _TIMER_ATTRS if name in props]
        if self.delay_level:
            given.append("delay_level")
        if len(given) > 1:
            return (
                f"set at most one of delay_level, deliver_time_ms and delay_seconds (got {', '.join(given)})"
            )
        for attr, name in _TIMER_ATTRS:
            raw = props.get(name)
            if raw is not None and (_int_or_none(raw) is None or raw == "0"):
                return f"{attr}={raw} must be a positive int"
        return None

    def all_properties(self) -> dict[str, str]:
        """The full property map as sent on the wire: user properties plus TAGS, KEYS and DELAY."""
        props = dict(self.properties)
        if self.tags:
            props[MessageConst.TAGS] = self.tags
        if self.keys:
            props[MessageConst.KEYS] = MessageConst.KEY_SEPARATOR.join(self.keys)
        if self.delay_level > 0:
            props[MessageConst.DELAY] = str(self.delay_level)
        return props

    def properties_string(self) -> str:
        """The RocketMQ-encoded properties string of ``all_properties()``."""
        return properties_to_string(self.all_properties())

    def set_properties_string(self, s: str) -> None:
        """Fill tags, keys, delay level and user properties from a wire properties string."""
        props = string_to_properties(s)
        self.tags = props.pop(MessageConst.TAGS, None)
        self.keys = _keys_list(props.pop(MessageConst.KEYS, None))
        delay = props.pop(MessageConst.DELAY, None)
        self.delay_level = int(delay) if delay and delay.isdigit() else 0
        self.properties = props

    @property
    def unique_key(self) -> str | None:
        """The client unique id (``UNIQ_KEY``) if set."""
        return self.properties.get(MessageConst.UNIQ_KEY)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, "
            f"body_len={len(self.body)}, properties={self.properties!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in Message.__slots__)

    __hash__ = None  # type: ignore[assignment]


class MessageExt(Message):
    """A stored message as read back from a broker (``Message`` plus store metadata).

    ``msg_id`` is the client unique id (``UNIQ_KEY``) when present, else ``offset_msg_id``.
    ``born_host``/``store_host`` are ``(ip, port)`` tuples. A message decoded from a record keeps
    the 8 packed host bytes and builds the tuples and ``offset_msg_id`` on first access (consumer
    hot path: most listeners never read them); the values are the same as eager decoding.
    """

    __slots__ = (
        "_born_host",
        "_born_host8",
        "_msg_id",
        "_offset_msg_id",
        "_store_host",
        "_store_host8",
        "body_crc",
        "born_timestamp",
        "commitlog_offset",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_size",
        "store_timestamp",
        "sys_flag",
    )

    def __init__(self, topic: str = "", body: bytes = b"", **kw: Any) -> None:
        super().__init__(
            topic,
            body,
            tags=kw.pop("tags", None),
            keys=kw.pop("keys", None),
            properties=kw.pop("properties", None),
            delay_level=kw.pop("delay_level", 0),
            flag=kw.pop("flag", 0),
        )
        self._msg_id: str | None = kw.pop("msg_id", None)
        self._offset_msg_id: str | None = kw.pop("offset_msg_id", "")
        self.queue_id: int = kw.pop("queue_id", 0)
        self.queue_offset: int = kw.pop("queue_offset", 0)
        self.commitlog_offset: int = kw.pop("commitlog_offset", 0)
        self.born_timestamp: int = kw.pop("born_timestamp", 0)
        self.store_timestamp: int = kw.pop("store_timestamp", 0)
        self._born_host: tuple[str, int] | None = kw.pop("born_host", ("0.0.0.0", 0))
        self._store_host: tuple[str, int] | None = kw.pop("store_host", ("0.0.0.0", 0))
        self._born_host8: bytes | None = None
        self._store_host8: bytes | None = None
        self.reconsume_times: int = kw.pop("reconsume_times", 0)
        self.store_size: int = kw.pop("store_size", 0)
        self.body_crc: int = kw.pop("body_crc", 0)
        self.sys_flag: int = kw.pop("sys_flag", 0)
        self.prepared_transaction_offset: int = kw.pop("prepared_transaction_offset", 0)
        if kw:
            raise TypeError(f"MessageExt got unexpected fields: {sorted(kw)}")

    @property
    def msg_id(self) -> str:
        """``UNIQ_KEY`` if the producer set one, else the offset msg id (as RocketMQ's client)."""
        return self._msg_id or self.properties.get(MessageConst.UNIQ_KEY) or self.offset_msg_id

    @msg_id.setter
    def msg_id(self, value: str) -> None:
        self._msg_id = value

    @property
    def receipt_handle(self) -> str | None:
        """A popped message's receipt handle (its ``POP_CK`` property; None: not popped).

        ``SimpleConsumer.ack`` and ``change_invisible_duration`` send it back to its broker.
        """
        return self.properties.get(MessageConst.POP_CK)

    @receipt_handle.setter
    def receipt_handle(self, value: str) -> None:
        self.properties[MessageConst.POP_CK] = value

    @property
    def offset_msg_id(self) -> str:
        """Store host + commitlog offset as 32 uppercase hex chars (``queryMsgById``)."""
        mid = self._offset_msg_id
        if mid is None:
            assert self._store_host8 is not None, "a lazy offset msg id needs the packed store host"
            mid = self._offset_msg_id = offset_msg_id_from_packed(self._store_host8, self.commitlog_offset)
        return mid

    @offset_msg_id.setter
    def offset_msg_id(self, value: str) -> None:
        self._offset_msg_id = value

    @property
    def born_host(self) -> tuple[str, int]:
        """The producer's ``(ip, port)``."""
        host = self._born_host
        if host is None:
            assert self._born_host8 is not None, "a lazy born host needs its packed bytes"
            host = self._born_host = unpack_host8(self._born_host8)
        return host

    @born_host.setter
    def born_host(self, value: tuple[str, int]) -> None:
        self._born_host = value

    @property
    def store_host(self) -> tuple[str, int]:
        """The storing broker's ``(ip, port)``."""
        host = self._store_host
        if host is None:
            assert self._store_host8 is not None, "a lazy store host needs its packed bytes"
            host = self._store_host = unpack_host8(self._store_host8)
        return host

    @store_host.setter
    def store_host(self, value: tuple[str, int]) -> None:
        self._store_host = value

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"msg_id={self.msg_id!r}, tags={self.tags!r}, keys={self.keys!r}, body_len={len(self.body)})"
        )


_MAX_CACHED_HOSTS = 4096
_hosts: dict[bytes, tuple[str, int]] = {}


def unpack_host8(raw: bytes) -> tuple[str, int]:
    """``(ipv4, port)`` of 8 stored host bytes (ipv4 + int32 port, big-endian); hosts repeat, so
    the (immutable) tuples are cached, bounded by ``_MAX_CACHED_HOSTS``."""
    host = _hosts.get(raw)
    if host is None:
        host = (inet_ntoa(raw[:4]), int.from_bytes(raw[4:8], "big", signed=True))
        if len(_hosts) < _MAX_CACHED_HOSTS:
            _hosts[bytes(raw)] = host
    return host


@total_ordering
class MessageQueue:
    """One queue of a topic on one broker; hashable, ordered by (topic, broker_name, queue_id)."""

    __slots__ = ("broker_name", "queue_id", "topic")

    def __init__(self, topic: str, broker_name: str, queue_id: int) -> None:
        self.topic = topic
        self.broker_name = broker_name
        self.queue_id = queue_id

    def _key(self) -> tuple[str, str, int]:
        return (self.topic, self.broker_name, self.queue_id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageQueue):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: MessageQueue) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"MessageQueue(topic={self.topic!r}, broker_name={self.broker_name!r}, queue_id={self.queue_id})"
        )

    def to_dict(self) -> dict[str, Any]:
        """RocketMQ's wire shape ``{"topic", "brokerName", "queueId"}``."""
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MessageQueue:
        """Build from RocketMQ's wire shape ``{"topic", "brokerName", "queueId"}``."""
        return cls(d["topic"], d["brokerName"], int(d["queueId"]))


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy import _speedups
    from rocketpy._accel import same_signature

    same_signature(properties_to_string)(_speedups.properties_to_string)
    same_signature(_speedups.properties_to_string)(properties_to_string)
    same_signature(string_to_properties)(_speedups.string_to_properties)
    same_signature(_speedups.string_to_properties)(string_to_properties)
