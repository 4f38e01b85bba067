"""CONSUMER_SEND_MSG_BACK (36): a consumer hands a message it failed to consume back to the broker.

Owns the header's fields (RocketMQ's ``ConsumerSendMsgBackRequestHeader``). ``delay_level`` 0 asks
for the broker's schedule (``3 + reconsume_times``), a positive level for that level, a negative
one for the dead-letter queue at once (orderly consumers past their limit).
"""

from __future__ import annotations

from rocketpy.protocol.header import Header, wire
from rocketpy.protocol.headers.offset import INT64_MAX

#: ``maxReconsumeTimes`` when the sender does not give one: the group's ``retryMaxTimes`` applies.
USE_GROUP_MAX = -1


class ConsumerSendMsgBackRequestHeader(Header):
    """One failed message to redeliver later (or to dead-letter).

    Attributes:
        offset: commitlog offset of the stored record the consumer received.
        group: the consumer group (its ``%RETRY%`` / ``%DLQ%`` topics).
        delay_level: 0 = broker's schedule, > 0 = that level, < 0 = straight to the DLQ.
        origin_msg_id: the message id the listener saw (kept as ``ORIGIN_MESSAGE_ID``).
        origin_topic: the topic the listener saw.
        unit_mode: RocketMQ's unit mode (read for its type only: not supported).
        max_reconsume_times: the consumer's limit (``USE_GROUP_MAX``: the group's ``retryMaxTimes``).
    """

    offset: int = wire("offset", lo=0, hi=INT64_MAX)
    group: str = wire("group", nonempty=True, hint="name the consumer group")
    delay_level: int = wire("delayLevel", default=0)
    origin_msg_id: str = wire("originMsgId", default="")
    origin_topic: str = wire("originTopic", default="")
    unit_mode: bool = wire("unitMode", default=False)
    max_reconsume_times: int = wire("maxReconsumeTimes", default=USE_GROUP_MAX)
