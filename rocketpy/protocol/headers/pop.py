"""POP consumption's headers and bodies (RocketMQ 5's RIP-19), with RocketMQ's field names.

POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE (body ``BatchAckMessageRequestBody``), PEEK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, NOTIFICATION and POLLING_INFO, plus the server-side assignment of
RocketMQ 5: QUERY_ASSIGNMENT (body ``QueryAssignmentRequestBody``, answer
``QueryAssignmentResponseBody``) and SET_MESSAGE_REQUEST_MODE (body
``SetMessageRequestModeRequestBody``). Times are milliseconds, as on RocketMQ's wire. The receipt
handle (``extraInfo``) and the offset-info fields of a POP answer are ``rocketpy.protocol.receipt``.

A BatchAck's ``b`` is a ``java.util.BitSet`` as fastjson writes it: the base64 of
``BitSet.toByteArray()`` (little-endian: bit ``i`` is bit ``i % 8`` of byte ``i // 8``); bit ``i``
acknowledges offset ``so + i``.
"""

from __future__ import annotations

import base64
import binascii
from enum import IntEnum, StrEnum
from typing import Any, NamedTuple

from rocketpy.protocol.access import Resource
from rocketpy.protocol.header import Header, wire
from rocketpy.protocol.headers.offset import INT64_MAX, MAX_QUEUE_ID
from rocketpy.protocol.shape import INT, REQUIRED_STR, STR, Fields, ListOf, Scalar

#: Most messages one POP answers (RocketMQ refuses more than 32).
MAX_POP_MSGS = 32
#: Longest invisible time a POP or an invisible-time change may ask for: 12 hours.
MAX_INVISIBLE_TIME_MS = 12 * 3600 * 1000
#: Most acks in one BATCH_ACK_MESSAGE body, and bits in one BatchAck's set.
MAX_BATCH_ACKS = 1024
MAX_BATCH_ACK_BITS = 4096
#: Most queue assignments in a QUERY_ASSIGNMENT answer a client reads.
MAX_ASSIGNMENTS = 65536

_INVISIBLE_HINT = "ask for a time above 0 and at most 12 hours (43200000 ms)"


class ConsumeInitMode(IntEnum):
    """Where a group with no offset in a queue starts popping (RocketMQ's ``ConsumeInitMode``)."""

    MIN = 0
    MAX = 1


class PopMessageRequestHeader(Header):
    """POP_MESSAGE: hand out up to ``maxNums`` messages, invisible to the group until acked.

    Attributes:
        group, topic: who pops what.
        queue_id: one queue, or -1 (any negative) for every queue of the topic on this broker.
        max_msgs: 1..32 messages (``maxMsgNums``).
        invisible_time_ms: how long the messages stay invisible after the pop.
        poll_time_ms: how long the broker may hold the request while there is nothing (0: answer now).
        born_time: the client's send time, ms (kept for RocketMQ's clients; not checked).
        init_mode: where a group without an offset starts (``ConsumeInitMode``).
        exp_type, exp: the subscription (TAG or SQL92; absent: every message).
        order: an orderly pop (one batch per queue in flight at a time, no retry topic).
        attempt_id: the client's id of this pop attempt (orderly; kept for RocketMQ's clients).
    """

    group: str = wire("consumerGroup", nonempty=True, hint="name the consumer group")
    topic: str = wire("topic", nonempty=True, hint="name the topic")
    queue_id: int = wire("queueId", hi=MAX_QUEUE_ID)
    max_msgs: int = wire("maxMsgNums", lo=1, hi=MAX_POP_MSGS, hint="pop at most 32 messages at a time")
    invisible_time_ms: int = wire("invisibleTime", lo=1, hi=MAX_INVISIBLE_TIME_MS, hint=_INVISIBLE_HINT)
    poll_time_ms: int = wire("pollTime", default=0, lo=0, hi=INT64_MAX)
    born_time: int = wire("bornTime", default=0)
    init_mode: int = wire("initMode", default=0, lo=0, hi=1)
    exp_type: str | None = wire("expType", default=None)
    exp: str | None = wire("exp", default=None)
    order: bool = wire("order", default=False)
    attempt_id: str | None = wire("attemptId", default=None)


