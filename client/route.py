"""The client's view of topic routes: publish info (writable queues) and subscribe queues.

Owns the conversion of a NameServer ``TopicRouteData`` (docs/wire.md, GET_ROUTEINFO_BY_TOPIC) into
what producers and consumers use (RocketMQ's ``topicRouteData2TopicPublishInfo`` /
``topicRouteData2TopicSubscribeInfo``):

* ``TopicPublishInfo``: the writable queues of every broker that has a master and write permission,
  sorted by (broker_name, queue_id), plus the topic's round-robin counter.
* ``subscribe_queues``: the readable queues (queue ids 0..readQueueNums-1 of readable brokers), sorted.
* ``resolve_publish_info``: cached publish info, else the NameServer's route, else (auto-create) the
  route of TBW102 capped at the producer's default queue number, else an error saying what to do.

Route objects are ``rocketpy.route.TopicRouteData`` (pydantic, control plane only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketpy.client.selector import RoundRobinIndex
from rocketpy.errors import MQClientError
from rocketpy.message import MessageQueue
from rocketpy.perm import PERM_WRITE
from rocketpy.route import TopicRouteData
from rocketpy.route import subscribe_queues as subscribe_queues  # re-exported: its home is rocketpy.route
from rocketpy.topic import AUTO_CREATE_TOPIC_KEY_TOPIC

if TYPE_CHECKING:
    from rocketpy.client.instance import MQClientInstance


class NoWritableQueueError(MQClientError):
    """The topic exists but none of its queues can be written now: no broker of it has a master in
    the route (one is being elected or registering), or write permission is wiped."""


class TopicPublishInfo:
    """The writable queues of one topic and its round-robin position.

    Attributes:
        topic: the topic name.
        message_queues: writable queues sorted by (broker_name, queue_id).
        index: the round-robin counter shared by every producer of this instance.
        route: the route this was built from.
    """

    __slots__ = ("index", "message_queues", "route", "topic")

    def __init__(self, topic: str, route: TopicRouteData, index: RoundRobinIndex | None = None) -> None:
        self.topic = topic
        self.route = route
        self.message_queues = publish_queues(topic, route)
        self.index = index or RoundRobinIndex()

    @property
    def ok(self) -> bool:
        """True when at least one queue can be written."""
        return bool(self.message_queues)

    def broker_names(self) -> list[str]:
        """The brokers holding writable queues, sorted."""
        return sorted({mq.broker_name for mq in self.message_queues})


def _masters(route: TopicRouteData) -> dict[str, str]:
    out: dict[str, str] = {}
    for bd in route.broker_datas:
        addr = bd.master_addr()
        if addr:
            out[bd.broker_name] = addr
    return out


def publish_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Writable queues of ``topic`` (master present, write bit set), sorted by (broker_name, queue_id)."""
    masters = _masters(route)
    queues: list[MessageQueue] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return queues


def broker_addrs(route: TopicRouteData) -> dict[str, dict[int, str]]:
    """broker_name -> {broker_id: addr} from a route."""
    out: dict[str, dict[int, str]] = {}
    for bd in route.broker_datas:
        out[bd.broker_name] = dict(bd.broker_addrs)
    return out


def auto_create_route(default: TopicRouteData, queue_nums: int) -> TopicRouteData:
    """TBW102's route with every broker's queue numbers capped at ``queue_nums`` (RocketMQ auto-create)."""
    capped = [
        qd.model_copy(
            update={
                "read_queue_nums": min(queue_nums, qd.read_queue_nums),
                "write_queue_nums": min(queue_nums, qd.write_queue_nums),
            }
        )
        for qd in default.queue_datas
    ]
    return default.model_copy(update={"queue_datas": capped})


async def resolve_publish_info(
    inst: MQClientInstance, topic: str, default_queue_nums: int
) -> TopicPublishInfo:
    """The publish info of ``topic``: cached, fetched, or auto-created through TBW102's route.

    Raises:
        NoWritableQueueError: the topic has no writable queue now.
        MQClientError: the topic does not exist and cannot be auto-created (the message says how to
            create it).
    """
    tp = inst.publish_info(topic)
    if tp is not None and tp.ok:
        return tp
    route = await inst.update_topic_route(topic)
    tp = inst.publish_info(topic)
    if tp is not None and tp.ok:
        return tp
    if route is not None:
        raise NoWritableQueueError(
            f"topic {topic!r} has no writable queue (write permission wiped or no master registered):"
            f" restore it with `mqadmin updateTopic -t {topic} -c CLUSTER -p 6` or start the broker master"
        )
    default = await inst.api.get_topic_route(AUTO_CREATE_TOPIC_KEY_TOPIC, inst.settings.mq_client_api_timeout)
    if default is not None:
        tp = inst.set_publish_route(topic, auto_create_route(default, default_queue_nums))
        if tp.ok:
            return tp
    raise MQClientError(
        f"topic {topic!r} does not exist: create it with"
        f" `mqadmin updateTopic -n {';'.join(inst.namesrv_addrs)} -t {topic} -c DefaultCluster`"
        " or start the broker with autoCreateTopicEnable=true"
    )
