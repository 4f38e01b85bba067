"""The compiled core (the ``_speedups`` modules) against its pure-Python twins: same bytes, same errors.

Each compiled function is fed the same input as its pure twin (``rocketpy._accel.PURE``): valid
input must give the same bytes / the same decoded fields, hostile input (random bytes, lengths past
the buffer, negative sizes, truncated records, corrupted fields) the same exception type and text.
These tests load the compiled modules themselves (``rocketpy._accel.load_compiled``), so they
compare both in either mode of ``scripts/test``; they skip when the compiled core is not built.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import hmac
import inspect
import itertools
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy import _accel, record, record_columns
from rocketpy.acl import signing
from rocketpy.broker.pop import acks, ledger, revive_log  # noqa: F401  (their twins join PURE)
from rocketpy.broker.pop import plain as pop_plain  # noqa: F401  (its twin joins PURE)
from rocketpy.broker.processors import (
    poppath,  # noqa: F401  (its twin joins PURE)
    pullpath,  # noqa: F401  (its twin joins PURE)
)
from rocketpy.broker.processors import send as broker_send
from rocketpy.broker.store.consume_queue import UNIT_SIZE
from rocketpy.broker.store.message import BrokerMessage
from rocketpy.client import deflate, send_core, trace  # noqa: F401  (their twins join PURE)
from rocketpy.message import Message, properties_to_string
from rocketpy.protocol.headers.send import V2_NAMES, SendMessageRequestHeader
from rocketpy.remoting import codec
from rocketpy.remoting.command import SERIALIZE_JSON, SERIALIZE_MSGPACK, RemotingCommand
from rocketpy.topic import SCHEDULE_TOPIC

try:
    speedups: Any = SimpleNamespace(**_accel.load_compiled())  # every compiled function by name
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    speedups = None

needs_compiled = pytest.mark.skipif(speedups is None, reason="the compiled core is not built")
PURE = _accel.PURE
TWINNED = (
    "append_records", "pack_record", "decode_records", "_decode_at", "encode_batch", "decode_batch",
    "encode_frame", "split_frames", "assemble_body", "read_typical_v2", "decode_columns", "signed_ext",
    "crc32", "hmac_signature", "tags_hash", "put_unique_key_entry", "read_record", "dispatch_run",
    "batch_messages", "redispatch", "string_to_properties", "properties_to_string", "check_ext",
    "check_doc",
    "start_usual", "batch_body", "settle_stored", "live_members", "earliest_deadline",
    "take_run", "drop_done", "acks_entry", "read_acks", "offsets_of",  # POP's (test_pop_speedups.py)
    "commit_queues", "encode_acks",
    "plain_messages", "group_plain", "stored_answers", "put_now", "get_now", "serve_turn", "receive",
    "put_key_entries",
    "group_commit_sync",  # the SYNC_FLUSH flush thread's (test_store_group_commit.py)
    "read_plain",  # POP's plain read (test_pop_plain.py)
    "write_pub", "write_before", "write_after", "write_sent",  # trace records (test_trace_encoders.py)
    "start_deflate",  # large bodies compressed off the loop (test_deflate.py)
    "pull_now",  # the pull fast path (test_pull_fast.py)
    "pop_now",  # the plain-pop fast path (test_pop_fast.py)
)  # fmt: skip
I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
HOST8 = st.binary(min_size=8, max_size=8)
PROPS = st.dictionaries(
    st.text(
        st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=8
    ),
    st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=12),
    max_size=4,
)
TOPIC = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20).filter(
    lambda t: len(t.encode()) <= record.MAX_TOPIC_BYTES
)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What ``fn(*args)`` did: ("ok", value) or ("raise", (exception type, message))."""
    try:
        return "ok", fn(*args)
    except Exception as exc:
        return "raise", (type(exc), str(exc))


EXT_FIELDS = (
    "topic",
    "body",
    "flag",
    "tags",
    "keys",
    "delay_level",
    "properties",
    "queue_id",
    "queue_offset",
    "commitlog_offset",
    "born_timestamp",
    "store_timestamp",
    "_born_host8",
    "_store_host8",
    "reconsume_times",
    "store_size",
    "body_crc",
    "sys_flag",
    "prepared_transaction_offset",
    "_msg_id",
    "_offset_msg_id",
    "_born_host",
    "_store_host",
)


def ext_fields(msg: Any) -> tuple[Any, ...]:
    return tuple(getattr(msg, name) for name in EXT_FIELDS)


def decoded(result: tuple[str, Any]) -> tuple[str, Any]:
    kind, value = result
    if kind == "ok":
        return kind, [ext_fields(m) for m in value] if isinstance(value, list) else ext_fields(value)
    return kind, value


# -- which implementation is active ---------------------------------------------------------------
def test_active_implementation_matches_the_environment() -> None:
    if _accel.extensions_disabled():
        assert _accel.ACTIVE == "pure" and _accel.LABEL == "pure Python"
        assert record.pack_record is PURE["pack_record"]
        assert codec.split_frames is PURE["split_frames"]
    elif speedups is not None:
        assert _accel.ACTIVE == "compiled" and _accel.LABEL == "compiled core", _accel.LOAD_ERROR
        assert record.pack_record is speedups.pack_record
        assert codec.encode_frame is speedups.encode_frame
    assert set(TWINNED) <= set(PURE)


@needs_compiled
def test_every_twin_has_a_compiled_function() -> None:
    for name in PURE:
        assert callable(getattr(speedups, name)), name


def _parameters(fn: Any) -> list[tuple[str, str, Any]]:
    return [(p.name, p.kind.name, p.default) for p in inspect.signature(fn).parameters.values()]


@needs_compiled
def test_compiled_signatures_are_the_pure_ones() -> None:
    """Names, kinds and defaults at run time (mypy checks the stubs' types against the pure twins)."""
    for name, pure in PURE.items():
        assert _parameters(getattr(speedups, name)) == _parameters(pure), name


@needs_compiled
def test_each_compiled_twin_lives_beside_its_pure_twin() -> None:
    """In a compiled module (``_speedups`` or another ``_`` name) of the package that owns the pure
    function (crc32's is rocketpy.record's)."""
    for name, pure in PURE.items():
        owner = "rocketpy.record" if pure is zlib.crc32 else pure.__module__
        package, _, module = getattr(speedups, name).__module__.rpartition(".")
        assert package == owner.rpartition(".")[0] and module.startswith("_"), name


SOURCE = Path(__file__).resolve().parents[2]
#: The lower packages a compiled module may read besides its own package and rocketpy's own modules.
READS_BELOW = {
    "rocketpy.acl": ("rocketpy.remoting",),
    "rocketpy.broker.processors": (
        "rocketpy.broker.store",
        "rocketpy.broker.transaction",
        "rocketpy.broker.pop",
    ),
    "rocketpy.broker.pop": ("rocketpy.broker.store",),
}


def _pyx_modules() -> dict[str, Path]:
    """Every ``.pyx`` of the source tree by module name (rocketpy/broker etc. are links)."""
    out = {}
    for directory, _dirs, files in os.walk(SOURCE / "rocketpy", followlinks=True):
        package = Path(directory).relative_to(SOURCE).parts
        for name in files:
            if name.endswith(".pyx"):
                out[".".join((*package, name[: -len(".pyx")]))] = Path(directory, name)
    return out


def test_every_compiled_module_is_listed_and_built() -> None:
    """``_accel.MODULES`` (loaded) and setup.py's list (built) name every ``_speedups.pyx``."""
    tree = ast.parse((SOURCE / "setup.py").read_text())
    built = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "MODULES"
    )
    assert list(_accel.MODULES) == built
    assert set(_pyx_modules()) == set(built)


@pytest.mark.parametrize("module", _accel.MODULES)
def test_compiled_module_reads_only_its_package_and_below(module: str) -> None:
    """No ``_bind_*`` (nor cimport) reaches a package above the module's own."""
    package = module.rpartition(".")[0]
    source = _pyx_modules()[module].read_text()
    for base, names in re.findall(r"^\s*from (rocketpy[\w.]*) c?import \(?([\w, ]+)", source, re.M):
        for read in [f"{base}.{n.strip()}" for n in names.split(",")] if base == "rocketpy" else [base]:
            own = package != "rocketpy" and (read == package or read.startswith(package + "."))
            bottom = read.count(".") == 1 and not (SOURCE / read.replace(".", "/")).is_dir()
            assert own or bottom or read.startswith(READS_BELOW.get(package, ("-",))), (module, read)


