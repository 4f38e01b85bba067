"""``SubscriptionData``: one topic subscription of a consumer group, shared by client and broker.

The consumer builds it from the user's selector and sends it in HEART_BEAT (``to_wire``) and in
each pull (``subscription``/``subVersion``/``expressionType`` header fields); the broker rebuilds it
from either with ``SubscriptionData.from_wire`` / ``parse_subscription`` and filters by its
``code_set``. Tag expressions follow RocketMQ: ``"A || B"`` is split on ``||`` and trimmed into
``tags_set``; ``code_set`` holds Java ``String.hashCode`` of each tag (``rocketpy.filter.tags``);
``""`` or ``"*"`` subscribes to every message.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rocketpy.errors import RocketpyError
from rocketpy.filter.sql92 import SqlParseError, compile_sql92
from rocketpy.filter.tags import java_string_hash, split_tag_expression

SUB_ALL = "*"
MAX_EXPRESSION_LENGTH = 4096


class ExpressionType(StrEnum):
    """Kind of a subscription expression (the ``expressionType`` wire field)."""

    TAG = "TAG"
    SQL92 = "SQL92"


class SubscriptionParseError(RocketpyError, ValueError):
    """A subscription expression that cannot be parsed (SUBSCRIPTION_PARSE_FAILED)."""


@dataclass(slots=True)
class SubscriptionData:
    """One topic subscription, in RocketMQ's shape.

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
    sub_version: int = 0

    @classmethod
    def of_tags(cls, topic: str, expression: str, sub_version: int) -> SubscriptionData:
        """A TAG subscription of ``expression``; one naming no tag (``"*"``, ``""``, ``"||"``) is all."""
        tags = split_tag_expression(expression) if expression != SUB_ALL else frozenset()
        if not tags:
            return cls(topic, SUB_ALL, ExpressionType.TAG, sub_version=sub_version)
        codes = frozenset(java_string_hash(t) for t in tags)
        return cls(topic, expression, ExpressionType.TAG, tags, codes, sub_version)

    @classmethod
    def from_wire(cls, d: Any) -> SubscriptionData:
        """Rebuild from a heartbeat's map (tags re-hashed from ``subString``).

        Raises:
            SubscriptionParseError: no topic, or an expression ``parse_subscription`` refuses.
        """
        if not isinstance(d, dict) or not d.get("topic"):
            raise SubscriptionParseError("a subscription in the heartbeat has no 'topic'")
        return parse_subscription(
            str(d["topic"]),
            str(d.get("subString") or SUB_ALL),
            int(d.get("subVersion") or 0),
            str(d.get("expressionType") or ExpressionType.TAG.value),
        )

    @property
    def is_all(self) -> bool:
        """True when every message of the topic matches."""
        return self.expression_type is ExpressionType.TAG and not self.tags_set

    def matches_tag(self, tag: str | None) -> bool:
        """Client-side re-check of a TAG subscription (removes hash collisions).

        SQL92 is re-checked over all properties by ``rocketpy.filter.sql92``, so it matches here.
        """
        if self.expression_type is ExpressionType.SQL92 or not self.tags_set:
            return True
        return tag is not None and tag in self.tags_set

    def same_as(self, other: SubscriptionData) -> bool:
        """True when the filter semantics are equal (version ignored)."""
        return (
            self.topic == other.topic
            and self.sub_string == other.sub_string
            and self.expression_type == other.expression_type
        )

    def to_wire(self) -> dict[str, Any]:
        """The SubscriptionData map of HEART_BEAT (docs/wire.md)."""
        return {
            "topic": self.topic,
            "subString": self.sub_string,
            "tagsSet": sorted(self.tags_set),
            "codeSet": sorted(self.code_set),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type.value,
        }


def parse_subscription(
    topic: str, expression: str | None, sub_version: int = 0, expression_type: str | None = None
) -> SubscriptionData:
    """The broker's reading of a subscription from the wire (pull header or heartbeat).

    A SQL92 expression is compiled here (``rocketpy.filter.sql92``, cached per text) so a bad one is
    refused with the parser's message; whether the broker filters by SQL92 at all
    (``enablePropertyFilter``) is the pull's decision, as in RocketMQ.

    Raises:
        SubscriptionParseError: for expressions that are too long, name no tag, do not parse, or
            are of an unknown type.
    """
    etype = (expression_type or ExpressionType.TAG.value).upper()
    expr = (expression or "").strip()
    if len(expr) > MAX_EXPRESSION_LENGTH:
        raise SubscriptionParseError(
            f"the subscription expression is {len(expr)} chars; the limit is {MAX_EXPRESSION_LENGTH}"
        )
    if etype == ExpressionType.SQL92:
        try:
            compile_sql92(expr)
        except SqlParseError as e:
            raise SubscriptionParseError(str(e)) from e
        return SubscriptionData(topic, expr, ExpressionType.SQL92, sub_version=sub_version)
    if etype != ExpressionType.TAG:
        raise SubscriptionParseError(f"expression type {etype!r} is not supported; use TAG or SQL92")
    if expr in ("", SUB_ALL):
        return SubscriptionData(topic, SUB_ALL, ExpressionType.TAG, sub_version=sub_version)
    sub = SubscriptionData.of_tags(topic, expr, sub_version)
    if sub.is_all:
        raise SubscriptionParseError(f"the tag expression {expr!r} names no tag; use '*' or 'TagA || TagB'")
    return sub
