"""Retry and dead-letter messages of consumer groups (the broker side of consume retry).

Owns the group topics created on demand: ``%RETRY%{group}`` with the group's ``retryQueueNums``
queues and ``%DLQ%{group}`` with one queue, both read+write (DESIGN §9: a consumer may subscribe to
its dead letters), and ``send_back_message``, the message stored from the record a consumer failed
on (RocketMQ ``asyncConsumerSendMsgBack``): the body as stored (compressed or not), flags, born time
and host, and properties are kept; ``RETRY_TOPIC`` names the topic the message was first sent to
and ``ORIGIN_MESSAGE_ID`` its first id (both kept from earlier rounds); reconsume times grow by one;
delivery-time properties of the original send are dropped (the send-back decides the delay).
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketpy.broker.schedule.records import TIMING_PROPERTIES
from rocketpy.broker.store import BrokerMessage
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.message import MessageConst, properties_to_string, string_to_properties
from rocketpy.msgid import create_offset_msg_id
from rocketpy.perm import PERM_RW
from rocketpy.record import HEAD_SIZE, RECORD_HEAD
from rocketpy.route import TopicConfig
from rocketpy.subscription_group import SubscriptionGroupConfig
from rocketpy.topic import dlq_topic, retry_topic

#: Queues of a dead-letter topic (RocketMQ: one).
DLQ_QUEUE_NUMS = 1
#: Properties that belong to one stay in a waiting topic, not to the message itself.
_PLACE_PROPERTIES = (*TIMING_PROPERTIES, MessageConst.REAL_TOPIC, MessageConst.REAL_QID)


def ensure_retry_topic(topics: TopicConfigManager, group: SubscriptionGroupConfig) -> TopicConfig:
    """``%RETRY%{group}``, created with the group's retry queue count when absent.

    Raises:
        TopicLimitError: the broker holds its maximum number of topics.
    """
    return topics.create_system_group_topic(
        retry_topic(group.group_name), max(1, group.retry_queue_nums), PERM_RW
    )


def ensure_dlq_topic(topics: TopicConfigManager, group: str) -> TopicConfig:
    """``%DLQ%{group}`` (one queue, read+write), created when absent.

    Raises:
        TopicLimitError: the broker holds its maximum number of topics.
    """
    return topics.create_system_group_topic(dlq_topic(group), DLQ_QUEUE_NUMS, PERM_RW)


@dataclass(frozen=True, slots=True)
class FailedRecord:
    """What the send-back needs of the stored record a consumer failed on."""

    topic: str
    reconsume_times: int
    properties: dict[str, str]
    message: BrokerMessage  # topic, queue and reconsume times still those of the stored record


def read_failed_record(
    record: memoryview | bytes, phys: int, store_host: tuple[str, int]
) -> FailedRecord | None:
    """Decode the record found at commitlog offset ``phys`` (None: it is not the record stored there).

    ``store_host`` is the broker's address, for the offset message id of a record that carries no
    ``UNIQ_KEY``.
    """
    (_total, _magic, _crc, qid, flag, _qoff, rec_phys, sys_flag, born_ts, born_host8, _store_ts,
     _store_host, reconsume, prepared, body_len) = RECORD_HEAD.unpack_from(record, 0)  # fmt: skip
    if rec_phys != phys:
        return None
    pos = HEAD_SIZE + body_len
    topic_len = record[pos]
    topic = str(record[pos + 1 : pos + 1 + topic_len], "utf-8")
    props = string_to_properties(str(record[pos + 3 + topic_len :], "utf-8"))
    if MessageConst.UNIQ_KEY not in props and MessageConst.ORIGIN_MESSAGE_ID not in props:
        props[MessageConst.ORIGIN_MESSAGE_ID] = create_offset_msg_id(store_host[0], store_host[1], phys)
    msg = BrokerMessage(
        topic, qid, bytes(record[HEAD_SIZE:pos]), "", flag, sys_flag, born_ts,
        reconsume_times=reconsume, prepared_transaction_offset=prepared,
    )  # fmt: skip
    msg.born_host8 = born_host8
    return FailedRecord(topic, reconsume, props, msg)


def send_back_message(
    failed: FailedRecord, topic: str, queue_id: int, origin_msg_id: str, max_reconsume_times: int
) -> BrokerMessage:
    """The message to store in ``topic``/``queue_id`` (retry or dead-letter) for ``failed``."""
    props = dict(failed.properties)
    for name in _PLACE_PROPERTIES:
        props.pop(name, None)
    props.setdefault(MessageConst.RETRY_TOPIC, failed.topic)
    origin = origin_msg_id or props.get(MessageConst.UNIQ_KEY, "")
    if origin:
        props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, origin)
    props[MessageConst.MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    m = failed.message
    out = BrokerMessage(
        topic, queue_id, m.body, properties_to_string(props), m.flag, m.sys_flag, m.born_timestamp,
        reconsume_times=failed.reconsume_times + 1, prepared_transaction_offset=m.prepared_transaction_offset,
    )  # fmt: skip
    out.born_host8 = m.born_host8
    return out
