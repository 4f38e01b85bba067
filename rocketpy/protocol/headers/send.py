"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE headers (RocketMQ's SendMessageRequestHeader(V2)
and SendMessageResponseHeader).

Owns the header's fields and both of its namings: V1 (SEND_MESSAGE) uses RocketMQ's field names,
V2 (SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE) renames them ``a``..``n`` (``V2_NAMES``; ``l``,
maxReconsumeTimes, is not used by rocketpy). The producer builds the V2 map with ``send_ext_v2``;
the broker reads either with ``SendMessageRequestHeader.from_ext``. A V2 map whose every field
already has its wire type (str / int / bool, within int32 where RocketMQ's field is an int) is read
by one flat fast path with literal keys; any other (V1 names, strings for numbers, nil values,
out-of-range ints) goes through the converting helpers, which raise ``HeaderError`` naming the field.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rocketpy._accel import twin
from rocketpy.errors import HeaderError
from rocketpy.protocol.fields import ext_bool, ext_int, ext_str
from rocketpy.protocol.header import Header, wire
from rocketpy.topic import AUTO_CREATE_TOPIC_KEY_TOPIC

#: V1 field name -> V2 short name, in the V2 map's key order.
V2_NAMES = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "batch": "m",
    "brokerName": "n",
}
V1_NAMES = {k: k for k in V2_NAMES}
_V1_OF_V2 = {short: name for name, short in V2_NAMES.items()}
#: Attribute name -> V1 field name (each attribute is its field's name in snake case).
_V1_OF_ATTR = {re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(): name for name in V2_NAMES}
#: Queues a topic auto-created by a send gets unless the producer asks otherwise.
DEFAULT_TOPIC_QUEUE_NUMS = 4
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)
_EMPTY: dict[str, Any] = {}
_DEFAULT_TOPIC = AUTO_CREATE_TOPIC_KEY_TOPIC
# The value types of a V2 header read by the flat fast path, in ``read_typical_v2``'s order.
_ABSENT: Any = None  # a missing required field: its type fails the check below
_TYPICAL_V2_TYPES = (str, int, str, int, int, int, int, str, str, int, bool, bool, str)


def send_ext_v2(
    producer_group: str,
    topic: str,
    default_topic: str,
    default_topic_queue_nums: int,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    flag: int,
    properties: str,
    reconsume_times: int,
    unit_mode: bool,
    batch: bool,
    broker_name: str,
) -> dict[str, Any]:
    """The SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE ``ext`` map (positional: built per send)."""
    return {
        "a": producer_group, "b": topic, "c": default_topic, "d": default_topic_queue_nums, "e": queue_id,
        "f": sys_flag, "g": born_timestamp, "h": flag, "i": properties, "j": reconsume_times,
        "k": unit_mode, "m": batch, "n": broker_name,
    }  # fmt: skip


class SendMessageRequestHeader:
    """The fields of a send request header.

    Attributes:
        producer_group: the sender's producer group.
        topic: the topic to store into.
        default_topic: the template topic for auto-creation (TBW102).
        default_topic_queue_nums: queues of an auto-created topic.
        queue_id: the queue; negative lets the broker choose.
        sys_flag: message sys flags (0x1 compressed, transaction bits).
        born_timestamp: when the producer created the message (ms).
        flag: the user's ``Message.flag``.
        properties: the properties string (``k\\x01v\\x02`` ...).
        reconsume_times: deliveries so far (retry topics).
        unit_mode: RocketMQ's unit mode (always False here).
        batch: the body is a batch encoding.
        broker_name: the broker the producer aimed at.
    """

    __slots__ = (
        "batch",
        "born_timestamp",
        "broker_name",
        "default_topic",
        "default_topic_queue_nums",
        "flag",
        "producer_group",
        "properties",
        "queue_id",
        "reconsume_times",
        "sys_flag",
        "topic",
        "unit_mode",
    )

    def __init__(
        self,
        producer_group: str,
        topic: str,
        queue_id: int,
        properties: str = "",
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        flag: int = 0,
        reconsume_times: int = 0,
        default_topic: str = _DEFAULT_TOPIC,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        unit_mode: bool = False,
        batch: bool = False,
        broker_name: str = "",
    ) -> None:
        self.producer_group, self.topic, self.queue_id, self.properties = (
            producer_group,
            topic,
            queue_id,
            properties,
        )
        self.sys_flag, self.born_timestamp, self.flag, self.reconsume_times = (
            sys_flag,
            born_timestamp,
            flag,
            reconsume_times,
        )
        self.default_topic, self.default_topic_queue_nums = default_topic, default_topic_queue_nums
        self.unit_mode, self.batch, self.broker_name = unit_mode, batch, broker_name

    def to_ext(self, v2: bool = True) -> dict[str, Any]:
        """The ``ext`` map with V2 short names (or V1 names for SEND_MESSAGE)."""
        ext = send_ext_v2(
            self.producer_group, self.topic, self.default_topic, self.default_topic_queue_nums, self.queue_id,
            self.sys_flag, self.born_timestamp, self.flag, self.properties, self.reconsume_times,
            self.unit_mode, self.batch, self.broker_name,
        )  # fmt: skip
        return ext if v2 else {_V1_OF_V2[k]: v for k, v in ext.items()}

    @staticmethod
    def wire_names(v2: bool) -> dict[str, str]:
        """Attribute -> wire name, in V2's short names or V1's (the ACL finds the topic by them)."""
        names = V2_NAMES if v2 else V1_NAMES
        return {attr: names[v1] for attr, v1 in _V1_OF_ATTR.items()}

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None, v2: bool) -> SendMessageRequestHeader:
        """Read a V2 (``v2``) or V1 header.

        Raises:
            HeaderError: a required field (topic, queueId) is missing, or a field has a bad type or range.
        """
        h = cls.__new__(cls)
        if v2 and ext is not None and read_typical_v2(h, ext):
            return h
        h._read_generic(ext, V2_NAMES if v2 else V1_NAMES)
        return h

    def _read_generic(self, ext: dict[str, Any] | None, n: dict[str, str]) -> None:
        """Read any header through the converting helpers (V1 names, or a V2 header needing work)."""
        get = ext.get if ext else _EMPTY.get
        v = get(n["topic"])
        self.topic = v if type(v) is str else ext_str(ext, n["topic"])
        v = get(n["queueId"])
        self.queue_id = v if type(v) is int else ext_int(ext, n["queueId"])
        v = get(n["properties"])
        self.properties = v if type(v) is str else ext_str(ext, n["properties"], "")
        v = get(n["sysFlag"])
        self.sys_flag = v if type(v) is int else ext_int(ext, n["sysFlag"], 0)
        v = get(n["bornTimestamp"])
        self.born_timestamp = v if type(v) is int else ext_int(ext, n["bornTimestamp"], 0)
        v = get(n["flag"])
        self.flag = v if type(v) is int else ext_int(ext, n["flag"], 0)
        v = get(n["reconsumeTimes"])
        self.reconsume_times = v if type(v) is int else ext_int(ext, n["reconsumeTimes"], 0)
        self.producer_group = _str(ext, n["producerGroup"], "")
        self.default_topic = _str(ext, n["defaultTopic"], _DEFAULT_TOPIC)
        self.default_topic_queue_nums = _int(ext, n["defaultTopicQueueNums"], DEFAULT_TOPIC_QUEUE_NUMS)
        self.unit_mode = ext_bool(ext, n["unitMode"], False)
        self.batch = ext_bool(ext, n["batch"], False)
        self.broker_name = _str(ext, n["brokerName"], "")
        if not (
            INT32_MIN <= self.queue_id <= INT32_MAX
            and INT32_MIN <= self.sys_flag <= INT32_MAX
            and INT32_MIN <= self.flag <= INT32_MAX
            and INT32_MIN <= self.reconsume_times <= INT32_MAX
        ):
            self._range_error()

    def _range_error(self) -> None:
        for name, value in (("queueId", self.queue_id), ("sysFlag", self.sys_flag), ("flag", self.flag),
                            ("reconsumeTimes", self.reconsume_times)):  # fmt: skip
            if not INT32_MIN <= value <= INT32_MAX:
                raise HeaderError(f"request header field {name!r} is out of the int32 range: {value}")


