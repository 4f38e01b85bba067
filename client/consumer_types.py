"""Consumer-side public enums, the message selector and the subscription a selector makes.

Owns: ``ConsumeStatus``, ``ConsumeOrderlyStatus``, ``MessageModel``, ``ConsumeFromWhere``,
``AllocateStrategy``, ``MessageSelector`` and ``build_subscription`` (a selector -> the shared
``rocketpy.subscription.SubscriptionData`` a consumer sends in its heartbeat and pull requests;
``ExpressionType`` and ``SubscriptionData`` are re-exported from there).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from enum import Enum, StrEnum
from typing import Any, TypeVar

from rocketpy.errors import MQClientError
from rocketpy.filter.sql92 import SqlParseError, compile_sql92
from rocketpy.subscription import SUB_ALL, ExpressionType, SubscriptionData
from rocketpy.topic import TOPIC_MAX_LENGTH

CONSUME_TIMESTAMP_DEFAULT_AGO_S = 30 * 60


class ConsumeStatus(StrEnum):
    """Result of a concurrent listener."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(StrEnum):
    """Result of an orderly listener."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


#: The listener results that mean "consumed" (concurrent and orderly), compared by identity.
CONSUME_OK = (ConsumeStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS)


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
        """Select by an SQL92 expression over properties (needs ``enablePropertyFilter=true``).

        Raises:
            MQClientError: the expression does not parse (the message names the column).
        """
        if not isinstance(expr, str) or not expr.strip():
            raise MQClientError('MessageSelector.by_sql needs a non-empty SQL92 expression, e.g. "a > 5"')
        check_sql(expr.strip())
        return cls(ExpressionType.SQL92, expr.strip())


def check_sql(expr: str) -> None:
    """Compile ``expr`` (cached) so a bad SQL92 expression fails before anything is sent.

    Raises:
        MQClientError: with the parser's message and column.
    """
    try:
        compile_sql92(expr)
    except SqlParseError as e:
        raise MQClientError(f"bad SQL92 expression {expr!r}: {e}") from e


def build_subscription(topic: str, selector: str | MessageSelector | None) -> SubscriptionData:
    """The subscription of ``topic`` for a tag expression string or a MessageSelector.

    Its ``sub_version`` is the current time in ms (a re-subscription supersedes the old one).

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
    version = time.time_ns() // 1_000_000
    if selector.expression_type is ExpressionType.SQL92:
        check_sql(selector.expression)
        return SubscriptionData(topic, selector.expression, ExpressionType.SQL92, sub_version=version)
    return SubscriptionData.of_tags(topic, selector.expression, version)


def check_topic(topic: Any) -> str:
    """Validate a topic name given to a consumer.

    Raises:
        MQClientError: when the topic is empty or not a str.
    """
    if not isinstance(topic, str) or not topic.strip():
        raise MQClientError(
            f"topic must be a non-empty string, got {topic!r}: pass the topic name to subscribe"
        )
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MQClientError(
            f"topic {topic[:20]!r}... is longer than {TOPIC_MAX_LENGTH} characters: use a shorter name"
        )
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