@pytest.mark.parametrize(("env", "label"), [("1", "pure Python"), ("0", "compiled core")])
def test_version_says_which_core_is_active(env: str, label: str) -> None:
    if label == "compiled core" and speedups is None:
        pytest.skip("the compiled core is not built")
    out = subprocess.run(
        [sys.executable, "-m", "rocketpy.cli", "--version"],
        env={**os.environ, _accel.NO_EXTENSIONS_ENV: env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert f"({label})" in out


# -- the record encoder ---------------------------------------------------------------------------
RECORD_ARGS = st.tuples(
    TOPIC.map(record.topic_part), PROPS.map(lambda p: properties_to_string(p).encode()),
    st.binary(max_size=300), I32, I32, I64, I64, I32, I64, HOST8, I64, HOST8, I32, I64,
)  # fmt: skip


@needs_compiled
@FUZZ
@given(RECORD_ARGS, st.integers(0, 16))
def test_pack_record_same_bytes(args: tuple[Any, ...], pos: int) -> None:
    size = record.HEAD_SIZE + len(args[2]) + len(args[0]) + 2 + len(args[1])
    bufs = [bytearray(b"\xee" * (pos + size + 3)) for _ in range(2)]
    sizes = [
        fn(buf, pos, *args) for fn, buf in ((PURE["pack_record"], bufs[0]), (speedups.pack_record, bufs[1]))
    ]
    assert sizes[0] == sizes[1] == size
    assert bufs[0] == bufs[1]


@needs_compiled
@FUZZ
@given(RECORD_ARGS, st.integers(0, 12), st.sampled_from([1 << 31, -(1 << 31) - 1, 1 << 63, -(1 << 64), 1.5]))
def test_pack_record_out_of_range_fields_raise_struct_error(
    args: tuple[Any, ...], field: int, bad: Any
) -> None:
    args = list(args)
    int_fields = [3, 4, 5, 6, 7, 8, 10, 12, 13]  # queue_id ... prepared_offset
    i = int_fields[field % len(int_fields)]
    if isinstance(bad, int) and abs(bad) < (1 << 63) and i in (5, 6, 8, 10, 13):
        return  # in range for a 64-bit field
    args[i] = bad
    for fn in (PURE["pack_record"], speedups.pack_record):
        with pytest.raises(struct.error):
            fn(bytearray(4096), 0, *args)


@needs_compiled
def test_pack_record_refuses_a_buffer_too_small_without_writing() -> None:
    buf = bytearray(50)
    with pytest.raises(ValueError, match="does not fit"):
        speedups.pack_record(buf, 0, b"\x01T", b"", b"x", 0, 0, 0, 0, 0, 0, bytes(8), 0, bytes(8), 0, 0)
    with pytest.raises(ValueError, match="does not fit"):
        speedups.pack_record(
            bytearray(500), -1, b"\x01T", b"", b"x", 0, 0, 0, 0, 0, 0, bytes(8), 0, bytes(8), 0, 0
        )
    assert buf == bytearray(50)
    with pytest.raises(TypeError):
        speedups.pack_record(
            b"read-only", 0, b"\x01T", b"", b"", 0, 0, 0, 0, 0, 0, bytes(8), 0, bytes(8), 0, 0
        )


# -- the commitlog's append callback -------------------------------------------------------------
class _Queue:
    """What ``append_records`` reads of a consume queue: the next offset to number from."""

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset


@needs_compiled
@FUZZ
@given(
    st.lists(st.tuples(st.binary(max_size=200), PROPS, I32, I32), min_size=1, max_size=5),
    st.integers(0, 1 << 40),
    st.integers(0, 64),
    st.integers(-8, 64),
)
def test_append_records_same_bytes_and_result(
    specs: list[tuple[bytes, dict[str, str], int, int]], next_offset: int, pos: int, slack: int
) -> None:
    msgs = [
        BrokerMessage("T", 2, body, properties_to_string(p), flag=f, sys_flag=sf) for body, p, f, sf in specs
    ]
    topic_b = record.topic_part("T")
    props = [m.properties.encode() for m in msgs]
    total = sum(
        record.record_size(len(m.body), len(topic_b) - 1, len(pb)) for m, pb in zip(msgs, props, strict=True)
    )
    room = total + record.END_FILE_MIN_BLANK_BYTES + slack  # slack < 0: does not fit, the tail is sealed
    results = []
    for fn in (PURE["append_records"], speedups.append_records):
        mm = bytearray(b"\xee" * (pos + room))
        batch = (msgs, topic_b, props, total, _Queue(next_offset), 1_700_000_000_000, bytes(8))
        wrote, r = fn(mm, 1 << 30, pos, room, batch)
        results.append(
            (mm, wrote, r.status, r.wrote_offset, r.wrote_bytes, r.queue_offset, r.msg_num, r.sizes)
        )
    assert results[0] == results[1]


# -- the record decoder ---------------------------------------------------------------------------
@st.composite
def records(draw: Any) -> bytes:
    body = draw(st.binary(max_size=200))
    sys_flag = draw(st.sampled_from([0, 0, record.COMPRESSED_FLAG, 0x4, 0x8]))
    if sys_flag & record.COMPRESSED_FLAG and draw(st.booleans()):
        body = zlib.compress(body)
    props = draw(PROPS)
    return record.encode_record(
        topic=draw(TOPIC), body=body, queue_id=draw(I32), flag=draw(I32), queue_offset=draw(I64),
        physical_offset=draw(I64), sys_flag=sys_flag, born_timestamp=draw(I64),
        born_host=(draw(st.ip_addresses(v=4)).exploded, draw(st.integers(0, 65535))),
        store_timestamp=draw(I64), store_host=("10.0.0.1", draw(st.integers(0, 65535))),
        reconsume_times=draw(I32), prepared_transaction_offset=draw(I64),
        properties=properties_to_string(props),
    )  # fmt: skip


def mutate(data: bytes, draw: Any) -> bytes:
    """A hostile variant: truncated, a byte flipped, a length field overwritten, or garbage appended."""
    b = bytearray(data)
    how = draw(st.sampled_from(["truncate", "flip", "length", "append", "none"]))
    if how == "truncate" and b:
        del b[draw(st.integers(0, len(b) - 1)) :]
    elif how == "flip" and b:
        i = draw(st.integers(0, len(b) - 1))
        b[i] ^= draw(st.integers(1, 255))
    elif how == "length" and len(b) >= 4:
        # TOTALSIZE, BODYLEN (84), or a batch's lengths: past the buffer, zero, "negative" (high bit).
        at = draw(st.sampled_from([0, 16, 84, 12])) if len(b) >= 88 else 0
        value = draw(st.sampled_from([0, 1, 3, 87, 88, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, len(b) + 1]))
        struct.pack_into(">I", b, min(at, len(b) - 4), value)
    elif how == "append":
        b += draw(st.binary(min_size=1, max_size=100))
    return bytes(b)


@needs_compiled
@FUZZ
@given(st.lists(records(), min_size=1, max_size=4))
def test_decode_records_same_messages(recs: list[bytes]) -> None:
    data = b"".join(recs)
    pure = decoded(outcome(PURE["decode_records"], data))
    assert pure == decoded(outcome(speedups.decode_records, data))
    assert pure == decoded(outcome(speedups.decode_records, memoryview(bytearray(data))))


PROPERTY_WORDS = st.sampled_from(
    ["TAGS", "KEYS", "DELAY", "UNIQ_KEY", "a", "", " ", "k1 k2", "3", "²", "é", "日本"]
)
RAW_PROPERTIES = st.lists(PROPERTY_WORDS | st.sampled_from(["\x01", "\x02"]), max_size=16).map("".join)


@needs_compiled
@FUZZ
@given(st.lists(RAW_PROPERTIES, min_size=1, max_size=4))
def test_decode_records_any_properties_string_same_fields(props: list[str]) -> None:
    data = b"".join(record.encode_record(topic="T", body=b"b", properties=p) for p in props)
    pure = decoded(outcome(PURE["decode_records"], data))
    assert pure == decoded(outcome(speedups.decode_records, data))


@needs_compiled
@FUZZ
@given(st.lists(records(), min_size=1, max_size=3), st.data())
def test_decode_records_hostile_input_same_error(recs: list[bytes], data: st.DataObject) -> None:
    hostile = mutate(b"".join(recs), data.draw)
    assert decoded(outcome(PURE["decode_records"], hostile)) == decoded(
        outcome(speedups.decode_records, hostile)
    )


@needs_compiled
@FUZZ
@given(st.binary(max_size=400))
def test_decode_records_random_bytes_same_error(data: bytes) -> None:
    assert decoded(outcome(PURE["decode_records"], data)) == decoded(outcome(speedups.decode_records, data))


# -- the put path's dispatch of a put's records -------------------------------------------------------
DISPATCH_PROPS = st.sampled_from([
    "", "TAGS\x01TagA\x02UNIQ_KEY\x010A1B2C", "UNIQ_KEY\x01FF00",
    "TAGS\x01b\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AB", "TAGS\x01\u00e9\x02UNIQ_KEY\x01\u00e9", "TAGS\x01\u4e2d",
    "a\x01b", "UNIQ_KEY\x01" + "A" * 70,
])  # fmt: skip
DISPATCH_RUN = st.tuples(
    st.integers(0, 1),  # queue id
    st.lists(
        st.tuples(st.integers(100, 300), DISPATCH_PROPS, st.sampled_from([None] * 7 + [-5, 1 << 40])),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 3_000),  # store timestamp step (ms)
)


def _dispatch_state(fn: Any, runs: list[Any], topic: str, cq_units: int, max_index: int) -> Any:
    """Dispatch ``runs`` with ``fn`` into a fresh queue table and index (in a temporary directory);
    everything they hold after."""
    root = tempfile.mkdtemp(prefix="dispatch-run-")
    try:
        return _dispatched(fn, runs, topic, cq_units, max_index, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _dispatched(fn: Any, runs: list[Any], topic: str, cq_units: int, max_index: int, root: str) -> Any:
    from rocketpy.broker.store.dispatch import Dispatcher
    from rocketpy.broker.store.index import IndexService

    index = IndexService(os.path.join(root, "index"), 8, max_index, lambda: 1_700_000_000.0)
    d = Dispatcher(os.path.join(root, "cq"), cq_units * 20, index, [1000, 5000])
    seen: list[tuple[Any, ...]] = []
    d.listen(lambda *a: seen.append(a))
    phys, ts = 0, 1_700_000_000_000
    ends = []
    for qid, items, step in runs:
        ts += step
        cq = d.cq(topic, qid)
        msgs = [BrokerMessage(topic, qid, b"", properties=pr, tags_code=code) for _, pr, code in items]
        phys = fn(d, cq, cq.next_offset, phys, [size for size, _, _ in items], msgs, ts)
        ends.append((phys, sorted((q.topic, q.queue_id) for q in d.dirty_cqs)))
        d.dirty_cqs = set()  # as a consume-queue flush takes them
    queues = [
        (cq.topic, cq.queue_id, cq.next_offset, cq.min_offset, cq.max_phys_end,
         [bytes(mf.mm) for mf in cq.files], [mf.wrote for mf in cq.files], bytes(cq._pending))
        for cq in d.cqs.values()
    ]  # fmt: skip
    files = [(bytes(f.mm), f.index_count, f.end_ts, f.end_phys, f.begin_ts) for f in index.files]
    state = (ends, queues, files, index.last_phys, index._unsynced, seen, d.dispatched_to)
    for cq in d.cqs.values():
        for mf in cq.files:
            mf.close()
    index.close()
    return state


@needs_compiled
@FUZZ
@given(
    st.lists(DISPATCH_RUN, min_size=1, max_size=8),
    st.sampled_from(["T", SCHEDULE_TOPIC]),
    st.sampled_from([3, 7, 64, 500]),
    st.sampled_from([4, 9, 200]),
)
def test_dispatch_run_same_state(runs: list[Any], topic: str, cq_units: int, max_index: int) -> None:
    pure, compiled = (
        _dispatch_state(fn, runs, topic, cq_units, max_index)
        for fn in (PURE["dispatch_run"], speedups.dispatch_run)
    )
    assert pure == compiled


def _redispatching(fn: Any) -> Any:
    """A ``dispatch_run`` made of ``fn`` (a ``redispatch`` twin) per record, as recovery and replicas
    hand records over (no tag code given)."""

    def run(d: Any, cq: Any, queue_offset: int, phys: int, sizes: list[int], msgs: list[Any], ts: int) -> int:
        for i, m in enumerate(msgs):
            fn(d, (sizes[i], cq.queue_id, queue_offset + i, ts, cq.topic, m.properties), phys)
            phys += sizes[i]
        return phys

    return run


@needs_compiled
@FUZZ
@given(
    st.lists(DISPATCH_RUN, min_size=1, max_size=8),
    st.sampled_from(["T", SCHEDULE_TOPIC]),
    st.sampled_from([3, 64]),
    st.sampled_from([4, 200]),
)
def test_redispatch_same_state(runs: list[Any], topic: str, cq_units: int, max_index: int) -> None:
    pure, compiled = (
        _dispatch_state(_redispatching(fn), runs, topic, cq_units, max_index)
        for fn in (PURE["redispatch"], speedups.redispatch)
    )
    assert pure == compiled


@needs_compiled
def test_dispatch_run_same_state_over_many_common_runs() -> None:
    # Runs the compiled fast path takes: queues with room, unique keys, no tag codes given; more
    # entries than one index header sync (64), and a file end of the index (max 150 entries).
    props = [f"TAGS\x01T{i % 3}\x02UNIQ_KEY\x01{i:032X}" for i in range(300)]
    runs = [
        (i % 2, [(120 + i % 7, props[(i * 5 + j) % 300], None) for j in range(1 + i % 5)], 700)
        for i in range(90)
    ]
    twins = (PURE["dispatch_run"], speedups.dispatch_run)
    fns = (*twins, _redispatching(PURE["redispatch"]), _redispatching(speedups.redispatch))
    states = [_dispatch_state(fn, runs, "T", 1000, 150) for fn in fns]
    assert states[0] == states[1] == states[2] == states[3]
    assert len(states[0][2]) == 2  # the index rolled to a second file


@needs_compiled
def test_dispatch_run_listener_may_stop_listening_inside_its_call() -> None:
    # The listeners are a tuple replaced on change: one that stops listening during a run's
    # dispatch does not make either twin skip the next listener, and is not called again.
    from rocketpy.broker.store.dispatch import Dispatcher

    def run(fn: Any, root: str) -> list[tuple[str, int]]:
        d = Dispatcher(os.path.join(root, "cq"), 64 * 20, None, [1000])
        seen: list[tuple[str, int]] = []

        def once(_t: str, _q: int, off: int, _c: int, _ts: int) -> None:
            seen.append(("once", off))
            d.listen(once, False)

        d.listen(once)
        d.listen(lambda _t, _q, off, _c, _ts: seen.append(("every", off)))
        cq = d.cq("T", 0)
        msgs = [BrokerMessage("T", 0, b"", properties="UNIQ_KEY\x01AB") for _ in range(3)]
        fn(d, cq, 0, 0, [120, 120, 120], msgs, 1_700_000_000_000)
        for mf in cq.files:
            mf.close()
        return seen

    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        pure, compiled = run(PURE["dispatch_run"], a), run(speedups.dispatch_run, b)
    assert pure == compiled == [("once", 0), ("every", 0), ("every", 1), ("every", 2)]


# -- the broker's messages of a batch ----------------------------------------------------------------
BATCH_PROPS_PIECE = st.sampled_from(
    ["UNIQ_KEY\x01", "AB12", "\x02", "\x01", "DELAY", "TIMER_", "TRAN_MSG\x01true", "XUNIQ_KEY\x01"]
) | st.sampled_from(["é", "中", ""])
BATCH_ITEMS = st.lists(
    st.tuples(st.binary(max_size=40), I32, st.lists(BATCH_PROPS_PIECE, max_size=8).map("".join)), max_size=6
)
BROKER_MESSAGE_FIELDS = BrokerMessage.__slots__


@needs_compiled
@FUZZ
@given(BATCH_ITEMS, st.integers(0, 50), st.integers(0, 30))  # (broker_send registers the pure twin)
def test_batch_messages_same_messages(items: list[tuple[bytes, int, str]], max_body: int, short: int) -> None:
    args = (items, "T", 3, 0x4, 1_700_000_000_000, ("10.0.0.7", 9876), 2, max_body, short)
    got = []
    for fn in (PURE["batch_messages"], speedups.batch_messages):
        msgs, uniqs, screened = fn(*args)
        fields = [tuple(getattr(m, f) for f in BROKER_MESSAGE_FIELDS) for m in msgs]
        got.append((fields, uniqs, screened, [type(m) for m in msgs]))
    assert got[0] == got[1]
    assert broker_send.batch_messages in (PURE["batch_messages"], speedups.batch_messages)


# -- a stored record as recovery and replicas check it ---------------------------------------------
@needs_compiled
@FUZZ
@given(records(), st.data())
def test_read_record_same_result(rec: bytes, data: st.DataObject) -> None:
    draw = data.draw
    body = mutate(rec, draw) if draw(st.booleans()) else rec
    lead, tail = draw(st.integers(0, 16)), draw(st.integers(0, 40))
    buf = bytes(lead) + body + bytes(tail)
    room = len(buf) - lead - draw(st.integers(0, tail))
    phys = struct.unpack_from(">q", rec, 28)[0] if draw(st.booleans()) else draw(I64)
    args = (buf, lead, room, phys, draw(st.booleans()), draw(st.booleans()))
    assert outcome(PURE["read_record"], *args) == outcome(speedups.read_record, *args)


@needs_compiled
@FUZZ
@given(st.binary(max_size=200), st.integers(-2, 210), st.integers(-2, 210))
def test_read_record_random_bytes_and_bounds_same_result(data: bytes, pos: int, room: int) -> None:
    args = (data, pos, room, 0, True, True)
    assert outcome(PURE["read_record"], *args) == outcome(speedups.read_record, *args)


@needs_compiled
def test_read_record_blank_tail_and_file_end() -> None:
    blank = record.SIZE_MAGIC.pack(64, record.BLANK_MAGIC) + bytes(64)
    for fn in (PURE["read_record"], speedups.read_record):
        assert fn(blank, 0, 64, 0, True, True) == 0  # a blank tail to the file's end
        assert fn(blank, 0, 72, 0, True, True) == -1  # a blank that does not reach the file's end
        assert fn(blank, 64, 0, 0, True, True) == 0  # the file's end itself
        assert fn(blank, 60, 4, 0, True, True) == -1  # less than a size and a magic
        assert outcome(fn, blank, 100, 40, 0, True, True)[0] == "raise"  # past the buffer


# -- the columnar decoder (Spark reads) -----------------------------------------------------------
@needs_compiled
@FUZZ
@given(st.lists(records(), min_size=1, max_size=4))
def test_decode_columns_same_buffers(recs: list[bytes]) -> None:
    data = b"".join(recs)
    pure = outcome(PURE["decode_columns"], data)
    assert pure == outcome(speedups.decode_columns, data)
    assert pure == outcome(speedups.decode_columns, memoryview(bytearray(data)))


@needs_compiled
@FUZZ
@given(st.lists(RAW_PROPERTIES, min_size=1, max_size=4))
def test_decode_columns_any_properties_string_same_buffers(props: list[str]) -> None:
    data = b"".join(record.encode_record(topic="T", body=b"b", properties=p) for p in props)
    assert outcome(PURE["decode_columns"], data) == outcome(speedups.decode_columns, data)


@needs_compiled
@FUZZ
@given(st.lists(records(), min_size=1, max_size=3), st.data())
def test_decode_columns_hostile_input_same_error(recs: list[bytes], data: st.DataObject) -> None:
    hostile = mutate(b"".join(recs), data.draw)
    assert outcome(PURE["decode_columns"], hostile) == outcome(speedups.decode_columns, hostile)


@needs_compiled
@FUZZ
@given(st.binary(max_size=400))
def test_decode_columns_random_bytes_same_error(data: bytes) -> None:
    assert outcome(PURE["decode_columns"], data) == outcome(speedups.decode_columns, data)


@needs_compiled
@FUZZ
@given(st.lists(records(), min_size=0, max_size=5), st.lists(st.integers(0, 5), max_size=4), st.data())
def test_decode_columns_of_parts_same_buffers_as_joined(
    recs: list[bytes], cuts: list[int], data: st.DataObject
) -> None:
    """A list of parts is read as the parts joined: cut between records (a chunk of pull answers,
    decoded in place), anywhere (a record across two parts), or spoiled (errors as the whole's)."""
    joined = b"".join(recs)
    bounds = sorted({0, len(recs), *(min(c, len(recs)) for c in cuts)})
    parts: list[Any] = [b"".join(recs[a:b]) for a, b in itertools.pairwise(bounds)]
    expected = outcome(PURE["decode_columns"], joined)
    assert outcome(PURE["decode_columns"], parts) == expected
    assert outcome(speedups.decode_columns, parts) == expected
    assert outcome(speedups.decode_columns, [memoryview(bytearray(p)) for p in parts]) == expected
    at = data.draw(st.integers(0, len(joined)))  # any cut, inside a record too
    assert outcome(speedups.decode_columns, [joined[:at], joined[at:]]) == expected
    spoiled = [mutate(p, data.draw) if p else p for p in parts]
    assert outcome(speedups.decode_columns, spoiled) == outcome(PURE["decode_columns"], spoiled)
    odd = [*parts, "not a buffer"]
    assert outcome(speedups.decode_columns, odd) == outcome(PURE["decode_columns"], odd)


@needs_compiled
def test_decode_columns_body_column_is_exact_and_its_own() -> None:
    """The body column written in place (sized from the records) is cut to its length and held by
    nobody else; a compressed record (its body grows past its record) takes the growing buffer."""
    plain = [record.encode_record(topic="T", body=b"b" * n) for n in (0, 3, 1000)]
    packed = record.encode_record(topic="T", body=zlib.compress(b"z" * 5000), sys_flag=record.COMPRESSED_FLAG)
    empty = [record.encode_record(topic="T", body=b"") for _ in range(3)]
    for recs in (plain, [*plain, packed], empty, []):
        for arg in (b"".join(recs), recs, [b"".join(recs)]):
            cols = speedups.decode_columns(arg)
            assert cols == PURE["decode_columns"](arg)
            body = cols.body_data
            del cols
            refs = sys.getrefcount(body)  # here and the call's argument: nothing of the decode holds it
            assert type(body) is bytes and (refs == 2 or body == b"")
    assert speedups.decode_columns([*plain, packed]).body_data == b"b" * 1003 + b"z" * 5000


def test_decode_columns_reads_what_decode_records_reads() -> None:
    props = "TAGS\x01t\x02KEYS\x01 k1  k2\x02UNIQ_KEY\x01U1\x02a\x011\x02a\x012\x02DELAY\x013"
    data = record.encode_record(topic="T", body=b"x" * 3, properties=props) + record.encode_record(
        topic="T2", body=b"", properties="", store_host=("10.0.0.2", 7), physical_offset=99
    )
    cols = record_columns.decode_columns(data)
    assert cols.rows == 2
    assert cols.topic_data == b"TT2" and cols.body_data == b"xxx"
    assert cols.tags_validity == b"\x01" and cols.tags_data == b"t"
    assert cols.key_data == b"k1k2" and cols.name_data == b"UNIQ_KEYa" and cols.value_data == b"U12"
    offset_id = record.decode_records(data)[1].offset_msg_id
    assert cols.msg_id_data == b"U1" + offset_id.encode()


@needs_compiled
@FUZZ
@given(records(), st.integers(-300, 300), st.integers(-300, 600))
def test_decode_at_any_offsets_never_crash(rec: bytes, offset: int, end: int) -> None:
    mv = memoryview(rec)
    result = outcome(speedups._decode_at, mv, offset, end)
    if 0 <= offset <= end <= len(rec):
        assert decoded(result) == decoded(outcome(PURE["_decode_at"], mv, offset, end))
    else:
        assert result[0] == "raise" and result[1][0] is record.RecordError
    # decode_record (not twinned) checks the offset itself: the same error under both.
    assert result[0] == "ok" or issubclass(result[1][0], Exception)
    with mock.patch.object(record, "decode_at", PURE["_decode_at"]):
        pure = decoded(outcome(record.decode_record, rec, offset))
    with mock.patch.object(record, "decode_at", speedups._decode_at):
        assert decoded(outcome(record.decode_record, rec, offset)) == pure


# -- the batch encoding ---------------------------------------------------------------------------
MESSAGES = st.lists(
    st.builds(
        lambda body, flag, tags, keys, props, uniq: Message(
            "T", body, tags=tags, keys=keys, properties={**props, "UNIQ_KEY": uniq}, flag=flag
        ),
        st.binary(max_size=200), I32, st.none() | st.text("abcXYZ", min_size=1, max_size=5),
        st.none() | st.lists(st.text("kK0", min_size=1, max_size=4), max_size=3), PROPS,
        st.text("0123456789ABCDEF", min_size=32, max_size=32),
    ),
    max_size=6,
)  # fmt: skip


@needs_compiled
@FUZZ
@given(MESSAGES)
def test_encode_batch_same_bytes_and_round_trip(msgs: list[Message]) -> None:
    body = PURE["encode_batch"](msgs)
    assert speedups.encode_batch(msgs) == body
    assert outcome(PURE["decode_batch"], body) == outcome(speedups.decode_batch, body)
    assert [(b, f) for b, f, _p in speedups.decode_batch(body)] == [(m.body, m.flag) for m in msgs]


@needs_compiled
def test_encode_batch_sets_unique_keys_and_refuses_oversize_properties() -> None:
    msgs = [Message("T", b"a"), Message("T", b"b")]
    speedups.encode_batch(msgs)
    assert all(m.unique_key for m in msgs)
    big = [Message("T", b"a", properties={"p": "x" * 40000})]
    assert outcome(PURE["encode_batch"], big) == outcome(speedups.encode_batch, big)
    assert outcome(speedups.encode_batch, big)[0] == "raise"


@needs_compiled
def test_encode_batch_body_whose_len_is_not_its_bytes_is_refused() -> None:
    body = memoryview(bytearray(64)).cast("I")  # len() 16, 64 bytes
    with pytest.raises(ValueError, match="does not match"):
        speedups.encode_batch([Message("T", body)])  # type: ignore[arg-type]


@needs_compiled
@FUZZ
@given(MESSAGES, st.data())
def test_decode_batch_hostile_input_same_error(msgs: list[Message], data: st.DataObject) -> None:
    hostile = mutate(PURE["encode_batch"](msgs), data.draw)
    assert outcome(PURE["decode_batch"], hostile) == outcome(speedups.decode_batch, hostile)


@needs_compiled
@FUZZ
@given(st.binary(max_size=300))
def test_decode_batch_random_bytes_same_error(data: bytes) -> None:
    assert outcome(PURE["decode_batch"], data) == outcome(speedups.decode_batch, data)


# -- frames ---------------------------------------------------------------------------------------
JSONISH = st.none() | st.dictionaries(
    st.text(max_size=6), st.text(max_size=10) | st.integers(-5, 5), max_size=4
)
COMMANDS = st.builds(
    RemotingCommand,
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.integers(0, (1 << 31) - 1),
    st.integers(0, 3),
    st.none() | st.text(max_size=20),
    JSONISH,
    st.binary(max_size=300) | st.integers(70_000, 70_100).map(lambda n: b"b" * n),  # large: its own part
    st.sampled_from([SERIALIZE_MSGPACK, SERIALIZE_MSGPACK, SERIALIZE_JSON]),
)


def cmd_fields(cmd: RemotingCommand) -> tuple[Any, ...]:
    return (cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext, bytes(cmd.body), cmd.serialize_type)


@needs_compiled
@FUZZ
@given(COMMANDS)
def test_encode_frame_same_parts(cmd: RemotingCommand) -> None:
    pure = PURE["encode_frame"](cmd)
    compiled = speedups.encode_frame(cmd)
    assert [bytes(p) for p in compiled] == [bytes(p) for p in pure]
    assert [type(p) for p in compiled] == [type(p) for p in pure]


@needs_compiled
def test_encode_frame_errors_match() -> None:
    for cmd in (
        RemotingCommand(1, 1, 0, None, None, b"", 0x42),
        RemotingCommand(1, 1, 0, "x" * (1 << 24), None),
    ):
        assert outcome(PURE["encode_frame"], cmd) == outcome(speedups.encode_frame, cmd)


def split_all(
    split: Any,
    chunks: list[bytes],
    max_frame_bytes: int,
    max_header_bytes: int = codec.DEFAULT_MAX_HEADER_BYTES,
) -> tuple[str, Any]:
    """Feed ``chunks`` to a fresh decoder whose inner loop is ``split``; every command or the error."""
    decoder = codec.FrameDecoder(max_frame_bytes, max_header_bytes)
    out: list[tuple[Any, ...]] = []
    with mock.patch.object(codec, "split_frames", split):
        try:
            for chunk in chunks:
                out.extend(cmd_fields(c) for c in decoder.feed(chunk))
        except Exception as exc:
            return "raise", (type(exc), str(exc), out)
    return "ok", (out, decoder.buffered_bytes)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)] or [data]


@needs_compiled
@FUZZ
@given(st.lists(COMMANDS, max_size=4), st.lists(st.integers(0, 1 << 20), max_size=4))
def test_split_frames_same_commands(cmds: list[RemotingCommand], cuts: list[int]) -> None:
    data = b"".join(codec.encode_frame_bytes(c) for c in cmds)
    chunks = chunked(data, cuts)
    pure = split_all(PURE["split_frames"], chunks, codec.MAX_FRAME_BYTES)
    assert pure[0] == "ok" and len(pure[1][0]) == len(cmds) and pure[1][1] == 0
    msgpack_cmds = [
        (p, cmd_fields(c)) for p, c in zip(pure[1][0], cmds, strict=True) if c.serialize_type == 0x10
    ]
    assert all(p == c for p, c in msgpack_cmds)  # (a JSON header turns a nil ext into {})
    assert split_all(speedups.split_frames, chunks, codec.MAX_FRAME_BYTES) == pure


HEADER_INT = st.integers(-(1 << 63), (1 << 64) - 1) | st.sampled_from([0, -1, -32, -33, 127, 128, 255, 256])
HEADER_TEXT = st.text(max_size=40) | st.sampled_from(["topic", "consumerGroup", "K\x01A", "é", "x" * 33])
HEADER_VALUE = (
    HEADER_INT | HEADER_TEXT | st.booleans() | st.none()
    | st.floats(allow_nan=False) | st.binary(max_size=3) | st.lists(st.integers(), max_size=2)
)  # fmt: skip
HEADER_ODD = st.booleans() | st.text(max_size=3) | st.floats(allow_nan=False) | st.none()


def _typed(value: Any) -> Any:
    """``value`` with the type of each part spelled out (True == 1 and 1.0 == 1 in Python)."""
    if isinstance(value, dict):
        return sorted((_typed(k), _typed(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return [_typed(v) for v in value]
    return (type(value).__name__, repr(value))


@needs_compiled
@FUZZ
@given(
    st.lists(
        st.tuples(
            HEADER_INT | HEADER_ODD, HEADER_INT | HEADER_ODD, HEADER_INT | HEADER_ODD,
            st.none() | HEADER_TEXT | HEADER_ODD,
            st.none() | st.dictionaries(HEADER_TEXT | st.integers(0, 3), HEADER_VALUE, max_size=20),
        ),
        min_size=1,
        max_size=3,
    ),
    st.booleans(),
)  # fmt: skip
def test_split_frames_msgpack_headers_same_commands_and_types(headers: list[Any], bin_type: bool) -> None:
    # The usual header shape is decoded without msgpack's Unpacker (short strings from a cache):
    # the same commands, value types included, or the same error, for every header msgpack can
    # write, whether or not it has that shape.
    stream = b""
    for fields in headers:
        try:
            header = msgpack.packb(list(fields), use_bin_type=bin_type)
        except (OverflowError, ValueError):  # an int msgpack cannot write
            continue
        stream += struct.pack(">II", 4 + len(header), SERIALIZE_MSGPACK << 24 | len(header)) + header
    pure = split_all(PURE["split_frames"], [stream, stream], codec.MAX_FRAME_BYTES, 1 << 16)
    compiled = split_all(speedups.split_frames, [stream, stream], codec.MAX_FRAME_BYTES, 1 << 16)
    assert _typed(compiled) == _typed(pure)


@needs_compiled
@FUZZ
@given(
    st.lists(COMMANDS, max_size=3),
    st.data(),
    st.sampled_from([4, 64, 1 << 20]),
    st.sampled_from([8, 64, 1 << 16]),
)
def test_split_frames_hostile_input_same_error(
    cmds: list[RemotingCommand], data: st.DataObject, limit: int, header_limit: int
) -> None:
    stream = mutate(b"".join(codec.encode_frame_bytes(c) for c in cmds), data.draw)
    chunks = chunked(stream, data.draw(st.lists(st.integers(0, 1 << 20), max_size=3)))
    pure = split_all(PURE["split_frames"], chunks, limit, header_limit)
    assert pure == split_all(speedups.split_frames, chunks, limit, header_limit)


@needs_compiled
@FUZZ
@given(st.binary(max_size=300))
def test_split_frames_random_bytes_same_error(data: bytes) -> None:
    assert split_all(PURE["split_frames"], [data], 1 << 16) == split_all(
        speedups.split_frames, [data], 1 << 16
    )


@needs_compiled
def test_split_frames_bad_headers_same_error() -> None:
    def frame(header: bytes, serialize_type: int = SERIALIZE_MSGPACK) -> bytes:
        return struct.pack(">II", 4 + len(header), serialize_type << 24 | len(header)) + header

    bad = [
        frame(msgpack.packb([1, 2, 3])),  # wrong arity
        frame(msgpack.packb(["1", 2, 0, None, None])),  # code not an int
        frame(msgpack.packb([1, 2, 0, 5, None])),  # remark not a string
        frame(msgpack.packb([1, 2, 0, None, None]) + b"\x00"),  # trailing bytes
        frame(b"\xc1"),  # never-used msgpack byte
        frame(b"{not json", SERIALIZE_JSON),
        frame(b"", 0x33),  # unknown serialize type
        struct.pack(">I", 2),  # shorter than its type field
    ]
    for data in bad:
        assert split_all(PURE["split_frames"], [data], 1 << 16) == split_all(
            speedups.split_frames, [data], 1 << 16
        )


@needs_compiled
@FUZZ
@given(
    st.lists(COMMANDS, max_size=4), st.lists(st.integers(0, 1 << 20), max_size=6), st.sampled_from([1, 2, 0])
)
def test_assemble_body_same_commands(cmds: list[RemotingCommand], cuts: list[int], max_frames: int) -> None:
    """Bodies of 16 bytes or more assembled in place (the threshold lowered from 1 MiB), arriving in
    any cuts, read ``max_frames`` at a time: the same commands from both twins as whole."""
    data = b"".join(codec.encode_frame_bytes(c) for c in cmds)
    chunks = chunked(data, cuts)

    def run(assemble: Any, split: Any) -> list[tuple[Any, ...]]:
        decoder = codec.FrameDecoder()
        out: list[tuple[Any, ...]] = []
        with (
            mock.patch.object(codec, "ASSEMBLE_BODY_BYTES", 16),
            mock.patch.object(codec, "assemble_body", assemble),
            mock.patch.object(codec, "split_frames", split),
        ):
            for chunk in [*chunks, b"", b"", b"", b""]:
                got = decoder.feed(chunk, max_frames)
                assert all(type(c.body) is bytes for c in got)  # whichever way they were built
                out.extend(cmd_fields(c) for c in got)
        assert decoder.buffered_bytes == 0
        return out

    whole = [cmd_fields(c) for c in codec.FrameDecoder().feed(data)]
    pure = run(PURE["assemble_body"], PURE["split_frames"])
    assert pure == whole == run(speedups.assemble_body, speedups.split_frames)


@needs_compiled
def test_split_frames_header_bounds_same_error() -> None:
    def frame(header: bytes, serialize_type: int = SERIALIZE_MSGPACK, body: bytes = b"") -> bytes:
        return (
            struct.pack(">II", 4 + len(header) + len(body), serialize_type << 24 | len(header))
            + header
            + body
        )

    items = codec.MAX_HEADER_ITEMS
    cases = [
        (frame(msgpack.packb([1, 2, 0, "r" * 5000, None])), 4096),  # over maxHeaderBytes
        (frame(msgpack.packb([1, 2, 0, "r" * 5000, None]))[:20], 4096),  # ... known from the prefix alone
        (frame(msgpack.packb([1, 2, 0, None, {f"k{i}": i for i in range(items + 1)}])), 1 << 16),
        (frame(msgpack.packb([1, 2, 0, None, {"k": [0] * (items + 1)}])), 1 << 16),
        (frame(msgpack.packb([1, 2, 0, None, {f"k{i}": i for i in range(items)}])), 1 << 16),  # answered
        (frame(b'{"code":1,"x":[' + b"0," * 3000 + b"0]}", SERIALIZE_JSON), 1 << 16),
        (frame(b'{"code":1,"x":' + b"[" * 20 + b"]" * 20 + b"}", SERIALIZE_JSON), 1 << 16),
        (frame(b'{"code":1,"remark":"' + b"[,{" * 3000 + b'"}', SERIALIZE_JSON), 1 << 16),  # answered
    ]
    for data, header_limit in cases:
        pure = split_all(PURE["split_frames"], [data], 1 << 20, header_limit)
        assert pure == split_all(speedups.split_frames, [data], 1 << 20, header_limit)
    outcomes = [split_all(PURE["split_frames"], [data], 1 << 20, limit)[0] for data, limit in cases]
    assert outcomes == ["raise", "raise", "raise", "raise", "ok", "raise", "raise", "ok"]


# -- the SEND_MESSAGE_V2 header ---------------------------------------------------------------------
ANY_VALUE = (
    st.none() | st.booleans() | st.integers(-(1 << 64), 1 << 64) | I32 | st.text(max_size=8)
    | st.floats(allow_nan=False) | st.lists(st.integers(), max_size=2)
)  # fmt: skip
TYPICAL_V2 = st.fixed_dictionaries(
    {"a": st.text(max_size=8), "b": st.text(max_size=8), "e": I32},
    optional={"c": st.text(max_size=8), "d": st.integers(-9, 99), "f": I32, "g": I64, "h": I32,
              "i": st.text(max_size=20), "j": I32, "k": st.booleans(), "m": st.booleans(),
              "n": st.text(max_size=8)},
)  # fmt: skip


def header_fields(h: SendMessageRequestHeader) -> tuple[Any, ...]:
    return tuple(getattr(h, name, "<unset>") for name in SendMessageRequestHeader.__slots__)


def read_both(ext: Any) -> list[tuple[str, Any]]:
    out = []
    for fn in (PURE["read_typical_v2"], speedups.read_typical_v2):
        h = SendMessageRequestHeader.__new__(SendMessageRequestHeader)
        kind, value = outcome(fn, h, ext)
        out.append((kind, value, header_fields(h)))
    return out


@needs_compiled
@FUZZ
@given(TYPICAL_V2, st.dictionaries(st.sampled_from(sorted(V2_NAMES.values())), ANY_VALUE, max_size=3))
def test_read_typical_v2_same_fields(ext: dict[str, Any], spoil: dict[str, Any]) -> None:
    plain, spoiled = read_both(ext), read_both({**ext, **spoil})
    assert plain[0] == plain[1] and plain[0][1] is True
    assert spoiled[0] == spoiled[1]  # wrong types or out-of-range ints: both False, nothing set


# -- the header check every request passes (rocketpy.protocol.shape.check_ext) ---------------------
EXT_KEY = st.text(max_size=6) | st.integers(0, 3) | st.binary(max_size=3)
EXT_VALUE = (
    ANY_VALUE | st.binary(max_size=4) | st.dictionaries(st.text(max_size=2), st.integers(), max_size=1)
)


@needs_compiled
@FUZZ
@given(st.dictionaries(EXT_KEY, EXT_VALUE, max_size=6))
def test_check_ext_same_outcome(ext: dict[Any, Any]) -> None:
    assert outcome(speedups.check_ext, ext) == outcome(PURE["check_ext"], ext)


@needs_compiled
@pytest.mark.parametrize(
    "ext",
    [
        None, {}, {"a": "x" * 65_536}, {"a": "x" * 65_537}, {"a": b"x" * 65_537}, {"k": True, "f": 1.5},
        {str(i): i for i in range(256)}, {str(i): i for i in range(257)}, {"a": [1]}, {1: "a"},
        {"a": 1 << 70}, {"a": None},
    ],
)  # fmt: skip
def test_check_ext_same_outcome_at_the_limits(ext: Any) -> None:
    assert outcome(speedups.check_ext, ext) == outcome(PURE["check_ext"], ext)
    from collections import OrderedDict  # a mapping that is not a dict: the pure twin decides

    other = OrderedDict(ext) if ext else ext
    assert outcome(speedups.check_ext, other) == outcome(PURE["check_ext"], other)


# -- the check every structured request body passes (rocketpy.protocol.shape.check_doc) ------------
DOC_KEY = st.text(max_size=3) | st.integers(-2, 3) | st.booleans() | st.floats(0, 1) | st.none()
DOC = st.recursive(
    ANY_VALUE | st.binary(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(DOC_KEY, inner, max_size=4),
    max_leaves=30,
)


def _nest(depth: int, leaf: Any, as_list: bool) -> Any:
    doc = leaf
    for i in range(depth - 1):
        doc = [doc] if as_list and i % 2 else {"k": doc}
    return doc


@needs_compiled
@FUZZ
@given(DOC)
def test_check_doc_same_outcome(doc: Any) -> None:
    assert outcome(speedups.check_doc, doc, "Body") == outcome(PURE["check_doc"], doc, "Body")


@needs_compiled
@pytest.mark.parametrize(
    "doc",
    [
        {}, [], 7, None, {"a": 1, 2: [3, {"b": None}]}, {(1, 2): 1}, {True: 1}, {1.5: 2}, {b"k": 1},
        _nest(32, {}, False), _nest(33, {}, False), _nest(32, [], True), _nest(33, [], True),
        _nest(33, 1, False), _nest(40, {}, True), {"a": [{"b": {1.0: 1}}]},
    ],
)  # fmt: skip
def test_check_doc_same_outcome_at_the_limits(doc: Any) -> None:
    assert outcome(speedups.check_doc, doc, "Body") == outcome(PURE["check_doc"], doc, "Body")
    from collections import OrderedDict  # a map or list subclass: the pure twin decides

    class Items(list):  # type: ignore[type-arg]
        pass

    for other in (OrderedDict(a=doc), Items([doc]), {"a": Items([doc])}):
        assert outcome(speedups.check_doc, other, "Body") == outcome(PURE["check_doc"], other, "Body")


# -- a POP answer's offset lists --------------------------------------------------------------------
_KIND = st.sampled_from(["0", "1", "", "é", "0 1"]) | st.text(max_size=3)
_ID = st.integers(-(2**63), 2**63 - 1) | st.sampled_from([1 << 64, -(1 << 63) - 1, True, 1.5, "7"])
_OFFSETS = st.lists(_ID, max_size=40) | st.tuples(_ID)


@needs_compiled
@FUZZ
@given(st.lists(st.tuples(_KIND, _ID, _ID), max_size=5) | st.lists(st.tuples(_KIND, _ID), max_size=2))
def test_format_start_offsets_same_text(entries: list[Any]) -> None:
    assert outcome(speedups.format_start_offsets, entries) == outcome(PURE["format_start_offsets"], entries)


@needs_compiled
@FUZZ
@given(st.lists(st.tuples(_KIND, _ID, _OFFSETS), max_size=5))
def test_format_msg_offsets_same_text(entries: list[Any]) -> None:
    assert outcome(speedups.format_msg_offsets, entries) == outcome(PURE["format_msg_offsets"], entries)


@needs_compiled
def test_format_offsets_of_a_full_answer_and_the_64_bit_ends() -> None:
    ends = [-(2**63), -1, 0, 9, 10, 2**63 - 1]
    entries = [("0", 3, list(range(10**12, 10**12 + 32))), ("1", 0, ends), ("0", 7, [])]
    assert speedups.format_msg_offsets(entries) == PURE["format_msg_offsets"](entries)
    assert speedups.format_msg_offsets(entries).split(";")[1] == "1 0 " + ",".join(map(str, ends))
    starts = [("0", q, o) for q, o in enumerate(ends)]
    assert speedups.format_start_offsets(starts) == PURE["format_start_offsets"](starts)
    assert speedups.format_start_offsets([]) == "" == speedups.format_msg_offsets([])
    assert speedups.format_msg_offsets((("0", 1, [2]),)) == "0 1 2"  # not a list: the pure twin


# -- the put path: body CRC, tag code, unique-key index entry ---------------------------------------
@needs_compiled
@FUZZ
@given(st.binary(max_size=3000), st.integers(0, 17))
def test_body_crc_same_value(data: bytes, skip: int) -> None:
    view = memoryview(data)[skip:]  # unaligned starts and every tail length
    assert speedups.crc32(view) == PURE["crc32"](view) == zlib.crc32(view)
    assert speedups.crc32(view, 0xDEADBEEF) == zlib.crc32(view, 0xDEADBEEF)  # a running CRC continued


@needs_compiled
def test_body_crc_of_every_length_around_the_block_sizes() -> None:
    data = bytes(range(256)) * 20
    for n in range(0, 300):
        assert speedups.crc32(data[:n]) == zlib.crc32(data[:n]), n
    assert speedups.crc32(bytearray(data)) == zlib.crc32(data)
    assert record.body_crc is (speedups.crc32 if _accel.ACTIVE == "compiled" else zlib.crc32)


# Properties strings made of the names the put path looks for, their separators and non-Latin-1
# text: items cut anywhere, names inside values, empty values, duplicates.
PROPS_PIECE = st.sampled_from(
    ["TAGS", "KEYS", "UNIQ_KEY", "XTAGS", "\x01", "\x02", "A1", "ff", "é", "中", "𝄞", "", " "]
)
PROPS_SOUP = st.lists(PROPS_PIECE, max_size=14).map("".join)
KEY_VALUE = st.text(st.sampled_from("0123456789ABCDEFabz-é中𝄞"), max_size=70)
INDEX_PROPS = st.dictionaries(st.sampled_from(["UNIQ_KEY", "KEYS", "TAGS", "a"]), KEY_VALUE, max_size=3).map(
    properties_to_string
)


@needs_compiled
@FUZZ
@given(PROPS.map(properties_to_string) | INDEX_PROPS | PROPS_SOUP)
def test_tags_hash_same_value(props: str) -> None:
    assert speedups.tags_hash(props) == PURE["tags_hash"](props)


@needs_compiled
@FUZZ
@given(PROPS.map(properties_to_string) | INDEX_PROPS | PROPS_SOUP)
def test_string_to_properties_same_dict(props: str) -> None:
    compiled, pure = speedups.string_to_properties(props), PURE["string_to_properties"](props)
    assert compiled == pure and list(compiled) == list(pure)  # the same pairs, in the same order


@needs_compiled
@FUZZ
@given(
    st.dictionaries(
        st.text(max_size=6) | st.integers(), st.text(max_size=6) | st.integers() | st.none(), max_size=5
    )
)
def test_properties_to_string_same_text(props: dict[Any, Any]) -> None:
    assert speedups.properties_to_string(props) == PURE["properties_to_string"](props)


@needs_compiled
@FUZZ
@given(
    INDEX_PROPS | PROPS_SOUP,
    st.integers(0, (1 << 32) - 1),
    I64,
    st.integers(0, (1 << 31) - 1),
    st.integers(1, 40),
    st.integers(1, 50),
    st.binary(min_size=4, max_size=4),
)
def test_put_unique_key_entry_same_bytes(
    props: str, topic_hash: int, phys: int, diff: int, count: int, slots: int, fill: bytes
) -> None:
    entries_pos = 40 + slots * 4
    size = entries_pos + 41 * 20
    files = [bytearray(fill * (size // 4)) for _ in range(2)]  # slots hold earlier entry numbers
    got = [
        outcome(fn, f, props, topic_hash, phys, diff, count, slots, entries_pos)
        for fn, f in zip((PURE["put_unique_key_entry"], speedups.put_unique_key_entry), files, strict=True)
    ]
    assert got[0] == got[1]
    assert files[0] == files[1]


@needs_compiled
@pytest.mark.parametrize(
    "args",
    [(10, 1, 0, 60, 4, 56), (10, 1 << 63, 0, 1, 4, 56), (10, 1, 1 << 31, 1, 4, 56), (10, 1, 0, 1, 0, 56)],
)
def test_put_unique_key_entry_out_of_range_same_error_type(args: tuple[int, ...]) -> None:
    props = properties_to_string({"UNIQ_KEY": "0A1B"})  # entry past the file, phys, diff, no slots
    twins = (PURE["put_unique_key_entry"], speedups.put_unique_key_entry)
    got = [outcome(fn, bytearray(1000), props, *args) for fn in twins]
    assert got[0][0] == got[1][0] == "raise" and got[0][1][0] is got[1][1][0], got


# -- the ACL's signed text --------------------------------------------------------------------------
EXT_VALUE = st.none() | st.text() | st.integers() | st.booleans() | st.floats(allow_nan=False)
EXT_KEY = st.sampled_from(["a", "b", "topic", "AccessKey", "Signature", "_UNIQUE_KEY_QUERY"]) | st.text()


@needs_compiled
@FUZZ
@given(st.none() | st.dictionaries(EXT_KEY, EXT_VALUE, max_size=16))
def test_signed_ext_same_bytes(ext: dict[str, Any] | None) -> None:
    assert outcome(PURE["signed_ext"], ext) == outcome(speedups.signed_ext, ext)


@needs_compiled
def test_signed_ext_same_error_for_a_lone_surrogate() -> None:
    ext = {"b": "a", "a": "\udc80", "c": 1}
    assert outcome(PURE["signed_ext"], ext) == outcome(speedups.signed_ext, ext)
    assert outcome(PURE["signed_ext"], ext)[0] == "raise"


@needs_compiled
def test_signed_ext_same_bytes_when_the_key_set_table_is_full() -> None:
    """Both twins clear their table of key orders when full, and still sign each set right."""
    exts = [{f"k{i}": i, "a": True, "Signature": "x"} for i in range(signing.MAX_CACHED_KEY_SETS + 5)]
    assert [PURE["signed_ext"](e) for e in exts] == [speedups.signed_ext(e) for e in exts]
    assert exts[0] and PURE["signed_ext"](exts[0]) == b"true0"


#: body sizes around SHA-1's block edges (55/56/64 bytes with the pads and text before them) and
#: around the size the compiled twin hashes itself
BODY_SIZES = st.sampled_from([0, 1, 55, 56, 63, 64, 65, 119, 120, 128, signing.OWN_SHA1_MAX_BODY,
                              signing.OWN_SHA1_MAX_BODY + 1, 3000]) | st.integers(0, 1100)  # fmt: skip


@needs_compiled
@FUZZ
@given(
    st.none() | st.dictionaries(EXT_KEY, EXT_VALUE, max_size=16),
    BODY_SIZES,
    st.binary(max_size=200),
    st.text(max_size=90),
    st.sampled_from([bytes, bytearray, memoryview]),
)
def test_hmac_signature_same_text(
    ext: dict[str, Any] | None, size: int, seed: bytes, secret: str, kind: type
) -> None:
    """Same signature (base64 of the MAC over the signed text and the body), or the same error, and
    both are RFC 2104's HmacSHA1 (``hmac``): secrets longer than a block, bodies across blocks."""
    body = kind((seed or b"\x00") * (size // max(len(seed), 1) + 1))[:size]
    key = signing.HmacKey(secret)
    pure = outcome(PURE["hmac_signature"], key, ext, body)
    assert pure == outcome(speedups.hmac_signature, key, ext, body)
    if pure[0] != "raise":
        mac = hmac.new(secret.encode(), signing.signed_content(ext, body), hashlib.sha1).digest()
        assert pure[1] == base64.b64encode(mac).decode()


def test_hmac_pads_follow_rfc2104() -> None:
    """The pads are the key padded (or hashed first, past 64 bytes) XOR 0x36, then XOR 0x5C."""
    for secret in (b"", b"k", b"x" * 64, b"y" * 65):
        block = (hashlib.sha1(secret).digest() if len(secret) > 64 else secret).ljust(64, b"\0")
        assert signing.hmac_pads(secret) == bytes(b ^ 0x36 for b in block) + bytes(b ^ 0x5C for b in block)
    assert "secret" not in repr(signing.HmacKey("secret"))


@needs_compiled
def test_hmac_signature_leaves_the_key_unchanged() -> None:
    key = signing.HmacKey("secret")
    for body in (b"body", b"b" * (signing.OWN_SHA1_MAX_BODY + 1)):
        first = speedups.hmac_signature(key, {"a": 1}, body)
        again = speedups.hmac_signature(key, {"a": 1}, body)
        assert again == first == PURE["hmac_signature"](key, {"a": 1}, body)
    assert key._base.digest() == signing._new_hmac_sha1(b"secret").digest()
    assert key.pads == signing.hmac_pads(b"secret")


def test_signature_uses_the_active_twin() -> None:
    for name in ("signed_ext", "hmac_signature"):
        active = getattr(speedups, name) if _accel.ACTIVE == "compiled" else PURE[name]
        assert getattr(signing, name) is active, name


# -- the broker's send-run fast path (rocketpy/broker/processors/sendrun.py) ------------------------
RUN_PROPS = st.lists(
    st.sampled_from(
        [
            "UNIQ_KEY\x01",
            "AB12",
            "\x02",
            "\x01",
            "DELAY",
            "TIMER_",
            "TRAN_MSG\x01true",
            "XUNIQ_KEY\x01",
            "é",
            "中",
        ]
    ),
    max_size=8,
).map("".join)
RUN_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 40), 1 << 40), st.sampled_from(["T", "U", "", "x" * 3])
)
RUN_EXT = st.fixed_dictionaries(
    {
        "b": st.sampled_from(["T", "U", "W", "V", "P"]) | RUN_VALUE,
        "e": st.integers(-2, 6) | RUN_VALUE,
        "i": RUN_PROPS | RUN_VALUE,
    },
    optional={k: RUN_VALUE for k in "acdfghjkmn"},
)
RUN_REQUEST = st.builds(
    lambda code, ext, body: RemotingCommand(code, 7, 0, None, ext, body),
    st.sampled_from([310, 310, 310, 10, 320]),
    RUN_EXT | st.none(),
    st.binary(max_size=40),
)


def _run_topic(topic: str) -> Any:
    """Topic T writable with 4 queues, U read-only, W and V 2 write / 5 read queues, P unknown."""
    return {
        "T": SimpleNamespace(perm=6, write_queue_nums=4, read_queue_nums=4),
        "U": SimpleNamespace(perm=4, write_queue_nums=4, read_queue_nums=4),
        "W": SimpleNamespace(perm=6, write_queue_nums=2, read_queue_nums=5),
        "V": SimpleNamespace(perm=6, write_queue_nums=2, read_queue_nums=5),
    }.get(topic)


@needs_compiled
@FUZZ
@given(st.lists(RUN_REQUEST, max_size=6), st.integers(0, 50))
def test_plain_messages_same_messages(requests: list[RemotingCommand], max_body: int) -> None:
    problems: dict[str, Any] = {"T": None, "U": None, "W": None, "P": None, "V": (1, "no")}
    got = []
    for fn in (PURE["plain_messages"], speedups.plain_messages):
        msgs = fn(requests, _run_topic, problems, ("10.0.0.7", 9876), max_body)
        got.append([None if m is None else tuple(getattr(m, f) for f in BROKER_MESSAGE_FIELDS) for m in msgs])
    assert got[0] == got[1]


GROUP_MESSAGE = st.none() | st.builds(
    lambda topic, q, props: BrokerMessage(topic, q, b"", properties=props),
    st.sampled_from(["T", "U"]),
    st.integers(0, 2),
    st.sampled_from(["", "WAIT\x01false", "A\x01b\x02WAIT\x01false", "WAIT\x01true", "UNIQ_KEY\x01AB"]),
)


@needs_compiled
@FUZZ
@given(st.lists(GROUP_MESSAGE, max_size=12), st.integers(0, 12), st.integers(1, 4), st.booleans())
def test_group_plain_same_groups(plain: list[Any], start: int, max_group: int, open_before: bool) -> None:
    # From a drawn start, over plain messages and Nones, with groups opened before and groups
    # filling up (put at once, in order): the same entries, groups, stop index and puts.
    start = min(start, len(plain))
    requests = [RemotingCommand(310, k, 0, None, {}, b"") for k in range(len(plain))]
    got = []
    for fn in (PURE["group_plain"], speedups.group_plain):
        out: list[Any] = ["earlier"]
        groups: dict[Any, list[int]] = {("T", 0, True): [0]} if open_before else {}
        puts: list[list[int]] = []
        stop = fn(requests, plain, start, out, groups, max_group, puts.append)
        got.append((stop, out, groups, puts))
    assert got[0] == got[1]
    stop = got[0][0]
    assert stop == len(plain) or plain[stop] is None
    assert all(m is not None for m in plain[start:stop])


@needs_compiled
def test_group_plain_refuses_a_start_outside_the_messages() -> None:
    for fn in (PURE["group_plain"], speedups.group_plain):
        with pytest.raises(IndexError):
            fn([RemotingCommand(310, 1, 0, None, {}, b"")], [], 0, [], {}, 4, print)
        with pytest.raises(IndexError):
            fn([], [], -1, [], {}, 4, print)


@needs_compiled
@FUZZ
@given(st.lists(st.tuples(st.binary(max_size=20), RUN_PROPS, st.integers(1, 300)), min_size=1, max_size=5))
def test_stored_answers_same_answers(items: list[tuple[bytes, str, int]]) -> None:
    from rocketpy.broker.store import PutMessageResult, PutMessageStatus

    result = PutMessageResult(
        PutMessageStatus.PUT_OK, "", 4096, sum(s for *_, s in items), 17, 1, len(items), b"\x00" * 8,
        [s for *_, s in items],
    )  # fmt: skip
    answers = []
    for fn in (PURE["stored_answers"], speedups.stored_answers):
        out: list[Any] = ["before"]
        out += [(RemotingCommand(310, 5 + k, 0, None, {}, body), None, 3, props) for k, (body, props, _) in
                enumerate(items)]  # fmt: skip
        total = fn(out, list(range(1, len(out))), result, "7F00000100002A9F")
        answers.append(
            (total, out[0], [(c.code, c.opaque, c.flag, c.remark, c.ext, c.body) for c in out[1:]])
        )
    assert answers[0] == answers[1]


# -- the store's coroutine-free put (rocketpy/broker/store/put.py) ----------------------------------
def _put_now_state(fn: Any, root: str, groups: list[list[Any]], prefault_due: int | None = None) -> Any:
    """What ``fn`` (a ``put_now`` twin) answers and leaves for ``groups`` of messages on a fresh
    store (fixed clock): each answer's fields, the commitlog's bytes, the queues' ends, the counts.
    ``prefault_due``: the commitlog's rolling-prefault mark, held there (0: every append asks for
    a prefault, so the compiled twin's inline append gives way to ``CommitLog.append``)."""
    import asyncio

    from rocketpy.broker.store import MessageStore
    from tests.unit.test_store_helpers import tiny_config

    async def run() -> Any:
        store = MessageStore(
            tiny_config(root, mapped_file_size_commit_log=1 << 16), clock=lambda: 1_700_000_000.5
        )
        await store.start()
        try:
            store.store_host = ("127.0.0.1", 10911)
            await store.put_message(BrokerMessage("T", 0, b"seed"))  # topic "T" and queue 0 known
            answers = []
            for msgs in groups:
                if prefault_due is not None:
                    store.commitlog._prefault_due = prefault_due
                r = fn(store._put, msgs)
                answers.append(
                    None if r is None
                    else (r.status, r.wrote_offset, r.wrote_bytes, r.queue_offset, r.msg_num, r.sizes)
                )  # fmt: skip
            cl = bytes(store.commitlog.files[-1].view[: store.commitlog.files[-1].wrote])
            ends = sorted((k, cq.next_offset) for k, cq in store.dispatcher.cqs.items())
            return answers, cl, ends, store._put._puts_since_yield, store.stats.put_total
        finally:
            await store.shutdown()

    return asyncio.run(run())


PUT_NOW_MESSAGE = st.builds(
    lambda topic, queue, body, props: BrokerMessage(topic, queue, body, props),
    st.sampled_from(["T", "T", "T", "U"]),
    st.sampled_from([0, 0, 0, 1]),
    st.binary(max_size=60),
    st.sampled_from(["", "TAGS\x01a", "WAIT\x01false", "UNIQ_KEY\x01K\x02KEYS\x01x y", "é\x01中"]),
)


@needs_compiled
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(PUT_NOW_MESSAGE, min_size=0, max_size=4), max_size=25))
def test_put_now_same_answers_and_store(groups: list[list[BrokerMessage]]) -> None:
    for prefault_due in (None, 0):
        states = []
        for fn in (PURE["put_now"], speedups.put_now):
            with tempfile.TemporaryDirectory() as root:
                states.append(_put_now_state(fn, root, groups, prefault_due))
        assert states[0] == states[1]


# -- the store's one-view read (rocketpy/broker/store/reads.py) -------------------------------------
def _get_now_states(
    layout: list[tuple[int, int]], asks: list[tuple[int, int, int, int]], waiting: bool = False
) -> list[Any]:
    """Both ``get_now`` twins' answers to ``asks`` ((queue, offset, max msgs, max bytes)) on one
    store holding ``layout`` ((queue, batch size) puts, in order: batches are back to back, queues
    interleave), each answer's fields and bytes, and the queue's state after it. Every unit is in
    its file, or with ``waiting`` each queue's newest units wait in memory for their file (as while
    the allocator creates it)."""
    import asyncio

    from rocketpy.broker.store import MessageStore
    from tests.unit.test_store_helpers import tiny_config

    async def run(root: str) -> Any:
        store = MessageStore(
            tiny_config(root, mapped_file_size_commit_log=1 << 16), clock=lambda: 1_700_000_000.5
        )
        await store.start()
        try:
            for q, size in layout:
                await store.put_messages([BrokerMessage("T", q, b"x" * (10 + k)) for k in range(size)])
            assert await store.settle()  # every unit in its file
            if waiting:
                for cq in store.dispatcher.cqs.values():
                    _units_wait(cq)
            out = []
            for q, offset, max_msgs, max_bytes in asks:
                cq = store.dispatcher.cqs.get(("T", q))
                answers = []
                for fn in (PURE["get_now"], speedups.get_now):
                    r = fn(store.commitlog, cq, offset, max_msgs, max_bytes)
                    answers.append(
                        None if r is None  # every slot (one not set fails here), the views as bytes
                        else (*(getattr(r, s) for s in type(r).__slots__ if s != "buffers"), r.join())
                    )  # fmt: skip
                    answers.append(None if cq is None else (cq.min_offset, cq.next_offset))
                out.append(answers)
            return out
        finally:
            await store.shutdown()

    with tempfile.TemporaryDirectory() as root:
        return asyncio.run(run(root))


@needs_compiled
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 6)), min_size=1, max_size=10),
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(-1, 30), st.integers(-1, 8), st.integers(0, 400)),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
)
def test_get_now_same_answers(
    layout: list[tuple[int, int]], asks: list[tuple[int, int, int, int]], waiting: bool
) -> None:
    for answers in _get_now_states(layout, asks, waiting):
        assert answers[0] == answers[2] and answers[1] == answers[3]


def _units_wait(cq: Any) -> None:
    """Move the units of ``cq``'s newest file back into memory, as if that file were still being
    created: ``read_units`` then serves them from ``_pending``."""
    if not cq.files or cq._pending:
        return
    mf = cq.files[-1]
    written = cq.next_offset * UNIT_SIZE - mf.base_offset
    if len(cq.files) == 1 or written <= 0:
        return
    cq._pending = bytearray(mf.view[:written])
    cq._pending_base = mf.base_offset
    cq.files.pop()
    mf.close()


@needs_compiled
def test_get_now_same_answers_with_units_waiting_for_their_file() -> None:
    """The compiled twin reads the consume queue's units in place, from a file or from the units
    still waiting in memory: both twins answer alike on either side of that boundary."""
    layout = [(0, 6)] * 4 + [(1, 3)] * 5  # 24 and 15 units: several 10-unit files each
    asks = [(q, o, m, 1 << 16) for q in (0, 1) for o in (0, 5, 9, 10, 19, 20, 23) for m in (1, 4, 8)]
    states = _get_now_states(layout, asks, waiting=True)
    assert any(answers[0] is not None for answers in states)
    for answers in states:
        assert answers[0] == answers[2] and answers[1] == answers[3]
