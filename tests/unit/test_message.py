"""Message model: properties, keys, msg id rules, queue identity."""

from __future__ import annotations

from rocketpy.message import Message, MessageConst, MessageExt, MessageQueue


def test_all_properties_and_back() -> None:
    m = Message("T", b"b", tags="TagA", keys=["k1", "k2"], properties={"a": "1"}, delay_level=3)
    s = m.properties_string()
    back = Message("T", b"b")
    back.set_properties_string(s)
    assert (back.tags, back.keys, back.delay_level, back.properties) == ("TagA", ["k1", "k2"], 3, {"a": "1"})
    assert back == m


def test_message_ext_msg_id_rules() -> None:
    e = MessageExt("T", b"", offset_msg_id="AB" * 16)
    assert e.msg_id == "AB" * 16
    e.properties[MessageConst.UNIQ_KEY] = "CD" * 16
    assert e.msg_id == "CD" * 16
    e.msg_id = "explicit"
    assert e.msg_id == "explicit"
    assert "queue_offset=0" in repr(e)


def test_message_queue_dict_roundtrip() -> None:
    q = MessageQueue("T", "broker-a", 3)
    assert MessageQueue.from_dict(q.to_dict()) == q
    assert q.to_dict() == {"topic": "T", "brokerName": "broker-a", "queueId": 3}


def test_properties_fast_path_and_malformed_fallback() -> None:
    from rocketpy.message import string_to_properties

    assert string_to_properties("a\x011\x02b\x01x\x01y\x02") == {"a": "1", "b": "x\x01y"}
    assert string_to_properties("a\x011\x02a\x012") == {"a": "2"}  # no trailing separator; last wins
    # items without a separator or with an empty name are skipped, the rest kept
    assert string_to_properties("junk\x02a\x011\x02\x01v\x02\x02b\x01\x02") == {"a": "1", "b": ""}


def test_message_ext_hosts_and_offset_id_settable() -> None:
    e = MessageExt("T", b"", born_host=("1.2.3.4", 5), store_host=("5.6.7.8", 9), offset_msg_id="X")
    assert (e.born_host, e.store_host, e.offset_msg_id) == (("1.2.3.4", 5), ("5.6.7.8", 9), "X")
    e.store_host = ("9.9.9.9", 1)
    e.offset_msg_id = "Y"
    assert (e.store_host, e.offset_msg_id, e.msg_id) == (("9.9.9.9", 1), "Y", "Y")
    assert MessageExt("T").born_host == ("0.0.0.0", 0)
