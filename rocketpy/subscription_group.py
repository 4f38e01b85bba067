"""``SubscriptionGroupConfig``: one consumer group's settings on a broker, and the system group names.

Shared by the broker (its ``subscriptionGroup.json`` table and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
and the admin client (which sends the config as that request's body). ``WIRE_NAMES`` maps each
field to RocketMQ's camelCase name.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Group used for admin reads of messages (RocketMQ's ``MixAll.TOOLS_CONSUMER_GROUP``).
TOOLS_CONSUMER = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER = "SELF_TEST_C_GROUP"
#: ``mqadmin resendDlq``'s progress: its committed offset on each ``%DLQ%`` queue (rocketpy only).
RESEND_DLQ_GROUP = "TOOLS_RESEND_DLQ"
#: The broker's internal transaction-check group.
CID_RMQ_SYS_TRANS = "CID_RMQ_SYS_TRANS"
#: Groups every broker has from the start.
SYSTEM_GROUPS = (TOOLS_CONSUMER, FILTERSRV_CONSUMER, SELF_TEST_CONSUMER, CID_RMQ_SYS_TRANS)

#: Field -> RocketMQ wire name, in the wire map's order.
WIRE_NAMES = {
    "group_name": "groupName",
    "consume_enable": "consumeEnable",
    "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable",
    "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes",
    "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
    "consume_message_orderly": "consumeMessageOrderly",
}


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """One consumer group's settings on a broker (RocketMQ's SubscriptionGroupConfig)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    #: a FIFO group (``mqadmin updateSubGroup -o true``): RocketMQ 5 clients consume per message group
    consume_message_orderly: bool = False

    def to_wire(self) -> dict[str, Any]:
        """The RocketMQ-shaped map (camelCase keys)."""
        return {WIRE_NAMES[k]: v for k, v in asdict(self).items()}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        """Build from a RocketMQ-shaped map; raises ValueError naming a bad or missing field."""
        if not isinstance(d, dict) or not d.get("groupName"):
            raise ValueError("the subscription group config needs a non-empty 'groupName'")
        kwargs: dict[str, Any] = {}
        defaults = cls(group_name="x")
        for field, wire in WIRE_NAMES.items():
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
