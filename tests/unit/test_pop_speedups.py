"""POP's compiled twins (``rocketpy/broker/pop/_speedups.pyx``) against their pure twins: the same
results, the same changes to their arguments, the same errors (see ``test_speedups.py``)."""

from __future__ import annotations

import base64
import struct
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy import _accel
from rocketpy.broker.pop import acks, ledger, revive_log
from rocketpy.protocol.headers.pop import BatchAck, encode_bitset, read_batch_acks

try:
    speedups: Any = SimpleNamespace(**_accel.load_compiled())
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    speedups = None

needs_compiled = pytest.mark.skipif(speedups is None, reason="the compiled core is not built")
PURE = _accel.PURE
I64 = st.integers(-(1 << 63), (1 << 63) - 1)


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except Exception as e:
        return type(e).__name__, str(e)


class FakeCk:
    def __init__(self, pop_time: int, reviving: bool = False) -> None:
        self.pop_time = pop_time
        self.reviving = reviving


CKS = [FakeCk(1), FakeCk(2), FakeCk(1, reviving=True)]


@needs_compiled
@settings(max_examples=300)
@given(
    st.dictionaries(st.integers(0, 40), st.integers(0, 2), max_size=30),
    st.lists(st.integers(-2, 42), max_size=12),
    st.integers(0, 3),
    st.booleans(),
)
def test_take_run_same_result_and_inflight(
    held: dict[int, int], offsets: list[int], pop_time: int, run: bool
) -> None:
    if run and held:  # often the common case: a run of one ck's offsets
        ck = min(held.values())
        offsets = sorted(o for o, c in held.items() if c == ck)
    inflight = {o: CKS[c] for o, c in held.items()}
    a, b = dict(inflight), dict(inflight)
    assert outcome(speedups.take_run, a, list(offsets), pop_time) == outcome(
        PURE["take_run"], b, list(offsets), pop_time
    )
    assert a == b


@needs_compiled
def test_take_run_huge_offsets_fall_back_alike() -> None:
    ck = FakeCk(1)
    for offsets in ([1 << 70, (1 << 70) + 1], [5, 1 << 70], [(1 << 63) - 1]):
        a = dict.fromkeys(offsets, ck)
        b = dict(a)
        assert speedups.take_run(a, list(offsets), 1) is PURE["take_run"](b, list(offsets), 1) is ck
        assert a == b == {}


@needs_compiled
@given(st.lists(st.integers(0, 30), max_size=20), st.sets(st.integers(0, 30)))
def test_drop_done_same_order(order: list[int], inflight: set[int]) -> None:
    a, b = deque(order), deque(order)
    held = dict.fromkeys(inflight, 0)
    speedups.drop_done(a, held)
    PURE["drop_done"](b, held)
    assert a == b


@needs_compiled
@settings(max_examples=300)
@given(
    st.one_of(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 40), 1 << 40)),
    I64,
    I64,
    st.one_of(
        st.lists(st.integers(0, 1 << 40), max_size=40),
        st.lists(st.integers(-(1 << 64), 1 << 64), max_size=4),
        st.integers(0, (1 << 62)).map(lambda b: list(range(b, b + 32))),
    ),
)
def test_acks_entry_same_bytes_and_errors(
    queue_id: int, seq: int, committed: int, offsets: list[int]
) -> None:
    assert outcome(speedups.acks_entry, queue_id, seq, committed, offsets) == outcome(
        PURE["acks_entry"], queue_id, seq, committed, offsets
    )


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["G", "g" * 70_000, "é"]) | st.integers(0, 1),
    st.sampled_from(["T", "%RETRY%G_T"]),
    st.lists(
        st.tuples(
            st.integers(-1, 9) | st.just(1 << 40),
            st.integers(0, 1 << 40),
            st.integers(-1, 1 << 40),
            st.lists(st.integers(0, 1 << 33), max_size=40) | st.just(list(range(2050))),
        ).map(lambda e: e if e[0] != 9 else [*e]),  # a list entry (not a tuple): the pure twin decides
        max_size=6,
    ),
    st.sampled_from([0, 1, 2, 256, -1]),
)
def test_encode_acks_same_records_and_errors(group: Any, topic: str, entries: Any, reason: int) -> None:
    assert outcome(speedups.encode_acks, group, topic, entries, reason) == outcome(
        PURE["encode_acks"], group, topic, entries, reason
    )


