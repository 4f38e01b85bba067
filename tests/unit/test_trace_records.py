"""Message trace records: RocketMQ's layout both ways, old clients' short records, the SDK's fast
encoders (equal to the generic encoder), and the dispatcher's bound (a full buffer drops, counted)."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from rocketpy.client.results import SendResult, SendStatus
from rocketpy.client.trace import (
    BATCH_KEYS_CHARS,
    BATCH_RECORDS,
    CONSUME_BATCH_RECORDS,
    ConsumeTracer,
    ProducerTracer,
    TraceDispatcher,
    context_code,
)
from rocketpy.message import Message, MessageExt, MessageQueue
from rocketpy.msgid import create_offset_msg_id
from rocketpy.trace import (
    CTX_EXCEPTION,
    CTX_FAILED,
    CTX_RETURNNULL,
    CTX_SUCCESS,
    TraceRecord,
    decode_body,
    decode_record,
    encode_record,
    is_trace_topic,
    record_keys,
)
from tests.waiting import wait_until_async

# A Pub record as RocketMQ's Java client (TraceDataEncoder) writes it: 14 fields.
JAVA_PUB = (
    "Pub\x011700000000000\x01DefaultRegion\x01PG\x01TopicA\x017F000001000018B4AAC2\x01TagA\x01k1 k2"
    "\x01127.0.0.1:10911\x0111\x013\x010\x017F00000100002A9F0000000000000000\x01true\x02"
)
# Older clients: Pub without offsetMsgId (13 fields), SubAfter without contextCode/timestamp/group.
OLD_PUB = (
    "Pub\x011700000000000\x01DefaultRegion\x01PG\x01TopicA\x01ID1\x01null\x01null\x01h:1\x015\x012"
    "\x010\x01true"
)
OLD_SUB_AFTER = "SubAfter\x01REQ1\x01ID1\x014\x01false\x01null"


def test_java_pub_record_decodes_field_by_field() -> None:
    [r] = decode_body(JAVA_PUB.encode())
    assert (r.kind, r.timestamp, r.region_id, r.group, r.topic) == (
        "Pub",
        1700000000000,
        "DefaultRegion",
        "PG",
        "TopicA",
    )
    assert (r.tags, r.keys, r.store_host, r.body_length, r.cost_ms, r.msg_type) == (
        "TagA",
        "k1 k2",
        "127.0.0.1:10911",
        11,
        3,
        0,
    )
    assert r.offset_msg_id == "7F00000100002A9F0000000000000000" and r.success is True
    assert encode_record(r) == JAVA_PUB  # written back byte for byte
    assert list(record_keys(r)) == ["7F000001000018B4AAC2", "k1", "k2"]


def test_old_records_keep_what_they_have() -> None:
    pub = decode_record(OLD_PUB)
    assert pub is not None and pub.offset_msg_id is None and pub.success is True and pub.tags is None
    after = decode_record(OLD_SUB_AFTER)
    assert after is not None and after.cost_ms == 4 and after.success is False
    assert after.context_code is None and after.timestamp is None and after.group is None
    # a garbled number is None, not an error; an unknown kind is skipped
    bad = decode_record("SubBefore\x01notatime\x01R\x01G\x01REQ\x01ID\x01x\x01null")
    assert bad is not None and bad.timestamp is None and bad.retry_times is None and bad.msg_id == "ID"
    assert decode_body("Unknown\x01a\x02\x02 \x02") == []


_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
).filter(lambda s: s.strip() == s and s != "null")


@given(
    kind=st.sampled_from(["Pub", "SubBefore", "SubAfter", "EndTransaction", "Deliver", "SendBack"]),
    ts=st.integers(0, 2**62),
    text=_text,
    n=st.integers(0, 10**9),
    ok=st.booleans(),
)
def test_every_kind_round_trips(kind: str, ts: int, text: str, n: int, ok: bool) -> None:
    r = TraceRecord(
        kind,
        timestamp=ts,
        group=text,
        msg_id=text,
        topic=text,
        request_id=text,
        keys=text,
        cost_ms=n,
        success=ok,
        retry_times=n,
        queue_id=n,
        queue_offset=n,
        body_length=n,
        msg_type=1,
        context_code=2,
        region_id="R",
        store_host="h:1",
        offset_msg_id=text,
        tags=text,
        transaction_id=text,
        transaction_state="COMMIT_MESSAGE",
        from_transaction_check=ok,
        broker_name="b",
        client_host="c:2",
        target_topic=text,
    )
    [back] = decode_body(encode_record(r) + encode_record(r))[:1]
    for name, value in back.as_dict().items():
        assert getattr(r, name) == value, name
    assert back.kind == kind


def test_trace_topics() -> None:
    assert is_trace_topic("RMQ_SYS_TRACE_TOPIC") and is_trace_topic("rmq_sys_TRACE_DATA_DefaultRegion")
    assert not is_trace_topic("TopicA")


def _bounds(chunks: int) -> list[float]:
    """A listener runner call's times: chunks of 2 ms each."""
    return [1.0 + 0.002 * i for i in range(chunks + 1)]


