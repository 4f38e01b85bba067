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
from typing import TYPE_CHECKING

from rocketpy.broker.processors.guard import SEND_BACK, Refusal
from rocketpy.broker.processors.send import STORED_STATUSES, SendMessageProcessor, put_status_to_response
from rocketpy.broker.retry import (
    FailedRecord,
    ensure_dlq_topic,
    ensure_retry_topic,
    read_failed_record,
    send_back_message,
)
from rocketpy.broker.store import PutMessageResult
from rocketpy.broker.topic_config import TopicLimitError
from rocketpy.message import MessageConst
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.send_back import ConsumerSendMsgBackRequestHeader
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.subscription_group import SubscriptionGroupConfig
from rocketpy.topic import dlq_topic, retry_topic

if TYPE_CHECKING:
    from rocketpy.broker.trace import BrokerTracer

log = logging.getLogger("rocketpy.broker.send_back")

#: RocketMQ's first retry level: the n-th redelivery waits level ``RETRY_BASE_LEVEL + n``.
RETRY_BASE_LEVEL = 3


class SendBackProcessor:
    """Handles CONSUMER_SEND_MSG_BACK for one broker.

    A send-back is stored as a send is (in RocketMQ the send processor answers both codes), so it is
    built from the broker's ``SendMessageProcessor`` and uses that one's parts: the guard (the
    broker's permission, its group table for the retry queue count and retryMaxTimes, its topic
    table where retry and DLQ topics are created), the store (the failed record is read there, the
    dead letter put there), the delivery service (the retry message waits for its delay level),
    the store config (the FLUSH_DISK_TIMEOUT remark) and the stats.

    Args:
        send: the broker's send processor.
    """

    def __init__(self, send: SendMessageProcessor) -> None:
        self.guard = send.guard
        self.broker_config = send.broker_config
        self.store_config = send.store_config
        self.topic_config = send.topic_config
        self.store = send.store
        self.delivery = send.delivery
        self.stats = send.stats
        #: traceTopicEnable: told of each message stored in a retry topic or DLQ (``broker/trace.py``)
        self.tracer: BrokerTracer | None = None

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
            if self.tracer is not None:
                msg_id = failed.properties.get(MessageConst.UNIQ_KEY) or h.origin_msg_id
                self.tracer.on_sent_back(h.group, msg_id, failed.reconsume_times + 1, topic)
            return RemotingCommand.response(request)
        code, remark = put_status_to_response(result, self.store_config.sync_flush_timeout)
        return self._error(request, code, remark or result.status.name)

    def _refusal(self, h: ConsumerSendMsgBackRequestHeader) -> SubscriptionGroupConfig | Refusal:
        """The group's config when the send-back may go ahead, else (code, remark)."""
        group = self.guard.group(SEND_BACK, h.group)
        if isinstance(group, tuple):
            return group
        return self.guard.broker(SEND_BACK) or group

    async def _retry(
        self,
        h: ConsumerSendMsgBackRequestHeader,
        group: SubscriptionGroupConfig,
        failed: FailedRecord,
        max_times: int,
    ) -> PutMessageResult | Refusal:
        retry = ensure_retry_topic(self.topic_config, group)
        tc = self.guard.topic(SEND_BACK, retry.topic_name, retry)
        if isinstance(tc, tuple):
            return tc
        queue_id = random.randrange(tc.write_queue_nums)
        level = h.delay_level if h.delay_level > 0 else RETRY_BASE_LEVEL + failed.reconsume_times
        msg = send_back_message(failed, tc.topic_name, queue_id, h.origin_msg_id, max_times)
        return await self.delivery.put_delayed(msg, level)

    async def _dead_letter(
        self, h: ConsumerSendMsgBackRequestHeader, failed: FailedRecord, max_times: int
    ) -> PutMessageResult | Refusal:
        dlq = ensure_dlq_topic(self.topic_config, h.group)
        tc = self.guard.topic(SEND_BACK, dlq.topic_name, dlq)
        if isinstance(tc, tuple):
            return tc
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
