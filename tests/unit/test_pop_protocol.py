"""POP's wire pieces as pure functions: receipt handles, offset infos, batch acks, revive-log records,
and the client's reading of a POP answer (RocketMQ's ``processPopResponse``)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.broker.pop.revive_log import (
    REASON_DEAD_LETTER,
    AckRecord,
    CkRecord,
    ReviveLogError,
    decode,
    encode_ack,
    encode_acks,
    encode_ck,
)
from rocketpy.client.pop_result import pop_result
from rocketpy.client.receipts import ack_groups, batch_acks
from rocketpy.errors import HeaderError, MQClientError, PollingFullError
from rocketpy.message import MessageExt
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.pop import (
    BatchAck,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    batch_ack_body,
    decode_bitset,
    encode_bitset,
    read_batch_acks,
)
from rocketpy.protocol.receipt import (
    ReceiptError,
    ReceiptHandle,
    format_msg_offsets,
    format_order_counts,
    format_start_offsets,
    parse_msg_offsets,
    parse_order_counts,
    parse_start_offsets,
)
from rocketpy.record import encode_record
from rocketpy.remoting.command import RemotingCommand

LONGS = st.integers(0, (1 << 63) - 1)
NAMES = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FFF, blacklist_characters=" "), min_size=1, max_size=40
)


@given(LONGS, LONGS, LONGS, st.integers(0, 999), st.booleans(), NAMES, st.integers(0, 65535), LONGS)
def test_receipt_handle_round_trips(
    ck: int, pop: int, inv: int, rq: int, retry: bool, broker: str, qid: int, off: int
) -> None:
    h = ReceiptHandle(ck, pop, inv, rq, "1" if retry else "0", broker, qid, off)
    text = h.encode()
    assert ReceiptHandle.parse(text) == h
    assert text.count(" ") == 7


def test_receipt_handle_is_rocketmqs_layout() -> None:
    h = ReceiptHandle.parse("10 1700000000000 30000 0 1 broker-a 3 12")
    assert (h.ck_queue_offset, h.pop_time, h.invisible_time, h.revive_qid) == (10, 1700000000000, 30000, 0)
    assert h.retry and h.broker_name == "broker-a" and (h.queue_id, h.queue_offset) == (3, 12)
    assert h.stored_topic("T", "g") == "%RETRY%g_T"
    assert not h.orderly and ReceiptHandle.parse("1 2 3 999 0 b 0 1").orderly


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("1 2 3", "has 3 fields"),
        ("1 2 3 0 0 b 0 x", "queue offset 'x' is not a number"),
        ("1 2 3 0 7 b 0 1", "topic kind '7'"),
        ("1 2 3 0 2 b 0 1", "topic kind '2'"),
        ("1 2 3 0 0  0 1", "names no broker"),
        ("-1 2 3 0 0 b 0 1", "out of range"),
        ("9" * 600, "characters long"),
    ],
)
def test_garbled_receipt_handles_are_refused(text: str, why: str) -> None:
    with pytest.raises(ReceiptError, match=why):
        ReceiptHandle.parse(text)


def test_offset_infos_round_trip() -> None:
    starts = format_start_offsets([("0", 1, 10), ("1", 0, 4)])
    assert starts == "0 1 10;1 0 4"
    assert parse_start_offsets(starts) == {"0@1": 10, "1@0": 4}
    msgs = format_msg_offsets([("0", 1, [10, 12])])
    assert msgs == "0 1 10,12" and parse_msg_offsets(msgs) == {"0@1": [10, 12]}
    counts = format_order_counts([("0", 2, 7, 3)])
    assert counts == "0 qo2%7 3" and parse_order_counts(counts) == {"0@qo2%7": 3}
    assert parse_start_offsets("") == {} and parse_start_offsets(None) == {}
    with pytest.raises(ReceiptError, match="names a queue twice"):
        parse_start_offsets("0 1 1;0 1 2")
    with pytest.raises(ReceiptError, match="not 'kind queue value'"):
        parse_msg_offsets("0 1")


@given(st.sets(st.integers(0, 4095), max_size=64))
def test_bitsets_round_trip_as_fastjson_writes_them(bits: set[int]) -> None:
    assert set(decode_bitset(encode_bitset(sorted(bits)))) == bits


def test_bitset_is_javas_little_endian_bytes() -> None:
    assert encode_bitset([0, 9]) == "AQI="  # BitSet{0, 9}.toByteArray() == [0x01, 0x02]
    with pytest.raises(ValueError, match="not base64"):
        decode_bitset("@@")


def test_batch_acks_read_short_and_long_names() -> None:
    ack = BatchAck("g", "T", True, 5, 1, 0, 123, 30000, (0, 3))
    doc = batch_ack_body("broker-a", [ack])
    assert read_batch_acks(doc) == [ack] and ack.offsets() == [5, 8]
    entry = {"consumerGroup": "g", "topic": "T", "retry": "0", "startOffset": 1, "queueId": 0}
    entry.update({"reviveQueueId": 0, "popTime": 1, "invisibleTime": 2, "bitSet": "AQ=="})
    long_names = {"acks": [entry]}
    assert read_batch_acks(long_names)[0].offsets() == [1]
    with pytest.raises(ValueError, match=r"acks\[0\] misses popTime"):
        read_batch_acks(
            {"acks": [{"c": "g", "t": "T", "r": "0", "so": 1, "q": 0, "rq": 0, "it": 2, "b": ""}]}
        )


def test_header_bounds_are_checked_with_the_field_named() -> None:
    good = PopMessageRequestHeader("g", "T", -1, 32, 1000).to_ext()
    for field, value, expect in [
        ("maxMsgNums", 33, "'maxMsgNums' must be between 1 and 32"),
        ("maxMsgNums", 0, "'maxMsgNums' must be between 1 and 32"),
        ("invisibleTime", 0, "'invisibleTime' must be between 1 and 43200000"),
        ("invisibleTime", 12 * 3600 * 1000 + 1, "'invisibleTime' must be between 1 and 43200000"),
    ]:
        with pytest.raises(HeaderError, match=expect):
            PopMessageRequestHeader.from_ext({**good, field: value})
    # RocketMQ's Java client sends every field as text
    text = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in good.items()}
    assert PopMessageRequestHeader.from_ext(text) == PopMessageRequestHeader.from_ext(good)


@given(
    st.integers(0, 1 << 40),
    st.lists(st.integers(0, 1000), min_size=1, max_size=64, unique=True),
    st.booleans(),
    st.integers(0, 1 << 40),
)
def test_revive_log_records_round_trip(start: int, deltas: list[int], orderly: bool, seq: int) -> None:
    offsets = sorted(start + d for d in deltas)
    key = ("group-1", "Topic-é", 3)
    attempts = [i % 5 for i in range(len(offsets))] if orderly else None
    ck = decode(encode_ck(key, seq, start, offsets[-1] + 1, 17, 30000, offsets, attempts))
    assert isinstance(ck, CkRecord)
    assert (ck.key, ck.seq, ck.start, ck.end, ck.offsets, ck.attempts) == (
        key, seq, start, offsets[-1] + 1, offsets, attempts,
    )  # fmt: skip
    ack = decode(encode_ack(key, seq, offsets, REASON_DEAD_LETTER))
    assert isinstance(ack, AckRecord) and (ack.key, ack.seq, ack.offsets, ack.reason) == (
        key, seq, offsets, REASON_DEAD_LETTER,
    )  # fmt: skip


@pytest.mark.parametrize("body", [b"", b"\x09abc", encode_ack(("g", "T", 0), 1, [1])[:-1], b"\x01" * 10])
def test_malformed_revive_log_records_are_refused(body: bytes) -> None:
    with pytest.raises(ReviveLogError):
        decode(body)


def _answer(code: int, body: bytes, header: PopMessageResponseHeader) -> RemotingCommand:
    return RemotingCommand(code, 1, 1, None, header.to_ext(), body)


def test_pop_answer_gives_each_message_its_handle() -> None:
    plain = encode_record(topic="T", body=b"a", queue_id=2, queue_offset=7)
    retried = encode_record(topic="T", body=b"b", queue_id=0, queue_offset=3,
                            properties="POP_CK\x019 100 5000 0 1 broker-a 0 3\x02")  # fmt: skip
    header = PopMessageResponseHeader(100, 5000, 0, 4, "0 2 6;1 0 9", "0 2 7;1 0 3")
    result = pop_result(_answer(ResponseCode.SUCCESS, plain + retried, header), "a:1", "broker-a", False)
    first, second = result.messages
    assert first.receipt_handle == "6 100 5000 0 0 broker-a 2 7"
    assert second.receipt_handle == "9 100 5000 0 1 broker-a 0 3"  # the broker's own, kept
    assert first.properties["1ST_POP_TIME"] == "100" and result.rest_num == 4


def test_orderly_pop_answer_sets_reconsume_times() -> None:
    plain = encode_record(topic="T", body=b"a", queue_id=1, queue_offset=4)
    header = PopMessageResponseHeader(100, 5000, 999, 0, "0 1 4", "0 1 4", "0 qo1%4 2")
    [m] = pop_result(_answer(ResponseCode.SUCCESS, plain, header), "a:1", "b", True).messages
    assert m.reconsume_times == 2 and ReceiptHandle.parse(m.receipt_handle).orderly


def test_pop_answer_codes() -> None:
    empty = PopMessageResponseHeader()
    assert pop_result(_answer(ResponseCode.POLLING_TIMEOUT, b"", empty), "a:1", "b", False).messages == []
    with pytest.raises(PollingFullError):
        pop_result(_answer(ResponseCode.POLLING_FULL, b"", empty), "a:1", "b", False)
    bad = PopMessageResponseHeader(1, 1, 0, 0, "0 5 1", "0 5 1")  # names queue 5, the record is queue 0
    with pytest.raises(MQClientError, match="malformed"):
        pop_result(_answer(ResponseCode.SUCCESS, encode_record(topic="T", body=b"x"), bad), "a:1", "b", False)


def _popped(queue_id: int, offset: int, handle: str | None = None, topic: str = "T") -> MessageExt:
    m = MessageExt(topic=topic, body=b"x", queue_id=queue_id, queue_offset=offset)
    if handle is not None:
        m.receipt_handle = handle
    return m


def test_ack_groups_one_batch_ack_per_pop_and_queue() -> None:
    msgs = [_popped(2, o, f"6 100 5000 0 0 broker-a 2 {o}") for o in (6, 7, 9)]
    msgs += [_popped(0, 3, "3 100 5000 0 1 broker-a 0 3")]  # a redelivered one: the retry topic's
    msgs += [_popped(2, 12, f"12 200 5000 0 0 broker-a 2 {o}") for o in (12, 13)]  # a later pop
    msgs += [_popped(2, 8, "6 100 5000 0 0 broker-a 2 8")]  # back to the first pop
    groups = ack_groups(msgs)
    assert [(g.handle.pop_time, g.handle.retry, g.offsets) for g in groups] == [
        (100, False, [6, 7, 9, 8]), (100, True, [3]), (200, False, [12, 13]),
    ]  # fmt: skip
    acks = batch_acks("g", groups)
    assert [(a.start_offset, a.bits, a.retry, a.topic) for a in acks] == [
        (6, (0, 1, 2, 3), False, "T"), (3, (0,), True, "T"), (12, (0, 1), False, "T"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "handle, why",
    [(None, "no receipt handle"), ("6 100 5000 0 0 broker-a 2 x7", "malformed"), ("garbage", "malformed")],
)
def test_ack_groups_refuse_a_bad_handle_among_good_ones(handle: str | None, why: str) -> None:
    good = [_popped(2, o, f"6 100 5000 0 0 broker-a 2 {o}") for o in (6, 7)]
    with pytest.raises(MQClientError, match=why):
        ack_groups([*good, _popped(2, 7, handle)])
    with pytest.raises(MQClientError, match="MessageExt"):
        ack_groups([*good, "not a message"])
    far = _popped(2, 9000, "6 100 5000 0 0 broker-a 2 9000")  # beyond a batch ack's bit set
    with pytest.raises(MQClientError, match="does not fit a batch ack"):
        batch_acks("g", ack_groups([*good, far]))


@given(st.lists(st.integers(0, 4095), max_size=64))
def test_bitset_fast_paths_read_as_the_byte_table(bits: list[int]) -> None:
    n = 0
    for i in bits:
        n |= 1 << i
    assert encode_bitset(bits) == (
        base64.b64encode(n.to_bytes((n.bit_length() + 7) // 8, "little")).decode() if bits else ""
    )
    assert decode_bitset(encode_bitset(bits)) == tuple(sorted(set(bits)))


@given(
    entries=st.lists(
        st.tuples(
            st.integers(0, 1023), st.integers(1, 2**40), st.integers(-1, 2**40),
            st.integers(0, 2**40), st.lists(st.integers(0, 2**20), min_size=1, max_size=50),
        ),
        min_size=1, max_size=6,
    ),
    reason=st.sampled_from([0, 1, 2]),
)  # fmt: skip
def test_acks_records_round_trip(entries: list[tuple[int, int, int, int, list[int]]], reason: int) -> None:
    wanted = [
        (qid, seq, committed, [base + d for d in deltas]) for qid, seq, committed, base, deltas in entries
    ]
    bodies = encode_acks("g", "T", wanted, reason)
    got = [r for body in bodies for r in decode(body)]  # type: ignore[union-attr]
    assert [(r.key, r.seq, r.committed, r.offsets, r.reason) for r in got] == [
        (("g", "T", qid), seq, committed, offsets, reason) for qid, seq, committed, offsets in wanted
    ]


def test_acks_records_split_at_the_record_bound() -> None:
    offsets = list(range(10_000))
    bodies = encode_acks("g", "T", [(3, 7, 42, offsets)])
    assert len(bodies) == 3
    got = [r for body in bodies for r in decode(body)]  # type: ignore[union-attr]
    assert [o for r in got for o in r.offsets] == offsets
    assert {(r.seq, r.committed) for r in got} == {(7, 42)}
    with pytest.raises(ReviveLogError):
        decode(bodies[0][:-1])
