"""A consume queue's units on an operator's request: QUERY_CONSUME_QUEUE (``mqadmin queryCq``).

Owns the answer in RocketMQ's shape (QueryConsumeQueueResponseBody): the queue's min and max
offsets, each unit asked for (commitlog offset, size, tag code) and, when a consumer group is named,
the group's live subscription of the topic and whether each unit's message matches it (``eval``:
the tag codes for a TAG subscription; the stored properties for SQL92, as a pull would filter).
RocketMQ sets ``eval`` only for units with a consume-queue extension (its bloom filter); this store
has none, so the unit is evaluated directly.
"""

from __future__ import annotations

import json
from typing import Any

from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.processors.body import encode
from rocketpy.broker.store import Store
from rocketpy.broker.subscription import MessageFilter, SqlMessageFilter, message_filter_of
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.errors import RocketpyError
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.admin import QueryConsumeQueueRequestHeader
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.subscription import ExpressionType

#: ``msg`` of a unit whose message cleanup already deleted (its commitlog file is gone)
GONE = "the message is no longer in the commitlog (deleted by cleanup)"


class ConsumeQueueViewProcessor:
    """Handles QUERY_CONSUME_QUEUE.

    Args:
        topic_config: the topic table (which queues exist).
        consumer_manager: the live groups (a named group's subscription).
        store: the consume queues and the commitlog.
    """

    def __init__(
        self, topic_config: TopicConfigManager, consumer_manager: ConsumerManager, store: Store
    ) -> None:
        self.topic_config = topic_config
        self.consumer_manager = consumer_manager
        self.store = store

    def query_consume_queue(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE: body ``{maxQueueIndex, minQueueIndex, queueData: [...],
        subscriptionData, filterData}``; SYSTEM_ERROR for a queue this broker does not have."""
        h = QueryConsumeQueueRequestHeader.from_ext(request.ext)
        topic, queue_id = h.topic, h.queue_id
        max_offset = self.store.get_max_offset_in_queue(topic, queue_id)
        if max_offset == 0 and not self._declared(topic, queue_id):
            return RemotingCommand.response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"queue {queue_id}@{topic} does not exist on this broker: check the topic and the "
                f"queue id (mqadmin topicStatus -t {topic} lists its queues)",
            )
        doc: dict[str, Any] = {
            "maxQueueIndex": max_offset,
            "minQueueIndex": self.store.get_min_offset_in_queue(topic, queue_id),
            "subscriptionData": None,
            "filterData": None,
        }
        flt: MessageFilter | None = None
        if h.consumer_group:
            flt, doc["subscriptionData"], doc["filterData"] = self._group_filter(h.consumer_group, topic)
        doc["queueData"] = [self._unit_doc(u, flt) for u in self._units(topic, queue_id, h.index, h.count)]
        remark = None
        if not doc["queueData"]:
            remark = f"index {h.index} of {queue_id}@{topic} is not stored" + (
                f": the queue holds offsets {doc['minQueueIndex']} to {max_offset - 1}"
                if max_offset > doc["minQueueIndex"]
                else ": the queue is empty"
            )
        return RemotingCommand.response(request, remark=remark, body=encode(doc, request))

    def _declared(self, topic: str, queue_id: int) -> bool:
        tc = self.topic_config.get(topic)
        return tc is not None and queue_id < max(tc.read_queue_nums, tc.write_queue_nums)

    def _units(self, topic: str, queue_id: int, index: int, count: int) -> list[tuple[int, int, int]]:
        """Up to ``count`` units from ``index`` (a read stops at a file's end: read on from there)."""
        units: list[tuple[int, int, int]] = []
        offset = index
        while len(units) < count:
            flat = self.store.read_queue_units(topic, queue_id, offset, count - len(units))
            if not flat:
                break
            got = [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
            units += got
            offset += len(got)
        return units

    def _group_filter(self, group: str, topic: str) -> tuple[MessageFilter | None, Any, str | None]:
        """(filter, subscriptionData, filterData) of ``group``'s live subscription of ``topic``."""
        sub = self.consumer_manager.find_subscription(group, topic)
        if sub is None:
            return None, None, f"{group}@{topic} is not online!"  # RocketMQ's words
        filter_data = None
        if sub.expression_type is ExpressionType.SQL92:
            filter_data = json.dumps(
                {
                    "consumerGroup": group,
                    "topic": topic,
                    "expression": sub.sub_string,
                    "expressionType": "SQL92",
                },
                indent=2,
            )
        try:
            return message_filter_of(sub), sub.to_wire(), filter_data
        except RocketpyError as e:  # an expression that no longer compiles: say so, show the units
            return None, sub.to_wire(), f"the subscription's expression cannot be evaluated: {e}"

    def _unit_doc(self, unit: tuple[int, int, int], flt: MessageFilter | None) -> dict[str, Any]:
        """RocketMQ's ConsumeQueueData of one unit (``eval`` against ``flt`` when given)."""
        phys, size, tags_code = unit
        doc: dict[str, Any] = {
            "physicOffset": phys,
            "physicSize": size,
            "tagsCode": tags_code,
            "extendDataJson": None,
            "bitMap": None,
            "eval": False,
            "msg": None,
        }
        if flt is not None:
            matched = flt.is_matched_by_consume_queue(tags_code)
            if matched and isinstance(flt, SqlMessageFilter):
                view = self.store.record_view(phys)
                if view is None:
                    matched, doc["msg"] = False, GONE
                else:
                    matched = bool(flt.is_matched_by_commit_log(view))
            doc["eval"] = matched
        return doc
