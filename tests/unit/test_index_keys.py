"""The index's bulk entry writer (``put_key_entries``): its compiled and pure twins write the same
bytes and answer alike, and a trace message's many keys all stay findable."""

from __future__ import annotations

import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy import _accel
from rocketpy.broker.store.index import IndexService, put_key_entries
from rocketpy.message import properties_to_string

try:
    compiled: Any = _accel.load_compiled()["put_key_entries"]
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    compiled = None

needs_compiled = pytest.mark.skipif(compiled is None, reason="the compiled core is not built")
PURE = _accel.PURE["put_key_entries"]
KEY = st.text(st.sampled_from("0123456789ABCDEFabz-é中 "), max_size=70)
PROPS = st.dictionaries(
    st.sampled_from(["UNIQ_KEY", "KEYS", "TAGS", "a", "XKEYS"]),
    KEY | st.lists(KEY, max_size=9).map(" ".join),
    max_size=4,
).map(properties_to_string)
PIECE = st.sampled_from(["KEYS\x01", "UNIQ_KEY\x01", "\x01", "\x02", " ", "  ", "A1", "é", "中", "KEYS"])
SOUP = st.lists(PIECE, max_size=16).map("".join)


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except Exception as exc:
        return "raise", type(exc)


@needs_compiled
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    PROPS | SOUP,
    st.integers(0, (1 << 32) - 1),
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.integers(0, 30),
    st.integers(1, 50),
    st.integers(-1, 12),
    st.binary(min_size=4, max_size=4),
)
def test_twins_write_the_same_bytes(
    props: str, topic_hash: int, phys: int, diff: int, count: int, slots: int, room: int, fill: bytes
) -> None:
    entries_pos = 40 + slots * 4
    size = entries_pos + 41 * 20
    files = [bytearray(fill * (size // 4)) for _ in range(2)]  # slots hold earlier entry numbers
    got = [
        outcome(fn, f, props, topic_hash, phys, diff, count, slots, entries_pos, room)
        for fn, f in zip((PURE, compiled), files, strict=True)
    ]
    assert got[0] == got[1]
    assert files[0] == files[1]


@needs_compiled
@pytest.mark.parametrize("count", [-1, 48, 1 << 20])
def test_entries_outside_the_file_raise_alike(count: int) -> None:
    props = properties_to_string({"KEYS": "a b c", "UNIQ_KEY": "0A1B"})
    got = [outcome(fn, bytearray(1000), props, 7, 1, 0, count, 4, 56, 1 << 30) for fn in (PURE, compiled)]
    assert got[0] == got[1] and got[0][0] == "raise"


def test_room_and_non_latin1_leave_it_to_put_message() -> None:
    mm = bytearray(40 + 4 * 4 + 10 * 20)
    props = properties_to_string({"KEYS": "a b", "UNIQ_KEY": "U"})
    assert put_key_entries(mm, props, 1, 0, 0, 1, 4, 56, 2) == -1  # three keys, room for two
    assert put_key_entries(mm, properties_to_string({"KEYS": "中"}), 1, 0, 0, 1, 4, 56, 9) == -1
    assert not any(mm)
    assert put_key_entries(mm, props, 1, 0, 0, 1, 4, 56, 3) == 3
    assert put_key_entries(mm, properties_to_string({"TAGS": "t"}), 1, 0, 0, 4, 4, 56, 3) == 0


def test_every_key_of_a_trace_message_is_found() -> None:
    """A trace message's keys (its records' message ids and keys) are found by ``lookup``, also when
    they spill into the next index file."""
    svc = IndexService(tempfile.mkdtemp(prefix="idx_"), 64, 700, lambda: 1_700_000_000.0)
    ts = 1_700_000_000_000
    svc.put_props("T", properties_to_string({"UNIQ_KEY": "F" * 32}), 0, ts)
    batches = []
    for b in range(3):  # 3 x 301 keys: the second and third do not fit the first file's 700 entries
        ids = [f"{b:04X}{i:028X}" for i in range(300)]
        batches.append(ids)
        props = properties_to_string({"KEYS": " ".join(ids), "UNIQ_KEY": f"E{b:031X}"})
        svc.put_props("RMQ_SYS_TRACE_TOPIC", props, 100 * (b + 1), ts + b)
    assert len(svc.files) == 2
    for b, ids in enumerate(batches):
        for key in (*ids, f"E{b:031X}"):
            assert svc.lookup("RMQ_SYS_TRACE_TOPIC", key, 10, ts - 1000, ts + 1000) == [100 * (b + 1)], key