def _int(ext: dict[str, Any] | None, name: str, default: int | None = None) -> int:
    value = ext.get(name) if ext else None
    return value if type(value) is int else ext_int(ext, name, default)


def _str(ext: dict[str, Any] | None, name: str, default: str | None = None) -> str:
    value = ext.get(name) if ext else None
    return value if type(value) is str else ext_str(ext, name, default)


@twin
def read_typical_v2(h: SendMessageRequestHeader, ext: dict[str, Any]) -> bool:
    """Fill ``h`` from a V2 header whose values need no conversion; False (nothing set) for any other.

    ``SendMessageRequestHeader.from_ext``'s fast path, a module function so it has a compiled twin.
    """
    get = ext.get
    topic, queue_id, properties = get("b", _ABSENT), get("e", _ABSENT), get("i", "")
    sys_flag, born, flag, reconsume = get("f", 0), get("g", 0), get("h", 0), get("j", 0)
    group, default_topic, default_nums = get("a", ""), get("c", _DEFAULT_TOPIC), get("d", 4)
    unit_mode, batch, broker_name = get("k", False), get("m", False), get("n", "")
    # One tuple compare checks all 13 wire types (fewer bytecodes than 13 ``is`` tests).
    if (
        type(topic), type(queue_id), type(properties), type(sys_flag), type(born), type(flag),
        type(reconsume), type(group), type(default_topic), type(default_nums), type(unit_mode),
        type(batch), type(broker_name),
    ) != _TYPICAL_V2_TYPES or not (
        INT32_MIN <= queue_id <= INT32_MAX
        and INT32_MIN <= sys_flag <= INT32_MAX
        and INT32_MIN <= flag <= INT32_MAX
        and INT32_MIN <= reconsume <= INT32_MAX
    ):  # fmt: skip
        return False
    h.topic, h.queue_id, h.properties = topic, queue_id, properties
    h.sys_flag, h.born_timestamp, h.flag, h.reconsume_times = sys_flag, born, flag, reconsume
    h.producer_group, h.default_topic = group, default_topic
    h.default_topic_queue_nums = default_nums
    h.unit_mode, h.batch, h.broker_name = unit_mode, batch, broker_name
    return True


class SendMessageResponseHeader(Header):
    """A stored send's answer (RocketMQ's SendMessageResponseHeader).

    Attributes:
        msg_id: the offset msg id of the stored message (of a batch: every message's, joined by ",").
        queue_id: the queue it was stored in.
        queue_offset: its queue offset (of a batch: the first message's).
        transaction_id: the message's unique key, when it had one.
    """

    msg_id: str = wire("msgId", default="")
    queue_id: int | None = wire("queueId", default=None)
    queue_offset: int = wire("queueOffset", default=0)
    transaction_id: str | None = wire("transactionId", default=None)


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.protocol.headers import _speedups

    same_signature(read_typical_v2)(_speedups.read_typical_v2)
    same_signature(_speedups.read_typical_v2)(read_typical_v2)
