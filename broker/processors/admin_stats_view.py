"""Broker-wide statistics: VIEW_BROKER_STATS_DATA (RocketMQ's named stats over a minute, an hour
and a day) and GET_BROKER_CONSUME_STATS (every group's progress on this broker), what
``mqadmin statsAll`` and ``brokerConsumeStats`` read.

Owns how ``StatsWindows`` figures and the offset table are shaped into RocketMQ's bodies
(BrokerStatsData, ConsumeStatsList).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.offsets import TOPIC_GROUP_SEPARATOR, ConsumerOffsetManager
from rocketpy.broker.processors.body import encode
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.stats_windows import STATS_NAMES
from rocketpy.broker.store import Store
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig
from rocketpy.message import MessageQueue
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.admin import GetConsumeStatsInBrokerHeader, ViewBrokerStatsDataRequestHeader
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel


class BrokerStatsViewProcessor:
    """Handles VIEW_BROKER_STATS_DATA and GET_BROKER_CONSUME_STATS.

    Args:
        broker_config: the broker's cluster and name.
        topic_config: the topic table.
        consumer_manager: the live groups (their subscriptions).
        offsets: the committed offsets.
        store: queue offsets.
        stats: the counters and their windows.
        broker_addr: this broker's address (known once it listens).
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        topic_config: TopicConfigManager,
        consumer_manager: ConsumerManager,
        offsets: ConsumerOffsetManager,
        store: Store,
        stats: BrokerStats,
        broker_addr: Callable[[], str],
    ) -> None:
        self.broker_config = broker_config
        self.topic_config = topic_config
        self.consumer_manager = consumer_manager
        self.offsets = offsets
        self.store = store
        self.stats = stats
        self.broker_addr = broker_addr

    def view_broker_stats_data(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA: body ``{"statsMinute", "statsHour", "statsDay"}``, each
        ``{"sum", "tps", "avgpt"}``; SYSTEM_ERROR when the item does not exist (RocketMQ's answer)."""
        h = ViewBrokerStatsDataRequestHeader.from_ext(request.ext)
        if h.stats_name not in STATS_NAMES:
            known = ", ".join(STATS_NAMES)
            return RemotingCommand.response(
                request, ResponseCode.SYSTEM_ERROR, f"unknown stats name <{h.stats_name}>; known: {known}"
            )
        view = None
        if not h.stats_name.startswith("BROKER_") or h.stats_key == self.broker_config.broker_cluster_name:
            view = self.stats.windows.view(h.stats_name, h.stats_key)
        if view is None:
            return RemotingCommand.response(
                request, ResponseCode.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist"
            )
        body = {f"stats{ring.capitalize()}": fig.to_wire() for ring, fig in view.items()}
        return RemotingCommand.response(request, body=encode(body, request))

    def get_broker_consume_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS: ``{"consumeStatsList": [{group: [ConsumeStats]}], "brokerAddr",
        "totalDiff"}``: per group with committed offsets here, per topic it consumes, each queue's
        broker and consumer offset (RocketMQ's ``lastTimestamp`` is left out: a store read per
        queue; GET_CONSUME_STATS has it) and the group's consume TPS on the topic."""
        only_order = GetConsumeStatsInBrokerHeader.from_ext(request.ext).is_order
        by_group: dict[str, list[dict[str, Any]]] = {}
        total_diff = 0
        for key in sorted(self.offsets.table):
            topic, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
            tc = self.topic_config.get(topic)
            if tc is None or (only_order and not tc.order) or not self._consumes(group, topic):
                continue
            committed = self.offsets.query_offsets(group, topic)
            rows = []
            for qid in range(tc.read_queue_nums):
                broker_offset = self.store.get_max_offset_in_queue(topic, qid)
                consumer_offset = committed.get(qid, 0)
                total_diff += broker_offset - max(consumer_offset, 0)
                mq = MessageQueue(topic, self.broker_config.broker_name, qid).to_dict()
                rows.append({"mq": mq, "brokerOffset": broker_offset, "consumerOffset": consumer_offset})
            tps = self.stats.windows.view("GROUP_GET_NUMS", f"{topic}@{group}")
            consume_tps = tps["minute"].tps if tps else 0.0
            by_group.setdefault(group, []).append({"offsetTable": rows, "consumeTps": consume_tps})
        body = {
            "consumeStatsList": [{g: stats} for g, stats in by_group.items()],
            "brokerAddr": self.broker_addr(),
            "totalDiff": total_diff,
        }
        return RemotingCommand.response(request, body=encode(body, request))

    def _consumes(self, group: str, topic: str) -> bool:
        """False when the group is online here with subscriptions and ``topic`` is not one of them."""
        info = self.consumer_manager.groups.get(group)
        return info is None or not info.subscriptions or topic in info.subscriptions
