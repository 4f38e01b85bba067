"""RocketMQ 5 protobuf messages <-> the broker's send headers and stored messages.

``SendPlan.from_proto`` checks one ``apache.rocketmq.v2.Message`` of a SendMessage request with
RocketMQ proxy's rules and limits (config keys of the same names) and turns it into what the
broker's SEND_MESSAGE_V2 processor reads: the properties string and sys flag. The client's
message id becomes ``UNIQ_KEY`` (indexed, returned, delivered), ``message_group`` the sharding key
(``__SHARDINGKEY``), ``delivery_timestamp`` the timer property ``TIMER_DELIVER_MS``, a
TRANSACTION message a half message (``TRAN_MSG``, producer group = its topic, as RocketMQ's proxy
registers 5.x producers by topic). ``to_proto`` turns a stored ``MessageExt`` back into a proto
message (PullMessage, the transaction check), with its message type read from its properties.
"""

from __future__ import annotations

import hashlib
import time
import zlib
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, cast

from rocketpy.broker.grpc.status import Code, RpcError
from rocketpy.config import BrokerConfig
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.message import MessageConst, MessageExt, properties_to_string
from rocketpy.record import COMPRESSED_FLAG, TRANSACTION_PREPARED_TYPE

#: ``apache.rocketmq.v2.MessageType`` as an IntEnum (see ``status.Code``).
MessageType: Any = cast(Any, IntEnum)("MessageType", list(pb.MessageType.items()))

#: Property names the broker sets itself: a user property of one of these names is refused.
SYSTEM_PROPERTY_KEYS = frozenset(
    v for k, v in vars(MessageConst).items() if k.isupper() and isinstance(v, str) and v != " "
)
#: Message types a topic's ``message.type`` attribute accepts (MIXED and unset: every type).
TOPIC_TYPES: dict[str, frozenset[int]] = {
    "NORMAL": frozenset({MessageType.NORMAL}),
    "FIFO": frozenset({MessageType.FIFO}),
    "DELAY": frozenset({MessageType.DELAY}),
    "TRANSACTION": frozenset({MessageType.TRANSACTION}),
    "MIXED": frozenset({MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION}),
}
#: A ``delivery_timestamp`` whose seconds pass this (year 5138) is read as milliseconds: the 5.x
#: Python client copies its ``delivery_timestamp`` (documented in ms in its tests) into the seconds.
_SECONDS_CEILING = 100_000_000_000
#: Most bytes a gzip-encoded body may inflate to before it is refused (beyond maxMessageSize).
_GZIP_SLACK = 1
#: Enum values as plain ints (protobuf's enum wrapper resolves each attribute in Python).
_GZIP = int(pb.Encoding.GZIP)
_IDENTITY = int(pb.Encoding.IDENTITY)
_MD5 = int(pb.DigestType.MD5)
_NORMAL = int(MessageType.NORMAL)


def timestamp_ms(seconds: int, nanos: int) -> int:
    """Epoch milliseconds of a protobuf Timestamp (seconds past ``_SECONDS_CEILING``: already ms)."""
    if seconds > _SECONDS_CEILING:
        return seconds
    return seconds * 1000 + nanos // 1_000_000


@dataclass(slots=True)
class SendPlan:
    """One message of a SendMessage request, ready for the broker's send processor.

    Attributes:
        topic: the topic.
        message_id: the client's id (kept as UNIQ_KEY and answered back).
        message_type: the message's ``MessageType``.
        body: the body (a gzip body inflated).
        properties: the properties string.
        sys_flag: TRANSACTION_PREPARED for a half message.
        born_timestamp: ms.
        message_group: the FIFO group ("" for none).
    """

    topic: str
    message_id: str
    message_type: int
    body: bytes
    properties: str
    sys_flag: int
    born_timestamp: int
    message_group: str

    @classmethod
    def from_proto(cls, msg: pb.Message, config: BrokerConfig, max_body_bytes: int) -> SendPlan:
        """Check ``msg`` and build its plan.

        Raises:
            RpcError: the message breaks a rule (the code says which: ILLEGAL_TOPIC,
                MESSAGE_BODY_TOO_LARGE, ILLEGAL_DELIVERY_TIME, ...).
        """
        sp = msg.system_properties  # each access builds a wrapper: read once
        topic = msg.topic.name
        message_id = sp.message_id
        if not topic:
            raise RpcError(Code.ILLEGAL_TOPIC, "the message has no topic name")
        if not message_id:
            raise RpcError(Code.ILLEGAL_MESSAGE_ID, "the message has no message_id; the client sets one")
        body = _body(msg.body, sp.body_encoding, config, max_body_bytes)
        user = msg.user_properties
        props: dict[str, str] = _user_properties(user, config) if user else {}
        props[MessageConst.UNIQ_KEY] = message_id
        props[MessageConst.WAIT] = "true"
        has = sp.HasField
        if has("tag") or sp.keys:
            _tag_and_keys(sp, props)
        group = _message_group(sp, config) if has("message_group") else ""
        if group:
            props[MessageConst.SHARDING_KEY] = group
        message_type = sp.message_type or _NORMAL
        if message_type == _NORMAL and not group and not has("delivery_timestamp"):
            sys_flag = 0  # what _typed answers a plain message, without its checks' lookups
        else:
            sys_flag = _typed(sp, message_type, config, props, topic)
        if has("born_timestamp"):
            born_ts = sp.born_timestamp
            born = timestamp_ms(born_ts.seconds, born_ts.nanos)
        else:
            born = int(time.time() * 1000)
        return cls(topic, message_id, message_type, body, properties_to_string(props), sys_flag, born, group)