def _take(d: TraceDispatcher) -> tuple[list[str], list[str]]:
    """The next trace message's records and KEYS (each key once)."""
    sealed = d._take()
    assert sealed is not None
    body, keys, n = sealed
    records = [r + "\x02" for r in bytes(body).decode().split("\x02")[:-1]]
    assert len(records) == n and len(set(keys)) == len(keys)
    return records, keys


def _dispatcher(size: int = 100, batch_records: int = BATCH_RECORDS) -> TraceDispatcher:
    d = TraceDispatcher("G", "127.0.0.1:9876", buffer_size=size, batch_records=batch_records)
    d._open = True  # appending only: no inner producer needed
    return d


def test_fast_encoders_equal_the_generic_encoder() -> None:
    d = _dispatcher()
    mq = MessageQueue("TopicA", "b", 1)
    omid = create_offset_msg_id("127.0.0.1", 10911, 42)
    result = SendResult(SendStatus.SEND_OK, "ID1", omid, mq, 7)
    ProducerTracer(d, "PG").pub(Message("TopicA", b"hello", tags="T", keys=["k1", "k2"]), result, 1000, 3, 0)
    m = MessageExt("TopicA", b"x", keys="k1")
    m.msg_id, m.reconsume_times = "ID1", 2
    tracer = ConsumeTracer(d, "CG", ("OK",))
    token = tracer.before([[m]])
    tracer.after([[m]], token, ["OK"], [1.0, 1.004])
    assert d.pending == 3
    (pub, before, after), keys = _take(d)
    assert set(keys) == {"ID1", "k1", "k2"} and d.pending == 0
    for text in (pub, before, after):
        r = decode_record(text.rstrip("\x02"))
        assert r is not None and encode_record(r) == text
    p = decode_record(pub.rstrip("\x02"))
    assert p is not None and (p.store_host, p.body_length, p.offset_msg_id, p.success) == (
        "127.0.0.1:10911",
        5,
        omid,
        True,
    )
    b, a = decode_record(before.rstrip("\x02")), decode_record(after.rstrip("\x02"))
    assert b is not None and (len(b.request_id or ""), b.retry_times, b.keys) == (32, 2, "k1")
    assert a is not None and (a.request_id, a.cost_ms, a.success, a.context_code, a.group) == (
        b.request_id,
        4,
        True,
        CTX_SUCCESS,
        "CG",
    )


def test_full_buffer_drops_and_counts() -> None:
    d = _dispatcher(size=3)
    for i in range(5):
        d.append(f"r{i}", "k")
    assert (d.stats.appended, d.stats.dropped, d.pending) == (3, 2, 3)
    d._open = False  # stopped: later records are dropped too
    d.append("late", "k")
    assert d.stats.dropped == 3


