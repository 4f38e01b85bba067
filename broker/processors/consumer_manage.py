"""Consumer group services: GET_CONSUMER_LIST_BY_GROUP, QUERY/UPDATE_CONSUMER_OFFSET and
LOCK/UNLOCK_BATCH_MQ (queue locks for orderly consumers).

Owns the header/body checks of those codes; state lives in the offset, consumer and lock managers.
"""

from __future__ import annotations

from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.processors.body import decode_map, encode
from rocketpy.broker.queue_locks import MessageQueueKey, RebalanceLockManager
from rocketpy.broker.store import Store
from rocketpy.message import MessageQueue
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.client import (
    LOCK_BATCH_BODY,
    ConsumerGroupRequestHeader,
    consumer_ids_body,
    locked_queues_body,
    read_lock_batch,
)
from rocketpy.protocol.headers.offset import (
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel


class ConsumerManageProcessor:
    """Handles consumer-list, offset and queue-lock requests.

    Args:
        consumer_manager: the live consumers of each group.
        offsets: the committed offsets.
        queue_locks: the orderly consumers' queue locks.
        store: the queues' min offsets (the young-queue rule of QUERY_CONSUMER_OFFSET).
    """

    def __init__(
        self,
        consumer_manager: ConsumerManager,
        offsets: ConsumerOffsetManager,
        queue_locks: RebalanceLockManager,
        store: Store,
    ) -> None:
        self.consumer_manager = consumer_manager
        self.offsets = offsets
        self.queue_locks = queue_locks
        self.store = store

    def get_consumer_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_LIST_BY_GROUP: the sorted client ids of a group's live consumers."""
        group = ConsumerGroupRequestHeader.from_ext(request.ext).group
        ids = self.consumer_manager.client_ids(group)
        if ids is None:
            return RemotingCommand.response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"no consumer of group [{group}] is online at this broker; "
                "start one (it must send heartbeats)",
            )
        return RemotingCommand.response(request, body=encode(consumer_ids_body(ids), request))

    def query_consumer_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CONSUMER_OFFSET: the group's committed offset, else 0 or QUERY_NOT_FOUND.

        A group with no committed offset gets 0 while the queue still holds its first message
        (min offset 0: RocketMQ's "still in memory" rule), so a new group on a young topic starts
        at the beginning; otherwise QUERY_NOT_FOUND, and the client's consume-from-where decides.
        The rule applies unless the request says ``setZeroIfNotFound=false`` (rocketpy's consumers
        ask for it only when starting from LAST; RocketMQ's clients do not send the field).
        """
        h = QueryConsumerOffsetRequestHeader.from_ext(request.ext)
        group, topic, queue_id = h.group, h.topic, h.queue_id
        offset = self.offsets.query_offset(group, topic, queue_id)
        if (
            offset < 0
            and h.set_zero_if_not_found
            and self.store.get_min_offset_in_queue(topic, queue_id) == 0
        ):
            offset = 0
        if offset < 0:
            return RemotingCommand.response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"group [{group}] has no committed offset for {topic}:{queue_id}; "
                "start from the position your consume-from-where setting says",
            )
        return RemotingCommand.response(request, ext=OffsetResponseHeader.pack(offset))

    def update_consumer_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_CONSUMER_OFFSET: store the group's next offset to consume."""
        h = UpdateConsumerOffsetRequestHeader.from_ext(request.ext)
        self.offsets.commit_offset(h.group, h.topic, h.queue_id, h.commit_offset)
        return RemotingCommand.response(request)

    def _lock_body(self, request: RemotingCommand) -> tuple[str, str, list[MessageQueueKey]]:
        doc = decode_map(request, "LockBatchRequestBody", LOCK_BATCH_BODY)
        group, client_id, mqs = read_lock_batch(doc)
        return group, client_id, [(mq.topic, mq.broker_name, mq.queue_id) for mq in mqs]

    def lock_batch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """LOCK_BATCH_MQ: lock (or renew) queues for an orderly consumer; answers the locked ones."""
        group, client_id, mqs = self._lock_body(request)
        locked = self.queue_locks.try_lock_batch(group, mqs, client_id)
        body = locked_queues_body(MessageQueue(t, b, q) for t, b, q in locked)
        return RemotingCommand.response(request, body=encode(body, request))

    def unlock_batch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """UNLOCK_BATCH_MQ: release queues held by the client."""
        group, client_id, mqs = self._lock_body(request)
        self.queue_locks.unlock_batch(group, mqs, client_id)
        return RemotingCommand.response(request)
