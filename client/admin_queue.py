"""A consume queue's units as its broker stores them: QUERY_CONSUME_QUEUE (``mqadmin queryCq``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketpy.errors import MQClientError
from rocketpy.protocol.codes import RequestCode
from rocketpy.protocol.headers.admin import QueryConsumeQueueRequestHeader

if TYPE_CHECKING:
    from rocketpy.client.admin import Admin


async def first_master(admin: Admin, topic: str) -> str:
    """The master address of the topic's first broker (by name): where ``queryCq`` asks when no
    broker is given, as RocketMQ's tool does.

    Raises:
        MQClientError: the topic has no route, or its first broker no master online.
    """
    route = await admin.topic_route(topic)
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        addr = bd.master_addr()
        if addr:
            return addr
    raise MQClientError(f"topic {topic!r} has no master online: give a broker address with -b")


async def query_consume_queue(
    admin: Admin, addr: str, topic: str, queue_id: int, index: int, count: int = 10, group: str | None = None
) -> dict[str, Any]:
    """QUERY_CONSUME_QUEUE on the broker at ``addr``: ``maxQueueIndex``, ``minQueueIndex``,
    ``queueData`` (per unit ``physicOffset``, ``physicSize``, ``tagsCode``, ``eval``, ``msg``, ...) and,
    with ``group``, its ``subscriptionData`` and ``filterData`` (RocketMQ's
    QueryConsumeQueueResponseBody)."""
    ext = QueryConsumeQueueRequestHeader(topic, queue_id, index, count, group).to_ext()
    return await admin.call_map(addr, RequestCode.QUERY_CONSUME_QUEUE, ext)
