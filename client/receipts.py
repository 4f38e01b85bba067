"""Receipt handles of received messages, on the SDK side: read one, group many into batch acks.

Shared by ``SimpleConsumer`` and the push consumer's POP mode (``client.pop_consumer``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rocketpy.errors import MQClientError
from rocketpy.message import MessageConst, MessageExt
from rocketpy.protocol.headers.pop import MAX_BATCH_ACK_BITS, BatchAck
from rocketpy.protocol.receipt import ReceiptError, ReceiptHandle


def parse_handle(message: Any) -> ReceiptHandle:
    """The receipt handle of a received message.

    Raises:
        MQClientError: not a ``MessageExt``, or its handle is missing or malformed.
    """
    if not isinstance(message, MessageExt):
        raise MQClientError(f"ack needs a received MessageExt (or several), got {type(message).__name__}")
    text = message.receipt_handle
    if not text:
        raise MQClientError(
            f"message {message.msg_id} has no receipt handle: only messages received by POP "
            "(SimpleConsumer, a POP-mode PushConsumer) can be acked this way"
        )
    try:
        return ReceiptHandle.parse(text)
    except ReceiptError as e:
        raise MQClientError(f"message {message.msg_id} has a malformed receipt handle: {e}") from None


@dataclass(slots=True)
class AckGroup:
    """Messages of one pop of one queue (their handles differ only in the queue offset)."""

    topic: str  # the topic the messages show under
    handle: ReceiptHandle  # the first message's
    offsets: list[int]


def ack_groups(messages: Iterable[Any]) -> list[AckGroup]:
    """``messages`` grouped by pop and queue; each group's first handle is read in full, the others
    only for their last field (the queue offset), so acking a batch costs little per message.

    Raises:
        MQClientError: as ``parse_handle``.
    """
    groups: dict[tuple[str, str], AckGroup] = {}
    last: AckGroup | None = None  # a pop's messages of one queue come one after another
    last_prefix = ""
    for m in messages:
        if not isinstance(m, MessageExt):
            parse_handle(m)  # raises
        prefix, _, offset = (m.properties.get(MessageConst.POP_CK) or "").rpartition(" ")
        if last is not None and prefix == last_prefix and m.topic == last.topic:
            g: AckGroup | None = last
        else:
            g = groups.get((m.topic, prefix))
        if g is not None and offset.isascii() and offset.isdigit() and len(offset) <= 18:
            g.offsets.append(int(offset))
        else:
            h = parse_handle(m)  # the first of its group (or one to refuse, saying why)
            if g is None:
                g = groups[(m.topic, prefix)] = AckGroup(m.topic, h, [h.queue_offset])
            else:
                g.offsets.append(h.queue_offset)
        last, last_prefix = g, prefix
    return list(groups.values())


def batch_acks(group: str, groups: list[AckGroup]) -> list[BatchAck]:
    """One BatchAck per ``ack_groups`` group.

    Raises:
        MQClientError: a handle whose offset does not fit its checkpoint's bit set.
    """
    acks = []
    for g in groups:
        h, ck = g.handle, g.handle.ck_queue_offset
        bits = sorted({o - ck for o in g.offsets})
        if bits[0] < 0 or bits[-1] >= MAX_BATCH_ACK_BITS:
            raise MQClientError(f"receipt handle {h.encode()!r} does not fit a batch ack; ack it alone")
        acks.append(
            BatchAck(group, g.topic, h.retry, ck, h.queue_id, h.revive_qid, h.pop_time, h.invisible_time,
                     tuple(bits))
        )  # fmt: skip
    return acks
