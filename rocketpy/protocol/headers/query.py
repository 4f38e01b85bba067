"""Message queries: QUERY_MESSAGE (a key within a time range, from the index) and VIEW_MESSAGE_BY_ID
(the record at a commitlog offset), RocketMQ's field names.
"""

from __future__ import annotations

from rocketpy.protocol.header import Header, wire
from rocketpy.protocol.headers.offset import INT64_MAX


class QueryMessageRequestHeader(Header):
    """QUERY_MESSAGE: messages of ``topic`` whose key (or unique id) is ``key``, stored in a time range.

    Attributes:
        topic, key: what to look up.
        max_num: most messages to answer (the broker caps it).
        begin_timestamp, end_timestamp: the store-time range, ms.
    """

    topic: str = wire("topic")
    key: str = wire("key")
    max_num: int = wire("maxNum", default=32, lo=1)
    begin_timestamp: int = wire("beginTimestamp", default=0)
    end_timestamp: int = wire("endTimestamp", default=INT64_MAX)


class QueryMessageResponseHeader(Header):
    """QUERY_MESSAGE's answer: how far the index was when it was searched."""

    index_last_update_timestamp: int = wire("indexLastUpdateTimestamp", default=0)
    index_last_update_phyoffset: int = wire("indexLastUpdatePhyoffset", default=0)


class ViewMessageRequestHeader(Header):
    """VIEW_MESSAGE_BY_ID: the record at a commitlog offset (decoded from an offset msg id)."""

    offset: int = wire("offset", lo=0, hi=INT64_MAX, hint="decode it from an offset msg id")
