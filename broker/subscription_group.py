"""Subscription group configs (``config/subscriptionGroup.json``).

Owns the group -> ``SubscriptionGroupConfig`` (``rocketpy.subscription_group``) table (RocketMQ's
SubscriptionGroupManager): created by UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, or on first use when
``autoCreateSubscriptionGroup`` is on; ``consumeEnable=false`` stops a group's pulls.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from rocketpy.broker.persistence import JsonTable
from rocketpy.subscription_group import SYSTEM_GROUPS, SubscriptionGroupConfig

log = logging.getLogger("rocketpy.broker.subscription_group")

GROUP_MAX_LENGTH = 255
MAX_GROUPS = 100_000


class SubscriptionGroupManager:
    """The subscription group table, persisted to subscriptionGroup.json.

    Args:
        path: the file path.
        auto_create: create groups on first use (``autoCreateSubscriptionGroup``).
    """

    def __init__(self, path: str, auto_create: bool, clock_ms: Callable[[], int] | None = None) -> None:
        self.auto_create = auto_create
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = {"timestamp": self._clock_ms(), "counter": 0}
        self.file = JsonTable(path, self.snapshot)
        for name in SYSTEM_GROUPS:
            self.table[name] = SubscriptionGroupConfig(name)

    def load(self) -> None:
        """Load subscriptionGroup.json (sync)."""
        doc = self.file.load()
        if not doc:
            return
        for name, d in (doc.get("subscriptionGroupTable") or {}).items():
            self.table[name] = SubscriptionGroupConfig.from_wire({**d, "groupName": name})
        dv = doc.get("dataVersion") or {}
        self.data_version = {"timestamp": int(dv.get("timestamp", 0)), "counter": int(dv.get("counter", 0))}

    def snapshot(self) -> dict[str, Any]:
        """The subscriptionGroup.json document (fresh dicts)."""
        return {
            "subscriptionGroupTable": {n: c.to_wire() for n, c in self.table.items()},
            "dataVersion": dict(self.data_version),
        }

    def _changed(self) -> None:
        self.data_version = {"timestamp": self._clock_ms(), "counter": self.data_version["counter"] + 1}
        self.file.mark_dirty()

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; created with defaults when absent and auto-create is on."""
        cfg = self.table.get(group)
        if cfg is None and self.auto_create and len(self.table) < MAX_GROUPS:
            cfg = self.table[group] = SubscriptionGroupConfig(group)
            log.info("auto-created subscription group %s", group)
            self._changed()
        return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        """Create or replace a group's config."""
        self.table[cfg.group_name] = cfg
        log.info("subscription group %s updated: %s", cfg.group_name, cfg)
        self._changed()

    def delete(self, group: str) -> bool:
        """Remove a group; True when it existed."""
        if self.table.pop(group, None) is None:
            return False
        self._changed()
        return True
