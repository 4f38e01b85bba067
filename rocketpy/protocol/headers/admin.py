"""Broker administration: topics (UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER), subscription
groups (DELETE_SUBSCRIPTIONGROUP), the statistics calls (GET_CONSUME_STATS, GET_TOPIC_STATS_INFO) and
a consume queue's units (QUERY_CONSUME_QUEUE), RocketMQ's field names.
"""

from __future__ import annotations

from rocketpy.perm import PERM_RW
from rocketpy.protocol.header import Header, wire
from rocketpy.topic import AUTO_CREATE_TOPIC_KEY_TOPIC, MAX_QUEUE_NUMS, SINGLE_TAG


class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC: create or change a topic (RocketMQ's CreateTopicRequestHeader).

    Attributes:
        topic: the topic's name.
        default_topic: the template topic (RocketMQ sends TBW102; not used here).
        read_queue_nums, write_queue_nums: its queues.
        perm: its permission bits (2 write, 4 read, 6 both).
        topic_filter_type: SINGLE_TAG (RocketMQ's only filter type).
        topic_sys_flag: RocketMQ's topic sys flag.
        order: an ordered topic.
        attributes: RocketMQ 5's attribute changes (``+message.type=FIFO``, ``-message.type``).
    """

    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic", default=AUTO_CREATE_TOPIC_KEY_TOPIC)
    read_queue_nums: int = wire("readQueueNums", default=8, lo=1, hi=MAX_QUEUE_NUMS)
    write_queue_nums: int = wire("writeQueueNums", default=8, lo=1, hi=MAX_QUEUE_NUMS)
    perm: int = wire("perm", default=PERM_RW, lo=0, hi=15, hint="perm bits: 2 write, 4 read, 6 both")
    topic_filter_type: str = wire("topicFilterType", default=SINGLE_TAG)
    topic_sys_flag: int = wire("topicSysFlag", default=0)
    order: bool = wire("order", default=False)
    #: RocketMQ 5's attribute changes, ``+key=value`` or ``-key`` joined by ``,`` (``+message.type=FIFO``)
    attributes: str = wire("attributes", default="")


class TopicRequestHeader(Header):
    """A request about one topic: DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO, GET_ROUTEINFO_BY_TOPIC."""

    topic: str = wire("topic")


class DeleteSubscriptionGroupRequestHeader(Header):
    """DELETE_SUBSCRIPTIONGROUP: drop a group's config (and its committed offsets with ``clean_offset``)."""

    group: str = wire("groupName")
    clean_offset: bool = wire("cleanOffset", default=False)


class GetConsumeStatsRequestHeader(Header):
    """GET_CONSUME_STATS: a group's progress on every topic it consumes here (or on ``topic`` only)."""

    group: str = wire("consumerGroup")
    topic: str | None = wire("topic", default=None)


class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA: one of the broker's named stats (``TOPIC_PUT_NUMS`` keyed by topic,
    ``GROUP_GET_NUMS`` by ``topic@group``, ...; RocketMQ's ViewBrokerStatsDataRequestHeader)."""

    stats_name: str = wire("statsName")
    stats_key: str = wire("statsKey")


class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS: every group's progress on this broker (ordered topics only with
    ``is_order``; RocketMQ's GetConsumeStatsInBrokerHeader)."""

    is_order: bool = wire("isOrder", default=False)


#: Units one QUERY_CONSUME_QUEUE answers at most (``mqadmin queryCq -c``; 20 bytes each on disk).
MAX_QUERY_CQ_COUNT = 1_000


class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE: ``count`` units of one consume queue from unit ``index`` (``mqadmin
    queryCq``; RocketMQ's QueryConsumeQueueRequestHeader). With ``consumer_group``, the answer also
    holds that group's subscription of the topic and whether each unit's message matches it."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId", lo=0)
    index: int = wire("index", lo=0, hint="a queue offset (mqadmin topicStatus shows a queue's range)")
    count: int = wire("count", default=10, lo=1, hi=MAX_QUERY_CQ_COUNT)
    consumer_group: str | None = wire("consumerGroup", default=None)
