"""Client-side message checks and wire preparation for the producer.

Owns: the rules a message must pass before anything is sent (``MQClientError`` naming the problem
and what to do), the ``PreparedMessage`` that carries a checked message's wire form (UNIQ_KEY,
properties string, compressed body and sys flag) across retries, and the batch splitter that packs
messages into requests of at most ``max_bytes`` encoded bytes.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from typing import Any

from rocketpy.client.deflate import COMPRESS_IN_THREAD_BYTES, deflate
from rocketpy.errors import MQClientError
from rocketpy.limits import MAX_MESSAGE_BYTES
from rocketpy.message import Message, MessageConst, MessageQueue
from rocketpy.msgid import new_unique_id
from rocketpy.protocol.headers.send import send_ext_v2
from rocketpy.record import (
    BATCH_HEAD,
    COMPRESSED_FLAG,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC,
    U16,
    body_crc,
)
from rocketpy.topic import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    TOPIC_NAME_RE,
    TRANS_HALF_TOPIC,
)

#: Most messages one send_batch call accepts.
MAX_BATCH_MESSAGES = 1_000_000
_RESERVED_TOPICS = frozenset(
    {AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC, TRANS_HALF_TOPIC, OFFSET_MOVED_EVENT}
)


_valid_topics: set[str] = set()
_VALID_TOPICS_MAX = 4096


def check_topic_name(topic: Any) -> str:
    """Validate a topic name for sending (RocketMQ's Validators.checkTopic); valid names are cached."""
    if topic in _valid_topics:
        return str(topic)
    if not isinstance(topic, str) or not topic:
        raise MQClientError(
            f"message topic must be a non-empty string, got {topic!r}: set Message(topic=...)"
        )
    if len(topic.encode()) > MAX_TOPIC_BYTES:
        raise MQClientError(
            f"topic {topic[:30]!r}... is longer than {MAX_TOPIC_BYTES} bytes: use a shorter name"
        )
    if not TOPIC_NAME_RE.match(topic):
        raise MQClientError(
            f"topic {topic!r} contains illegal characters: use only letters, digits, '%', '|', '_' and '-'"
        )
    if topic in _RESERVED_TOPICS:
        raise MQClientError(f"topic {topic!r} is a system topic and cannot be sent to: use your own topic")
    if len(_valid_topics) >= _VALID_TOPICS_MAX:
        _valid_topics.clear()
    _valid_topics.add(topic)
    return topic


def check_message(msg: Any, max_bytes: int = MAX_MESSAGE_BYTES) -> Message:
    """Check a message before sending.

    The usual message (a ``Message`` to an already validated topic, ``bytes`` body, no keys or
    properties, plain int delay level and flag) passes one boolean expression; anything else, and
    every failure, goes through the full rule by rule check.

    Raises:
        MQClientError: not a Message, bad topic, empty/oversized/non-bytes body, bad tags, keys,
            properties, delay level or flag; the message says what to do.
    """
    tags = getattr(msg, "tags", None)
    if (
        type(msg) is Message
        and msg.topic in _valid_topics
        and type(msg.body) is bytes
        and 0 < len(msg.body) <= max_bytes
        and (tags is None or (type(tags) is str and tags != "" and "||" not in tags))
        and not msg.keys
        and not msg.properties
        and type(msg.delay_level) is int
        and msg.delay_level >= 0
        and type(msg.flag) is int
        and -(2**31) <= msg.flag < 2**31
    ):
        return msg
    return _check_message_rules(msg, max_bytes)


def _check_message_rules(msg: Any, max_bytes: int) -> Message:
    if not isinstance(msg, Message):
        raise MQClientError(
            f"expected a rocketpy.Message, got {type(msg).__name__}: wrap the payload in Message(topic, body)"
        )
    check_topic_name(msg.topic)
    body = msg.body
    if not isinstance(body, bytes | bytearray | memoryview):
        raise MQClientError(
            f"message body must be bytes, got {type(body).__name__}: encode it first (e.g. text.encode())"
        )
    if len(body) == 0:
        raise MQClientError("message body is empty: send at least one byte")
    if len(body) > max_bytes:
        raise MQClientError(
            f"message body is {len(body)} bytes; the limit is {max_bytes} bytes (before compression):"
            " split the payload or store it elsewhere and send a reference"
        )
    if msg.tags is not None and (not isinstance(msg.tags, str) or not msg.tags or "||" in msg.tags):
        raise MQClientError(f"tags must be a non-empty str without '||' or None, got {msg.tags!r}")
    for k in msg.keys:
        if not isinstance(k, str) or not k or " " in k:
            raise MQClientError(f"each key must be a non-empty str without spaces, got {k!r}")
    _check_properties(msg.properties)
    if not isinstance(msg.delay_level, int) or msg.delay_level < 0:
        raise MQClientError(
            f"delay_level={msg.delay_level!r} must be an int >= 0 (1..18 for RocketMQ's levels)"
        )
    if not isinstance(msg.flag, int) or not -(2**31) <= msg.flag < 2**31:
        raise MQClientError(f"flag={msg.flag!r} must be a 32-bit int")
    timer_problem = msg.delivery_time_problem()
    if timer_problem:
        raise MQClientError(timer_problem)
    return msg


def _check_properties(props: Any) -> None:
    if not isinstance(props, dict):
        raise MQClientError(f"properties must be a dict[str, str], got {type(props).__name__}")
    for k, v in props.items():
        if not isinstance(k, str) or not isinstance(v, str) or not k:
            raise MQClientError(
                f"property {k!r}={v!r}: names and values must be str (convert values with str())"
            )
        if "\x01" in k or "\x02" in k or "\x01" in v or "\x02" in v:
            raise MQClientError(
                f"property {k!r} contains the reserved characters \\x01 or \\x02: remove them"
            )


class PreparedMessage:
    """A checked message's wire form, reused by every attempt of one send."""

    __slots__ = (
        "body",
        "born_ms",
        "flag",
        "needs_compress",
        "properties",
        "queue_nums",
        "sys_flag",
        "topic",
        "uniq_key",
    )

    def __init__(self, msg: Message, compress_over_bytes: int, default_queue_nums: int = 4) -> None:
        uniq, self.properties = wire_properties(msg)
        if len(self.properties) > MAX_PROPERTIES_BYTES:
            raise MQClientError(
                f"properties encode to {len(self.properties)} bytes; the limit is {MAX_PROPERTIES_BYTES}:"
                " send fewer or shorter properties"
            )
        self.topic = msg.topic
        self.uniq_key = uniq
        body = msg.body
        self.body = body if type(body) is bytes else bytes(body)
        self.flag = msg.flag
        self.sys_flag = 0
        self.born_ms = int(time.time() * 1000)
        self.queue_nums = default_queue_nums
        self.needs_compress = len(self.body) > compress_over_bytes

    async def compress(self, level: int) -> None:
        """zlib-compress the body once (in a thread when large) and set the COMPRESSED sys flag."""
        if not self.needs_compress:
            return
        self.needs_compress = False
        if len(self.body) >= COMPRESS_IN_THREAD_BYTES:
            self.body = await deflate(self.body, level)
        else:
            self.body = zlib.compress(self.body, level)
        self.sys_flag |= COMPRESSED_FLAG

    def ext_for(self, group: str, mq: MessageQueue) -> dict[str, Any]:
        """The SEND_MESSAGE_V2 header for sending to ``mq`` (docs/wire.md)."""
        return send_ext_v2(
            group, self.topic, AUTO_CREATE_TOPIC_KEY_TOPIC, self.queue_nums, mq.queue_id, self.sys_flag,
            self.born_ms, self.flag, self.properties, 0, False, False, mq.broker_name,
        )  # fmt: skip


def batch_ext(group: str, topic: str, queue_nums: int, mq: MessageQueue, sys_flag: int = 0) -> dict[str, Any]:
    """The SEND_BATCH_MESSAGE header (V2 names, docs/wire.md) for sending a batch to ``mq``."""
    return send_ext_v2(
        group, topic, AUTO_CREATE_TOPIC_KEY_TOPIC, queue_nums, mq.queue_id, sys_flag, int(time.time() * 1000),
        0, "", 0, False, True, mq.broker_name,
    )  # fmt: skip


def wire_properties(msg: Message) -> tuple[str, str]:
    """``(UNIQ_KEY, properties string)`` of ``msg``: user properties, TAGS, KEYS, DELAY and a UNIQ_KEY
    (the message's own if set, else a new one). Same content as ``properties_to_string`` of
    ``all_properties()`` plus UNIQ_KEY, built without intermediate dicts (hot path)."""
    user = msg.properties
    if not user and not msg.tags and not msg.keys and msg.delay_level <= 0:
        new_uniq = new_unique_id()  # the usual message: its properties are the UNIQ_KEY alone
        return new_uniq, f"UNIQ_KEY\x01{new_uniq}\x02"
    uniq = user.get(MessageConst.UNIQ_KEY) if user else None
    if uniq is None:
        uniq = new_unique_id()
    parts = []
    if user:
        skip = {MessageConst.UNIQ_KEY}
        if msg.tags:
            skip.add(MessageConst.TAGS)
        if msg.keys:
            skip.add(MessageConst.KEYS)
        if msg.delay_level > 0:
            skip.add(MessageConst.DELAY)
        parts = [f"{k}\x01{v}\x02" for k, v in user.items() if k not in skip]
    if msg.tags:
        parts.append(f"TAGS\x01{msg.tags}\x02")
    if msg.keys:
        parts.append(f"KEYS\x01{' '.join(msg.keys)}\x02")
    if msg.delay_level > 0:
        parts.append(f"DELAY\x01{msg.delay_level}\x02")
    parts.append(f"UNIQ_KEY\x01{uniq}\x02")
    return uniq, "".join(parts)


def prepare_message(
    msg: Message, max_bytes: int, compress_over_bytes: int, default_queue_nums: int = 4
) -> PreparedMessage:
    """Check ``msg`` and build its wire form (compression happens later, in ``compress``)."""
    check_message(msg, max_bytes)
    return PreparedMessage(msg, compress_over_bytes, default_queue_nums)


def check_batch(msgs: Any, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
    """Check a batch: a non-empty sequence of Messages of one topic, without delay levels.

    Raises:
        MQClientError: saying which message is wrong and why.
    """
    if not isinstance(msgs, Sequence) or isinstance(msgs, str | bytes) or not msgs:
        raise MQClientError("send_batch needs a non-empty list of Message objects")
    if len(msgs) > MAX_BATCH_MESSAGES:
        raise MQClientError(
            f"send_batch got {len(msgs)} messages; send at most {MAX_BATCH_MESSAGES} per call"
        )
    topic = getattr(msgs[0], "topic", None)
    for i, m in enumerate(msgs):
        try:
            check_message(m, max_bytes)
        except MQClientError as e:
            raise MQClientError(f"batch message #{i}: {e}") from None
        if m.topic != topic:
            raise MQClientError(
                f"batch message #{i} has topic {m.topic!r} but #0 has {topic!r}: a batch goes to one topic"
            )
        if m.delay_level or m.deliver_time_ms or m.delay_seconds:
            raise MQClientError(
                f"batch message #{i} has a delivery time (delay_level, deliver_time_ms or delay_seconds): "
                "delayed messages cannot be batched"
            )


def batch_item(body: bytes, flag: int, props_b: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """One message of a batch request body, as its four parts (RocketMQ's batch encoding: head with
    total size, magic, body CRC32, flag and body length; body; properties length; properties)."""
    n = item_bytes(len(body), len(props_b))
    head = BATCH_HEAD.pack(n, MESSAGE_MAGIC, body_crc(body), flag, len(body))
    return head, body, U16.pack(len(props_b)), props_b


def item_bytes(body_len: int, props_len: int) -> int:
    """Encoded size of a ``batch_item`` with a body and properties of these byte lengths."""
    return BATCH_HEAD.size + body_len + 2 + props_len


def split_batch(msgs: Sequence[Message], max_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[bytes, list[str]]]:
    """Encode ``msgs`` into batch request bodies of at most ``max_bytes`` each (a lone bigger message
    travels alone). Each message gets a UNIQ_KEY property if it has none (set on the message).

    Returns:
        ``(body, unique keys in order)`` per request, in message order.
    """
    chunks: list[tuple[bytes, list[str]]] = []
    parts: list[bytes] = []
    uids: list[str] = []
    size = 0
    for m in msgs:
        uid, props = wire_properties(m)
        m.properties[MessageConst.UNIQ_KEY] = uid
        props_b = props.encode()
        if len(props_b) > MAX_PROPERTIES_BYTES:
            raise MQClientError(
                f"message properties encode to {len(props_b)} bytes; the limit is {MAX_PROPERTIES_BYTES}"
            )
        item = batch_item(m.body, m.flag, props_b)
        n = item_bytes(len(m.body), len(props_b))
        if parts and size + n > max_bytes:
            chunks.append((b"".join(parts), uids))
            parts, uids, size = [], [], 0
        parts += item
        uids.append(uid)
        size += n
    if parts:
        chunks.append((b"".join(parts), uids))
    return chunks
