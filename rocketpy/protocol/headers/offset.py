"""Offset headers: a group's committed offsets (QUERY/UPDATE_CONSUMER_OFFSET) and a queue's offsets
by position or time (GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME), with RocketMQ's field names.
"""

from __future__ import annotations

from rocketpy.protocol.header import Header, wire

INT64_MAX = (1 << 63) - 1
#: Queue ids are 16-bit in the stored record's key space.
MAX_QUEUE_ID = 65535


class QueryConsumerOffsetRequestHeader(Header):
    """A group's committed offset of one queue.

    Attributes:
        group, topic, queue_id: whose offset of which queue.
        set_zero_if_not_found: answer 0 (not QUERY_NOT_FOUND) while the queue still starts at 0
            (defaults to true: RocketMQ's clients omit it).
    """

    group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId", lo=0, hi=MAX_QUEUE_ID)
    set_zero_if_not_found: bool = wire("setZeroIfNotFound", default=True)


class UpdateConsumerOffsetRequestHeader(Header):
    """A group's new committed offset (the next one to consume) of one queue."""

    group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId", lo=0, hi=MAX_QUEUE_ID)
    commit_offset: int = wire("commitOffset", lo=0, hi=INT64_MAX)


class QueueRequestHeader(Header):
    """One queue of a topic: GET_MAX_OFFSET, GET_MIN_OFFSET and GET_EARLIEST_MSG_STORETIME."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId", lo=0, hi=MAX_QUEUE_ID)


class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset stored at or after ``timestamp`` ms."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId", lo=0, hi=MAX_QUEUE_ID)
    timestamp: int = wire("timestamp", lo=0, hi=INT64_MAX)


class OffsetResponseHeader(Header):
    """An answered offset: QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: int = wire("offset", default=0)


class StoreTimeResponseHeader(Header):
    """GET_EARLIEST_MSG_STORETIME's answer: a store time in ms (-1: the queue is empty)."""

    timestamp: int = wire("timestamp", default=-1)
