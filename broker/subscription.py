"""The broker-side filters of a subscription (the store's ``MessageFilter``).

Owns ``TagMessageFilter``: it compares a consume-queue unit's tag hash code with the subscription's
codes (``rocketpy.subscription.SubscriptionData``) and never reads the commitlog (hash collisions
are removed by the client, as in RocketMQ). And ``SqlMessageFilter``: every unit passes the
consume-queue stage and the record's properties are tested by the compiled SQL92 expression
(``rocketpy.filter.sql92``), so non-matching bodies never leave the broker. ``message_filter_of``
picks one for a subscription.
"""

from __future__ import annotations

from typing import Any

from rocketpy.filter.sql92 import compile_sql92
from rocketpy.subscription import ExpressionType, SubscriptionData

_MASK32 = 0xFFFFFFFF


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


class SqlMessageFilter:
    """The store's MessageFilter for SQL92 subscriptions (tests each record's properties).

    ``is_matched_by_commit_log`` is the compiled expression's ``match_record`` itself (no wrapper
    call per message); it reads only the properties the expression names.
    """

    __slots__ = ("expression", "is_matched_by_commit_log")

    matches_all = False

    def __init__(self, sub: SubscriptionData) -> None:
        assert sub.expression_type is ExpressionType.SQL92
        self.expression = compile_sql92(sub.sub_string)
        self.is_matched_by_commit_log = self.expression.match_record

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """Every unit may match: the properties decide (no bloom filter in the consume queue)."""
        return True


MessageFilter = TagMessageFilter | SqlMessageFilter


def message_filter_of(sub: SubscriptionData | None) -> MessageFilter:
    """The filter of ``sub`` (SQL92 expressions must have parsed already: ``parse_subscription``)."""
    if sub is not None and sub.expression_type is ExpressionType.SQL92:
        return SqlMessageFilter(sub)
    return TagMessageFilter(sub)
