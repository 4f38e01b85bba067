"""Consumer timers shortened for integration tests (RocketMQ's defaults are 20-30 s)."""

from __future__ import annotations

from typing import Any

from rocketpy.client.consumer_types import ConsumeFromWhere

#: PushConsumer keyword arguments: rebalance, offset persistence, heartbeat and route polling in about
#: a second, reading new groups from the first offset.
FAST_CONSUMER: dict[str, Any] = {
    "rebalance_interval": 1.0,
    "persist_consumer_offset_interval": 0.3,
    "heartbeat_broker_interval": 1.0,
    "poll_name_server_interval": 1.0,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}