class PopMessageResponseHeader(Header):
    """POP_MESSAGE's (and PEEK_MESSAGE's) answer; the offset infos are ``rocketpy.protocol.receipt``'s.

    Attributes:
        pop_time: when the broker handed the messages out (ms since the epoch).
        invisible_time: the invisible time granted (ms).
        revive_qid: the revive queue (999 for an orderly pop).
        rest_num: messages left behind in the queues the pop looked at.
    """

    pop_time: int = wire("popTime", default=0)
    invisible_time: int = wire("invisibleTime", default=0)
    revive_qid: int = wire("reviveQid", default=0)
    rest_num: int = wire("restNum", default=0)
    start_offset_info: str | None = wire("startOffsetInfo", default=None)
    msg_offset_info: str | None = wire("msgOffsetInfo", default=None)
    order_count_info: str | None = wire("orderCountInfo", default=None)


class AckMessageRequestHeader(Header):
    """ACK_MESSAGE: one popped message is consumed.

    ``topic`` is the topic the message is stored in (its POP retry topic for a redelivered one),
    ``queue_id``/``offset`` its place there, ``extra_info`` its receipt handle.
    """

    group: str = wire("consumerGroup", nonempty=True, hint="name the consumer group")
    topic: str = wire("topic", nonempty=True, hint="name the topic the message is stored in")
    queue_id: int = wire("queueId")
    extra_info: str = wire("extraInfo", hint="send the message's receipt handle (POP_CK)")
    offset: int = wire("offset")


class ChangeInvisibleTimeRequestHeader(Header):
    """CHANGE_MESSAGE_INVISIBLETIME: keep a popped message invisible ``invisibleTime`` ms from now."""

    group: str = wire("consumerGroup", nonempty=True, hint="name the consumer group")
    topic: str = wire("topic", nonempty=True, hint="name the topic the message is stored in")
    queue_id: int = wire("queueId")
    extra_info: str = wire("extraInfo", hint="send the message's receipt handle (POP_CK)")
    offset: int = wire("offset")
    invisible_time_ms: int = wire("invisibleTime", lo=1, hi=MAX_INVISIBLE_TIME_MS, hint=_INVISIBLE_HINT)


class ChangeInvisibleTimeResponseHeader(Header):
    """The answer: the message's new pop time and invisible time (the client builds its new handle)."""

    pop_time: int = wire("popTime", default=0)
    invisible_time: int = wire("invisibleTime", default=0)
    revive_qid: int = wire("reviveQid", default=0)


class PeekMessageRequestHeader(Header):
    """PEEK_MESSAGE: read what a POP would hand out next, without handing it out."""

    group: str = wire("consumerGroup", nonempty=True, hint="name the consumer group")
    topic: str = wire("topic", nonempty=True, hint="name the topic")
    queue_id: int = wire("queueId", hi=MAX_QUEUE_ID)
    max_msgs: int = wire("maxMsgNums", lo=1, hi=MAX_POP_MSGS, hint="peek at most 32 messages at a time")


class NotificationRequestHeader(Header):
    """NOTIFICATION: is there something to pop? Held up to ``pollTime`` ms while there is not."""

    group: str = wire("consumerGroup", nonempty=True, hint="name the consumer group")
    topic: str = wire("topic", nonempty=True, hint="name the topic")
    queue_id: int = wire("queueId", hi=MAX_QUEUE_ID)
    poll_time_ms: int = wire("pollTime", default=0, lo=0, hi=INT64_MAX)
    born_time: int = wire("bornTime", default=0)
    order: bool = wire("order", default=False)
    attempt_id: str | None = wire("attemptId", default=None)


class NotificationResponseHeader(Header):
    """NOTIFICATION's answer."""

    has_msg: bool = wire("hasMsg", default=False)
    polling_full: bool = wire("pollingFull", default=False)


