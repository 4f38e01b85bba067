"""The shared wire vocabulary (rocketpy/perm, sysflag, topic, subscription, route.TopicConfig and the
request headers): RocketMQ's numbers, and maps that are the same bytes as the ones sent before."""

from __future__ import annotations

import msgpack
import pytest

from rocketpy.broker.processors.pull import PULL_RESPONSE_CODES, pull_response_code
from rocketpy.broker.store import GetMessageStatus
from rocketpy.client.message_check import PreparedMessage, batch_ext
from rocketpy.errors import HeaderError
from rocketpy.message import Message, MessageQueue
from rocketpy.perm import PERM_RW, PermName, is_inherited, is_readable, is_writeable, perm_to_string
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.offset import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketpy.protocol.headers.pull import PullMessageRequestHeader
from rocketpy.protocol.headers.send import V2_NAMES, SendMessageRequestHeader
from rocketpy.route import TopicConfig
from rocketpy.subscription import ExpressionType, SubscriptionData, SubscriptionParseError, parse_subscription
from rocketpy.subscription_group import WIRE_NAMES, SubscriptionGroupConfig
from rocketpy.sysflag import PullSysFlag, build_pull_sys_flag


def _wire(ext: dict[str, object]) -> bytes:
    return msgpack.packb(ext, use_bin_type=True)


def test_perm_bits_are_rocketmqs() -> None:
    assert (PermName.PRIORITY, PermName.READ, PermName.WRITE, PermName.INHERIT) == (8, 4, 2, 1)
    assert PERM_RW == 6
    assert is_readable(4) and not is_readable(2) and is_writeable(6) and not is_writeable(4)
    assert is_inherited(7) and not is_inherited(6)
    assert [perm_to_string(p) for p in (6, 4, 2, 7, 0)] == ["RW-", "R--", "-W-", "RWX", "---"]


def test_pull_sys_flags_are_rocketmqs() -> None:
    assert [int(f) for f in PullSysFlag] == [0x1, 0x2, 0x4, 0x8, 0x10]
    assert build_pull_sys_flag(commit_offset=True, suspend=True, subscription=True) == 0x7
    assert build_pull_sys_flag(commit_offset=False, suspend=True, subscription=True) == 0x6
    assert build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True) == 0x4


def test_send_header_maps_are_the_bytes_the_producer_sent() -> None:
    mq = MessageQueue("T", "broker-a", 3)
    prepared = PreparedMessage(Message("T", b"x", tags="A"), 1 << 20)
    expected = {
        "a": "pg", "b": "T", "c": "TBW102", "d": 4, "e": 3, "f": 0, "g": prepared.born_ms, "h": 0,
        "i": prepared.properties, "j": 0, "k": False, "m": False, "n": "broker-a",
    }  # fmt: skip
    assert _wire(prepared.ext_for("pg", mq)) == _wire(expected)
    batch = batch_ext("pg", "T", 8, mq)
    assert _wire(batch) == _wire(expected | {"d": 8, "g": batch["g"], "i": "", "m": True})


def test_send_header_round_trips_in_both_namings() -> None:
    h = SendMessageRequestHeader(
        "pg", "T", 2, "K\x01v\x02", sys_flag=1, born_timestamp=17, flag=5, reconsume_times=3,
        default_topic_queue_nums=8, batch=True, broker_name="b",
    )  # fmt: skip
    v2 = h.to_ext()
    assert list(v2) == list(V2_NAMES.values())
    v1 = h.to_ext(v2=False)
    assert list(v1) == list(V2_NAMES)
    for ext, is_v2 in ((v2, True), (v1, False)):
        back = SendMessageRequestHeader.from_ext(ext, v2=is_v2)
        assert back.to_ext() == v2


def test_send_header_reads_json_strings() -> None:
    ext = {"a": "pg", "b": "T", "e": "1", "f": "0", "k": "false", "m": "true", "n": "b"}
    h = SendMessageRequestHeader.from_ext(ext, v2=True)
    assert (h.queue_id, h.sys_flag, h.unit_mode, h.batch, h.broker_name) == (1, 0, False, True, "b")
    with pytest.raises(HeaderError, match="'m'"):
        SendMessageRequestHeader.from_ext({"b": "T", "e": 0, "m": "maybe"}, v2=True)