def test_acks_entry_decodes_back() -> None:
    body = revive_log.encode_acks("g", "t", [(3, 9, 100, [100, 101, 131]), (4, 10, -1, [7])])
    entries = revive_log.decode(body[0])
    assert isinstance(entries, list)
    assert [(r.key, r.seq, r.committed, r.offsets) for r in entries] == [
        (("g", "t", 3), 9, 100, [100, 101, 131]),
        (("g", "t", 4), 10, -1, [7]),
    ]
    assert struct.unpack_from(">iqqqH", revive_log.acks_entry(3, 9, 100, [101, 100]))[3] == 100


@needs_compiled
@given(I64, st.lists(st.integers(0, 4095), max_size=40).map(tuple))
def test_offsets_of_same_list(start: int, bits: tuple[int, ...]) -> None:
    assert speedups.offsets_of(start, bits) == PURE["offsets_of"](start, bits)


def _entry() -> st.SearchStrategy[dict[str, Any]]:
    value = st.one_of(
        st.text(max_size=6),
        st.integers(-5, 1 << 40),
        st.none(),
        st.booleans(),
        st.just("1"),
        st.just("12"),
        st.just("x" * 4097),
    )
    bits = st.one_of(
        st.lists(st.integers(0, 64), max_size=8).map(encode_bitset),
        st.just("!!"),
        st.just(base64.b64encode(b"\xff" * 513).decode()),
        st.sampled_from([base64.b64encode(b"\xff" * 512).decode(), "", "AAAA", "AB==", "AB=C", "A===", "/w"]),
        st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode()),  # any bits, any padding
        st.text(alphabet="AZaz09+/=-_ \n", max_size=9),  # noncanonical: the pure twin decides
    )
    usual = st.fixed_dictionaries(
        {
            "c": st.text(min_size=1, max_size=5),
            "t": st.text(min_size=1, max_size=5),
            "r": st.sampled_from(["0", "1"]),
            "so": st.integers(0, 1 << 40),
            "q": st.integers(0, 16),
            "rq": st.integers(0, 8),
            "pt": st.integers(0, 1 << 41),
            "it": st.integers(1, 1 << 20),
            "b": bits,
        }
    )
    names = st.sampled_from(["c", "t", "r", "so", "q", "rq", "pt", "it", "b", "consumerGroup", "x"])
    return st.one_of(
        usual,
        st.tuples(usual, names, value).map(lambda e: {**e[0], e[1]: e[2]}),
        st.tuples(usual, names).map(lambda e: {k: v for k, v in e[0].items() if k != e[1]}),
    )


@needs_compiled
@settings(max_examples=400)
@given(
    st.one_of(st.lists(_entry(), max_size=4), st.none(), st.just("x"), st.lists(st.integers(), max_size=2)),
    st.one_of(st.none(), st.just("broker-a"), st.integers(), st.just("b" * 4097)),
)
def test_read_acks_same_acks_and_the_same_as_the_full_reader(entries: Any, broker: Any) -> None:
    doc: dict[str, Any] = {"acks": entries}
    if broker is not None:
        doc["brokerName"] = broker
    fast = outcome(speedups.read_acks, doc)
    assert fast == outcome(PURE["read_acks"], doc)
    if fast[0] == "ok" and fast[1] is not None:  # what it reads, the full reader reads alike
        assert fast[1] == read_batch_acks(doc)
        assert all(type(a) is BatchAck for a in fast[1])


