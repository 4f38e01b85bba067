"""POP receipt handles and the offset-info fields of a POP answer (RocketMQ's ``ExtraInfoUtil``).

A popped message carries its receipt handle in the ``POP_CK`` property; ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME send it back as ``extraInfo``. It is eight fields separated by one
space (``MessageConst.KEY_SEPARATOR``)::

    ckQueueOffset popTime invisibleTime reviveQid topicKind brokerName queueId queueOffset
    |             |       |             |         |         |          |       the message's offset
    |             |       |             |         |         |          queue of the stored topic
    |             |       |             |         |         broker that popped it
    |             |       |             |         "0" the topic itself, "1" its POP retry topic
    |             |       |             |         (``%RETRY%{group}_{topic}``); RocketMQ's "2" (its
    |             |       |             |         V2 retry naming) is not used here and refused
    |             |       |             revive queue; 999 = an orderly pop (``POP_ORDER_REVIVE_QUEUE``)
    |             |       ms the message stays invisible after ``popTime``
    |             ms since the epoch when the broker handed it out
    first offset the pop read in that queue (its checkpoint)

A POP answer does not carry handles: its header says, per queue the pop read, where the read
started (``startOffsetInfo``: ``"kind qid start"`` entries joined by ``;``), which offsets it
handed out (``msgOffsetInfo``: ``"kind qid o1,o2,..."``) and, for orderly pops, how often each
was handed out before (``orderCountInfo``: ``"kind qo{qid}%{offset} count"``); the client builds
each message's handle from them (RocketMQ's ``MQClientAPIImpl.processPopResponse``).

The two formatters of a POP answer's offsets have compiled twins (``_speedups.pyx``): every pop
formats each message's offset in decimal.

Everything here is pure and bounded: a handle is at most ``MAX_HANDLE_CHARS`` characters, an info
field at most ``MAX_INFO_ENTRIES`` entries; malformed text raises ``ReceiptError`` saying what is
wrong, never a traceback from deep inside.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from rocketpy._accel import twin
from rocketpy.errors import RocketpyError
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic

SEPARATOR = " "
NORMAL_TOPIC = "0"
RETRY_TOPIC = "1"
#: The revive queue id an orderly pop answers with (RocketMQ's ``KeyBuilder.POP_ORDER_REVIVE_QUEUE``).
POP_ORDER_REVIVE_QUEUE = 999
#: Longest receipt handle accepted (a broker name is at most a few dozen characters).
MAX_HANDLE_CHARS = 512
#: Most entries in one offset-info field (a pop reads at most a few hundred queues).
MAX_INFO_ENTRIES = 4096
_FIELDS = 8
_LONG_MAX = (1 << 63) - 1
#: A well-formed handle (numbers of at most 18 digits fit a long): read in one match.
_HANDLE = re.compile(
    r"(\d{1,18}) (\d{1,18}) (\d{1,18}) (\d{1,18}) ([01]) ([^ ]+) (\d{1,18}) (\d{1,18})", re.ASCII
)


class ReceiptError(RocketpyError, ValueError):
    """A receipt handle or offset-info field that cannot be read (the message says why)."""


def topic_kind(topic: str) -> str:
    """``"1"`` for a retry topic (``%RETRY%...``), else ``"0"``."""
    return RETRY_TOPIC if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else NORMAL_TOPIC


def _long(text: str, name: str, lo: int = 0) -> int:
    if not text.lstrip("-").isdigit() or len(text) > 20:
        raise ReceiptError(f"its {name} {text[:24]!r} is not a number")
    value = int(text)
    if not lo <= value <= _LONG_MAX:
        raise ReceiptError(f"its {name} {value} is out of range")
    return value


class ReceiptHandle(NamedTuple):
    """One popped message's receipt handle (see the module docstring for the fields); a tuple, as
    every acked message's handle is read once."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    kind: str
    broker_name: str
    queue_id: int
    queue_offset: int

    @property
    def retry(self) -> bool:
        """True when the message was stored in the group's POP retry topic."""
        return self.kind != NORMAL_TOPIC

    @property
    def orderly(self) -> bool:
        """True for a message of an orderly pop."""
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def stored_topic(self, topic: str, group: str) -> str:
        """The topic the message is stored in: ``topic`` itself, or ``group``'s POP retry topic of it.

        ``topic`` is the topic the consumer subscribed to (a retry message shows under it).
        """
        if not self.retry or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return topic
        return pop_retry_topic(group, topic)

    def encode(self) -> str:
        """The handle's text (``POP_CK`` / ``extraInfo``)."""
        return (
            f"{self.ck_queue_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} "
            f"{self.kind} {self.broker_name} {self.queue_id} {self.queue_offset}"
        )

    @classmethod
    def parse(cls, text: object) -> ReceiptHandle:
        """Read a handle.

        Raises:
            ReceiptError: it is not a string of eight well-formed fields.
        """
        if not isinstance(text, str) or not text:
            raise ReceiptError("it is empty")
        if len(text) > MAX_HANDLE_CHARS:
            raise ReceiptError(f"it is {len(text)} characters long (at most {MAX_HANDLE_CHARS})")
        m = _HANDLE.fullmatch(text)
        if m is not None:  # the common case
            ck, pop_time, invisible, revive, kind, broker, qid, offset = m.groups()
            return cls(
                int(ck), int(pop_time), int(invisible), int(revive), kind, broker, int(qid), int(offset)
            )
        parts = text.split(SEPARATOR)
        if len(parts) != _FIELDS:
            raise ReceiptError(f"it has {len(parts)} fields, not {_FIELDS}")
        ck, pop_time, invisible, revive, kind, broker, qid, offset = parts
        if kind not in (NORMAL_TOPIC, RETRY_TOPIC):
            raise ReceiptError(f"its topic kind {kind[:8]!r} is not 0 (the topic) or 1 (its retry topic)")
        if not broker:
            raise ReceiptError("it names no broker")
        return cls(
            _long(ck, "checkpoint offset"),
            _long(pop_time, "pop time"),
            _long(invisible, "invisible time"),
            _long(revive, "revive queue id"),
            kind,
            broker,
            _long(qid, "queue id"),
            _long(offset, "queue offset"),
        )


