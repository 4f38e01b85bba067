"""Subscription group configs (``config/subscriptionGroup.json``).

Owns the group -> ``SubscriptionGroupConfig`` table (RocketMQ's SubscriptionGroupManager):
created by UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, or on first use when
``autoCreateSubscriptionGroup`` is on; ``consumeEnable=false`` stops a group's pulls.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from rocketpy.broker.persistence import JsonTable

log = logging.getLogger("rocketpy.broker.subscription_group")

GROUP_MAX_LENGTH = 255
MAX_GROUPS = 100_000

_WIRE_NAMES = {
    "group_name": "groupName",
    "consume_enable": "consumeEnable",
    "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable",
    "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes",
    "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
}


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """One consumer group's settings on this broker."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_wire(self) -> dict[str, Any]:
        """The RocketMQ-shaped map (camelCase keys)."""
        return {_WIRE_NAMES[k]: v for k, v in asdict(self).items()}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        """Build from a RocketMQ-shaped map; raises ValueError naming a bad or missing field."""
        if not isinstance(d, dict) or not d.get("groupName"):
            raise ValueError("the subscription group config needs a non-empty 'groupName'")
        kwargs: dict[str, Any] = {}
        defaults = cls(group_name="x")
        for field, wire in _WIRE_NAMES.items():
            if wire not in d:
                continue
            default = getattr(defaults, field)
            value = d[wire]
            if isinstance(default, bool):
                kwargs[field] = value if isinstance(value, bool) else str(value).lower() == "true"
            elif isinstance(default, int):
                try:
                    kwargs[field] = int(value)
                except (TypeError, ValueError) as e:
                    raise ValueError(f"field {wire!r} must be an integer, got {value!r}") from e
            else:
                kwargs[field] = str(value)
        return cls(**kwargs)


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
        for name in ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_RMQ_SYS_TRANS"):
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
