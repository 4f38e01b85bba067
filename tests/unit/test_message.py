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
