"""Half messages: the send-side rewrite into the half topic and the way back out of it.

Owns the three message shapes of a transaction (RocketMQ ``TransactionalMessageBridge``):

* ``to_half`` (on send): the message keeps its body and properties, its real topic and queue go to
  ``REAL_TOPIC`` / ``REAL_QID``, ``__transactionId__`` is its UNIQ_KEY, the transaction bits of its
  sys flag are cleared, and it is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, where no consumer
  subscribes.
* ``HalfRecord.committed`` (on commit): the message to put into its real topic and queue, with the
  half message's body, flags, born time and host and properties, minus the transaction properties
  (``TRAN_MSG``, ``REAL_TOPIC``, ``REAL_QID``); its sys flag says COMMIT and its prepared-transaction
  offset is the half message's commitlog offset.
* ``HalfRecord.discarded`` (after ``transactionCheckMax`` checks): the half message as it is, moved to
  ``TRANS_CHECK_MAX_TIME_TOPIC`` for inspection.
"""

from __future__ import annotations

from rocketpy.broker.store import BrokerMessage
from rocketpy.message import MessageConst, properties_to_string, string_to_properties
from rocketpy.message_props import TRAN_MARK
from rocketpy.record import (
    HEAD_SIZE,
    RECORD_HEAD,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rocketpy.topic import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC

#: The one queue of the half and op topics.
HALF_QUEUE_ID = 0
#: What marks a send as a half message (``rocketpy.message_props``); the compiled ``batch_messages``
#: reads it here.
_TRAN_MARK = TRAN_MARK
#: Properties a committed message does not keep.
_TRANSACTION_ONLY = (MessageConst.TRAN_MSG, MessageConst.REAL_TOPIC, MessageConst.REAL_QID)


def to_half(msg: BrokerMessage, producer_group: str) -> BrokerMessage:
    """``msg`` rewritten as a half message of ``producer_group`` (see the module docstring)."""
    props = string_to_properties(msg.properties)
    props[MessageConst.REAL_TOPIC] = msg.topic
    props[MessageConst.REAL_QID] = str(msg.queue_id)
    props.setdefault(MessageConst.PGROUP, producer_group)
    uniq = props.get(MessageConst.UNIQ_KEY)
    if uniq:
        props.setdefault(MessageConst.TRANSACTION_ID, uniq)
    out = BrokerMessage(
        TRANS_HALF_TOPIC,
        HALF_QUEUE_ID,
        msg.body,
        properties_to_string(props),
        msg.flag,
        msg.sys_flag & ~TRANSACTION_TYPE_MASK,
        msg.born_timestamp,
        reconsume_times=msg.reconsume_times,
    )
    out.born_host8 = msg.born_host8
    return out


class HalfRecord:
    """A stored half message, parsed once.

    Attributes:
        queue_offset: its offset in the half queue.
        commitlog_offset: where its record starts.
        store_timestamp: when the broker stored it (ms).
        properties: its decoded properties.
        producer_group: ``PGROUP``.
        real_topic / real_queue_id: where a commit puts it.
        unique_key: its UNIQ_KEY ("" when none).
        raw: a copy of the whole record (the body of CHECK_TRANSACTION_STATE).
    """

    __slots__ = (
        "body",
        "born_host8",
        "born_timestamp",
        "commitlog_offset",
        "flag",
        "producer_group",
        "properties",
        "queue_offset",
        "raw",
        "real_queue_id",
        "real_topic",
        "reconsume_times",
        "store_timestamp",
        "sys_flag",
        "unique_key",
    )

    def __init__(self, record: bytes) -> None:
        (_total, _magic, _crc, _qid, self.flag, self.queue_offset, self.commitlog_offset, self.sys_flag,
         self.born_timestamp, self.born_host8, self.store_timestamp, _store_host, self.reconsume_times,
         _prepared, body_len) = RECORD_HEAD.unpack_from(record, 0)  # fmt: skip
        self.raw = record
        pos = HEAD_SIZE + body_len
        self.body = record[HEAD_SIZE:pos]
        topic_len = record[pos]
        topic = record[pos + 1 : pos + 1 + topic_len].decode(errors="replace")
        if topic != TRANS_HALF_TOPIC:
            raise ValueError(f"the record is in topic {topic}, not in {TRANS_HALF_TOPIC}")
        self.properties = props = string_to_properties(record[pos + 3 + topic_len :].decode(errors="replace"))
        self.producer_group = props.get(MessageConst.PGROUP, "")
        self.real_topic = props.get(MessageConst.REAL_TOPIC, "")
        qid = props.get(MessageConst.REAL_QID, "")
        if not self.real_topic or not qid.isdigit():
            raise ValueError("the half message has no REAL_TOPIC/REAL_QID")
        self.real_queue_id = int(qid)
        self.unique_key = props.get(MessageConst.UNIQ_KEY, "")

    @property
    def transaction_id(self) -> str:
        """``__transactionId__`` (the UNIQ_KEY unless the producer set its own)."""
        return self.properties.get(MessageConst.TRANSACTION_ID, self.unique_key)

    def _copy(self, topic: str, queue_id: int, props: dict[str, str], sys_flag: int) -> BrokerMessage:
        out = BrokerMessage(
            topic,
            queue_id,
            self.body,
            properties_to_string(props),
            self.flag,
            sys_flag,
            self.born_timestamp,
            reconsume_times=self.reconsume_times,
            prepared_transaction_offset=self.commitlog_offset,
        )
        out.born_host8 = self.born_host8
        return out

    def committed(self) -> BrokerMessage:
        """The message a commit puts into the real topic and queue."""
        props = self.properties.copy()
        for name in _TRANSACTION_ONLY:
            props.pop(name, None)
        sys_flag = (self.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE
        return self._copy(self.real_topic, self.real_queue_id, props, sys_flag)

    def discarded(self, checks: int) -> BrokerMessage:
        """The half message moved to the discard topic (its real topic stays in ``REAL_TOPIC``)."""
        props = dict(self.properties)
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(checks)
        props[MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET] = str(self.queue_offset)
        return self._copy(TRANS_CHECK_MAX_TIME_TOPIC, 0, props, self.sys_flag)

    def check_immunity_ms(self, default_ms: int) -> int:
        """How old it must be before it is checked: ``CHECK_IMMUNITY_TIME_IN_SECONDS`` or the default."""
        raw = self.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS, "")
        return int(raw) * 1000 if raw.isdigit() else default_ms
