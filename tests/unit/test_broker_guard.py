"""The checks in front of pulls, sends and send-backs (``broker/processors/guard.py``): order, codes
and the exact remarks each operation answers with."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.broker.processors.guard import PULL, SEND, SEND_BACK, Guard
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig
from rocketpy.protocol.codes import ResponseCode
from rocketpy.route import TopicConfig
from rocketpy.subscription_group import SubscriptionGroupConfig


@pytest.fixture
def guard(tmp_path: Path) -> Guard:
    bc = BrokerConfig(brokerName="b1", brokerClusterName="C1")
    topics = TopicConfigManager(bc, str(tmp_path / "topics.json"))
    topics.update(TopicConfig(topic_name="T", read_queue_nums=4, write_queue_nums=4))
    topics.update(TopicConfig(topic_name="RO", perm=4))
    topics.update(TopicConfig(topic_name="WO", perm=2))
    groups = SubscriptionGroupManager(str(tmp_path / "groups.json"), auto_create=False)
    groups.update(SubscriptionGroupConfig(group_name="G"))
    groups.update(SubscriptionGroupConfig(group_name="OFF", consume_enable=False))
    return Guard(bc, topics, groups)


def test_every_check_passes(guard: Guard) -> None:
    for access in (PULL, SEND, SEND_BACK):
        assert guard.broker(access) is None
    assert guard.pull("G", "T") is guard.topic_config.get("T")
    assert guard.topic(SEND, "T", guard.topic_config.get("T")) is guard.topic_config.get("T")
    assert isinstance(guard.group(SEND_BACK, "OFF"), SubscriptionGroupConfig)  # a send-back may


def test_broker_permission(guard: Guard) -> None:
    guard.broker_config.broker_permission = 2  # write only
    assert guard.pull("G", "T") == (
        ResponseCode.NO_PERMISSION,
        "the broker[b1] pulling message is forbidden (brokerPermission has no read bit)",
    )
    assert guard.broker(SEND) is None
    guard.broker_config.broker_permission = 4  # read only
    assert guard.broker(SEND) == (
        ResponseCode.NO_PERMISSION,
        "the broker[b1] does not accept messages now: its write permission is wiped (brokerPermission); "
        "send to another broker or restore it with mqadmin updateBrokerConfig",
    )
    assert guard.broker(SEND_BACK) == (
        ResponseCode.NO_PERMISSION,
        "the broker[b1] does not accept messages now (its write permission is wiped); "
        "the consumer retries locally",
    )


def test_subscription_group(guard: Guard) -> None:
    assert guard.pull("NOPE", "T") == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        "subscription group [NOPE] does not exist on broker b1; create it with mqadmin updateSubGroup "
        "or set autoCreateSubscriptionGroup=true",
    )
    assert guard.group(SEND_BACK, "NOPE") == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        "subscription group [NOPE] does not exist on this broker; create it with mqadmin updateSubGroup "
        "or set autoCreateSubscriptionGroup=true",
    )
    assert guard.pull("OFF", "T") == (
        ResponseCode.NO_PERMISSION,
        "subscription group [OFF] may not consume (consumeEnable=false)",
    )


def test_topic_exists_and_permission(guard: Guard) -> None:
    assert guard.pull("G", "NOPE") == (
        ResponseCode.TOPIC_NOT_EXIST,
        "topic[NOPE] does not exist on broker b1; check the topic name or create it with "
        "mqadmin updateTopic -t NOPE",
    )
    assert guard.topic(SEND, "NOPE", None) == (
        ResponseCode.TOPIC_NOT_EXIST,
        "topic[NOPE] does not exist on broker b1 and autoCreateTopicEnable is false; "
        "create it with: mqadmin updateTopic -t NOPE -c C1",
    )
    assert guard.pull("G", "WO") == (
        ResponseCode.NO_PERMISSION,
        "topic[WO] on broker b1 is not readable (perm=2)",
    )
    ro = guard.topic_config.get("RO")
    assert guard.topic(SEND, "RO", ro) == (
        ResponseCode.NO_PERMISSION,
        "topic[RO] on broker b1 is not writable (perm=4); restore its write permission with "
        "mqadmin updateTopic -p 6",
    )
    assert guard.topic(SEND_BACK, "RO", ro) == (
        ResponseCode.NO_PERMISSION,
        "topic[RO] is not writable (perm=4); restore it with mqadmin updateTopic -p 6",
    )


def test_pull_checks_run_in_order(guard: Guard) -> None:
    guard.broker_config.broker_permission = 2
    assert guard.pull("NOPE", "NOPE")[0] == ResponseCode.NO_PERMISSION  # the broker first
    guard.broker_config.broker_permission = 6
    assert guard.pull("NOPE", "NOPE")[0] == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST  # then the group
    assert guard.pull("G", "NOPE")[0] == ResponseCode.TOPIC_NOT_EXIST  # then the topic


def test_braces_in_names_are_not_templates(guard: Guard) -> None:
    code, remark = guard.topic(SEND, "{topic}", None)  # type: ignore[misc]
    assert code == ResponseCode.TOPIC_NOT_EXIST and remark.startswith("topic[{topic}] does not exist")
