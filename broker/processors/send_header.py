"""``SendHeader``: the fields of a SEND_MESSAGE (V1 names) or SEND_MESSAGE_V2 (``a``..``j``) header.

Owns the header reading of the send path. A V2 header whose every field already has its wire type
(str / int, within int32 where RocketMQ's field is an int) is read by one flat fast path with literal
keys; any other header (V1 names, strings for numbers, nil values, out-of-range ints) goes through
the generic helpers, which convert or raise ``HeaderError`` with the field's name.
"""

from __future__ import annotations

from typing import Any

from rocketpy.remoting.headers import HeaderError, ext_int, ext_str

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
}
V1_NAMES = {k: k for k in V2_NAMES}
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)
_EMPTY: dict[str, Any] = {}


class SendHeader:
    """The fields of a send request header the broker uses.

    Raises:
        HeaderError: a required field is missing, or a field has a bad type or range.
    """

    __slots__ = (
        "born_timestamp",
        "default_topic",
        "default_topic_queue_nums",
        "flag",
        "producer_group",
        "properties",
        "queue_id",
        "reconsume_times",
        "sys_flag",
        "topic",
    )

    def __init__(self, ext: dict[str, Any] | None, v2: bool) -> None:
        if v2 and ext is not None and self._read_typical_v2(ext):
            return
        self._read_generic(ext, V2_NAMES if v2 else V1_NAMES)

    def _read_typical_v2(self, ext: dict[str, Any]) -> bool:
        """Read a V2 header whose values need no conversion; False (nothing set) for any other."""
        get = ext.get
        topic, queue_id, properties = get("b"), get("e"), get("i", "")
        sys_flag, born, flag, reconsume = get("f", 0), get("g", 0), get("h", 0), get("j", 0)
        group, default_topic, default_nums = get("a", ""), get("c", "TBW102"), get("d", 4)
        if not (
            type(topic) is str
            and type(queue_id) is int
            and type(properties) is str
            and type(sys_flag) is int
            and type(born) is int
            and type(flag) is int
            and type(reconsume) is int
            and type(group) is str
            and type(default_topic) is str
            and type(default_nums) is int
            and INT32_MIN <= queue_id <= INT32_MAX
            and INT32_MIN <= sys_flag <= INT32_MAX
            and INT32_MIN <= flag <= INT32_MAX
            and INT32_MIN <= reconsume <= INT32_MAX
        ):
            return False
        self.topic, self.queue_id, self.properties = topic, queue_id, properties
        self.sys_flag, self.born_timestamp, self.flag, self.reconsume_times = sys_flag, born, flag, reconsume
        self.producer_group, self.default_topic, self.default_topic_queue_nums = (
            group,
            default_topic,
            default_nums,
        )
        return True

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
        self.default_topic = _str(ext, n["defaultTopic"], "TBW102")
        self.default_topic_queue_nums = _int(ext, n["defaultTopicQueueNums"], 4)
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
