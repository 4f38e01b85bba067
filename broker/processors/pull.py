"""PULL_MESSAGE / LITE_PULL_MESSAGE, with long polling.

Owns the pull checks (broker and topic read permission, group, queue id, offset range), the
subscription used for tag filtering (from the request when FLAG_SUBSCRIPTION is set, else from the
group's heartbeat), the commit offset a pull carries, and the mapping of the store's
GetMessageStatus to RocketMQ's response codes (reference §4). A pull that finds nothing and may
suspend is handed to the long-polling table and answered later. Everything here is synchronous:
the store read is a memory copy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.long_polling import PullRequestHoldService
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.processors.guard import Guard
from rocketpy.broker.processors.pullpath import MAX_PULL_MSGS, pull_now
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import GetMessageResult, GetMessageStatus, Store
from rocketpy.broker.subscription import MessageFilter, message_filter_of
from rocketpy.config import StoreConfig
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.pull import PullMessageRequestHeader, PullMessageResponseHeader
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.subscription import ExpressionType, SubscriptionData, SubscriptionParseError, parse_subscription
from rocketpy.sysflag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND

if TYPE_CHECKING:
    from rocketpy.broker.trace import BrokerTracer

log = logging.getLogger("rocketpy.broker.pull")

_FILTER_CACHE_MAX = 4096
#: A pull answer's map, positional (suggested broker id, next begin offset, min offset, max offset).
_pull_answer = PullMessageResponseHeader.pack

#: The store's answer -> the pull's response code (reference §4). An empty or missing queue asked
#: from offset 0 is "nothing yet" (PULL_NOT_FOUND) instead; see ``pull_response_code``.
PULL_RESPONSE_CODES: dict[GetMessageStatus, ResponseCode] = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: ResponseCode.PULL_OFFSET_MOVED,
}
_EMPTY_QUEUE = frozenset({GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE})
#: Statuses whose remark says the offset is outside the queue.
_OUT_OF_RANGE = _EMPTY_QUEUE | {GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY}


def pull_response_code(status: GetMessageStatus, queue_offset: int) -> ResponseCode:
    """The response code of a pull from ``queue_offset`` that the store answered with ``status``."""
    if queue_offset == 0 and status in _EMPTY_QUEUE:
        return ResponseCode.PULL_NOT_FOUND
    return PULL_RESPONSE_CODES[status]


class PullMessageProcessor:
    """Handles pulls for one broker; owns the table of held pulls (``holds``).

    Args:
        guard: the broker's checks (permission, group, topic) and its config (polling settings).
        store_config: the transfer limits of one pull.
        consumer_manager: the subscriptions heartbeats announced (pulls without FLAG_SUBSCRIPTION).
        offsets: where a pull's commit offset goes.
        store: where messages are read.
        stats: counts messages handed out.
    """

    def __init__(
        self,
        guard: Guard,
        store_config: StoreConfig,
        consumer_manager: ConsumerManager,
        offsets: ConsumerOffsetManager,
        store: Store,
        stats: BrokerStats,
    ) -> None:
        self.guard = guard
        self.broker_config = guard.broker_config
        self.store_config = store_config
        self.consumer_manager = consumer_manager
        self.offsets = offsets
        self.store = store
        self.stats = stats
        self.holds = PullRequestHoldService(self.rerun)
        #: ``(topic, queue_id, next_offset) -> broker id`` for suggestWhichBrokerId (replication)
        self.suggest_broker_id: Callable[[str, int, int], int] | None = None
        self._filters: dict[tuple[str, str, str], MessageFilter | SubscriptionParseError] = {}
        #: traceTopicEnable: told of each delivered batch (``broker/trace.py``)
        self.tracer: BrokerTracer | None = None

    def handle(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """First pass of a pull: may suspend (returns None) or answers at once. The common case
        goes the fast path (``pullpath.pull_now``: one compiled call), the rest through ``process``."""
        answer = pull_now(self, channel, request)
        if answer is not None:
            return answer
        return self.process(channel, request, allow_suspend=True)

    def rerun(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """A held pull woken by a message or its deadline: answer whatever is there now."""
        return self.process(channel, request, allow_suspend=False)

    def _error(self, request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        return RemotingCommand.response(request, code, remark)

    def _check(self, request: RemotingCommand, h: PullMessageRequestHeader) -> RemotingCommand | None:
        tc = self.guard.pull(h.group, h.topic)
        if isinstance(tc, tuple):
            return self._error(request, *tc)
        if not 0 <= h.queue_id < tc.read_queue_nums:
            return self._error(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"queueId {h.queue_id} is out of range for topic[{h.topic}] on broker "
                f"{self.broker_config.broker_name}: it has {tc.read_queue_nums} read queues "
                f"(ids 0..{tc.read_queue_nums - 1})",
            )
        return None

    def _filter(
        self, request: RemotingCommand, h: PullMessageRequestHeader
    ) -> MessageFilter | RemotingCommand:
        """The pull's filter: from its own subscription (FLAG_SUBSCRIPTION) or the group's heartbeat.

        Filters are cached per (topic, expression, type); SQL92 ones compile once per text.
        """
        if h.sys_flag & FLAG_SUBSCRIPTION:
            if (
                h.expression_type.upper() == ExpressionType.SQL92
                and not self.broker_config.enable_property_filter
            ):
                return self._sql92_refused(request)
            key = (h.topic, h.subscription, h.expression_type)
            cached = self._filters.get(key)
            if cached is None:
                try:
                    cached = message_filter_of(self._parse(h))
                except SubscriptionParseError as e:
                    cached = e
                if len(self._filters) >= _FILTER_CACHE_MAX:
                    self._filters.clear()
                self._filters[key] = cached
            if isinstance(cached, SubscriptionParseError):
                return self._error(
                    request,
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                    f"cannot use subscription {h.subscription!r}: {cached}",
                )
            return cached
        sub = self.consumer_manager.find_subscription(h.group, h.topic)
        if sub is None:
            return self._error(
                request,
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"consumer group [{h.group}] has no subscription of topic[{h.topic}] on this broker; "
                "send a HEART_BEAT with the subscription first, or set the subscription flag (0x4)",
            )
        if sub.expression_type is ExpressionType.SQL92 and not self.broker_config.enable_property_filter:
            return self._sql92_refused(request)
        return message_filter_of(sub)

    def _sql92_refused(self, request: RemotingCommand) -> RemotingCommand:
        return self._error(
            request,
            ResponseCode.SYSTEM_ERROR,
            "The broker does not support consumer to filter message by SQL92; "
            "set enablePropertyFilter=true in the broker's config, or use a TAG expression",
        )

    def _parse(self, h: PullMessageRequestHeader) -> SubscriptionData:
        return parse_subscription(h.topic, h.subscription, h.sub_version, h.expression_type)

    def process(
        self, channel: Channel, request: RemotingCommand, allow_suspend: bool
    ) -> RemotingCommand | None:
        """Run one pull; returns the response, or None when the pull was suspended."""
        h = PullMessageRequestHeader.from_ext(request.ext)
        error = self._check(request, h)
        if error is not None:
            return error
        message_filter = self._filter(request, h)
        if isinstance(message_filter, RemotingCommand):
            return message_filter
        sc = self.store_config
        max_msgs = min(h.max_msgs, MAX_PULL_MSGS, sc.max_transfer_count_on_message_in_memory)
        max_bytes = sc.max_transfer_bytes_on_message_in_memory
        if h.max_msg_bytes and h.max_msg_bytes > 0:
            max_bytes = min(max_bytes, h.max_msg_bytes)
        result = self.store.get_message(
            h.group, h.topic, h.queue_id, h.queue_offset, max_msgs, max_bytes, message_filter
        )
        if allow_suspend and h.sys_flag & FLAG_COMMIT_OFFSET and h.commit_offset >= 0:
            self.offsets.commit_offset(h.group, h.topic, h.queue_id, h.commit_offset)
        code = pull_response_code(result.status, h.queue_offset)
        suggest = 0
        if code == ResponseCode.SUCCESS and self.suggest_broker_id is not None:
            suggest = self.suggest_broker_id(h.topic, h.queue_id, result.next_begin_offset)
        ext = _pull_answer(suggest, result.next_begin_offset, result.min_offset, result.max_offset)
        if code == ResponseCode.SUCCESS:
            body = result.join()
            result.release()
            self.stats.on_get(h.group, h.topic, result.message_count, len(body))
            if self.tracer is not None:
                self.tracer.on_delivered(h.group, h.topic, body, channel.remote_addr)
            return RemotingCommand.response(request, code, None, ext, body)
        if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and h.sys_flag & FLAG_SUSPEND:
            held = self._suspend(channel, request, h, message_filter)
            if held is None:
                return None
            return self._error(request, ResponseCode.SYSTEM_BUSY, f"cannot hold the pull: {held}")
        return RemotingCommand.response(request, code, _remark(h, result), ext)

    def _suspend(
        self,
        channel: Channel,
        request: RemotingCommand,
        h: PullMessageRequestHeader,
        message_filter: MessageFilter,
    ) -> str | None:
        bc = self.broker_config
        timeout_ms = h.suspend_timeout_ms if bc.long_polling_enable else bc.short_polling_time_mills
        return self.holds.hold(
            channel, request, h.topic, h.queue_id, h.queue_offset, timeout_ms, message_filter
        )


def _remark(h: PullMessageRequestHeader, result: GetMessageResult) -> str:
    status = result.status
    if status in _OUT_OF_RANGE:
        return (
            f"offset {h.queue_offset} is outside [{result.min_offset}, {result.max_offset}] of "
            f"{h.topic}:{h.queue_id} ({status.name}); "
            f"continue from nextBeginOffset {result.next_begin_offset}"
        )
    if status is GetMessageStatus.NO_MATCHED_MESSAGE:
        return (
            f"no message matched the subscription up to offset {result.next_begin_offset}; "
            "pull again from there"
        )
    return f"no new message in {h.topic}:{h.queue_id} at offset {h.queue_offset} ({status.name})"
