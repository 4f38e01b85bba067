"""The store's housekeeping on an operator's request: CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC
and DELETE_EXPIRED_COMMITLOG (``mqadmin cleanExpiredCQ``, ``cleanUnusedTopic``,
``deleteExpiredCommitLog``).

Owns which topics the store keeps: those in the topic table and the brokers' own
(``rocketpy.topic.is_system_topic``: schedule, transaction, POP revive, trace topics). The store
does the work (``broker/store/cq_clean.py``): the choice on the loop, the deletion in a thread.
"""

from __future__ import annotations

import logging

from rocketpy.broker.processors.body import encode
from rocketpy.broker.store import Store
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.topic import is_system_topic

log = logging.getLogger("rocketpy.broker")


class StoreCleanProcessor:
    """Handles CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC and DELETE_EXPIRED_COMMITLOG.

    Args:
        topic_config: the topics to keep.
        store: the message store.
    """

    def __init__(self, topic_config: TopicConfigManager, store: Store) -> None:
        self.topic_config = topic_config
        self.store = store

    def _retain(self, topic: str) -> bool:
        return self.topic_config.get(topic) is not None or is_system_topic(topic)

    async def clean_expired_consume_queue(
        self, channel: Channel, request: RemotingCommand
    ) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE: body ``{"filesDeleted": n}`` (RocketMQ answers SUCCESS alone)."""
        deleted = await self.store.clean_expired_consume_queues(self._retain)
        log.info("cleanExpiredCQ from %s: %d consume-queue files deleted", channel.remote_addr, deleted)
        return RemotingCommand.response(request, body=encode({"filesDeleted": deleted}, request))

    async def clean_unused_topic(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC: body ``{"topics": [...]}``, the topics whose queues were deleted."""
        topics = await self.store.clean_unused_topics(self._retain)
        log.info("cleanUnusedTopic from %s: queues of %s deleted", channel.remote_addr, topics or "no topic")
        return RemotingCommand.response(request, body=encode({"topics": topics}, request))

    async def delete_expired_commitlog(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG: body ``{"filesDeleted": n}``: the commitlog files past
        ``fileReservedTime`` (and the queue and index files only they needed) deleted now, not at
        the next ``deleteWhen`` hour (RocketMQ answers SUCCESS alone)."""
        deleted = await self.store.delete_expired_commitlog()
        log.info("deleteExpiredCommitLog from %s: %d store files deleted", channel.remote_addr, deleted)
        return RemotingCommand.response(request, body=encode({"filesDeleted": deleted}, request))
