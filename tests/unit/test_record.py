"""Record codec, batch codec, message ids and tag hashes."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.filter.tags import java_string_hash, java_string_hash_key, tags_code
from rocketpy.message import Message, MessageConst, MessageQueue, properties_to_string, string_to_properties
from rocketpy.msgid import create_offset_msg_id, decode_offset_msg_id, new_unique_id
from rocketpy.record import (
    BLANK_MAGIC,
    COMPRESSED_FLAG,
    SIZE_MAGIC,
    RecordError,
    decode_batch,
    decode_record,
    decode_records,
    encode_batch,
    encode_record,
    pack_blank,
    pack_host,
    pack_record,
    topic_part,
)


def test_java_string_hash_known_values() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("日本語") == 25921943
    assert java_string_hash("😀") == 1772899  # two UTF-16 surrogates
    assert tags_code(None) == 0


@given(st.text(max_size=80))
def test_hash_key_equals_plain_hash(s: str) -> None:
    assert java_string_hash_key(s) == java_string_hash(s)
    assert java_string_hash_key("Topic#" + s + "0123456789ABCDEF") == java_string_hash(
        "Topic#" + s + "0123456789ABCDEF"
    )


def test_offset_msg_id_roundtrip() -> None:
    mid = create_offset_msg_id("10.1.2.3", 10911, 123456789)
    assert len(mid) == 32 and mid == mid.upper()
    assert mid.startswith("0A010203") and decode_offset_msg_id(mid) == ("10.1.2.3", 10911, 123456789)
    with pytest.raises(ValueError, match="32 hex"):
        decode_offset_msg_id("abc")
    # a unique id's bytes 4..8 are the client's pid and more: never a port, so never an address
    with pytest.raises(ValueError, match="not an offset msg id"):
        decode_offset_msg_id("C0000202" + "3752C4E1" + "0" * 16)


def test_unique_ids_distinct_and_hex() -> None:
    ids = {new_unique_id() for _ in range(5000)}
    assert len(ids) == 5000
    for i in list(ids)[:10]:
        assert len(i) == 32 and int(i, 16) >= 0 and i == i.upper()


def test_properties_roundtrip() -> None:
    props = {"a": "1", "KEYS": "k1 k2", "x y": ""}
    s = properties_to_string(props)
    assert s == "a\x011\x02KEYS\x01k1 k2\x02x y\x01\x02"
    assert string_to_properties(s) == props
    assert string_to_properties("") == {}


def test_message_keys_and_queue_order() -> None:
    assert Message("T", b"", keys="a b").keys == ["a", "b"]
    assert Message("T", b"", keys=["a", "b c"]).keys == ["a", "b c"]
    q = [MessageQueue("T", "b", 2), MessageQueue("T", "a", 3), MessageQueue("S", "z", 0)]
    assert [m.queue_id for m in sorted(q)] == [0, 3, 2]
    assert len({MessageQueue("T", "b", 2), MessageQueue("T", "b", 2)}) == 1


def _record(body: bytes = b"hello", **kw: object) -> bytes:
    props = properties_to_string({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1", "p": "v"})
    return encode_record(
        topic="TopicA", body=body, queue_id=3, flag=7, queue_offset=11, physical_offset=4096, sys_flag=0,
        born_timestamp=1000, born_host=("10.0.0.1", 5000), store_timestamp=2000,
        store_host=("10.0.0.2", 10911),
        reconsume_times=2, properties=props, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_record_roundtrip() -> None:
    raw = _record()
    m = decode_record(raw)
    assert (m.topic, m.body, m.tags, m.keys, m.properties) == ("TopicA", b"hello", "TagA", ["k1", "k2"],
                                                               {"UNIQ_KEY": "U1", "p": "v"})  # fmt: skip
    assert (m.queue_id, m.flag, m.queue_offset, m.commitlog_offset) == (3, 7, 11, 4096)
    assert (m.born_host, m.store_host, m.reconsume_times, m.store_size) == (
        ("10.0.0.1", 5000), ("10.0.0.2", 10911), 2, len(raw))  # fmt: skip
    assert m.body_crc == zlib.crc32(b"hello")
    assert m.msg_id == "U1"
    assert decode_offset_msg_id(m.offset_msg_id) == ("10.0.0.2", 10911, 4096)
    two = decode_records(raw + _record(b"second"))
    assert [x.body for x in two] == [b"hello", b"second"]


def test_record_lazy_fields_match_eager_values() -> None:
    raw = _record()
    m = decode_record(raw + _record(b"next"), 0)
    assert m.offset_msg_id == create_offset_msg_id("10.0.0.2", 10911, 4096)
    assert m.offset_msg_id is m.offset_msg_id  # computed once
    assert m.born_host == ("10.0.0.1", 5000) and m.store_host == ("10.0.0.2", 10911)
    neg = decode_record(encode_record(topic="T", body=b"", store_host=("10.0.0.2", -2), physical_offset=1))
    assert neg.store_host == ("10.0.0.2", -2) and neg.offset_msg_id.startswith("0A000002FFFFFFFE")
    second = decode_records(raw + _record(b"next"))[1]
    assert (second.body, second.store_size, second.topic) == (b"next", len(_record(b"next")), "TopicA")
    m.store_host = ("1.1.1.1", 1)
    assert m.store_host == ("1.1.1.1", 1)


def test_record_lengths_that_do_not_add_up() -> None:
    raw = bytearray(_record())
    topic_len_pos = 88 + len(b"hello")
    raw[topic_len_pos] = 200  # topic runs past the record
    with pytest.raises(RecordError, match="add up"):
        decode_record(bytes(raw))
    raw = bytearray(_record())
    raw[topic_len_pos + 1 + 6] += 1  # properties length one too long
    with pytest.raises(RecordError, match="add up"):
        decode_record(bytes(raw))


def test_record_compressed_body_is_inflated() -> None:
    comp = zlib.compress(b"x" * 1000)
    raw = encode_record(topic="T", body=comp, sys_flag=COMPRESSED_FLAG)
    assert decode_record(raw).body == b"x" * 1000


def test_record_errors() -> None:
    raw = _record()
    with pytest.raises(RecordError):
        decode_record(raw[:-1])
    bad = bytearray(raw)
    bad[4] ^= 0xFF
    with pytest.raises(RecordError, match="magic"):
        decode_record(bytes(bad))
    with pytest.raises(ValueError, match="127"):
        encode_record(topic="t" * 128, body=b"")


_TAG = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=20)
_FLAG = st.integers(-(2**31), 2**31 - 1)


@given(st.lists(st.tuples(st.binary(max_size=300), _FLAG, _TAG), max_size=20))
def test_batch_roundtrip(items: list[tuple[bytes, int, str]]) -> None:
    msgs = [Message("T", b, tags=t or None, flag=f) for b, f, t in items]
    decoded = decode_batch(encode_batch(msgs))
    assert [(b, f) for b, f, _ in decoded] == [(b, f) for b, f, _ in items]
    for (_, _, p), m in zip(decoded, msgs, strict=True):
        props = string_to_properties(p)
        assert props[MessageConst.UNIQ_KEY] == m.properties[MessageConst.UNIQ_KEY]
        assert props.get(MessageConst.TAGS) == m.tags


def test_batch_truncated() -> None:
    enc = encode_batch([Message("T", b"abc"), Message("T", b"de")])
    with pytest.raises(RecordError):
        decode_batch(enc[:-3])


def test_batch_decode_checks_and_text() -> None:
    enc = encode_batch([Message("T", b"abc", tags="Tägé"), Message("T", b"", keys="k")])
    (b1, _, p1), (b2, _, p2) = decode_batch(memoryview(enc))
    assert (b1, b2) == (b"abc", b"") and "TAGS\x01Tägé\x02" in p1 and "KEYS\x01k\x02" in p2
    bad = bytearray(enc)
    bad[20 + 3] += 1  # first message's properties length one too long
    with pytest.raises(RecordError, match="add up"):
        decode_batch(bytes(bad))
    bad = bytearray(enc)
    bad[16:20] = (10_000).to_bytes(4, "big")  # body length past the message
    with pytest.raises(RecordError, match="does not fit"):
        decode_batch(bytes(bad))


def test_host_tuples_cached_but_equal() -> None:
    a = decode_record(_record())
    b = decode_record(_record(b"other"))
    assert a.store_host == b.store_host == ("10.0.0.2", 10911)
    assert a.born_host == ("10.0.0.1", 5000)


def test_pack_record_is_the_encoder_in_place() -> None:
    """The store packs records straight into its map with ``pack_record``; ``encode_record`` wraps it."""
    props = properties_to_string({"TAGS": "TagA", "UNIQ_KEY": "U1"})
    want = encode_record(
        topic="TopicA", body=b"body", queue_id=2, flag=5, queue_offset=9, physical_offset=300, sys_flag=0,
        born_timestamp=1, born_host=("10.0.0.1", 5000), store_timestamp=2, store_host=("10.0.0.2", 10911),
        reconsume_times=1, prepared_transaction_offset=0, properties=props,
    )  # fmt: skip
    buf = bytearray(b"\xee" * (300 + len(want) + 8))
    born, stored = pack_host(("10.0.0.1", 5000)), pack_host(("10.0.0.2", 10911))
    size = pack_record(buf, 300, topic_part("TopicA"), props.encode(), b"body", 2, 5, 9, 300, 0, 1, born, 2,
                       stored, 1, 0)  # fmt: skip
    assert size == len(want) and bytes(buf[300 : 300 + size]) == want
    assert buf[:300] == b"\xee" * 300 and buf[300 + size :] == b"\xee" * 8  # nothing written outside
    m = decode_record(buf, 300)
    assert (m.topic, m.body, m.tags, m.commitlog_offset, m.queue_offset) == (
        "TopicA",
        b"body",
        "TagA",
        300,
        9,
    )
    pack_blank(buf, 300 + size, 8)
    assert SIZE_MAGIC.unpack_from(buf, 300 + size) == (8, BLANK_MAGIC)
    with pytest.raises(ValueError, match=r"1\.\.127"):
        topic_part("")
