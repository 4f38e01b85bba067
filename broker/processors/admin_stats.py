"""Statistics queries: GET_BROKER_RUNTIME_INFO, GET_CONSUME_STATS, GET_TOPIC_STATS_INFO and
GET_CONSUMER_CONNECTION_LIST.

Owns how counters, store offsets and group state are assembled into RocketMQ-shaped bodies
(KVTable, ConsumeStats, TopicStatsTable, ConsumerConnection).
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING, Any

from rocketpy.broker.processors.body import encode
from rocketpy.record import POS_STORE_TIMESTAMP
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.headers import ext_opt_str, ext_str
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from rocketpy.broker.controller import BrokerController

_TS = struct.Struct(">q")
VERSION_DESC = "rocketpy-0.1.0"


class AdminStatsProcessor:
    """Handles the statistics codes."""

    def __init__(self, controller: BrokerController) -> None:
        self.c = controller

    def register(self, server: Any) -> None:
        """Register the statistics codes with the RemotingServer."""
        server.register_processor(RequestCode.GET_BROKER_RUNTIME_INFO, self.get_runtime_info)
        server.register_processor(RequestCode.GET_CONSUME_STATS, self.get_consume_stats)
        server.register_processor(RequestCode.GET_TOPIC_STATS_INFO, self.get_topic_stats)
        server.register_processor(RequestCode.GET_CONSUMER_CONNECTION_LIST, self.get_consumer_connections)

    def runtime_table(self) -> dict[str, str]:
        """The KVTable of GET_BROKER_RUNTIME_INFO (all values strings, as RocketMQ)."""
        c = self.c
        s = c.stats
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
            "heldPulls": str(c.long_polling.held_count),
            "topicCount": str(len(c.topic_config.table)),
            "consumerGroupCount": str(len(c.consumer_manager.groups)),
            "brokerPermission": str(c.broker_config.broker_permission),
        }
        table.update({k: str(v) for k, v in c.store.runtime_info().items()})
        return table

    def get_runtime_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO: body ``{"table": {key: str}}``."""
        return RemotingCommand.response(request, body=encode({"table": self.runtime_table()}))

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store timestamp (ms) of the message at ``offset``, or 0 when it is not there."""
        if offset < 0:
            return 0
        result = self.c.store.get_message("TOOLS_CONSUMER", topic, queue_id, offset, 1)
        try:
            if result.buffers:
                return int(_TS.unpack_from(result.buffers[0], POS_STORE_TIMESTAMP)[0])
            return 0
        finally:
            result.release()

    def _mq(self, topic: str, queue_id: int) -> dict[str, Any]:
        return {"topic": topic, "brokerName": self.c.broker_config.broker_name, "queueId": queue_id}

    def get_consume_stats(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUME_STATS: broker offset, committed offset and last consumed time per queue."""
        c = self.c
        group = ext_str(request.ext, "consumerGroup")
        only = ext_opt_str(request.ext, "topic")
        topics = {only} if only else c.offsets.topics_of_group(group)
        info = c.consumer_manager.groups.get(group)
        if not only and info is not None:
            topics |= set(info.subscriptions)
        rows = []
        for topic in sorted(topics):
            tc = c.topic_config.get(topic)
            if tc is None or (topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and not only):
                continue
            committed = c.offsets.query_offsets(group, topic)
            for qid in range(tc.write_queue_nums):
                consumer_offset = committed.get(qid, 0)
                rows.append({
                    "mq": self._mq(topic, qid),
                    "brokerOffset": c.store.get_max_offset_in_queue(topic, qid),
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": self._store_time(topic, qid, consumer_offset - 1),
                })  # fmt: skip
        body = {"offsetTable": rows, "consumeTps": c.stats.group_get_tps(group)}
        return RemotingCommand.response(request, body=encode(body))

    def get_topic_stats(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO: min/max offset and last store time per queue of a topic."""
        c = self.c
        topic = ext_str(request.ext, "topic")
        tc = c.topic_config.get(topic)
        if tc is None:
            return RemotingCommand.response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] does not exist on this broker"
            )
        rows = []
        for qid in range(tc.write_queue_nums):
            max_offset = c.store.get_max_offset_in_queue(topic, qid)
            rows.append({
                "mq": self._mq(topic, qid),
                "minOffset": c.store.get_min_offset_in_queue(topic, qid),
                "maxOffset": max_offset,
                "lastUpdateTimestamp": self._store_time(topic, qid, max_offset - 1),
            })  # fmt: skip
        return RemotingCommand.response(request, body=encode({"offsetTable": rows}))

    def get_consumer_connections(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST: the group's clients, settings and subscriptions."""
        group = ext_str(request.ext, "consumerGroup")
        info = self.c.consumer_manager.groups.get(group)
        if info is None:
            return RemotingCommand.response(
                request,
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"no consumer of group [{group}] is online at this broker",
            )
        body = {
            "connectionSet": [
                {"clientId": cid, "clientAddr": ci.channel.remote_addr, "language": "PYTHON"}
                for cid, ci in sorted(info.channels.items())
            ],
            "subscriptionTable": {t: s.to_wire() for t, s in info.subscriptions.items()},
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "consumeFromWhere": info.consume_from_where,
        }
        return RemotingCommand.response(request, body=encode(body))
