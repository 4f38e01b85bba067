"""CONSUMER_SEND_MSG_BACK (36): a consumer hands a message it failed to consume back to the broker.

Owns the header's fields (RocketMQ's ``ConsumerSendMsgBackRequestHeader``), the client's map
(``to_ext``) and the broker's reading (``from_ext``). ``delay_level`` 0 asks for the broker's
schedule (``3 + reconsume_times``), a positive level for that level, a negative one for the
dead-letter queue at once (orderly consumers past their limit).
"""

from __future__ import annotations

from typing import Any

from rocketpy.remoting.headers import HeaderError, ext_bool, ext_int, ext_str

#: ``maxReconsumeTimes`` when the sender does not give one: the group's ``retryMaxTimes`` applies.
USE_GROUP_MAX = -1


class ConsumerSendMsgBackRequestHeader:
    """One failed message to redeliver later (or to dead-letter).

    Attributes:
        offset: commitlog offset of the stored record the consumer received.
        group: the consumer group (its ``%RETRY%`` / ``%DLQ%`` topics).
        delay_level: 0 = broker's schedule, > 0 = that level, < 0 = straight to the DLQ.
        origin_msg_id: the message id the listener saw (kept as ``ORIGIN_MESSAGE_ID``).
        origin_topic: the topic the listener saw.
        max_reconsume_times: the consumer's limit (``USE_GROUP_MAX``: the group's ``retryMaxTimes``).
    """

    __slots__ = ("delay_level", "group", "max_reconsume_times", "offset", "origin_msg_id", "origin_topic")

    def __init__(
        self,
        offset: int,
        group: str,
        delay_level: int = 0,
        origin_msg_id: str = "",
        origin_topic: str = "",
        max_reconsume_times: int = USE_GROUP_MAX,
    ) -> None:
        self.offset, self.group, self.delay_level = offset, group, delay_level
        self.origin_msg_id, self.origin_topic = origin_msg_id, origin_topic
        self.max_reconsume_times = max_reconsume_times

    def to_ext(self) -> dict[str, Any]:
        """The ``ext`` map (RocketMQ's field names)."""
        return {
            "offset": self.offset,
            "group": self.group,
            "delayLevel": self.delay_level,
            "originMsgId": self.origin_msg_id,
            "originTopic": self.origin_topic,
            "unitMode": False,
            "maxReconsumeTimes": self.max_reconsume_times,
        }

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None) -> ConsumerSendMsgBackRequestHeader:
        """Read the header (``maxReconsumeTimes`` absent: the group's limit).

        Raises:
            HeaderError: a missing or malformed field, a negative offset, an empty group.
        """
        offset = ext_int(ext, "offset")
        if offset < 0:
            raise HeaderError(f"request header field 'offset' must be a commitlog offset >= 0, got {offset}")
        group = ext_str(ext, "group")
        if not group:
            raise HeaderError("request header field 'group' is empty; name the consumer group")
        ext_bool(ext, "unitMode", False)  # read for its type only: unit mode is not supported
        return cls(
            offset,
            group,
            ext_int(ext, "delayLevel", 0),
            ext_str(ext, "originMsgId", ""),
            ext_str(ext, "originTopic", ""),
            ext_int(ext, "maxReconsumeTimes", USE_GROUP_MAX),
        )
