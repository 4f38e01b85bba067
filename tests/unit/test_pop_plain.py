"""A plain pop's read (``rocketpy/broker/pop/plain.py``): both twins of ``read_plain`` against each
other and against ``PopReader._read_topic``, which they stand in for: on the same store and the
same sequence of pops, acks and offset resets, the same answers, the same cks and the same ledger."""

from __future__ import annotations

import asyncio
import tempfile
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy import _accel
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.pop import plain  # its twin joins PURE
from rocketpy.broker.pop.ledger import PopLedger
from rocketpy.broker.pop.reader import Limits, PopRead, PopReader
from rocketpy.broker.pop.types import PopRequest, PopResult, PopStatus
from rocketpy.broker.store import BrokerMessage, MessageStore
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig
from rocketpy.route import TopicConfig
from tests.unit.test_store_helpers import tiny_config

try:
    speedups: Any = SimpleNamespace(**_accel.load_compiled())
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    speedups = None

PURE = _accel.PURE
GROUP, TOPIC, QUEUES = "G", "T", 4


def _reference(reader: PopReader, req: PopRequest, out: PopRead) -> None:
    reader._read_topic(req, req.topic, req.queue_id, None, out)


def _ck(ck: Any, counts: Any = None) -> tuple[Any, ...]:
    return (ck.seq, ck.queue.key, ck.pop_time, ck.invisible_ms, ck.deadline, ck.start_offset, ck.end_offset,
            list(ck.offsets), ck.open, ck.floor, ck.reviving, ck.order, ck.unwritten, counts)  # fmt: skip


def _ledger(ledger: PopLedger) -> Any:
    queues = {}
    for key, q in ledger.queues.items():
        inflight = {o: ck.seq for o, ck in q.inflight.items()}
        queues[key] = (q.next_offset, q.committed, inflight, list(q._order), q.orderly, dict(q.attempts),
                       set(q.acked_ahead))  # fmt: skip
    heap = sorted((d, s) for d, s, _ in ledger._heap)
    return queues, ledger.inflight_total, list(ledger._open), heap, ledger.next_seq


def _read(out: PopRead) -> Any:
    r = out.result
    popped = [(p.kind, p.queue_id, p.start_offset, p.offsets, p.counts) for p in r.queues]
    return (r.status, r.rest_num, r.count, r.size, popped, b"".join(r.parts),
            [_ck(ck, c) for ck, c in out.cks], out.acks, [q.key for q in out.touched])  # fmt: skip


class Side:
    """One reader (its own ledger and offset table) over the shared store."""

    def __init__(self, store: MessageStore, topics: TopicConfigManager, root: str, per_queue: int) -> None:
        self.offsets = ConsumerOffsetManager(f"{root}/offsets-{id(self)}.json")
        self.floor = 0
        self.reader = reader = PopReader(
            PopLedger(), store, topics, self.offsets, lambda: "b", lambda: self.floor,
            Limits(per_queue, 10_000, 1 << 20),
        )  # fmt: skip
        self.full_reads = 0  # queues read through ``_read_queue``
        full = reader._read_queue

        def counted(*args: Any) -> None:
            self.full_reads += 1
            full(*args)

        reader._read_queue = counted  # type: ignore[method-assign]

    def pop(self, fn: Any, qid: int, max_msgs: int, rotor: int, now: int) -> Any:
        reader = self.reader
        reader._rotor = rotor
        self.floor = now // 10
        req = PopRequest(GROUP, TOPIC, qid, max_msgs, 30_000, init_mode=0)
        out = PopRead(PopResult(PopStatus.NO_MESSAGE, "b", now, 30_000), [], [], [])
        store = reader.store
        before = store.stats.get_total
        fn(reader, req, out)
        got = store.stats.get_total - before
        for q in out.touched:  # the service's commit
            low = q.low_water()
            if low != q.committed:
                q.committed = low
                self.offsets.commit_offset(GROUP, TOPIC, q.queue_id, low)
        return _read(out), got

    def ack(self, qid: int, k: int) -> None:
        q = self.reader.ledger.queue((GROUP, TOPIC, qid))
        if q is None or not q.inflight:
            return
        offsets = sorted(q.inflight)[: k + 1]
        for o in offsets:
            self.reader.ledger.ack(q, o, q.inflight[o].pop_time)
        low = q.low_water()
        if low != q.committed:
            q.committed = low
            self.offsets.commit_offset(GROUP, TOPIC, qid, low)

    def reset(self, qid: int, offset: int) -> None:
        self.offsets.commit_offset(GROUP, TOPIC, qid, offset)  # an admin's reset


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("pop"), st.integers(-1, QUEUES - 1), st.integers(1, 32), st.integers(0, 7)),
        st.tuples(st.just("ack"), st.integers(0, QUEUES - 1), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("reset"), st.integers(0, QUEUES - 1), st.integers(0, 30), st.just(0)),
        st.tuples(st.just("put"), st.integers(0, QUEUES - 1), st.integers(1, 40), st.just(0)),
    ),
    max_size=30,
)