def _body(body: bytes, encoding: int, config: BrokerConfig, max_body_bytes: int) -> bytes:
    if encoding == _GZIP:
        inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header
        try:
            body = inflater.decompress(body, max_body_bytes + _GZIP_SLACK)
        except zlib.error as e:
            raise RpcError(Code.MESSAGE_CORRUPTED, f"the GZIP body does not inflate: {e}") from e
    if not body and config.enable_message_body_empty_check:
        raise RpcError(Code.MESSAGE_BODY_EMPTY, "the message body is empty")
    if len(body) > max_body_bytes:
        raise RpcError(
            Code.MESSAGE_BODY_TOO_LARGE,
            f"the message body is {len(body)} bytes or more; "
            f"this broker's maxMessageSize is {max_body_bytes}",
        )
    return body


def _user_properties(user: Any, config: BrokerConfig) -> dict[str, str]:
    if len(user) > config.user_property_max_num > 0:
        raise RpcError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the message has {len(user)} user properties; at most {config.user_property_max_num} "
            "(userPropertyMaxNum)",
        )
    size = 0
    for key, value in user.items():
        if not key or key in SYSTEM_PROPERTY_KEYS or "\x01" in key or "\x02" in key:
            raise RpcError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                f"user property key {key!r} is empty, reserved by RocketMQ or holds a control character",
            )
        if "\x01" in value or "\x02" in value:
            raise RpcError(Code.BAD_REQUEST, f"user property {key!r} holds a control character")
        size += len(key) + len(value)
    if size > config.max_user_property_size > 0:
        raise RpcError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the user properties take {size} characters; at most {config.max_user_property_size} "
            "(maxUserPropertySize)",
        )
    return dict(user)


def _tag_and_keys(sp: pb.SystemProperties, props: dict[str, str]) -> None:
    if sp.HasField("tag"):
        if not sp.tag.strip() or "|" in sp.tag or "\x01" in sp.tag or "\x02" in sp.tag:
            raise RpcError(
                Code.ILLEGAL_MESSAGE_TAG, f"tag {sp.tag!r} is blank or holds '|' or a control character"
            )
        props[MessageConst.TAGS] = sp.tag
    if sp.keys:
        for key in sp.keys:
            if not key.strip() or any(c in key for c in " \x01\x02"):
                raise RpcError(
                    Code.ILLEGAL_MESSAGE_KEY, f"key {key!r} is blank or holds a space or control character"
                )
        props[MessageConst.KEYS] = MessageConst.KEY_SEPARATOR.join(sp.keys)


def _message_group(sp: pb.SystemProperties, config: BrokerConfig) -> str:
    if not sp.HasField("message_group"):
        return ""
    group = sp.message_group
    limit = config.max_message_group_size
    if not group.strip() or (limit > 0 and len(group) > limit) or "\x01" in group or "\x02" in group:
        raise RpcError(
            Code.ILLEGAL_MESSAGE_GROUP,
            f"message group {group[:80]!r} is blank, holds a control character or is longer than "
            f"{limit} characters (maxMessageGroupSize)",
        )
    return group


