"""Subscription data and the broker-side tag filter.

Owns ``SubscriptionData`` (topic, expression, tag set, tag hash codes, version) parsed from a
RocketMQ tag expression (``"A || B"``, ``"*"`` or empty for all) and ``TagMessageFilter``, the
``MessageFilter`` the store calls per consume-queue unit: it compares the unit's tag hash code
with the subscription's codes and never reads the commitlog (hash collisions are removed by
the client, as in RocketMQ).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rocketpy.errors import RocketpyError
from rocketpy.filter.tags import java_string_hash, split_tag_expression

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"
MAX_EXPRESSION_LENGTH = 4096
_MASK32 = 0xFFFFFFFF


class SubscriptionParseError(RocketpyError, ValueError):
    """A subscription expression that cannot be parsed (SUBSCRIPTION_PARSE_FAILED)."""


@dataclass(slots=True)
class SubscriptionData:
    """One topic subscription of a consumer group."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG

    @property
    def is_all(self) -> bool:
        """True when every message of the topic matches."""
        return self.sub_string in ("", SUB_ALL)

    def to_wire(self) -> dict[str, Any]:
        """The RocketMQ-shaped map."""
        return {
            "topic": self.topic,
            "subString": self.sub_string,
            "tagsSet": sorted(self.tags_set),
            "codeSet": sorted(self.code_set),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type,
        }

    def same_as(self, other: SubscriptionData) -> bool:
        """True when the filter semantics are equal (version ignored)."""
        return (
            self.topic == other.topic
            and self.sub_string == other.sub_string
            and self.expression_type == other.expression_type
        )


def parse_subscription(
    topic: str, expression: str | None, sub_version: int = 0, expression_type: str | None = None
) -> SubscriptionData:
    """Build SubscriptionData from a tag expression such as ``"TagA || TagB"``.

    Raises:
        SubscriptionParseError: for expressions that are too long or of an unsupported type.
    """
    etype = (expression_type or EXPRESSION_TAG).upper()
    expr = (expression or "").strip()
    if len(expr) > MAX_EXPRESSION_LENGTH:
        raise SubscriptionParseError(
            f"the subscription expression is {len(expr)} chars; the limit is {MAX_EXPRESSION_LENGTH}"
        )
    if etype != EXPRESSION_TAG:
        raise SubscriptionParseError(
            f"expression type {etype!r} is not supported by this broker; "
            "use TAG (SQL92 needs enablePropertyFilter=true)"
        )
    sd = SubscriptionData(topic=topic, sub_version=sub_version, expression_type=etype)
    if expr in ("", SUB_ALL):
        sd.sub_string = SUB_ALL
        return sd
    sd.sub_string = expr
    sd.tags_set.update(split_tag_expression(expr))
    sd.code_set.update(java_string_hash(tag) for tag in sd.tags_set)
    if not sd.tags_set:
        raise SubscriptionParseError(f"the tag expression {expr!r} names no tag; use '*' or 'TagA || TagB'")
    return sd


def subscription_from_wire(d: dict[str, Any]) -> SubscriptionData:
    """Build SubscriptionData from a heartbeat's map (tags re-hashed from ``subString``)."""
    if not isinstance(d, dict) or not d.get("topic"):
        raise SubscriptionParseError("a subscription in the heartbeat has no 'topic'")
    return parse_subscription(
        str(d["topic"]),
        str(d.get("subString") or SUB_ALL),
        int(d.get("subVersion") or 0),
        str(d.get("expressionType") or EXPRESSION_TAG),
    )


class TagMessageFilter:
    """The store's MessageFilter for tag subscriptions (matches by consume-queue tag hash)."""

    __slots__ = ("_all", "_codes")

    def __init__(self, sub: SubscriptionData | None) -> None:
        self._all = sub is None or sub.is_all
        self._codes = frozenset(c & _MASK32 for c in sub.code_set) if sub is not None else frozenset()

    @property
    def matches_all(self) -> bool:
        """Store hint: every message matches (``"*"``), so it skips the per-message calls."""
        return self._all

    @property
    def tag_codes(self) -> frozenset[int]:
        """Store hint: the 32-bit tag codes that match (the commitlog check always passes)."""
        return self._codes

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """True when a unit with ``tags_code`` may match (None means unknown: match)."""
        if self._all or tags_code is None:
            return True
        return (tags_code & _MASK32) in self._codes

    def is_matched_by_commit_log(self, record: Any) -> bool:
        """Tag filtering needs no commitlog check."""
        return True
