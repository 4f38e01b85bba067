"""A POP_MESSAGE answer turned into messages with receipt handles (RocketMQ's ``processPopResponse``).

Owns the client's reading of a pop: SUCCESS carries the stored records (decoded by
``record.decode_records``) and, in its header, where each queue's read started and which offsets
it handed out; each message without a ``POP_CK`` gets the handle built from those
(``ReceiptHandle(startOffset of its queue, popTime, invisibleTime, reviveQid, kind, broker,
queueId, queueOffset)``), one the broker already set (a redelivered message) keeps it; an orderly
pop's ``orderCountInfo`` becomes the messages' ``reconsume_times``; ``1ST_POP_TIME`` is set when
absent. POLLING_TIMEOUT and PULL_NOT_FOUND are "nothing came" (no messages); POLLING_FULL and
every other code raise the code's ``MQBrokerError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketpy.client.answers import answer_header
from rocketpy.errors import MQClientError, broker_error
from rocketpy.message import MessageConst, MessageExt
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.pop import PopMessageResponseHeader
from rocketpy.protocol.receipt import (
    ReceiptError,
    ReceiptHandle,
    info_key,
    order_key,
    parse_order_counts,
    parse_start_offsets,
    topic_kind,
)
from rocketpy.record import RecordError, decode_records
from rocketpy.remoting.command import RemotingCommand

_NOTHING = frozenset({ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND})


@dataclass(slots=True)
class PopResult:
    """What a pop brought: the messages (each with ``receipt_handle``) and what is left behind."""

    messages: list[MessageExt] = field(default_factory=list)
    rest_num: int = 0
    pop_time: int = 0
    invisible_ms: int = 0


def pop_result(resp: RemotingCommand, addr: str, broker_name: str, order: bool) -> PopResult:
    """Read a POP_MESSAGE answer (see the module docstring).

    Raises:
        MQBrokerError: an error code (POLLING_FULL included).
        MQClientError: a SUCCESS answer whose records or offset infos are malformed.
    """
    if resp.code in _NOTHING:
        return PopResult()
    if resp.code != ResponseCode.SUCCESS:
        raise broker_error(resp.code, resp.remark, addr)
    h = answer_header(resp, addr, PopMessageResponseHeader)
    try:
        msgs = decode_records(resp.body) if resp.body else []
        starts = parse_start_offsets(h.start_offset_info)
        counts = parse_order_counts(h.order_count_info) if order else {}
        _complete(msgs, h, starts, counts, broker_name)
    except (RecordError, ReceiptError, KeyError) as e:
        raise MQClientError(f"the POP answer of {addr} is malformed: {e!r}") from None
    return PopResult(msgs, h.rest_num, h.pop_time, h.invisible_time)


def _complete(
    msgs: list[MessageExt],
    h: PopMessageResponseHeader,
    starts: dict[str, int],
    counts: dict[str, int],
    broker_name: str,
) -> None:
    """Give each message without a ``POP_CK`` its handle (the text up to the queue offset is the
    same for every message of a queue: built once per queue)."""
    prefixes: dict[tuple[str, int], str] = {}
    pop_time = str(h.pop_time)
    topic, queue_id, kind, prefix = "", -1, "", ""  # a queue's messages come one after another
    for m in msgs:
        props = m.properties
        if MessageConst.POP_CK not in props:
            if m.queue_id != queue_id or m.topic != topic:
                topic, queue_id, kind = m.topic, m.queue_id, topic_kind(m.topic)
                cached = prefixes.get((kind, queue_id))
                if cached is None:
                    start = starts[info_key(kind, queue_id)]
                    handle = ReceiptHandle(
                        start, h.pop_time, h.invisible_time, h.revive_qid, kind, broker_name, queue_id, 0
                    )
                    cached = prefixes[(kind, queue_id)] = handle.encode()[:-1]  # without its offset "0"
                prefix = cached
            props[MessageConst.POP_CK] = prefix + str(m.queue_offset)
            if counts:
                count = counts.get(order_key(kind, queue_id, m.queue_offset)) or counts.get(
                    info_key(kind, queue_id)
                )
                if count:
                    m.reconsume_times = count
        if MessageConst.FIRST_POP_TIME not in props:
            props[MessageConst.FIRST_POP_TIME] = pop_time