def test_read_acks_reads_the_sdks_body() -> None:
    a = BatchAck("g", "T", False, 100, 3, 0, 1234, 60000, tuple(range(32)))
    b = BatchAck("g", "T", True, 7, 1, 0, 1234, 60000, (0, 2, 5))
    doc = {"brokerName": "broker-a", "acks": [a.to_wire(), b.to_wire()]}
    assert acks.read_acks(doc) == [a, b]
    assert acks.offsets_of(b.start_offset, b.bits) == b.offsets() == [7, 9, 12]
    assert acks.read_acks({"acks": []}) is None
    assert (
        acks.read_acks({"acks": [{**a.to_wire(), "so": "100"}]}) is None
    )  # numbers as text: the full reader


def test_ledger_acks_a_run_and_one_by_one_alike() -> None:
    for offsets, acked in (
        ([10, 11, 12], [10, 11, 12]),
        ([12, 10, 11], [10, 11, 12]),
        ([10, 10, 11], [10, 11]),
    ):
        led = ledger.PopLedger()
        q = led.add_queue(("g", "t", 0), 10)
        assert q is not None
        ck = led.pop(q, [10, 11, 12], 13, 1000, 60_000, 0)
        done = led.ack_many(q, offsets, 1000)
        assert sorted(o for offs in done.values() for o in offs) == acked
        left = 3 - len(acked)
        assert len(q.inflight) == ck.open == led.inflight_total == left and led.open_count == min(left, 1)
        assert q.low_water() == (12 if left else 13)


# -- apply_batch_acks: a batch ack's bookkeeping on the service ----------------------------------------
class Service:
    """What ``apply_batch_acks`` reads and calls of a ``PopService``: its ledger, offset table and
    counters, and its commit / count / wake steps (``PopService``'s own methods)."""

    def __init__(self, root: str) -> None:
        from rocketpy.broker.offsets import ConsumerOffsetManager

        self.ledger = ledger.PopLedger()
        self.offsets = ConsumerOffsetManager(f"{root}/offsets.json")
        self.counts: dict[tuple[str, str], list[int]] = {}
        self.woken: list[tuple[str, int]] = []

    from rocketpy.broker.pop.service import PopService as _S

    commit = _S.commit
    _count = _S._count
    _maybe_unblocked = _S._maybe_unblocked
    del _S

    def _wake(self, topic: str, queue_id: int) -> None:
        self.woken.append((topic, queue_id))


GROUPS = ["G", "H"]
RETRY_G = "%RETRY%G_T"  # pop_retry_topic("G", "T")


def _state(svc: Service) -> Any:
    queues = {}
    for key, q in svc.ledger.queues.items():
        inflight = {o: ck.seq for o, ck in q.inflight.items()}
        queues[key] = (q.next_offset, q.committed, inflight, list(q._order), q.orderly, dict(q.attempts),
                       set(q.acked_ahead))  # fmt: skip
    opened = {seq: ck.open for seq, ck in svc.ledger._open.items()}
    return queues, opened, svc.ledger.inflight_total, svc.offsets.table, svc.counts, svc.woken


POPS = st.lists(
    st.tuples(
        st.sampled_from([("G", "T", 0), ("G", "T", 1), ("H", "T", 0), ("G", RETRY_G, 0)]),
        st.integers(1, 6),  # messages
        st.booleans(),  # orderly
        st.integers(0, 2),  # pop time
    ),
    max_size=6,
)
ACKS = st.lists(
    st.tuples(
        st.sampled_from(GROUPS),
        st.booleans(),  # retry
        st.integers(0, 2),  # queue id (2: never popped)
        st.integers(-1, 20),  # start offset
        st.lists(st.integers(0, 8), max_size=8, unique=True).map(lambda b: tuple(sorted(b))),
        st.integers(0, 2),  # pop time
        st.booleans(),  # take one pop's offsets as they were handed out (the common case)
    ),
    max_size=6,
)


