"""Unit tests of the broker's in-process managers: topics, offsets, groups, consumers, locks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rocketpy.broker.consumer_manager import ClientChannelInfo, ConsumerManager
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.queue_locks import RebalanceLockManager
from rocketpy.broker.subscription import TagMessageFilter
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager, is_send_forbidden_topic, validate_topic_name
from rocketpy.config import BrokerConfig
from rocketpy.filter.tags import java_string_hash
from rocketpy.perm import PERM_INHERIT, PERM_RW
from rocketpy.route import TopicConfig
from rocketpy.subscription import SubscriptionParseError, parse_subscription
from rocketpy.subscription_group import SubscriptionGroupConfig


def read_json(path: str) -> Any:
    return json.loads(Path(path).read_text())


def exists(path: str) -> bool:
    return Path(path).exists()


class FakeChannel:
    def __init__(self, addr: str) -> None:
        self.remote_addr = addr
        self.closed = False
        self.sent: list[Any] = []

    def send(self, cmd: Any) -> None:
        self.sent.append(cmd)


def test_topic_name_validation() -> None:
    assert validate_topic_name("Topic_A-1%|x") is None
    assert "illegal" in (validate_topic_name("a b") or "")
    assert "127" in (validate_topic_name("a" * 128) or "")
    assert validate_topic_name("a" * 127) is None
    assert "empty" in (validate_topic_name("") or "")
    assert is_send_forbidden_topic("TBW102")
    assert is_send_forbidden_topic("SCHEDULE_TOPIC_XXXX")
    assert is_send_forbidden_topic("RMQ_SYS_TRANS_HALF_TOPIC")
    assert not is_send_forbidden_topic("RMQ_SYS_TRACE_TOPIC")  # traced clients write their records there
    assert not is_send_forbidden_topic("TopicA")


def test_topic_auto_create_and_listeners(tmp_path: Path) -> None:
    cfg = BrokerConfig(brokerName="b1", defaultTopicQueueNums=8)
    tm = TopicConfigManager(cfg, str(tmp_path / "topics.json"))
    changes: list[int] = []
    tm.add_change_listener(lambda: changes.append(tm.data_version["counter"]))
    assert tm.get("TBW102") is not None and tm.get("TBW102").perm & PERM_INHERIT  # type: ignore[union-attr]
    tc = tm.create_on_send("NewTopic", "TBW102", 4)
    assert tc is not None and tc.write_queue_nums == 4 and tc.read_queue_nums == 4 and tc.perm == PERM_RW
    assert changes == [1]
    # second call returns the existing config, no change
    assert tm.create_on_send("NewTopic", "TBW102", 4) is tc
    assert changes == [1]
    big = tm.create_on_send("Big", "TBW102", 64)
    assert big is not None and big.write_queue_nums == 8


def test_topic_auto_create_off(tmp_path: Path) -> None:
    cfg = BrokerConfig(brokerName="b1", autoCreateTopicEnable=False)
    tm = TopicConfigManager(cfg, str(tmp_path / "topics.json"))
    assert tm.get("TBW102") is None
    assert tm.create_on_send("NewTopic", "TBW102", 4) is None
    cfg.auto_create_topic_enable = True  # switched on live (UPDATE_BROKER_CONFIG)
    tc = tm.create_on_send("NewTopic", "TBW102", 4)
    assert tc is not None and tc.write_queue_nums == 4 and tc.perm == PERM_RW


async def test_topic_persist_and_reload(tmp_path: Path) -> None:
    cfg = BrokerConfig(brokerName="b1")
    path = str(tmp_path / "config" / "topics.json")
    tm = TopicConfigManager(cfg, path)
    tm.update(TopicConfig(topic_name="T1", read_queue_nums=3, write_queue_nums=5, perm=6))
    await tm.file.persist()
    assert not tm.file.dirty
    doc = read_json(path)
    assert doc["topicConfigTable"]["T1"]["writeQueueNums"] == 5
    tm2 = TopicConfigManager(cfg, path)
    tm2.load()
    t1 = tm2.get("T1")
    assert t1 is not None and (t1.read_queue_nums, t1.write_queue_nums) == (3, 5)
    assert tm2.data_version["counter"] == tm.data_version["counter"]
    assert tm2.delete("T1") and not tm2.delete("T1")


async def test_offsets_commit_query_persist(tmp_path: Path) -> None:
    path = str(tmp_path / "config" / "consumerOffset.json")
    om = ConsumerOffsetManager(path)
    assert om.query_offset("g", "T", 0) == -1
    om.commit_offset("g", "T", 0, 10)
    om.commit_offset("g", "T", 1, 20)
    om.commit_offset("g2", "T", 0, 5)
    assert om.query_offset("g", "T", 1) == 20
    assert om.topics_of_group("g") == {"T"}
    assert om.groups_of_topic("T") == {"g", "g2"}
    await om.file.persist()
    assert read_json(path)["offsetTable"]["T@g"] == {"0": 10, "1": 20}
    om2 = ConsumerOffsetManager(path)
    om2.load()
    assert om2.query_offset("g", "T", 0) == 10
    om2.remove_group("g2")
    assert om2.query_offset("g2", "T", 0) == -1
    assert exists(path)


async def test_subscription_groups(tmp_path: Path) -> None:
    path = str(tmp_path / "subscriptionGroup.json")
    sm = SubscriptionGroupManager(path, auto_create=False)
    assert sm.find("cg") is None
    sm.update(
        SubscriptionGroupConfig.from_wire({"groupName": "cg", "consumeEnable": False, "retryMaxTimes": "3"})
    )
    cfg = sm.find("cg")
    assert cfg is not None and not cfg.consume_enable and cfg.retry_max_times == 3
    await sm.file.persist()
    sm2 = SubscriptionGroupManager(path, auto_create=True)
    sm2.load()
    assert sm2.find("cg") == cfg
    assert sm2.find("other") is not None
    with pytest.raises(ValueError, match="groupName"):
        SubscriptionGroupConfig.from_wire({})


def test_tag_filter() -> None:
    sub = parse_subscription("T", "TagA || TagB ")
    assert sub.tags_set == {"TagA", "TagB"}
    f = TagMessageFilter(sub)
    assert f.is_matched_by_consume_queue(java_string_hash("TagA"))
    assert f.is_matched_by_consume_queue(java_string_hash("TagB") & 0xFFFFFFFFFFFFFFFF)
    assert not f.is_matched_by_consume_queue(java_string_hash("TagC"))
    assert not f.is_matched_by_consume_queue(0)
    assert f.is_matched_by_consume_queue(None)
    all_filter = TagMessageFilter(parse_subscription("T", "*"))
    assert all_filter.is_matched_by_consume_queue(12345)
    # the store's hints: skip per-message calls for "*", compare codes directly for tags
    assert all_filter.matches_all and not f.matches_all
    assert f.tag_codes == {java_string_hash("TagA") & 0xFFFFFFFF, java_string_hash("TagB") & 0xFFFFFFFF}
    assert parse_subscription("T", "a > 1", expression_type="SQL92").expression_type == "SQL92"
    with pytest.raises(SubscriptionParseError, match="column 5"):
        parse_subscription("T", "a > 'x'", expression_type="SQL92")
    with pytest.raises(SubscriptionParseError):
        parse_subscription("T", "||")


def test_consumer_manager_membership_and_notify() -> None:
    notified: list[tuple[str, list[Any]]] = []
    cm = ConsumerManager(lambda g, chans: notified.append((g, chans)), channel_expired_timeout_ms=1000)
    c1, c2 = FakeChannel("a:1"), FakeChannel("a:2")
    subs = [parse_subscription("T", "*")]
    settings = {"consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING"}
    assert cm.register_consumer("g", ClientChannelInfo(c1, "cid1", 0), settings, subs)
    assert notified[-1] == ("g", [c1])
    # a refresh with the same data does not notify
    assert not cm.register_consumer("g", ClientChannelInfo(c1, "cid1", 100), settings, subs)
    assert cm.register_consumer("g", ClientChannelInfo(c2, "cid2", 100), settings, subs)
    assert set(notified[-1][1]) == {c1, c2}
    assert cm.client_ids("g") == ["cid1", "cid2"]
    # subscription change notifies
    assert cm.register_consumer(
        "g", ClientChannelInfo(c2, "cid2", 200), settings, [parse_subscription("T", "A")]
    )
    sub = cm.find_subscription("g", "T")
    assert sub is not None and sub.sub_string == "A"
    # connection close removes and notifies the rest
    n = len(notified)
    cm.do_channel_close(c2)
    assert cm.client_ids("g") == ["cid1"] and len(notified) == n + 1 and notified[-1][1] == [c1]
    # expiry
    removed = cm.scan_not_active(now_ms=1101)
    assert removed == [("g", "cid1")]
    assert cm.client_ids("g") is None


def test_consumer_manager_unregister_and_producers() -> None:
    notified: list[str] = []
    cm = ConsumerManager(lambda g, chans: notified.append(g), channel_expired_timeout_ms=1000)
    c1 = FakeChannel("a:1")
    cm.register_producer("pg", ClientChannelInfo(c1, "p1", 0))
    assert cm.producer_channels_of("pg") == [c1]
    cm.unregister_producer("pg", "p1")
    assert cm.producer_channels_of("pg") == []
    cm.register_consumer("g", ClientChannelInfo(c1, "c1", 0), {}, [])
    assert cm.unregister_consumer("g", "c1")
    assert not cm.unregister_consumer("g", "c1")


def test_queue_locks_ttl() -> None:
    now = [0]
    lm = RebalanceLockManager(clock_ms=lambda: now[0], ttl_ms=60_000)
    mq0, mq1 = ("T", "b", 0), ("T", "b", 1)
    assert lm.try_lock_batch("g", [mq0, mq1], "c1") == {mq0, mq1}
    assert lm.try_lock_batch("g", [mq0, mq1], "c2") == set()
    now[0] = 30_000
    assert lm.try_lock_batch("g", [mq0], "c1") == {mq0}  # renew
    now[0] = 61_000
    assert lm.try_lock_batch("g", [mq0, mq1], "c2") == {mq1}  # mq1 expired, mq0 renewed at 30 s
    lm.unlock_batch("g", [mq0], "c2")  # not the holder: no effect
    assert lm.is_locked("g", mq0, "c1")
    lm.unlock_batch("g", [mq0], "c1")
    assert lm.try_lock_batch("g", [mq0], "c2") == {mq0}


def test_topic_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rocketpy.broker.topic_config as topic_config

    tm = TopicConfigManager(BrokerConfig(brokerName="b1"), str(tmp_path / "topics.json"))
    monkeypatch.setattr(topic_config, "MAX_TOPICS", len(tm.table) + 1)
    assert tm.create_on_send("One", "TBW102", 4) is not None
    with pytest.raises(topic_config.TopicLimitError, match="delete unused topics"):
        tm.create_on_send("Two", "TBW102", 4)
    with pytest.raises(topic_config.TopicLimitError):
        tm.update(TopicConfig(topic_name="Three"))
    tm.update(
        TopicConfig(topic_name="One", read_queue_nums=2, write_queue_nums=2)
    )  # changing an existing topic is fine
