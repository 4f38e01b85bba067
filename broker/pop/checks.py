"""The refusals of POP requests: what the broker, the topic, the group and a receipt handle must be.

Each check raises ``PopError`` with RocketMQ's response code and a remark that says what to do;
the service calls them before touching its bookkeeping, so a refused request changes nothing.
"""

from __future__ import annotations

from rocketpy.broker.pop.types import PopError
from rocketpy.broker.subscription import MessageFilter, message_filter_of
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig
from rocketpy.perm import is_readable
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.receipt import ReceiptError, ReceiptHandle
from rocketpy.route import TopicConfig
from rocketpy.subscription import ExpressionType, SubscriptionParseError, parse_subscription
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX, TOPIC_MAX_LENGTH, pop_retry_topic

_RC = ResponseCode


def retry_topic_too_long(retry: str) -> bool:
    """A POP retry topic name past ``TOPIC_MAX_LENGTH`` bytes (the topic could not be created)."""
    return len(retry) > TOPIC_MAX_LENGTH or (not retry.isascii() and len(retry.encode()) > TOPIC_MAX_LENGTH)


class PopChecks:
    """Checks against the broker's live config, topic table and group table."""

    def __init__(
        self, broker_config: BrokerConfig, topics: TopicConfigManager, groups: SubscriptionGroupManager
    ) -> None:
        self.broker_config = broker_config
        self.topics = topics
        self.groups = groups

    @property
    def broker_name(self) -> str:
        """This broker's name (receipt handles carry it)."""
        return self.broker_config.broker_name

    def consumer(self, group: str, topic: str, queue_id: int, *, pop: bool = False) -> TopicConfig:
        """Check a POP / PEEK / NOTIFICATION / POLLING_INFO of ``group`` on ``topic`` (queue -1: any).

        Raises:
            PopError: the broker or topic is not readable, the topic or group is unknown, the
                group may not consume, the queue id is out of range, or (``pop``) the group's POP
                retry topic name would be too long.
        """
        name = self.broker_name
        if not is_readable(self.broker_config.broker_permission):
            raise PopError(
                _RC.NO_PERMISSION,
                f"the broker[{name}] pop message is forbidden (brokerPermission has no read bit)",
            )
        tc = self.topics.get(topic)
        if tc is None:
            raise PopError(
                _RC.TOPIC_NOT_EXIST,
                f"topic[{topic}] does not exist on broker {name}; check the "
                f"topic name or create it with mqadmin updateTopic -t {topic}",
            )
        if not is_readable(tc.perm):
            raise PopError(
                _RC.NO_PERMISSION, f"topic[{topic}] on broker {name} is not readable (perm={tc.perm})"
            )
        if queue_id >= tc.read_queue_nums:
            raise PopError(
                _RC.INVALID_PARAMETER,
                f"queueId {queue_id} is out of range for topic[{topic}] on broker {name}: it has "
                f"{tc.read_queue_nums} read queues (ids 0..{tc.read_queue_nums - 1}, or -1 for any)",
            )
        self.group(group)
        if pop and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            retry = pop_retry_topic(group, topic)
            if retry_topic_too_long(retry):
                raise PopError(
                    _RC.INVALID_PARAMETER,
                    f"group {group!r} cannot pop topic {topic!r}: its retry topic {retry[:40]!r}... "
                    f"would be longer than {TOPIC_MAX_LENGTH} bytes; use a shorter group or topic name",
                )
        return tc

    def group(self, group: str) -> None:
        """Check ``group`` exists (or is auto-created) and may consume.

        Raises:
            PopError: SUBSCRIPTION_GROUP_NOT_EXIST or NO_PERMISSION.
        """
        cfg = self.groups.find(group)
        if cfg is None:
            raise PopError(
                _RC.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist on broker {self.broker_name}; create "
                "it with mqadmin updateSubGroup or set autoCreateSubscriptionGroup=true",
            )
        if not cfg.consume_enable:
            raise PopError(
                _RC.NO_PERMISSION, f"subscription group [{group}] may not consume (consumeEnable=false)"
            )

    def message_filter(
        self, topic: str, expression_type: str | None, expression: str | None
    ) -> MessageFilter | None:
        """The filter of a POP's subscription (None: every message).

        Raises:
            PopError: the expression does not parse, or SQL92 while ``enablePropertyFilter=false``.
        """
        etype = (expression_type or ExpressionType.TAG.value).upper()
        if not expression or (etype == ExpressionType.TAG and expression.strip() in ("", "*")):
            return None
        if etype == ExpressionType.SQL92 and not self.broker_config.enable_property_filter:
            raise PopError(
                _RC.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by SQL92; "
                "set enablePropertyFilter=true in the broker's config, or use a TAG "
                "expression",
            )
        try:
            return message_filter_of(parse_subscription(topic, expression, 0, etype))
        except SubscriptionParseError as e:
            raise PopError(
                _RC.SUBSCRIPTION_PARSE_FAILED, f"cannot use subscription {expression!r}: {e}"
            ) from None

    def queue_of_message(self, topic: str, queue_id: int) -> None:
        """Check an ACK / CHANGE_MESSAGE_INVISIBLETIME names a queue of a topic here.

        Raises:
            PopError: TOPIC_NOT_EXIST, or MESSAGE_ILLEGAL for a queue id out of range (RocketMQ's code).
        """
        tc = self.topics.get(topic)
        if tc is None:
            raise PopError(
                _RC.TOPIC_NOT_EXIST,
                f"topic[{topic}] does not exist on broker {self.broker_name}; "
                "ack at the broker the message came from",
            )
        if not 0 <= queue_id < tc.read_queue_nums:
            raise PopError(
                _RC.MESSAGE_ILLEGAL,
                f"queueId {queue_id} is out of range for topic[{topic}] (0..{tc.read_queue_nums - 1})",
            )

    def handle(self, text: str, topic: str, queue_id: int, offset: int) -> ReceiptHandle:
        """Read a receipt handle and check it names this broker and this message.

        Raises:
            PopError: INVALID_PARAMETER, saying what is wrong with it.
        """
        try:
            h = ReceiptHandle.parse(text)
        except ReceiptError as e:
            raise PopError(
                _RC.INVALID_PARAMETER,
                f"the receipt handle (extraInfo) is malformed: {e}; send the POP_CK the message came with",
            ) from None
        if h.broker_name != self.broker_name:
            raise PopError(
                _RC.INVALID_PARAMETER,
                f"the receipt handle was issued by broker {h.broker_name!r}, "
                f"this is {self.broker_name!r}: send it to the broker the "
                "message came from",
            )
        retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if h.queue_id != queue_id or h.queue_offset != offset or h.retry != retry:
            raise PopError(
                _RC.INVALID_PARAMETER,
                f"the receipt handle names queue {h.queue_id} offset {h.queue_offset} of the "
                f"{'retry topic' if h.retry else 'topic'}, but the request names {topic}:{queue_id} "
                f"offset {offset}: send the handle with the message it came with",
            )
        return h
