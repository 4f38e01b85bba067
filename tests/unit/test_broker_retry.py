"""The message a send-back stores: kept fields, RETRY_TOPIC / ORIGIN_MESSAGE_ID from the first round."""

from __future__ import annotations

from rocketpy.broker.retry import read_failed_record, send_back_message
from rocketpy.broker.store import BrokerMessage
from rocketpy.message import MessageConst, MessageExt, properties_to_string
from rocketpy.record import decode_record, encode_record

STORE_HOST = ("10.0.0.9", 10911)


def _record(topic: str, props: dict[str, str], phys: int, reconsume: int = 0) -> bytes:
    return encode_record(
        topic=topic, body=b"body", queue_id=2, queue_offset=5, physical_offset=phys, born_timestamp=11,
        born_host=("10.0.0.1", 4242), store_timestamp=12, store_host=STORE_HOST, reconsume_times=reconsume,
        properties=properties_to_string(props),
    )  # fmt: skip


def _stored(m: BrokerMessage) -> MessageExt:
    """``m`` as the store would write it (the fields a send-back sets)."""
    return decode_record(
        encode_record(
            topic=m.topic, body=m.body, queue_id=m.queue_id, flag=m.flag, sys_flag=m.sys_flag,
            born_timestamp=m.born_timestamp, born_host=m.born_host, store_host=STORE_HOST,
            reconsume_times=m.reconsume_times, properties=m.properties,
        )
    )  # fmt: skip


def test_first_send_back_names_the_original_topic_and_id() -> None:
    raw = _record("Orders", {"UNIQ_KEY": "U1", "KEYS": "k1", "DELAY": "3", "REAL_TOPIC": "X", "a": "b"}, 400)
    failed = read_failed_record(raw, 400, STORE_HOST)
    assert failed is not None and failed.topic == "Orders" and failed.reconsume_times == 0
    back = _stored(send_back_message(failed, "%RETRY%g", 0, "U1", 16))
    assert back.topic == "%RETRY%g" and back.reconsume_times == 1 and back.body == b"body"
    assert back.properties["RETRY_TOPIC"] == "Orders" and back.properties["ORIGIN_MESSAGE_ID"] == "U1"
    assert back.properties["a"] == "b" and back.keys == ["k1"] and back.msg_id == "U1"
    assert "REAL_TOPIC" not in back.properties and back.delay_level == 0
    assert back.born_host == ("10.0.0.1", 4242) and back.born_timestamp == 11


def test_later_rounds_keep_the_first_topic_and_id() -> None:
    props = {"UNIQ_KEY": "U1", MessageConst.RETRY_TOPIC: "Orders", MessageConst.ORIGIN_MESSAGE_ID: "U1"}
    failed = read_failed_record(_record("%RETRY%g", props, 800, reconsume=4), 800, STORE_HOST)
    assert failed is not None
    back = _stored(send_back_message(failed, "%DLQ%g", 0, "other", 4))
    assert back.properties["RETRY_TOPIC"] == "Orders" and back.properties["ORIGIN_MESSAGE_ID"] == "U1"
    assert back.reconsume_times == 5 and back.properties["MAX_RECONSUME_TIMES"] == "4"


def test_a_record_without_unique_key_gets_its_offset_id_and_wrong_offsets_are_refused() -> None:
    raw = _record("Orders", {}, 1200)
    assert read_failed_record(raw, 1201, STORE_HOST) is None  # not the record stored at that offset
    failed = read_failed_record(raw, 1200, STORE_HOST)
    assert failed is not None
    origin = failed.properties["ORIGIN_MESSAGE_ID"]
    assert origin.startswith("0A000009") and len(origin) == 32
