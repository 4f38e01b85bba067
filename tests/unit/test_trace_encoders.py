"""Message trace's record writers (``write_pub``, ``write_before``, ``write_after``): the compiled
twins (``client/_traceenc.pyx``) write the same bodies, KEYS, counts and sealed trace messages as
the pure ones, for usual and unusual listener calls (batches, filtered and skipped chunks, failures,
keys, messages sealed mid-call by their record count or their KEYS) and sends."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy import _accel
from rocketpy.client.listener import SKIPPED
from rocketpy.client.results import SendResult, SendStatus
from rocketpy.client.trace import TraceDispatcher
from rocketpy.message import Message, MessageExt, MessageQueue
from rocketpy.msgid import create_offset_msg_id
from tests.unit.test_trace_records import _dispatcher

try:
    compiled: Any = _accel.load_compiled()
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    compiled = None

needs_compiled = pytest.mark.skipif(compiled is None, reason="the compiled core is not built")
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OK = "OK"
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
ID = st.text("0123456789ABCDEF", min_size=1, max_size=32)
WORD = st.text("abz-é中", min_size=1, max_size=8)
KEYS = st.none() | st.lists(WORD | st.just("k" * 400), min_size=1, max_size=3)
RESULT = st.sampled_from([OK, None, "RECONSUME_LATER", ValueError("boom"), SKIPPED])
TIME = st.floats(1_700_000_000.0, 1_800_000_000.0, allow_nan=False)


def _state(d: TraceDispatcher) -> tuple[Any, ...]:
    """What a writer leaves: sealed messages, the open one, the counts."""
    sealed = [(bytes(body), keys, n) for body, keys, n in d._sealed]
    s = d.stats
    return (sealed, bytes(d._body), list(d._keys), d._keys_chars, d._records, d._count, s.appended, s.dropped)


def _message(msg_id: str, keys: list[str] | None, retries: int, switch_off: bool, unique: bool) -> MessageExt:
    m = MessageExt("TopicA", b"x", keys=keys, reconsume_times=retries)
    if unique:  # a consumed message's id is its UNIQ_KEY property
        m.properties["UNIQ_KEY"] = msg_id
    else:
        m.msg_id = msg_id
    if switch_off:
        m.properties["TRACE_ON"] = "false"
    return m


def _drawn_message(draw: st.DrawFn) -> MessageExt:
    off = draw(st.booleans()) and draw(st.booleans())  # a quarter of them: TRACE_ON=false
    return _message(draw(ID), draw(KEYS), draw(st.integers(0, 16)), off, draw(st.booleans()))


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    """A listener runner call: its chunks of messages, results and times."""
    sizes = draw(st.lists(st.integers(0, 3), min_size=1, max_size=6))
    chunks = [[_drawn_message(draw) for _ in range(size)] for size in sizes]
    times = [draw(TIME)]  # the start, then each chunk's end
    for _ in sizes:
        times.append(times[-1] + draw(st.floats(0.0, 5.0)))
    results = draw(st.lists(RESULT, min_size=len(sizes), max_size=len(sizes)))
    return {"chunks": chunks, "results": results, "times": times, "seq": draw(st.integers(0, 1 << 40))}


def _consume(fns: dict[str, Any], d: TraceDispatcher, group: str, now: int, call: dict[str, Any]) -> Any:
    c = call
    token = fns["write_before"](d, group, now, c["seq"], c["chunks"])
    fns["write_after"](d, group, c["chunks"], token, c["results"], c["times"], (OK,))
    return token


@needs_compiled
@FUZZ
@given(st.lists(calls(), min_size=1, max_size=5), st.integers(1, 40), st.integers(1, 200),
       st.integers(0, 1 << 45), TEXT)  # fmt: skip
def test_consume_writers_are_twins(
    many: list[dict[str, Any]], batch_records: int, buffer_size: int, now: int, group: str
) -> None:
    pure, fast = _dispatcher(buffer_size, batch_records), _dispatcher(buffer_size, batch_records)
    for call in many:
        token = _consume(_accel.PURE, pure, group, now, call)
        assert _consume(compiled, fast, group, now, call) == token
        assert _state(fast) == _state(pure)


@needs_compiled
def test_the_usual_calls_are_twins() -> None:
    """A message per chunk, one result for all (the path most calls take), with and without keys,
    more than 1,024 chunks and ids long enough to seal by KEYS, failures and successes."""
    for n, keys in ((32, None), (40, ["order-1", "user-9"]), (1100, None)):
        chunks = [[_message(f"{i:032X}", keys, 0, False, True)] for i in range(n)]
        times = [1.7e9 + i * 0.0042 for i in range(n + 1)]
        for result in (OK, "RECONSUME_LATER"):
            pure, fast = _dispatcher(20_000, 1600), _dispatcher(20_000, 1600)
            call = {"chunks": chunks, "results": [result] * n, "times": times, "seq": 7}
            _consume(_accel.PURE, pure, "CG", 1, call)
            _consume(compiled, fast, "CG", 1, call)
            assert _state(fast) == _state(pure)


@needs_compiled
@FUZZ
@given(
    st.integers(0, 1 << 45), TEXT, TEXT, ID, st.none() | TEXT,
    st.none() | st.lists(st.text("ab中 ", min_size=1, max_size=5), min_size=1, max_size=3),
    st.none() | st.just("") | st.integers(0, 1 << 40).map(lambda o: create_offset_msg_id("10.1.2.3", 9, o)),
    st.integers(0, 1 << 22), st.integers(0, 9999), st.integers(0, 2), st.booleans(), st.booleans(),
    st.integers(1, 3),
)  # fmt: skip
def test_pub_writer_is_twins(
    begin_ms: int, group: str, topic: str, msg_id: str, tags: str | None, keys: list[str] | None,
    omid: str | None, body_len: int, cost_ms: int, msg_type: int, ok: bool, off: bool, batch_records: int,
) -> None:  # fmt: skip
    props = {"TRACE_ON": "false"} if off else None
    msg = Message(topic, b"b" * body_len, tags=tags, keys=keys, properties=props)
    status = SendStatus.SEND_OK if ok else SendStatus.FLUSH_DISK_TIMEOUT
    result = SendResult(status, msg_id, omid, MessageQueue(topic, "b", 0), 1)  # type: ignore[arg-type]
    pure, fast = _dispatcher(3, batch_records), _dispatcher(3, batch_records)
    for _ in range(4):  # the fourth is dropped: the buffer holds 3
        args = (group, msg, result, begin_ms, cost_ms, msg_type)
        assert compiled["write_pub"](fast, *args) == _accel.PURE["write_pub"](pure, *args)
        assert _state(fast) == _state(pure)
    assert _state(pure)[7] == (0 if off else 1)


@needs_compiled
@FUZZ
@given(st.floats(1_700_000_000.0, 1_800_000_000.0), st.floats(0.0, 30.0), st.integers(0, 3), st.booleans(),
       st.booleans(), ID)  # fmt: skip
def test_sent_writer_is_twins(
    begin: float, took: float, delay: int, timed: bool, ok: bool, msg_id: str
) -> None:
    """``write_sent``: the cost from the send's start and end, the message's type (usual, delayed,
    timed) as ``msg_type_of`` says."""
    msg = Message("TopicA", b"body", delay_level=delay, delay_seconds=5 if timed and not delay else None)
    status = SendStatus.SEND_OK if ok else SendStatus.SLAVE_NOT_AVAILABLE
    omid = create_offset_msg_id("10.1.2.3", 9, 77)
    result = SendResult(status, msg_id, omid, MessageQueue("TopicA", "b", 0), 1)
    pure, fast = _dispatcher(10, 5), _dispatcher(10, 5)
    args = ("PG", msg, result, begin, begin + took)
    assert compiled["write_sent"](fast, *args) == _accel.PURE["write_sent"](pure, *args)
    assert _state(fast) == _state(pure)