def test_trace_switch_off_skips_the_message() -> None:
    d = _dispatcher()
    m = MessageExt("TopicA", b"x", properties={"TRACE_ON": "false"})
    m.msg_id = "ID"
    ConsumeTracer(d, "CG", ("OK",)).before([[m]])
    assert not d.pending


def test_batches_are_bounded_and_lose_nothing() -> None:
    """Entries of many records (one per listener call) are cut to BATCH_RECORDS per trace message;
    a skipped message leaves no record, and retry counts are those seen before the call."""
    d = _dispatcher(size=10_000)
    tracer = ConsumeTracer(d, "CG", ("OK",))
    chunks = []
    for c in range(300):
        m = MessageExt("TopicA", b"x", keys=f"k{c}")
        m.msg_id = f"ID{c}"
        chunks.append([m])
    chunks[5][0].properties["TRACE_ON"] = "false"
    token = tracer.before(chunks)
    for [m] in chunks:
        m.reconsume_times = 9  # a failed call raises it afterwards: SubBefore keeps the old count
    tracer.after(chunks, token, ["OK"] * 299 + [None], _bounds(300))
    assert d.pending == 2 * 299
    sent: list[str] = []
    while d.pending:
        records, keys = _take(d)
        assert 0 < len(records) <= BATCH_RECORDS
        assert set(keys) == {k for r in records for k in record_keys(decode_record(r.rstrip("\x02")))}
        sent += records
    decoded = [decode_record(r.rstrip("\x02")) for r in sent]
    assert [r.kind for r in decoded] == ["SubBefore"] * 299 + ["SubAfter"] * 299
    assert "ID5" not in {r.msg_id for r in decoded} and {r.retry_times for r in decoded[:299]} == {0}
    by_id = {r.request_id for r in decoded[:299]}
    assert len(by_id) == 299 and {r.request_id for r in decoded[299:]} == by_id
    assert decoded[-1].context_code == CTX_RETURNNULL and decoded[-1].success is False


def test_long_user_keys_split_trace_messages_within_the_properties_limit() -> None:
    """Traced messages with long keys: each trace message's KEYS stays within BATCH_KEYS_CHARS (a
    record's properties hold 32,767 bytes), every record is sent once, in order."""
    d = _dispatcher(size=10_000)
    tracer = ConsumeTracer(d, "CG", ("OK",))
    chunks = []
    for c in range(400):
        m = MessageExt("TopicA", b"x", keys=[f"order-{c:04d}-" + "k" * 180, f"user-{c}"])
        m.msg_id = f"ID{c:04d}"
        chunks.append([m])
    token = tracer.before(chunks)
    tracer.after(chunks, token, ["OK"] * 400, _bounds(400))
    sent: list[str] = []
    messages = 0
    while d.pending:
        records, keys = _take(d)
        assert records, "a take with records pending gave none"
        assert len(" ".join(keys)) <= BATCH_KEYS_CHARS
        assert set(keys) == {k for r in records for k in record_keys(decode_record(r.rstrip("\x02")))}
        sent += records
        messages += 1
    assert messages > 2  # 400 x ~200 characters of keys do not fit one message
    decoded = [decode_record(r.rstrip("\x02")) for r in sent]
    assert [r.kind for r in decoded] == ["SubBefore"] * 400 + ["SubAfter"] * 400
    assert [r.msg_id for r in decoded[:400]] == [f"ID{c:04d}" for c in range(400)]


def _take_all(d: TraceDispatcher) -> list[list[str]]:
    """Every trace message's records until nothing is pending, each message's KEYS checked."""
    messages: list[list[str]] = []
    while d.pending:
        records, keys = _take(d)
        assert records, "a take with records pending gave none"
        assert len(records) <= d.batch_records and len(" ".join(keys)) <= BATCH_KEYS_CHARS
        assert set(keys) == {k for r in records for k in record_keys(decode_record(r.rstrip("\x02")))}
        messages.append(records)
    return messages