def info_key(kind: str, queue_id: int) -> str:
    """The key of a queue in the offset-info maps: ``"{kind}@{queueId}"``."""
    return f"{kind}@{queue_id}"


def order_key(kind: str, queue_id: int, offset: int) -> str:
    """The key of one message in ``orderCountInfo``: ``"{kind}@qo{queueId}%{offset}"``."""
    return f"{kind}@qo{queue_id}%{offset}"


@twin
def format_start_offsets(entries: list[tuple[str, int, int]]) -> str:
    """``startOffsetInfo`` from ``(kind, queue_id, start_offset)`` entries."""
    return ";".join(f"{kind} {qid} {start}" for kind, qid, start in entries)


@twin
def format_msg_offsets(entries: list[tuple[str, int, list[int]]]) -> str:
    """``msgOffsetInfo`` from ``(kind, queue_id, offsets)`` entries."""
    return ";".join(f"{kind} {qid} {','.join(map(str, offsets))}" for kind, qid, offsets in entries)


def format_order_counts(entries: list[tuple[str, int, int, int]]) -> str:
    """``orderCountInfo`` from ``(kind, queue_id, offset, count)`` entries (one per message)."""
    return ";".join(f"{kind} qo{qid}%{offset} {count}" for kind, qid, offset, count in entries)


def _entries(text: str, what: str) -> list[tuple[str, str]]:
    """``(key, value)`` of each ``"kind id value"`` entry, the key ``"kind@id"``."""
    if not text:
        return []
    items = text.split(";")
    if len(items) > MAX_INFO_ENTRIES:
        raise ReceiptError(f"{what} has {len(items)} entries (at most {MAX_INFO_ENTRIES})")
    out = []
    for item in items:
        parts = item.split(SEPARATOR)
        if len(parts) != 3:
            raise ReceiptError(f"{what} entry {item[:40]!r} is not 'kind queue value'")
        out.append((f"{parts[0]}@{parts[1]}", parts[2]))
    if len({k for k, _ in out}) != len(out):
        raise ReceiptError(f"{what} names a queue twice")
    return out


def parse_start_offsets(text: str | None) -> dict[str, int]:
    """``startOffsetInfo`` -> ``{"kind@qid": start}``.

    Raises:
        ReceiptError: malformed text.
    """
    return {k: _long(v, "start offset") for k, v in _entries(text or "", "startOffsetInfo")}


def parse_msg_offsets(text: str | None) -> dict[str, list[int]]:
    """``msgOffsetInfo`` -> ``{"kind@qid": [offset, ...]}``.

    Raises:
        ReceiptError: malformed text.
    """
    return {
        k: [_long(o, "message offset") for o in v.split(",")]
        for k, v in _entries(text or "", "msgOffsetInfo")
    }


def parse_order_counts(text: str | None) -> dict[str, int]:
    """``orderCountInfo`` -> ``{"kind@qo{qid}%{offset}" or "kind@qid": count}``.

    Raises:
        ReceiptError: malformed text.
    """
    return {k: _long(v, "order count") for k, v in _entries(text or "", "orderCountInfo")}


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.protocol import _speedups

    same_signature(format_start_offsets)(_speedups.format_start_offsets)
    same_signature(_speedups.format_start_offsets)(format_start_offsets)
    same_signature(format_msg_offsets)(_speedups.format_msg_offsets)
    same_signature(_speedups.format_msg_offsets)(format_msg_offsets)