def _typed(
    sp: pb.SystemProperties, message_type: int, config: BrokerConfig, props: dict[str, str], topic: str
) -> int:
    """Set the properties of a delayed or transactional message; returns the sys flag."""
    has_delivery = sp.HasField("delivery_timestamp")
    if message_type not in (MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION):
        raise RpcError(Code.BAD_REQUEST, f"message type {MessageType(message_type).name} is not served here")
    if has_delivery != (message_type == MessageType.DELAY):
        raise RpcError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a DELAY message needs a delivery_timestamp, and only a DELAY message may carry one",
        )
    if (message_type == MessageType.FIFO) != bool(props.get(MessageConst.SHARDING_KEY)):
        raise RpcError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a FIFO message needs a message_group, and only a FIFO message may carry one",
        )
    if has_delivery:
        deliver_ms = timestamp_ms(sp.delivery_timestamp.seconds, sp.delivery_timestamp.nanos)
        ahead = deliver_ms - int(time.time() * 1000)
        if ahead > config.max_delay_time_mills:
            raise RpcError(
                Code.ILLEGAL_DELIVERY_TIME,
                f"delivery_timestamp is {ahead} ms ahead; at most {config.max_delay_time_mills} "
                "(maxDelayTimeMills)",
            )
        props[MessageConst.TIMER_DELIVER_MS] = str(max(deliver_ms, 0))
    if message_type != MessageType.TRANSACTION:
        return 0
    props[MessageConst.TRAN_MSG] = "true"
    props[MessageConst.PGROUP] = topic
    if sp.HasField("orphaned_transaction_recovery_duration"):
        seconds = min(
            sp.orphaned_transaction_recovery_duration.seconds, config.max_transaction_recovery_second
        )
        props[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(max(seconds, 0))
    return TRANSACTION_PREPARED_TYPE


def message_type_of(props: dict[str, str]) -> int:
    """The ``MessageType`` a stored message was sent as, read from its properties."""
    if props.get(MessageConst.TRAN_MSG) == "true" or MessageConst.TRANSACTION_ID in props:
        return MessageType.TRANSACTION
    if MessageConst.TIMER_DELIVER_MS in props or MessageConst.DELAY in props:
        return MessageType.DELAY
    if MessageConst.SHARDING_KEY in props:
        return MessageType.FIFO
    return MessageType.NORMAL


def to_proto(ext: MessageExt, topic: str | None = None) -> pb.Message:
    """A stored message as the 5.x clients receive it (``topic`` overrides the stored one)."""
    out = pb.Message()
    fill_message(out, ext, topic)
    return out


def fill_message(out: pb.Message, ext: MessageExt, topic: str | None = None) -> None:
    """Write ``ext`` into ``out`` (a response's own message field: filled in place, not copied in).

    Each nested field is read once: upb builds a wrapper object on every access.
    """
    props = ext.properties
    body = ext.body
    if ext.sys_flag & COMPRESSED_FLAG:
        body = zlib.decompress(body)
    out.body = body
    out.topic.name = topic or props.get(MessageConst.REAL_TOPIC) or ext.topic
    sp = out.system_properties
    sp.message_id = props.get(MessageConst.UNIQ_KEY) or ext.offset_msg_id
    if ext.tags:
        sp.tag = ext.tags
    if ext.keys:
        sp.keys.extend(ext.keys)
    # MD5 as RocketMQ's proxy sends it: the Node.js client checks a CRC32 digest as a decimal
    # string and the Python client as hex, so only MD5 (uppercase hex) reads the same in both
    digest = sp.body_digest
    digest.type = _MD5  # type: ignore[assignment]
    digest.checksum = hashlib.md5(body).hexdigest().upper()
    sp.body_encoding = _IDENTITY  # type: ignore[assignment]
    sp.message_type = message_type_of(props)  # type: ignore[assignment]
    _set_ms(sp.born_timestamp, ext.born_timestamp)
    sp.born_host = ext.born_host[0]
    _set_ms(sp.store_timestamp, ext.store_timestamp)
    sp.store_host = f"{ext.store_host[0]}:{ext.store_host[1]}"
    sp.queue_id = ext.queue_id
    sp.queue_offset = ext.queue_offset
    sp.delivery_attempt = ext.reconsume_times + 1
    group = props.get(MessageConst.SHARDING_KEY)
    if group is not None:
        sp.message_group = group
    deliver = props.get(MessageConst.TIMER_DELIVER_MS)
    if deliver is not None and deliver.isdigit():
        _set_ms(sp.delivery_timestamp, int(deliver))
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_KEYS}
    if user:
        out.user_properties.update(user)


def _set_ms(ts: Any, ms: int) -> None:
    """A Timestamp field set to ``ms`` (two C field writes; ``FromMilliseconds`` is Python)."""
    seconds, rest = divmod(ms, 1000)
    ts.seconds = seconds
    ts.nanos = rest * 1_000_000
