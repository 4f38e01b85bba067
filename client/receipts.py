"""Receipt handles of received messages, on the SDK side: read one, group many into batch acks.

Shared by ``SimpleConsumer`` and the push consumer's POP mode (``client.pop_consumer``).
"""

from __future__ import annotations

from typing import Any

from rocketpy.errors import MQClientError
from rocketpy.message import MessageExt
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


def batch_acks(group: str, items: list[tuple[MessageExt, ReceiptHandle]]) -> list[BatchAck]:
    """One BatchAck per checkpoint (topic kind, queue, checkpoint offset, pop time) of ``items``.

    Raises:
        MQClientError: a handle whose offset does not fit its checkpoint's bit set.
    """
    groups: dict[tuple[str, bool, int, int, int], list[ReceiptHandle]] = {}
    for m, h in items:
        groups.setdefault((m.topic, h.retry, h.queue_id, h.ck_queue_offset, h.pop_time), []).append(h)
    acks = []
    for (topic, retry, qid, ck, pop_time), handles in groups.items():
        h0 = handles[0]
        bits = sorted({h.queue_offset - ck for h in handles})
        if bits[0] < 0 or bits[-1] >= MAX_BATCH_ACK_BITS:
            raise MQClientError(f"receipt handle {h0.encode()!r} does not fit a batch ack; ack it alone")
        acks.append(
            BatchAck(group, topic, retry, ck, qid, h0.revive_qid, pop_time, h0.invisible_time, tuple(bits))
        )
    return acks