def _consumed(first: int, n: int) -> list[list[MessageExt]]:
    chunks = []
    for c in range(first, first + n):
        m = MessageExt("TopicA", b"x")
        m.msg_id = f"{c:032X}"  # as long as a real id: 33 characters of KEYS each
        chunks.append([m])
    return chunks


def test_a_consumers_trace_message_counts_each_id_once() -> None:
    """A consumed message's SubBefore and SubAfter name one id, indexed once: a consumer's trace
    message holds CONSUME_BATCH_RECORDS records (more ids' worth of records than KEYS would hold if
    each record's id were counted), and when its listener calls' records are not paired in it
    (all SubBefore first), KEYS still stays within the bound; every record once, in order."""
    d = _dispatcher(size=20_000, batch_records=CONSUME_BATCH_RECORDS)
    tracer = ConsumeTracer(d, "CG", ("OK",))
    for call in range(60):  # listener calls of 32 messages, one after another: pairs stay together
        chunks = _consumed(call * 32, 32)
        tracer.after(chunks, tracer.before(chunks), ["OK"] * 32, _bounds(32))
    messages = _take_all(d)
    assert CONSUME_BATCH_RECORDS * 33 > BATCH_KEYS_CHARS  # counted per record, it would not fit
    assert len(messages[0]) == CONSUME_BATCH_RECORDS and sum(map(len, messages)) == 2 * 60 * 32
    sent = [decode_record(r.rstrip("\x02")) for m in messages for r in m]
    assert [(r.kind, r.msg_id) for r in sent] == [
        (kind, f"{c:032X}") for call in range(60) for kind in ("SubBefore", "SubAfter")
        for c in range(call * 32, call * 32 + 32)
    ]  # fmt: skip

    chunks = _consumed(0, 1200)  # one call of 1,200: its SubBefore records come first, unpaired
    tracer.after(chunks, tracer.before(chunks), ["OK"] * 1200, _bounds(1200))
    messages = _take_all(d)
    assert len(messages[0]) < CONSUME_BATCH_RECORDS  # cut by KEYS: ~909 ids
    sent = [decode_record(r.rstrip("\x02")) for m in messages for r in m]
    assert [(r.kind, r.msg_id) for r in sent] == [
        (kind, f"{c:032X}") for kind in ("SubBefore", "SubAfter") for c in range(1200)
    ]


def test_context_codes() -> None:
    assert context_code("OK", True) == CTX_SUCCESS
    assert context_code(None, False) == CTX_RETURNNULL
    assert context_code(ValueError(), False) == CTX_EXCEPTION
    assert context_code("RECONSUME_LATER", False) == CTX_FAILED


# Records as rocketmq-client-cpp 2.x writes them (src/trace/TraceUtil.cpp): Pub with 13 fields after
# the kind, empty strings for absent tags/keys; SubAfter with only requestId, msgId, costTime, status
# and keys (no contextCode, timestamp or group). Its topic is rmq_sys_TRACE_DATA_<region>.
CPP_BODY = (
    "Pub\x011700000000123\x01DefaultRegion\x01cpp_pg\x01CppTopic\x01C0A8000100002A9F0000000000000001\x01"
    "TagA\x01\x01127.0.0.1:10911\x0142\x015\x010\x017F00000100002A9F00000000000000AB\x01true\x02"
    "SubBefore\x011700000000200\x01DefaultRegion\x01cpp_cg\x01REQ-9\x01C0A8000100002A9F0000000000000001"
    "\x011\x01\x02"
    "SubAfter\x01REQ-9\x01C0A8000100002A9F0000000000000001\x017\x01false\x01\x02"
)


