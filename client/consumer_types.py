"""Consumer-side public enums, the message selector and the subscription record.

Owns: ``ConsumeStatus``, ``ConsumeOrderlyStatus``, ``MessageModel``, ``ConsumeFromWhere``,
``AllocateStrategy``, ``ExpressionType``, ``MessageSelector`` and ``SubscriptionData`` (what a
consumer sends in its heartbeat and pull requests, docs/wire.md HEART_BEAT / PULL_MESSAGE).

Tag expressions follow RocketMQ: ``"A || B"`` is split on ``||`` and trimmed into ``tags_set``;
``code_set`` holds Java ``String.hashCode`` of each tag; ``""`` or ``"*"`` subscribes to all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum, StrEnum
from typing import Any, TypeVar

from rocketpy.errors import MQClientError
from rocketpy.filter.tags import java_string_hash, split_tag_expression

SUB_ALL = "*"
CONSUME_TIMESTAMP_DEFAULT_AGO_S = 30 * 60


class ConsumeStatus(StrEnum):
    """Result of a concurrent listener."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(StrEnum):
    """Result of an orderly listener."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class MessageModel(StrEnum):
    """CLUSTERING shares the queues among a group; BROADCASTING gives every consumer all queues."""

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(StrEnum):
    """Where a group with no stored offset starts."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class AllocateStrategy(StrEnum):
    """Queue allocation strategies (reference §6)."""

    AVERAGELY = "AVERAGELY"
    AVERAGELY_BY_CIRCLE = "AVERAGELY_BY_CIRCLE"
    CONSISTENT_HASH = "CONSISTENT_HASH"
    BY_CONFIG = "BY_CONFIG"


class ExpressionType(StrEnum):
    """Kind of a subscription expression."""

    TAG = "TAG"
    SQL92 = "SQL92"


_E = TypeVar("_E", bound=Enum)


def coerce_enum(enum_cls: type[_E], value: Any, option: str) -> _E:
    """Return ``value`` as a member of ``enum_cls``, accepting the member or its name.

    Raises:
        MQClientError: naming the option and the allowed values.
    """
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        for member in enum_cls:
            if value.upper() in (member.name, str(member.value).upper()):
                return member
    allowed = ", ".join(f"{enum_cls.__name__}.{m.name}" for m in enum_cls)
    raise MQClientError(f"{option}={value!r} is not valid: use one of {allowed}")


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """A subscription filter: a tag expression or an SQL92 expression over message properties.

    Attributes:
        expression_type: TAG or SQL92.
        expression: the expression text (``"*"`` for all tags).
    """

    expression_type: ExpressionType
    expression: str

    @classmethod
    def by_tag(cls, expr: str | None = None) -> MessageSelector:
        """Select by tags: ``"TagA || TagB"``; ``None``, ``""`` or ``"*"`` selects all."""
        text = (expr or "").strip() or SUB_ALL
        return cls(ExpressionType.TAG, text)

    @classmethod
    def by_sql(cls, expr: str) -> MessageSelector:
        """Select by an SQL92 expression over properties (needs ``enablePropertyFilter=true``)."""
        if not isinstance(expr, str) or not expr.strip():
            raise MQClientError('MessageSelector.by_sql needs a non-empty SQL92 expression, e.g. "a > 5"')
        return cls(ExpressionType.SQL92, expr.strip())


@dataclass(slots=True)
class SubscriptionData:
    """One topic subscription of a consumer, in RocketMQ's shape.

    Attributes:
        topic: the subscribed topic.
        sub_string: the expression as given (``"*"`` = all).
        expression_type: TAG or SQL92.
        tags_set: the tags of a TAG expression (empty = all).
        code_set: Java ``String.hashCode`` of each tag.
        sub_version: creation time in ms (lets the broker detect a newer subscription).
    """

    topic: str
    sub_string: str = SUB_ALL
    expression_type: ExpressionType = ExpressionType.TAG
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)

    @classmethod
    def build(cls, topic: str, selector: str | MessageSelector | None) -> SubscriptionData:
        """Build from a tag expression string or a MessageSelector.

        Raises:
            MQClientError: on an empty topic or a selector of the wrong type.
        """
        check_topic(topic)
        if selector is None or isinstance(selector, str):
            selector = MessageSelector.by_tag(selector)
        if not isinstance(selector, MessageSelector):
            raise MQClientError(
                f"subscribe({topic!r}, ...) needs a tag expression str or a MessageSelector, "
                f"not {type(selector).__name__}"
            )
        if selector.expression_type is ExpressionType.SQL92:
            return cls(topic, selector.expression, ExpressionType.SQL92)
        if selector.expression == SUB_ALL:
            return cls(topic)
        tags = split_tag_expression(selector.expression)
        if not tags:
            return cls(topic)
        codes = frozenset(java_string_hash(t) for t in tags)
        return cls(topic, selector.expression, ExpressionType.TAG, tags, codes)

    @property
    def is_all(self) -> bool:
        """True when every message of the topic matches."""
        return self.expression_type is ExpressionType.TAG and not self.tags_set

    def matches_tag(self, tag: str | None) -> bool:
        """Client-side re-check of a TAG subscription (removes hash collisions).

        SQL92 is evaluated by the broker, so it always matches here.
        """
        if self.expression_type is ExpressionType.SQL92 or not self.tags_set:
            return True
        return tag is not None and tag in self.tags_set

    def to_wire(self) -> dict[str, Any]:
        """SubscriptionData map as sent in HEART_BEAT (docs/wire.md)."""
        return {
            "topic": self.topic,
            "subString": self.sub_string,
            "tagsSet": sorted(self.tags_set),
            "codeSet": sorted(self.code_set),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type.value,
        }


def check_topic(topic: Any) -> str:
    """Validate a topic name given to a consumer.

    Raises:
        MQClientError: when the topic is empty or not a str.
    """
    if not isinstance(topic, str) or not topic.strip():
        raise MQClientError(
            f"topic must be a non-empty string, got {topic!r}: pass the topic name to subscribe"
        )
    if len(topic) > 127:
        raise MQClientError(f"topic {topic[:20]!r}... is longer than 127 characters: use a shorter name")
    return topic


def check_positive(name: str, value: Any, *, integer: bool = False) -> Any:
    """Return ``value`` if it is a positive number (int when ``integer``), else raise MQClientError."""
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
        raise MQClientError(f"{name}={value!r} must be a positive {'integer' if integer else 'number'}")
    return value


def consume_timestamp_ms(value: Any) -> int:
    """``consume_timestamp`` as epoch ms: a datetime, epoch ms, or RocketMQ's ``yyyyMMddHHmmss`` string."""
    if value is None:
        return int((time.time() - CONSUME_TIMESTAMP_DEFAULT_AGO_S) * 1000)
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        try:
            return int(datetime.strptime(value, "%Y%m%d%H%M%S").timestamp() * 1000)
        except ValueError:
            pass
    raise MQClientError(
        f"consume_timestamp={value!r} is not valid: pass a datetime, epoch milliseconds or 'yyyyMMddHHmmss'"
    )