class PollingInfoRequestHeader(Header):
    """POLLING_INFO: how many POPs of the group wait on the queue now."""

    group: str = wire("consumerGroup", nonempty=True, hint="name the consumer group")
    topic: str = wire("topic", nonempty=True, hint="name the topic")
    queue_id: int = wire("queueId", hi=MAX_QUEUE_ID)


class PollingInfoResponseHeader(Header):
    """POLLING_INFO's answer."""

    polling_num: int = wire("pollingNum", default=0)


# --- BATCH_ACK_MESSAGE ------------------------------------------------------------------------

_LONG = Scalar((int,))
#: One BatchAck, under fastjson's short names (the long ones are accepted too: see ``read_batch_acks``).
BATCH_ACK = Fields(
    {
        "c": STR,
        "t": STR,
        "r": STR,
        "so": _LONG,
        "q": INT,
        "rq": INT,
        "pt": _LONG,
        "it": _LONG,
        "b": Scalar((str,), max_len=MAX_BATCH_ACK_BITS),
    }
)
#: RocketMQ's BatchAckMessageRequestBody.
BATCH_ACK_BODY = Fields({"brokerName": STR, "acks": ListOf(BATCH_ACK, MAX_BATCH_ACKS, required=True)})
_LONG_NAMES = {
    "c": "consumerGroup", "t": "topic", "r": "retry", "so": "startOffset", "q": "queueId",
    "rq": "reviveQueueId", "pt": "popTime", "it": "invisibleTime", "b": "bitSet",
}  # fmt: skip


class BatchAck(NamedTuple):
    """The acks of one checkpoint: offsets ``start_offset + i`` for each ``i`` in ``bits``.

    ``topic`` is the subscribed topic; ``retry`` says the messages are in its POP retry topic. A
    tuple (as ``ReceiptHandle``): every batch ack of a consumer makes and reads several.
    """

    group: str
    topic: str
    retry: bool
    start_offset: int
    queue_id: int
    revive_qid: int
    pop_time: int
    invisible_time: int
    bits: tuple[int, ...]

    def offsets(self) -> list[int]:
        """The acknowledged offsets."""
        start = self.start_offset
        return [start + i for i in self.bits]

    def to_wire(self) -> dict[str, Any]:
        """The BatchAck map (short names, as RocketMQ's clients write it)."""
        return {
            "c": self.group, "t": self.topic, "r": "1" if self.retry else "0", "so": self.start_offset,
            "q": self.queue_id, "rq": self.revive_qid, "pt": self.pop_time, "it": self.invisible_time,
            "b": encode_bitset(self.bits),
        }  # fmt: skip