def _play(svc: Service, pops: Any, first_ack: int) -> list[Any]:
    """Pop as ``pops`` says, ack some of the first pops' offsets one by one; the cks made, in order."""
    cks = []
    for (group, topic, qid), n, orderly, pop_time in pops:
        key = (group, topic, qid)
        q = svc.ledger.queue(key) or svc.ledger.add_queue(key, 0)
        assert q is not None
        if orderly and q.inflight:
            continue
        start = q.next_offset
        offsets = list(range(start, start + n))
        cks.append(svc.ledger.pop(q, offsets, start + n, pop_time, 1000, 0, order=orderly))
    for ck in cks[:1]:
        for o in ck.offsets[first_ack : first_ack + 1]:
            svc.ledger.ack(ck.queue, o, ck.pop_time)
            svc.commit(ck.queue)
    return cks


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(POPS, ACKS, st.integers(0, 3))
def test_apply_batch_acks_same_result_and_changes(pops: Any, entries: Any, first_ack: int) -> None:
    import tempfile

    from rocketpy.topic import pop_retry_topic

    assert pop_retry_topic("G", "T") == RETRY_G
    outs, states = [], []
    for fn in (PURE["apply_batch_acks"], speedups.apply_batch_acks):
        with tempfile.TemporaryDirectory() as root:
            svc = Service(root)
            cks = _play(svc, pops, first_ack)
            batch = []
            for i, (group, retry, qid, start, bits, pop_time, whole) in enumerate(entries):
                if whole and cks:  # one pop's offsets as its receipt handles name them
                    ck = cks[i % len(cks)]
                    group, topic, qid = ck.queue.key
                    retry, start, pop_time = topic == RETRY_G, ck.start_offset, ck.pop_time
                    bits = tuple(o - start for o in ck.offsets)
                batch.append(BatchAck(group, "T", retry, start, qid, 0, pop_time, 1000, bits))
            kind, value = outcome(fn, svc, batch)
            if kind == "ok":
                done, acked, asked = value
                value = ([(q.key, seq, offs) for q, seq, offs in done], acked, asked)
            outs.append((kind, value))
            states.append(_state(svc))
    assert outs[0] == outs[1]
    assert states[0] == states[1]


@needs_compiled
@settings(max_examples=200, deadline=None)
@given(POPS, st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6)), max_size=8), st.integers(0, 3))
def test_commit_queues_same_changes(pops: Any, acks: Any, first_ack: int) -> None:
    """Acks without commits (some out of order, some orderly queues), then each twin commits the
    queues (one listed twice): the same low-water marks, offsets and ledger."""
    import tempfile

    states = []
    for fn in (PURE["commit_queues"], speedups.commit_queues):
        with tempfile.TemporaryDirectory() as root:
            svc = Service(root)
            cks = _play(svc, pops, first_ack)
            for which, at in acks:
                if cks:
                    ck = cks[which % len(cks)]
                    if at < len(ck.offsets):
                        svc.ledger.ack(ck.queue, ck.offsets[at], ck.pop_time)
            queues = list(svc.ledger.queues.values())
            kind, value = outcome(fn, svc, queues + queues[:1])
            states.append((kind, value, _state(svc)))
    assert states[0] == states[1]


@needs_compiled
def test_apply_batch_acks_takes_a_whole_pop_in_c(tmp_path: Any) -> None:
    svc = Service(str(tmp_path))
    q = svc.ledger.add_queue(("G", "T", 0), 0)
    assert q is not None
    ck = svc.ledger.pop(q, list(range(32)), 32, 5, 1000, 0)
    svc._count("G", "T", 0, 32)
    calls: list[str] = []
    svc.commit = lambda q: calls.append("commit")  # type: ignore[assignment,method-assign]
    whole = BatchAck("G", "T", False, 0, 0, 0, 5, 1000, tuple(range(32)))
    done, acked, asked = speedups.apply_batch_acks(svc, [whole])
    assert [(dq.key, seq, offs) for dq, seq, offs in done] == [(("G", "T", 0), ck.seq, list(range(32)))]
    assert (acked, asked, calls) == (32, 32, [])  # the commit ran in C
    assert (q.committed, svc.offsets.table, svc.counts) == (32, {"T@G": {0: 32}}, {("G", "T"): [32, 32, 0]})
    assert not q.inflight and not svc.ledger._open and svc.ledger.inflight_total == 0
