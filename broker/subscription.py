"""The broker-side tag filter of a subscription.

Owns ``TagMessageFilter``, the ``MessageFilter`` the store calls per consume-queue unit: it compares
the unit's tag hash code with the subscription's codes (``rocketpy.subscription.SubscriptionData``)
and never reads the commitlog (hash collisions are removed by the client, as in RocketMQ).
"""

from __future__ import annotations

from typing import Any

from rocketpy.subscription import SubscriptionData

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
