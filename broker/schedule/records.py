"""Rewriting messages between their real topic and a waiting topic (schedule or timer).

Owns the two directions: ``to_waiting_topic`` keeps the real topic and queue in ``REAL_TOPIC`` /
``REAL_QID`` and moves the message to a waiting queue; ``real_message`` builds, from the stored
waiting record, the message to put into its real topic (RocketMQ ``messageTimeup``): same body,
flags, born time and host, reconsume times; ``DELAY`` and the timer properties removed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rocketpy.broker.store import BrokerMessage, Store
from rocketpy.message import MessageConst, properties_to_string, string_to_properties
from rocketpy.record import HEAD_SIZE, RECORD_HEAD

log = logging.getLogger("rocketpy.broker.schedule")

#: Properties that ask for a later delivery: dropped when the message reaches its real topic.
TIMING_PROPERTIES = (
    MessageConst.DELAY,
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.TIMER_DELAY_MS,
)


def to_waiting_topic(
    msg: BrokerMessage, props: dict[str, str], topic: str, queue_id: int, tags_code: int | None = None
) -> BrokerMessage:
    """``msg`` moved to ``topic``/``queue_id`` with its real place in ``REAL_TOPIC``/``REAL_QID``.

    ``props`` is the decoded properties of ``msg`` with any changes the caller made (the clamped
    level, the absolute timer time); ``tags_code`` is the consume-queue tag field (None: the store
    derives it, which for the schedule topic is the delivery time of the level).
    """
    props[MessageConst.REAL_TOPIC] = msg.topic
    props[MessageConst.REAL_QID] = str(msg.queue_id)
    out = BrokerMessage(
        topic,
        queue_id,
        msg.body,
        properties_to_string(props),
        msg.flag,
        msg.sys_flag,
        msg.born_timestamp,
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
        tags_code=tags_code,
    )
    out.born_host8 = msg.born_host8
    return out


def real_message(record: memoryview | bytes) -> BrokerMessage | None:
    """The message to put into the real topic, from a stored waiting record (None: not one)."""
    (_total, _magic, _crc, _qid, flag, _qoff, _phys, sys_flag, born_ts, born_host8, _store_ts, _store_host,
     reconsume, prepared, body_len) = RECORD_HEAD.unpack_from(record, 0)  # fmt: skip
    pos = HEAD_SIZE + body_len
    topic_len = record[pos]
    props_start = pos + 3 + topic_len
    props = string_to_properties(str(record[props_start:], "utf-8"))
    topic = props.get(MessageConst.REAL_TOPIC)
    qid = props.get(MessageConst.REAL_QID, "")
    if not topic or not qid.isdigit():
        return None
    for name in TIMING_PROPERTIES:
        props.pop(name, None)
    out = BrokerMessage(
        topic,
        int(qid),
        bytes(record[HEAD_SIZE:pos]),
        properties_to_string(props),
        flag,
        sys_flag,
        born_ts,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
    )
    out.born_host8 = born_host8
    return out


async def put_in_order(
    store: Store, msgs: list[BrokerMessage | None], on_stored: Callable[[int], None]
) -> int:
    """Put ``msgs`` in order, one batch per run of one real queue (``None``: skipped).

    Calls ``on_stored(n)`` after each stored run with how many of ``msgs`` are taken so far.
    Returns how many were taken: all of them, or those before the first refused run.
    """
    i = 0
    while i < len(msgs):
        m = msgs[i]
        j = i + 1
        if m is not None:
            while (
                j < len(msgs)
                and (nxt := msgs[j]) is not None
                and nxt.topic == m.topic
                and nxt.queue_id == m.queue_id
            ):
                j += 1
            run = msgs[i:j]
            result = await (store.put_message(m) if j == i + 1 else store.put_messages(run))  # type: ignore[arg-type]
            if not result.ok:
                log.warning("re-put to %s failed: %s %s", m.topic, result.status.name, result.remark)
                return i
        i = j
        on_stored(i)
    return i
