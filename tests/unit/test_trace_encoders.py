"""Message trace's record encoders (``_encode_pub``, ``_encode_before``, ``_encode_after``): the
compiled twins (``client/_traceenc.pyx``) write the same texts, ids and keyed entries as the pure
ones, for usual and unusual listener calls (batches, filtered and skipped chunks, failures, keys)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy import _accel
from rocketpy.client.listener import SKIPPED
from rocketpy.client.trace import _Encoded
from rocketpy.msgid import create_offset_msg_id

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
KEYS_TEXT = st.none() | st.lists(WORD, min_size=1, max_size=3).map(" ".join)
RESULT = st.sampled_from([OK, None, "RECONSUME_LATER", ValueError("boom"), SKIPPED])
TIME = st.floats(1_700_000_000.0, 1_800_000_000.0, allow_nan=False)


def _run(fn: Any, what: tuple[Any, ...]) -> tuple[str, Any]:
    out = _Encoded()
    try:
        fn(what, out)
    except Exception as exc:
        return "raise", type(exc)
    return "ok", (out.texts, out.ids, out.keyed)


def _both(name: str, what: tuple[Any, ...]) -> None:
    pure = _run(_accel.PURE[name], what)
    assert pure[0] == "ok", pure
    assert _run(compiled[name], what) == pure


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    """A listener runner call's entries: chunk sizes, traced ids and keys, results and times."""
    sizes = draw(st.lists(st.integers(0, 3), min_size=1, max_size=6))
    n = sum(sizes)
    ids = draw(st.lists(ID, min_size=n, max_size=n))
    keys = draw(st.none() | st.lists(KEYS_TEXT, min_size=n, max_size=n))
    times: list[float] = []
    for begin in draw(st.lists(TIME, min_size=len(sizes), max_size=len(sizes))):
        times += [begin, begin + draw(st.floats(0.0, 5.0))]
    return {
        "sizes": sizes,
        "ids": ids,
        "keys": keys,
        "retries": draw(st.lists(st.integers(0, 16), min_size=n, max_size=n)),
        "results": draw(st.lists(RESULT, min_size=len(sizes), max_size=len(sizes))),
        "times": times,
        "seq": draw(st.integers(0, 1 << 40)),
        "divisors": draw(st.none() | st.just([s + 1 for s in sizes])),
    }


@needs_compiled
@FUZZ
@given(calls(), st.integers(0, 1 << 45), TEXT)
def test_consume_encoders_are_twins(call: dict[str, Any], now: int, group: str) -> None:
    c = call
    _both("_encode_before", (now, group, c["seq"], c["sizes"], c["ids"], c["retries"], c["keys"]))
    what = (group, c["seq"], c["sizes"], c["divisors"], c["ids"], c["keys"], c["results"], c["times"], (OK,))
    _both("_encode_after", what)


@needs_compiled
@FUZZ
@given(st.lists(ID, min_size=1, max_size=40), st.none() | st.lists(KEYS_TEXT, min_size=40, max_size=40),
       st.floats(1_700_000_000.0, 1_800_000_000.0), st.floats(0.0, 3.0))  # fmt: skip
def test_the_usual_calls_are_twins(ids: list[str], keys: list[str | None] | None, t: float, d: float) -> None:
    """A message per chunk, one result for all (the path most calls take), more than 1,024 chunks too."""
    n = len(ids)
    keys = None if keys is None else keys[:n]
    times = [x for i in range(n) for x in (t + i * d, t + i * d + d)]
    for result in (OK, "RECONSUME_LATER"):
        _both("_encode_after", ("G", 5, [1] * n, None, ids, keys, [result] * n, times, (OK,)))
    _both("_encode_before", (1, "G", 5, [1] * n, ids, [0] * n, keys))
    many = [f"{i:032X}" for i in range(1100)]
    _both("_encode_before", (1, "G", 5, [1] * 1100, many, [0] * 1100, None))
    _both("_encode_after", ("G", 5, [1] * 1100, None, many, None, [OK] * 1100, [t, t + d] * 1100, (OK,)))


@needs_compiled
@FUZZ
@given(
    st.integers(0, 1 << 45), TEXT, TEXT, ID, st.none() | TEXT,
    st.none() | st.lists(st.text("ab中", min_size=1, max_size=5), min_size=1, max_size=3).map(tuple),
    st.none() | st.just("") | st.integers(0, 1 << 40).map(lambda o: create_offset_msg_id("10.1.2.3", 9, o)),
    st.integers(0, 1 << 22), st.integers(0, 9999), st.integers(0, 2), st.booleans(),
)  # fmt: skip
def test_pub_encoder_is_twins(
    begin_ms: int, group: str, topic: str, msg_id: str, tags: str | None, keys: tuple[str, ...] | None,
    omid: str | None, body_len: int, cost_ms: int, msg_type: int, ok: bool,
) -> None:  # fmt: skip
    _both("_encode_pub", (begin_ms, group, topic, msg_id, tags, keys, omid, body_len, cost_ms, msg_type, ok))