def test_pull_header_map_is_the_bytes_the_consumer_sent() -> None:
    h = PullMessageRequestHeader(
        "cg", "T", 1, 10, 32, sys_flag=0x7, commit_offset=9, suspend_timeout_ms=15_000,
        subscription="A || B", sub_version=123, expression_type="TAG",
    )  # fmt: skip
    expected = {
        "consumerGroup": "cg", "topic": "T", "queueId": 1, "queueOffset": 10, "maxMsgNums": 32,
        "sysFlag": 0x7, "commitOffset": 9, "suspendTimeoutMillis": 15_000, "subscription": "A || B",
        "subVersion": 123, "expressionType": "TAG",
    }  # fmt: skip
    assert _wire(h.to_ext()) == _wire(expected)
    back = PullMessageRequestHeader.from_ext(h.to_ext())
    assert [getattr(back, f) for f in back.__slots__] == [getattr(h, f) for f in h.__slots__]
    h.max_msg_bytes = 4096
    assert PullMessageRequestHeader.from_ext(h.to_ext()).max_msg_bytes == 4096


def test_pull_header_checks_ranges() -> None:
    ext = PullMessageRequestHeader("cg", "T", 0, 0, 32).to_ext()
    with pytest.raises(HeaderError, match="queueOffset"):
        PullMessageRequestHeader.from_ext(ext | {"queueOffset": -1})
    with pytest.raises(HeaderError, match="maxMsgNums"):
        PullMessageRequestHeader.from_ext(ext | {"maxMsgNums": 0})
    with pytest.raises(HeaderError, match="consumerGroup"):
        PullMessageRequestHeader.from_ext({k: v for k, v in ext.items() if k != "consumerGroup"})


def test_offset_headers_round_trip_and_check() -> None:
    q = QueryConsumerOffsetRequestHeader("cg", "T", 3, False)
    assert q.to_ext() == {"consumerGroup": "cg", "topic": "T", "queueId": 3, "setZeroIfNotFound": False}
    assert QueryConsumerOffsetRequestHeader.from_ext(q.to_ext()).set_zero_if_not_found is False
    assert QueryConsumerOffsetRequestHeader.from_ext(
        {"consumerGroup": "g", "topic": "T", "queueId": 0}
    ).set_zero_if_not_found
    u = UpdateConsumerOffsetRequestHeader("cg", "T", 3, 42)
    assert list(u.to_ext()) == ["consumerGroup", "topic", "queueId", "commitOffset"]
    assert UpdateConsumerOffsetRequestHeader.from_ext(u.to_ext()).commit_offset == 42
    with pytest.raises(HeaderError, match="queueId"):
        UpdateConsumerOffsetRequestHeader.from_ext(u.to_ext() | {"queueId": 70_000})
    with pytest.raises(HeaderError, match="commitOffset"):
        UpdateConsumerOffsetRequestHeader.from_ext(u.to_ext() | {"commitOffset": -1})


def test_every_get_status_has_a_pull_code() -> None:
    assert set(PULL_RESPONSE_CODES) == set(GetMessageStatus)
    assert pull_response_code(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0) is ResponseCode.PULL_NOT_FOUND
    assert pull_response_code(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 5) is ResponseCode.PULL_OFFSET_MOVED
    assert pull_response_code(GetMessageStatus.FOUND, 0) is ResponseCode.SUCCESS


def test_topic_config_wire_map_is_pydantics() -> None:
    tc = TopicConfig(topic_name="T", read_queue_nums=3, write_queue_nums=5, perm=7, order=True)
    assert tc.to_wire() == tc.model_dump(by_alias=True, mode="json")
    assert list(tc.to_wire()) == list(tc.model_dump(by_alias=True, mode="json"))
    assert TopicConfig.from_wire({**tc.to_wire(), "readQueueNums": "3"}) == tc


def test_subscription_is_the_same_on_both_sides() -> None:
    client = SubscriptionData.of_tags("T", "TagA || TagB", 7)
    broker = SubscriptionData.from_wire(client.to_wire())
    assert broker == client and broker.same_as(client)
    assert client.matches_tag("TagA") and not client.matches_tag("TagC") and not client.is_all
    everything = SubscriptionData.of_tags("T", " || ", 0)
    assert everything.is_all and everything.sub_string == "*"
    assert parse_subscription("T", "*").is_all
    with pytest.raises(SubscriptionParseError):
        parse_subscription("T", "||")
    sql = SubscriptionData("T", "a > 1", ExpressionType.SQL92)
    assert not sql.is_all and sql.matches_tag(None) and sql.to_wire()["expressionType"] == "SQL92"


def test_subscription_group_config_wire_names() -> None:
    cfg = SubscriptionGroupConfig("cg", retry_queue_nums=2)
    wire = cfg.to_wire()
    assert list(wire) == list(WIRE_NAMES.values())
    assert SubscriptionGroupConfig.from_wire(wire) == cfg