def encode_bitset(bits: tuple[int, ...] | list[int]) -> str:
    """A BitSet with ``bits`` set, as fastjson writes it (base64 of the little-endian bytes)."""
    if not bits:
        return ""
    lo, hi = min(bits), max(bits)
    if hi - lo + 1 == len(bits) == len(set(bits)):  # one run (a whole pop's batch acked)
        n = (1 << (hi + 1)) - (1 << lo)
    else:
        n = 0
        for i in bits:
            n |= 1 << i
    return base64.b64encode(n.to_bytes((n.bit_length() + 7) // 8, "little")).decode("ascii")


def decode_bitset(text: str) -> tuple[int, ...]:
    """The set bits of a BitSet written by ``encode_bitset`` (or RocketMQ's clients).

    Raises:
        ValueError: not base64, or more than ``MAX_BATCH_ACK_BITS`` bits wide.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"bitSet is not base64 ({e})") from None
    if len(raw) * 8 > MAX_BATCH_ACK_BITS:
        raise ValueError(f"bitSet is {len(raw) * 8} bits wide (at most {MAX_BATCH_ACK_BITS})")
    n = int.from_bytes(raw, "little")
    if not n & (n + 1):  # bits 0..k-1 (a whole pop's batch acked): the common case
        return tuple(range(n.bit_length()))
    return tuple([i * 8 + b for i, byte in enumerate(raw) if byte for b in _BYTE_BITS[byte]])


#: The set bits of each byte value, lowest first.
_BYTE_BITS = tuple(tuple(b for b in range(8) if v >> b & 1) for v in range(256))


def _get(entry: dict[str, Any], short: str) -> Any:
    value = entry.get(short)
    return entry.get(_LONG_NAMES[short]) if value is None else value


def read_batch_acks(doc: dict[str, Any]) -> list[BatchAck]:
    """The acks of a decoded BatchAckMessageRequestBody (checked against ``BATCH_ACK_BODY``).

    Raises:
        ValueError: an ack misses a field or has a malformed one (the message names it).
    """
    out = []
    for i, entry in enumerate(doc.get("acks") or ()):
        try:
            try:  # the short names, as RocketMQ's clients (and the SDK) write them
                fields = [entry["c"], entry["t"], entry["r"], entry["so"], entry["q"], entry["rq"],
                          entry["pt"], entry["it"], entry["b"]]  # fmt: skip
            except KeyError:
                fields = [_get(entry, name) for name in _LONG_NAMES]
            if None in fields:
                missing = [_LONG_NAMES[n] for n, v in zip(_LONG_NAMES, fields, strict=True) if v is None]
                raise ValueError(f"misses {', '.join(missing)}")
            c, t, r, so, q, rq, pt, it, b = fields
            out.append(
                BatchAck(
                    str(c),
                    str(t),
                    str(r) == "1",
                    int(so),
                    int(q),
                    int(rq),
                    int(pt),
                    int(it),
                    decode_bitset(str(b)),
                )
            )
        except (TypeError, ValueError) as e:
            raise ValueError(f"acks[{i}] {e}") from None
    return out


def batch_ack_body(broker_name: str, acks: list[BatchAck]) -> dict[str, Any]:
    """A BatchAckMessageRequestBody."""
    return {"brokerName": broker_name, "acks": [a.to_wire() for a in acks]}


def batch_ack_resources(doc: Any) -> list[Resource]:
    """The topics and groups a decoded BatchAckMessageRequestBody names (for the ACL)."""
    found: list[Resource] = []
    acks = doc.get("acks") if isinstance(doc, dict) else None
    for entry in acks if isinstance(acks, list) else []:
        if not isinstance(entry, dict):
            continue
        group, topic = _get(entry, "c"), _get(entry, "t")
        if isinstance(group, str) and group:
            found.append(("group", group))
        if isinstance(topic, str) and topic:
            found.append(("topic", topic))
    return found


# --- QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE ----------------------------------------------


class MessageRequestMode(StrEnum):
    """How a group's consumers read a topic (RocketMQ's ``MessageRequestMode``): PULL gives each
    consumer queues of its own; POP lets the broker hand messages of shared queues out one by one."""

    PULL = "PULL"
    POP = "POP"


#: RocketMQ's QueryAssignmentRequestBody.
QUERY_ASSIGNMENT_BODY = Fields(
    {
        "topic": REQUIRED_STR,
        "consumerGroup": REQUIRED_STR,
        "clientId": REQUIRED_STR,
        "strategyName": STR,
        "messageModel": STR,
    }
)
#: RocketMQ's SetMessageRequestModeRequestBody.
SET_MODE_BODY = Fields(
    {"topic": REQUIRED_STR, "consumerGroup": REQUIRED_STR, "mode": REQUIRED_STR, "popShareQueueNum": INT}
)


def assignment_resources(doc: Any) -> list[Resource]:
    """The topic and group a decoded QueryAssignmentRequestBody names (for the ACL)."""
    if not isinstance(doc, dict):
        return []
    found: list[Resource] = []
    if isinstance(group := doc.get("consumerGroup"), str) and group:
        found.append(("group", group))
    if isinstance(topic := doc.get("topic"), str) and topic:
        found.append(("topic", topic))
    return found