def test_cpp_client_records_decode() -> None:
    pub, before, after = decode_body(CPP_BODY.encode())
    assert (pub.kind, pub.group, pub.topic, pub.tags, pub.keys, pub.body_length, pub.cost_ms) == (
        "Pub",
        "cpp_pg",
        "CppTopic",
        "TagA",
        None,
        42,
        5,
    )
    assert pub.offset_msg_id == "7F00000100002A9F00000000000000AB" and pub.success is True
    assert (before.group, before.request_id, before.retry_times, before.keys) == ("cpp_cg", "REQ-9", 1, None)
    assert (after.request_id, after.cost_ms, after.success) == ("REQ-9", 7, False)
    assert after.group is None and after.timestamp is None and after.context_code is None


BOUNDS = [1000.0, 1000.0014, 1000.0038, 1000.0072, 1000.0116]  # chunk c from BOUNDS[c] to BOUNDS[c + 1]


def test_calls_of_many_chunks_with_one_result_encode_each_message() -> None:
    """A call's chunks all answered alike (the usual call) and a call with mixed results are encoded
    the same way, field for field, with each message's own id, keys, cost and chunk request id."""
    d = _dispatcher(size=1000)
    tracer = ConsumeTracer(d, "CG", ("OK",))
    calls = []
    for results in (["OK"] * 4, ["OK", "LATER", "OK", None]):
        chunks = []
        for c in range(4):
            m = MessageExt("TopicA", b"x", keys=[f"k{c}", "x"] if c % 2 else None)
            m.msg_id = f"ID{len(calls)}{c}"
            chunks.append([m])
        token = tracer.before(chunks)
        tracer.after(chunks, token, results, BOUNDS)  # chunk c took c + 1.4 ms
        calls.append(results)
    records, keys = _take(d)
    decoded = [decode_record(r.rstrip("\x02")) for r in records]
    afters = [r for r in decoded if r is not None and r.kind == "SubAfter"]
    befores = [r for r in decoded if r is not None and r.kind == "SubBefore"]
    assert len(afters) == len(befores) == 8
    assert set(keys) == {f"ID{i}{c}" for i in range(2) for c in range(4)} | {"k1", "k3", "x"}
    for n, (b, a) in enumerate(zip(befores, afters, strict=True)):
        call, c = divmod(n, 4)
        ok = calls[call][c] == "OK"
        assert (a.msg_id, a.request_id, a.cost_ms, a.success) == (f"ID{call}{c}", b.request_id, c + 1, ok)
        assert a.keys == b.keys == (f"k{c} x" if c % 2 else None)
        assert a.timestamp == int(BOUNDS[c + 1] * 1000) and a.group == "CG"
        assert a.context_code == (
            CTX_SUCCESS if ok else CTX_RETURNNULL if calls[call][c] is None else CTX_FAILED
        )
    assert len({b.request_id for b in befores}) == 8


async def test_full_trace_messages_go_at_once_and_the_rest_on_the_interval() -> None:
    """A message's worth of records is sent as soon as it is buffered, in one trace message; what
    is left waits for the flush interval, then goes too; no send goes out empty."""
    d = TraceDispatcher("G", None, flush_interval_s=4.0)
    sent: list[Message] = []

    class Inner:
        async def send(self, msg: Message) -> None:
            sent.append(msg)

        async def shutdown(self) -> None:
            pass

    d._producer = Inner()  # type: ignore[assignment]
    d._open = True
    d._task = asyncio.get_running_loop().create_task(d._routine())
    for i in range(BATCH_RECORDS + 10):
        d.append(f"Pub\x01{i}\x02", f"K{i}")
    await wait_until_async(lambda: len(sent) == 1, timeout=3, message="the full trace message was not sent")
    assert sent[0].body.count(b"\x02") == BATCH_RECORDS
    assert len(sent[0].properties["KEYS"].split(" ")) == BATCH_RECORDS
    assert d.pending == 10
    await wait_until_async(lambda: len(sent) == 2, timeout=15, message="the rest was not sent")
    assert sent[1].body.count(b"\x02") == 10 and d.pending == 0
    await d.shutdown()
    assert (d.stats.sent_records, d.stats.sent_messages, d.stats.dropped) == (BATCH_RECORDS + 10, 2, 0)
