"""Queue and message queries: GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, QUERY_MESSAGE (key + time range) and VIEW_MESSAGE_BY_ID.

Owns the header checks of those codes; every answer comes from one store call.
"""

from __future__ import annotations

from rocketpy.broker.schedule.query import find_waiting
from rocketpy.broker.store import Store
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.headers import HeaderError, ext_int, ext_str

MAX_QUERY_NUM = 64
INT64_MAX = (1 << 63) - 1


class QueryProcessor:
    """Handles the offset and message query codes.

    Args:
        store: the message store every answer comes from.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def _queue(self, request: RemotingCommand) -> tuple[str, int]:
        topic = ext_str(request.ext, "topic")
        queue_id = ext_int(request.ext, "queueId")
        if not 0 <= queue_id < 65536:
            raise HeaderError(f"request header field 'queueId' must be between 0 and 65535, got {queue_id}")
        return topic, queue_id

    def get_max_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_MAX_OFFSET: the next queue offset to be written (0 for an empty queue)."""
        topic, queue_id = self._queue(request)
        offset = self.store.get_max_offset_in_queue(topic, queue_id)
        return RemotingCommand.response(request, ext={"offset": offset})

    def get_min_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_MIN_OFFSET: the smallest queue offset still stored."""
        topic, queue_id = self._queue(request)
        offset = self.store.get_min_offset_in_queue(topic, queue_id)
        return RemotingCommand.response(request, ext={"offset": offset})

    def search_offset_by_timestamp(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset stored at or after ``timestamp`` ms."""
        topic, queue_id = self._queue(request)
        timestamp = ext_int(request.ext, "timestamp")
        if not 0 <= timestamp <= INT64_MAX:
            raise HeaderError(f"request header field 'timestamp' must be a ms time >= 0, got {timestamp}")
        offset = self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
        return RemotingCommand.response(request, ext={"offset": offset})

    def get_earliest_msg_storetime(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_EARLIEST_MSG_STORETIME: store time (ms) of the queue's first message, -1 if none."""
        topic, queue_id = self._queue(request)
        ts = self.store.get_earliest_message_time(topic, queue_id)
        return RemotingCommand.response(request, ext={"timestamp": ts})

    def query_message(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """QUERY_MESSAGE: messages of a topic with a key, stored within a time range."""
        ext = request.ext
        topic = ext_str(ext, "topic")
        key = ext_str(ext, "key")
        max_num = ext_int(ext, "maxNum", 32)
        begin = ext_int(ext, "beginTimestamp", 0)
        end = ext_int(ext, "endTimestamp", INT64_MAX)
        if max_num <= 0:
            raise HeaderError(f"request header field 'maxNum' must be at least 1, got {max_num}")
        result = self.store.query_message(topic, key, min(max_num, MAX_QUERY_NUM), begin, end)
        if not result.buffers:  # maybe waiting for its delivery time (delay level or timer)
            result = find_waiting(self.store, topic, key, min(max_num, MAX_QUERY_NUM), begin, end)
        out_ext = {
            "indexLastUpdateTimestamp": result.index_last_update_timestamp,
            "indexLastUpdatePhyoffset": result.index_last_update_phyoffset,
        }
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
        offset = ext_int(request.ext, "offset")
        if not 0 <= offset <= INT64_MAX:
            raise HeaderError(f"request header field 'offset' must be a commitlog offset >= 0, got {offset}")
        record = self.store.lookup_message_by_offset(offset)
        if record is None:
            return RemotingCommand.response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"no message at commitlog offset {offset} on this broker; the id may belong to another "
                "broker, or the message was deleted by cleanup",
            )
        return RemotingCommand.response(request, body=record)
