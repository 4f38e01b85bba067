"""Queue and message queries: GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, QUERY_MESSAGE (key + time range) and VIEW_MESSAGE_BY_ID.

Every answer comes from one store call; the headers are ``rocketpy.protocol.headers.offset`` / ``.query``.
"""

from __future__ import annotations

from rocketpy.broker.schedule.query import find_waiting
from rocketpy.broker.store import Store
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.offset import (
    OffsetResponseHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    StoreTimeResponseHeader,
)
from rocketpy.protocol.headers.query import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel

MAX_QUERY_NUM = 64


class QueryProcessor:
    """Handles the offset and message query codes.

    Args:
        store: the message store every answer comes from.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def get_max_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_MAX_OFFSET: the next queue offset to be written (0 for an empty queue)."""
        h = QueueRequestHeader.from_ext(request.ext)
        offset = self.store.get_max_offset_in_queue(h.topic, h.queue_id)
        return RemotingCommand.response(request, ext=OffsetResponseHeader.pack(offset))

    def get_min_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_MIN_OFFSET: the smallest queue offset still stored."""
        h = QueueRequestHeader.from_ext(request.ext)
        offset = self.store.get_min_offset_in_queue(h.topic, h.queue_id)
        return RemotingCommand.response(request, ext=OffsetResponseHeader.pack(offset))

    def search_offset_by_timestamp(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset stored at or after ``timestamp`` ms."""
        h = SearchOffsetRequestHeader.from_ext(request.ext)
        offset = self.store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
        return RemotingCommand.response(request, ext=OffsetResponseHeader.pack(offset))

    def get_earliest_msg_storetime(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_EARLIEST_MSG_STORETIME: store time (ms) of the queue's first message, -1 if none."""
        h = QueueRequestHeader.from_ext(request.ext)
        ts = self.store.get_earliest_message_time(h.topic, h.queue_id)
        return RemotingCommand.response(request, ext=StoreTimeResponseHeader.pack(ts))

    def query_message(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """QUERY_MESSAGE: messages of a topic with a key, stored within a time range."""
        h = QueryMessageRequestHeader.from_ext(request.ext)
        topic, key, begin, end = h.topic, h.key, h.begin_timestamp, h.end_timestamp
        max_num = min(h.max_num, MAX_QUERY_NUM)
        result = self.store.query_message(topic, key, max_num, begin, end)
        if not result.buffers:  # maybe waiting for its delivery time (delay level or timer)
            result = find_waiting(self.store, topic, key, max_num, begin, end)
        out_ext = QueryMessageResponseHeader(
            index_last_update_timestamp=result.index_last_update_timestamp,
            index_last_update_phyoffset=result.index_last_update_phyoffset,
        ).to_ext()
        if not result.buffers:
            return RemotingCommand.response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"no message of topic[{topic}] with key {key!r} stored between {begin} and {end} ms; "
                "check the key, the topic and the time range",
                out_ext,
            )
        return RemotingCommand.response(request, ext=out_ext, body=result.join())

    def view_message_by_id(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID: the raw record at a commitlog offset (decoded from an offset msg id)."""
        offset = ViewMessageRequestHeader.from_ext(request.ext).offset
        record = self.store.lookup_message_by_offset(offset)
        if record is None:
            return RemotingCommand.response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"no message at commitlog offset {offset} on this broker; the id may belong to another "
                "broker, or the message was deleted by cleanup",
            )
        return RemotingCommand.response(request, body=record)
