"""The checks in front of the message paths: broker permission, subscription group, topic, topic
permission.

Owns the rule and the answer (response code and remark) of each check, for pulls, sends and
consumer send-backs alike; a processor calls the steps in its order (a pull: broker, group, topic;
a send: broker, then its topic-name checks and auto-creation, then topic; a send-back: group,
broker, then the retry or DLQ topic's permission) and keeps its own later checks (queue ids,
offsets). What differs between the three is data: the permission bit each needs and the remarks
(``Access``). A refusal is ``(code, remark)``: the processor answers with it. Passing checks cost
a few attribute reads; a remark is formatted only when a check refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig
from rocketpy.perm import PERM_READ, PERM_WRITE
from rocketpy.protocol.codes import ResponseCode
from rocketpy.route import TopicConfig
from rocketpy.subscription_group import SubscriptionGroupConfig

#: ``(response code, remark)`` of a refused request.
Refusal = tuple[int, str]


@dataclass(frozen=True, slots=True)
class Access:
    """What one operation needs and how its refusals read.

    The remarks are ``str.format`` templates over ``broker`` (this broker's name), ``cluster``,
    ``group``, ``topic`` and ``perm`` (the topic's bits); "" for a check the operation never runs.

    Attributes:
        perm: the permission bit the broker and the topic must carry (``PERM_READ``/``PERM_WRITE``).
        broker_refused: the broker's permission lacks ``perm``.
        group_missing: the subscription group does not exist.
        group_refused: the group may not consume (checked only when not "").
        topic_missing: the topic does not exist (and was not auto-created).
        topic_refused: the topic's permission lacks ``perm``.
    """

    perm: int
    broker_refused: str
    topic_refused: str
    group_missing: str = ""
    group_refused: str = ""
    topic_missing: str = ""


_GROUP_MISSING = (
    "subscription group [{group}] does not exist on {where}; create it with mqadmin updateSubGroup or set "
    "autoCreateSubscriptionGroup=true"
)

PULL = Access(
    PERM_READ,
    broker_refused="the broker[{broker}] pulling message is forbidden (brokerPermission has no read bit)",
    topic_refused="topic[{topic}] on broker {broker} is not readable (perm={perm})",
    group_missing=_GROUP_MISSING.replace("{where}", "broker {broker}"),
    group_refused="subscription group [{group}] may not consume (consumeEnable=false)",
    topic_missing=(
        "topic[{topic}] does not exist on broker {broker}; check the topic name or create it with "
        "mqadmin updateTopic -t {topic}"
    ),
)
SEND = Access(
    PERM_WRITE,
    broker_refused=(
        "the broker[{broker}] does not accept messages now: its write permission is wiped "
        "(brokerPermission); send to another broker or restore it with mqadmin updateBrokerConfig"
    ),
    topic_refused=(
        "topic[{topic}] on broker {broker} is not writable (perm={perm}); "
        "restore its write permission with mqadmin updateTopic -p 6"
    ),
    topic_missing=(
        "topic[{topic}] does not exist on broker {broker} and autoCreateTopicEnable is false; "
        "create it with: mqadmin updateTopic -t {topic} -c {cluster}"
    ),
)
SEND_BACK = Access(
    PERM_WRITE,
    broker_refused=(
        "the broker[{broker}] does not accept messages now (its write permission is wiped); "
        "the consumer retries locally"
    ),
    topic_refused="topic[{topic}] is not writable (perm={perm}); restore it with mqadmin updateTopic -p 6",
    group_missing=_GROUP_MISSING.replace("{where}", "this broker"),
)


class Guard:
    """The checks of one broker, against its live config and its topic and group tables.

    Args:
        broker_config: the broker's name, cluster and ``brokerPermission`` (live).
        topic_config: the topic table (the processors also auto-create through it).
        subscription_groups: the group table.
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        topic_config: TopicConfigManager,
        subscription_groups: SubscriptionGroupManager,
    ) -> None:
        self.broker_config = broker_config
        self.topic_config = topic_config
        self.subscription_groups = subscription_groups

    def broker(self, access: Access) -> Refusal | None:
        """NO_PERMISSION when the broker's permission lacks ``access.perm``."""
        if self.broker_config.broker_permission & access.perm:
            return None
        return ResponseCode.NO_PERMISSION, access.broker_refused.format(broker=self.broker_config.broker_name)

    def group(self, access: Access, group: str) -> SubscriptionGroupConfig | Refusal:
        """The group's config; SUBSCRIPTION_GROUP_NOT_EXIST without one, NO_PERMISSION when
        ``access`` consumes and the group may not."""
        cfg = self.subscription_groups.find(group)
        if cfg is None:
            remark = access.group_missing.format(group=group, broker=self.broker_config.broker_name)
            return ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark
        if access.group_refused and not cfg.consume_enable:
            return ResponseCode.NO_PERMISSION, access.group_refused.format(group=group)
        return cfg

    def topic(self, access: Access, topic: str, tc: TopicConfig | None) -> TopicConfig | Refusal:
        """``tc`` (``topic``'s config) when it exists and its permission carries ``access.perm``;
        else TOPIC_NOT_EXIST or NO_PERMISSION."""
        if tc is not None and tc.perm & access.perm:
            return tc
        bc = self.broker_config
        if tc is None:
            remark = access.topic_missing.format(
                topic=topic, broker=bc.broker_name, cluster=bc.broker_cluster_name
            )
            return ResponseCode.TOPIC_NOT_EXIST, remark
        return ResponseCode.NO_PERMISSION, access.topic_refused.format(
            topic=topic, broker=bc.broker_name, perm=tc.perm
        )

    def pull(self, group: str, topic: str) -> TopicConfig | Refusal:
        """A pull's checks in order: the broker is readable, the group exists and may consume, the
        topic exists and is readable. The topic's config when all pass."""
        refused = self.broker(PULL)
        if refused is not None:
            return refused
        cfg = self.group(PULL, group)
        if isinstance(cfg, tuple):
            return cfg
        return self.topic(PULL, topic, self.topic_config.get(topic))