def _run(
    fns: list[Any], layout: list[tuple[int, int]], ops: list[Any], per_queue: int, cq_units: int = 10
) -> tuple[list[Any], list[int]]:
    """What each of ``fns`` answered and left after each step, and how many queues each read fully."""

    async def run() -> tuple[list[Any], list[int]]:
        with tempfile.TemporaryDirectory() as root:
            config = tiny_config(root, mapped_file_size_commit_log=1 << 16)
            config.mapped_file_size_consume_queue = 20 * cq_units
            store = MessageStore(config)
            await store.start()
            try:
                topics = TopicConfigManager(BrokerConfig(), f"{root}/topics.json")
                topics.update(TopicConfig(topic_name=TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES))
                sides = [Side(store, topics, root, per_queue) for _ in fns]
                seen: list[list[Any]] = [[] for _ in fns]

                async def put(qid: int, n: int) -> None:
                    await store.put_messages([BrokerMessage(TOPIC, qid, b"m%d" % i) for i in range(n)])

                for qid, n in layout:
                    await put(qid, n)
                for step, (op, a, b, c) in enumerate(ops):
                    if op == "put":
                        await put(a, b)
                        continue
                    for fn, side, out in zip(fns, sides, seen, strict=True):
                        if op == "pop":
                            out.append(side.pop(fn, a, b, c, 1_000 + step))
                        elif op == "ack":
                            side.ack(a, b)
                        else:
                            side.reset(a, b)
                        out.append(_ledger(side.reader.ledger))
                return seen, [side.full_reads for side in sides]
            finally:
                await store.shutdown()

    return asyncio.run(run())


LAYOUT = st.lists(st.tuples(st.integers(0, QUEUES - 1), st.integers(1, 30)), max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LAYOUT, OPS, st.sampled_from([2, 40, 2000]))
def test_both_twins_read_as_read_topic_does(
    layout: list[tuple[int, int]], ops: list[Any], per_queue: int
) -> None:
    fns = [_reference, PURE["read_plain"]]
    if speedups is not None:
        fns.append(speedups.read_plain)
    states, _ = _run(fns, layout, ops, per_queue)
    for other in states[1:]:
        assert other == states[0]


def test_the_common_case_takes_the_fast_steps() -> None:
    """A drain of full queues: after each queue's first pop (made by the full read) the twins find
    the messages themselves; the answers are still the reference's."""
    fns = [_reference, PURE["read_plain"]]
    if speedups is not None:
        fns.append(speedups.read_plain)
    ops = [("pop", -1, 32, r) for r in range(12)] + [("ack", q, 99, 0) for q in range(QUEUES)]
    ops += [("pop", q, 4, 0) for q in range(QUEUES)]
    states, full_reads = _run(fns, [(q, 100) for q in range(QUEUES)], ops, 2000, cq_units=1000)
    assert all(s == states[0] for s in states[1:])
    pops = [entry for entry in states[0] if isinstance(entry, tuple) and len(entry) == 2]
    assert sum(r[0][2] for r in pops) == 12 * 32 + 4 * 4  # every pop took what it asked for
    visits = full_reads[0]  # the reference reads every queue it visits fully
    assert all(n == QUEUES for n in full_reads[1:]), (visits, full_reads)  # each queue's first pop only


@pytest.mark.skipif(speedups is None, reason="the compiled core is not built")
def test_the_active_twin_is_the_compiled_one() -> None:
    if _accel.ACTIVE == "compiled":
        assert plain.read_plain is speedups.read_plain
