"""CONSUMER_SEND_MSG_BACK: a consumer hands back a message it failed to consume.

Owns the decision RocketMQ's ``asyncConsumerSendMsgBack`` makes: the record at the given commitlog
offset is stored again, either in ``%RETRY%{group}`` at a delay level (``3 + reconsume_times``, or
the level the consumer asked for) through the schedule service, or, once its reconsume times reach
the limit (the consumer's ``maxReconsumeTimes``, else the group's ``retryMaxTimes``) or when the
consumer asks for it (a negative level), in ``%DLQ%{group}``. Both topics are created on demand
(``broker/retry.py``). A group, offset or permission problem is answered with a remark saying what
to do; the store's answer is mapped as a send's is.
"""

from __future__ import annotations

import logging
import random

from rocketpy.broker.processors.send import STORED_STATUSES, put_status_to_response
from rocketpy.broker.retry import (
    FailedRecord,
    ensure_dlq_topic,
    ensure_retry_topic,
    read_failed_record,
    send_back_message,
)
from rocketpy.broker.schedule.delivery import DeliveryTimeService
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import MessageStore, PutMessageResult
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager, TopicLimitError
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.perm import is_writeable
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.send_back import ConsumerSendMsgBackRequestHeader
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.route import TopicConfig
from rocketpy.subscription_group import SubscriptionGroupConfig
from rocketpy.topic import dlq_topic, retry_topic

log = logging.getLogger("rocketpy.broker.send_back")

#: RocketMQ's first retry level: the n-th redelivery waits level ``RETRY_BASE_LEVEL + n``.
RETRY_BASE_LEVEL = 3


class SendBackProcessor:
    """Handles CONSUMER_SEND_MSG_BACK for one broker.

    Args:
        broker_config: the broker's permission and name (live).
        store_config: the sync-flush timeout (for the FLUSH_DISK_TIMEOUT remark).
        topic_config: the topic table (retry and DLQ topics are created in it).
        subscription_groups: the group table (retry queue count, retryMaxTimes).
        store: where the failed record is read and the dead letter is put.
        delivery: puts the retry message at its delay level.
        stats: counts stored messages.
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        topic_config: TopicConfigManager,
        subscription_groups: SubscriptionGroupManager,
        store: MessageStore,
        delivery: DeliveryTimeService,
        stats: BrokerStats,
    ) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.topic_config = topic_config
        self.subscription_groups = subscription_groups
        self.store = store
        self.delivery = delivery
        self.stats = stats

    async def handle(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """Store the failed message again (retry topic at a delay level, or the DLQ)."""
        h = ConsumerSendMsgBackRequestHeader.from_ext(request.ext)
        refused = self._refusal(h)
        if isinstance(refused, tuple):
            return self._error(request, *refused)
        group = refused
        if group.retry_queue_nums <= 0:  # RocketMQ: the group wants no retries; the message is dropped
            log.info("group %s has retryQueueNums=0: message at %d not retried", h.group, h.offset)
            return RemotingCommand.response(request)
        record = self.store.lookup_message_by_offset(h.offset)
        failed = read_failed_record(record, h.offset, self.store.store_host) if record else None
        if failed is None:
            return self._error(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"no message at commitlog offset {h.offset} on broker {self.broker_config.broker_name} "
                "(deleted by cleanup, or not an offset this broker gave out); send back the message "
                "as received from this broker",
            )
        max_times = h.max_reconsume_times if h.max_reconsume_times >= 0 else group.retry_max_times
        dead = h.delay_level < 0 or failed.reconsume_times >= max_times
        try:
            if dead:
                result = await self._dead_letter(h, failed, max_times)
            else:
                result = await self._retry(h, group, failed, max_times)
        except TopicLimitError as e:
            return self._error(request, ResponseCode.SYSTEM_ERROR, str(e))
        if isinstance(result, tuple):
            return self._error(request, *result)
        if result.status in STORED_STATUSES:  # stored (a slow flush does not undo it)
            topic = dlq_topic(h.group) if dead else retry_topic(h.group)
            self.stats.on_put(topic, 1, len(failed.message.body))
            return RemotingCommand.response(request)
        code, remark = put_status_to_response(result, self.store_config.sync_flush_timeout)
        return self._error(request, code, remark or result.status.name)

    def _refusal(self, h: ConsumerSendMsgBackRequestHeader) -> SubscriptionGroupConfig | tuple[int, str]:
        """The group's config when the send-back may go ahead, else (code, remark)."""
        group = self.subscription_groups.find(h.group)
        if group is None:
            return (
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{h.group}] does not exist on this broker; create it with "
                "mqadmin updateSubGroup or set autoCreateSubscriptionGroup=true",
            )
        if not is_writeable(self.broker_config.broker_permission):
            return (
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker_config.broker_name}] does not accept messages now (its write "
                "permission is wiped); the consumer retries locally",
            )
        return group

    @staticmethod
    def _not_writable(tc: TopicConfig) -> tuple[int, str] | None:
        if is_writeable(tc.perm):
            return None
        return (
            ResponseCode.NO_PERMISSION,
            f"topic[{tc.topic_name}] is not writable (perm={tc.perm}); "
            "restore it with mqadmin updateTopic -p 6",
        )

    async def _retry(
        self,
        h: ConsumerSendMsgBackRequestHeader,
        group: SubscriptionGroupConfig,
        failed: FailedRecord,
        max_times: int,
    ) -> PutMessageResult | tuple[int, str]:
        tc = ensure_retry_topic(self.topic_config, group)
        problem = self._not_writable(tc)
        if problem:
            return problem
        queue_id = random.randrange(tc.write_queue_nums)
        level = h.delay_level if h.delay_level > 0 else RETRY_BASE_LEVEL + failed.reconsume_times
        msg = send_back_message(failed, tc.topic_name, queue_id, h.origin_msg_id, max_times)
        return await self.delivery.put_delayed(msg, level)

    async def _dead_letter(
        self, h: ConsumerSendMsgBackRequestHeader, failed: FailedRecord, max_times: int
    ) -> PutMessageResult | tuple[int, str]:
        tc = ensure_dlq_topic(self.topic_config, h.group)
        problem = self._not_writable(tc)
        if problem:
            return problem
        msg = send_back_message(failed, tc.topic_name, 0, h.origin_msg_id, max_times)
        log.info(
            "message %s of group %s goes to %s after %d consume attempt(s)",
            h.origin_msg_id or h.offset,
            h.group,
            tc.topic_name,
            failed.reconsume_times + 1,
        )
        return await self.store.put_message(msg)

    def _error(self, request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        log.info("send-back refused: %s", remark)
        return RemotingCommand.response(request, code, remark)
