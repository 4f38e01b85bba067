"""PULL_MESSAGE / LITE_PULL_MESSAGE header (RocketMQ's PullMessageRequestHeader).

Owns the header's fields, the consumer's builder (``pull_request_ext``) and the broker's reader
(``PullMessageRequestHeader.from_ext``, with the range checks of the broker). ``sysFlag`` holds
``rocketpy.sysflag`` bits; ``maxMsgBytes`` is optional and left out of the map when unset.
"""

from __future__ import annotations

from typing import Any

from rocketpy.remoting.headers import HeaderError, ext_int, ext_opt_int, ext_str
from rocketpy.subscription import ExpressionType

#: The expression type when a request names none (a plain str: it is compared with wire values).
_TAG = ExpressionType.TAG.value
INT64_MAX = (1 << 63) - 1
_EMPTY: dict[str, Any] = {}


def pull_request_ext(
    group: str,
    topic: str,
    queue_id: int,
    queue_offset: int,
    max_msgs: int,
    sys_flag: int,
    commit_offset: int,
    suspend_timeout_ms: int,
    subscription: str,
    sub_version: int,
    expression_type: str,
    max_msg_bytes: int | None = None,
) -> dict[str, Any]:
    """The PULL_MESSAGE ``ext`` map (positional: built per pull)."""
    ext = {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": queue_offset,
        "maxMsgNums": max_msgs, "sysFlag": sys_flag, "commitOffset": commit_offset,
        "suspendTimeoutMillis": suspend_timeout_ms, "subscription": subscription, "subVersion": sub_version,
        "expressionType": expression_type,
    }  # fmt: skip
    if max_msg_bytes is not None:
        ext["maxMsgBytes"] = max_msg_bytes
    return ext


class PullMessageRequestHeader:
    """The fields of a pull request header.

    Attributes:
        group: the consumer group (``consumerGroup``).
        topic, queue_id: the queue.
        queue_offset: where to read.
        max_msgs: most messages to answer (``maxMsgNums``).
        sys_flag: ``PullSysFlag`` bits.
        commit_offset: the consumed offset to store (with ``FLAG_COMMIT_OFFSET``).
        suspend_timeout_ms: how long the broker may hold the pull (``suspendTimeoutMillis``).
        subscription: the expression (with ``FLAG_SUBSCRIPTION``); ``sub_version`` its version.
        expression_type: TAG or SQL92.
        max_msg_bytes: most body bytes to answer, or None.
    """

    __slots__ = (
        "commit_offset",
        "expression_type",
        "group",
        "max_msg_bytes",
        "max_msgs",
        "queue_id",
        "queue_offset",
        "sub_version",
        "subscription",
        "suspend_timeout_ms",
        "sys_flag",
        "topic",
    )

    def __init__(
        self,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_msgs: int,
        *,
        sys_flag: int = 0,
        commit_offset: int = 0,
        suspend_timeout_ms: int = 0,
        subscription: str = "*",
        sub_version: int = 0,
        expression_type: str = _TAG,
        max_msg_bytes: int | None = None,
    ) -> None:
        self.group, self.topic, self.queue_id, self.queue_offset = group, topic, queue_id, queue_offset
        self.max_msgs, self.sys_flag, self.commit_offset = max_msgs, sys_flag, commit_offset
        self.suspend_timeout_ms, self.subscription, self.sub_version = (
            suspend_timeout_ms,
            subscription,
            sub_version,
        )
        self.expression_type, self.max_msg_bytes = expression_type, max_msg_bytes

    def to_ext(self) -> dict[str, Any]:
        """The ``ext`` map."""
        return pull_request_ext(
            self.group, self.topic, self.queue_id, self.queue_offset, self.max_msgs, self.sys_flag,
            self.commit_offset, self.suspend_timeout_ms, self.subscription, self.sub_version,
            self.expression_type, self.max_msg_bytes,
        )  # fmt: skip

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None) -> PullMessageRequestHeader:
        """Read a pull header.

        Raises:
            HeaderError: a required field is missing, a field is malformed or out of its range.
        """
        h = cls.__new__(cls)
        get = ext.get if ext else _EMPTY.get
        # Hot path: values usually have their wire type already; the ext_* helpers convert the rest
        # (decimal strings, nil) or raise with the field's name.
        v = get("consumerGroup")
        h.group = v if type(v) is str else ext_str(ext, "consumerGroup")
        v = get("topic")
        h.topic = v if type(v) is str else ext_str(ext, "topic")
        v = get("queueId")
        h.queue_id = v if type(v) is int else ext_int(ext, "queueId")
        v = get("queueOffset")
        h.queue_offset = v if type(v) is int else ext_int(ext, "queueOffset")
        v = get("maxMsgNums")
        h.max_msgs = v if type(v) is int else ext_int(ext, "maxMsgNums")
        v = get("sysFlag")
        h.sys_flag = v if type(v) is int else ext_int(ext, "sysFlag", 0)
        v = get("commitOffset")
        h.commit_offset = v if type(v) is int else ext_int(ext, "commitOffset", 0)
        v = get("suspendTimeoutMillis")
        h.suspend_timeout_ms = v if type(v) is int else ext_int(ext, "suspendTimeoutMillis", 0)
        v = get("subscription")
        h.subscription = v if type(v) is str else ext_str(ext, "subscription", "*")
        v = get("subVersion")
        h.sub_version = v if type(v) is int else ext_int(ext, "subVersion", 0)
        v = get("expressionType")
        h.expression_type = v if type(v) is str else ext_str(ext, "expressionType", _TAG)
        v = get("maxMsgBytes")
        h.max_msg_bytes = v if v is None or type(v) is int else ext_opt_int(ext, "maxMsgBytes")
        h._check_ranges()
        return h

    def _check_ranges(self) -> None:
        if not 0 <= self.queue_offset <= INT64_MAX:
            raise HeaderError(
                f"request header field 'queueOffset' must be between 0 and {INT64_MAX}, "
                f"got {self.queue_offset}; "
                "pull from an offset the queue has (see GET_MIN_OFFSET / GET_MAX_OFFSET)"
            )
        if not 0 < self.max_msgs <= 1 << 31:
            raise HeaderError(f"request header field 'maxMsgNums' must be at least 1, got {self.max_msgs}")
        if self.commit_offset > INT64_MAX:
            raise HeaderError(
                f"request header field 'commitOffset' must be at most {INT64_MAX}, got {self.commit_offset}"
            )
        if not 0 <= self.suspend_timeout_ms <= INT64_MAX:
            raise HeaderError(
                f"request header field 'suspendTimeoutMillis' must be >= 0, got {self.suspend_timeout_ms}"
            )
