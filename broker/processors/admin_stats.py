"""Statistics queries: GET_BROKER_RUNTIME_INFO, GET_CONSUME_STATS, GET_TOPIC_STATS_INFO and
GET_CONSUMER_CONNECTION_LIST.

Owns how counters, store offsets and group state are assembled into RocketMQ-shaped bodies
(KVTable, ConsumeStats, TopicStatsTable, ConsumerConnection).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable
from typing import Any

from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.lag import LagClock
from rocketpy.broker.long_polling import PullRequestHoldService
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.processors.body import encode
from rocketpy.broker.processors.client_calls import connection_doc
from rocketpy.broker.schedule.delivery import DeliveryTimeService
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import Store
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig
from rocketpy.message import MessageQueue
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.admin import GetConsumeStatsRequestHeader, TopicRequestHeader
from rocketpy.protocol.headers.client import ConsumerGroupRequestHeader
from rocketpy.record import POS_STORE_TIMESTAMP
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX, pop_retry_origin

_TS = struct.Struct(">q")


def _total_mem_kib() -> int:
    """The host's memory in KiB (0 when the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 1024
    except (ValueError, OSError):
        return 0


VERSION_DESC = "rocketpy-0.1.0"


class AdminStatsProcessor:
    """Handles the statistics codes.

    Args:
        broker_config: the broker's name and permission (live).
        topic_config: the topic table.
        consumer_manager: the live consumer groups.
        offsets: the committed offsets.
        store: queue offsets, store times and the store's own figures.
        stats: message counters and TPS.
        holds: the held pulls (their count).
        delivery: the delay-level and timer messages waiting (their counts).
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        topic_config: TopicConfigManager,
        consumer_manager: ConsumerManager,
        offsets: ConsumerOffsetManager,
        store: Store,
        stats: BrokerStats,
        holds: PullRequestHoldService,
        delivery: DeliveryTimeService | None = None,
    ) -> None:
        self.broker_config = broker_config
        self.topic_config = topic_config
        self.consumer_manager = consumer_manager
        self.offsets = offsets
        self.store = store
        self.stats = stats
        self.holds = holds
        self.delivery = delivery
        #: more runtime figures (the replication side adds its own)
        self.runtime_extras: list[Callable[[], dict[str, str]]] = []
        #: ``(group, topic) -> {queue id: (in flight, next offset to pop, oldest pop time)}`` of POP
        #: consumption (``PopService.inflight``), shown by GET_CONSUME_STATS
        self.pop_view: Callable[[str, str], dict[int, tuple[int, int, int | None]]] | None = None
        #: the age of each queue's oldest unconsumed message (GET_CONSUME_STATS' ``lagLatencyMs``)
        self.lag = LagClock(store)

    def runtime_table(self) -> dict[str, str]:
        """The KVTable of GET_BROKER_RUNTIME_INFO (all values strings, as RocketMQ)."""
        s = self.stats
        table = {
            "brokerVersionDesc": VERSION_DESC,
            "bootTimestamp": str(s.boot_timestamp_ms),
            "runtime": f"{int(time.time() - s.boot_timestamp_ms / 1000)} s",
            "putTps": f"{s.put_tps(10):.2f} {s.put_tps(60):.2f}",
            "getTransferedTps": f"{s.get_tps(10):.2f} {s.get_tps(60):.2f}",
            "msgPutTotalTodayNow": str(s.put_msgs_total),
            "msgGetTotalTodayNow": str(s.get_msgs_total),
            "msgPutBytesTotal": str(s.put_bytes_total),
            "msgGetBytesTotal": str(s.get_bytes_total),
            "heldPulls": str(self.holds.held_count),
            "topicCount": str(len(self.topic_config.table)),
            "consumerGroupCount": str(len(self.consumer_manager.groups)),
            "brokerPermission": str(self.broker_config.broker_permission),
            # the host and average message size (mqadmin exportMetrics reads them, as RocketMQ's)
            "putMessageAverageSize": f"{s.put_bytes_total / s.put_msgs_total:.2f}"
            if s.put_msgs_total
            else "0",
            "totalMemKBytes": str(_total_mem_kib()),
            "availableProcessors": str(os.cpu_count() or 1),
        }
        if self.delivery is not None:
            table["timerWaitingCount"] = str(self.delivery.timer_waiting())
            table["scheduleWaitingCount"] = str(sum(self.delivery.delay_waiting().values()))
        table.update({k: str(v) for k, v in self.store.runtime_info().items()})
        for extra in self.runtime_extras:
            table.update(extra())
        return table

    def get_runtime_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO: body ``{"table": {key: str}}``."""
        return RemotingCommand.response(request, body=encode({"table": self.runtime_table()}, request))

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store timestamp (ms) of the message at ``offset``, or 0 when it is not there."""
        if offset < 0:
            return 0
        result = self.store.get_message("TOOLS_CONSUMER", topic, queue_id, offset, 1)
        try:
            if result.buffers:
                return int(_TS.unpack_from(result.buffers[0], POS_STORE_TIMESTAMP)[0])
            return 0
        finally:
            result.release()

    def _mq(self, topic: str, queue_id: int) -> dict[str, Any]:
        return MessageQueue(topic, self.broker_config.broker_name, queue_id).to_dict()

    def get_consume_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUME_STATS: broker offset, committed offset, last consumed time and how long the
        oldest unconsumed message has waited (``lagLatencyMs``) per queue.

        A queue the group consumes by POP also has ``pullOffset`` (the next offset to pop),
        ``inflightCount`` and ``oldestInflightTimestamp`` (when the longest-unacked message was
        popped; 0: none), and the group's POP retry topics are listed too."""
        h = GetConsumeStatsRequestHeader.from_ext(request.ext)
        group, only = h.group, h.topic
        topics = {only} if only else self.offsets.topics_of_group(group)
        info = self.consumer_manager.groups.get(group)
        if not only and info is not None:
            topics |= set(info.subscriptions)
        rows = []
        self.lag.begin_pass()
        for topic in sorted(topics):
            tc = self.topic_config.get(topic)
            pop_retry = pop_retry_origin(topic, group) is not None
            if tc is None or (topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and not only and not pop_retry):
                continue
            committed = self.offsets.query_offsets(group, topic)
            popped = self.pop_view(group, topic) if self.pop_view is not None else {}
            for qid in range(tc.write_queue_nums):
                consumer_offset = committed.get(qid, 0)
                broker_offset = self.store.get_max_offset_in_queue(topic, qid)
                row = {
                    "mq": self._mq(topic, qid),
                    "brokerOffset": broker_offset,
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": self._store_time(topic, qid, consumer_offset - 1),
                    # rocketpy (RocketMQ 5's consumer lag latency): how long the oldest
                    # unconsumed message has waited, ms (0: caught up)
                    "lagLatencyMs": self.lag.latency_ms(group, topic, qid, consumer_offset, broker_offset),
                }
                if qid in popped:
                    count, next_offset, oldest = popped[qid]
                    row.update(
                        pullOffset=next_offset, inflightCount=count, oldestInflightTimestamp=oldest or 0
                    )
                rows.append(row)
        self.lag.end_pass()
        body = {"offsetTable": rows, "consumeTps": self.stats.group_get_tps(group)}
        return RemotingCommand.response(request, body=encode(body, request))

    def get_topic_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO: min/max offset and last store time per queue of a topic."""
        topic = TopicRequestHeader.from_ext(request.ext).topic
        tc = self.topic_config.get(topic)
        if tc is None:
            return RemotingCommand.response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] does not exist on this broker"
            )
        rows = []
        for qid in range(tc.write_queue_nums):
            max_offset = self.store.get_max_offset_in_queue(topic, qid)
            rows.append({
                "mq": self._mq(topic, qid),
                "minOffset": self.store.get_min_offset_in_queue(topic, qid),
                "maxOffset": max_offset,
                "lastUpdateTimestamp": self._store_time(topic, qid, max_offset - 1),
            })  # fmt: skip
        return RemotingCommand.response(request, body=encode({"offsetTable": rows}, request))

    def get_consumer_connections(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST: the group's clients, settings and subscriptions."""
        group = ConsumerGroupRequestHeader.from_ext(request.ext).group
        info = self.consumer_manager.groups.get(group)
        if info is None:
            return RemotingCommand.response(
                request,
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"no consumer of group [{group}] is online at this broker",
            )
        body = {
            "connectionSet": [
                # rocketpy's "protocol": "remoting" or "grpc"
                {**connection_doc(ci), "protocol": ci.channel.attrs.get("protocol", "remoting")}
                for _cid, ci in sorted(info.channels.items())
            ],
            "subscriptionTable": {t: s.to_wire() for t, s in info.subscriptions.items()},
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "consumeFromWhere": info.consume_from_where,
        }
        return RemotingCommand.response(request, body=encode(body, request))
