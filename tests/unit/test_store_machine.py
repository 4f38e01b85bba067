"""Hypothesis state machine over the store: random puts (single and batch, sizes crossing 4 KiB file
boundaries), gets, clean and abnormal restarts, and cleanup. Every read equals what was put, in order
per queue, nothing missing and nothing extra."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rocketpy.broker.store import GetMessageStatus, MessageStore, PutMessageStatus
from rocketpy.record import decode_records
from tests.unit.test_store_helpers import bmsg, tiny_config

TOPICS = ("A", "B")
QUEUES = (0, 1, 2)


class StoreMachine(RuleBasedStateMachine):
    """Model: per (topic, queue) the list of (commitlog offset, body) put so far."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.root = tempfile.mkdtemp(prefix="store_machine_")
        self.now = time.time()
        self.disk_ratio = 0.1
        self.model: dict[tuple[str, int], list[tuple[int, bytes]]] = {
            (t, q): [] for t in TOPICS for q in QUEUES
        }
        self.counter = 0
        self.store = self._open()

    def _open(self) -> MessageStore:
        store = MessageStore(tiny_config(self.root, max_message_size=3000), clock=self._clock,
                             disk_usage=lambda _p: self.disk_ratio)  # fmt: skip
        self.loop.run_until_complete(store.start())
        return store

    def _clock(self) -> float:
        return self.now

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @rule(topic=st.sampled_from(TOPICS), queue=st.sampled_from(QUEUES),
          sizes=st.lists(st.integers(0, 2500), min_size=1, max_size=4))  # fmt: skip
    def put(self, topic: str, queue: int, sizes: list[int]) -> None:
        bodies = []
        for size in sizes:
            self.counter += 1
            head = b"#%d#" % self.counter
            bodies.append(head + bytes([self.counter % 251]) * max(0, size - len(head)))
        msgs = [bmsg(topic, queue, b, keys=f"k{self.counter}") for b in bodies]
        r = self._run(self.store.put_messages(msgs) if len(msgs) > 1 else self.store.put_message(msgs[0]))
        total = sum(len(b) for b in bodies) + len(msgs) * 200
        if r.status is PutMessageStatus.MESSAGE_ILLEGAL:
            assert total > 4000, r.remark  # only a batch too large for one 4 KiB file may be refused
            return
        assert r.status is PutMessageStatus.PUT_OK, r
        assert r.queue_offset == len(self.model[(topic, queue)])
        offsets = [int(i[16:], 16) for i in r.offset_msg_ids]
        self.model[(topic, queue)].extend(zip(offsets, bodies, strict=True))

    @rule(topic=st.sampled_from(TOPICS), queue=st.sampled_from(QUEUES), data=st.data())
    def get(self, topic: str, queue: int, data: st.DataObject) -> None:
        expected = self._expected(topic, queue)
        lo = self.store.get_min_offset_in_queue(topic, queue)
        hi = len(self.model[(topic, queue)])
        offset = data.draw(st.integers(0, hi + 2))
        r = self.store.get_message("g", topic, queue, offset, data.draw(st.integers(1, 8)))
        if hi == 0:
            assert r.status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
        elif offset < lo:
            assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == lo
        elif offset == hi:
            assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        elif offset > hi:
            assert r.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
        else:
            assert r.status is GetMessageStatus.FOUND
            got = [m.body for m in decode_records(r.join())]
            assert got == [b for _, b in expected[offset - lo : offset - lo + len(got)]]
            assert r.next_begin_offset == offset + len(got)

    def _expected(self, topic: str, queue: int) -> list[tuple[int, bytes]]:
        min_phys = self.store.min_physical_offset
        return [(o, b) for o, b in self.model[(topic, queue)] if o >= min_phys]

    @rule()
    def restart_clean(self) -> None:
        self._run(self.store.shutdown())
        self.store = self._open()

    @rule()
    def restart_abnormal(self) -> None:
        self._run(self.store.settle())
        self._run(self.store.terminate())
        self.store = self._open()

    @precondition(lambda self: len(self.store.commitlog.files) > 2)
    @rule()
    def cleanup(self) -> None:
        self.now = time.time() + 100 * 3600  # every file is past fileReservedTime (72 h)
        self.disk_ratio = 0.8  # past diskMaxUsedSpaceRatio: clean at any hour
        deleted = self._run(asyncio.to_thread(self.store.cleanup.run_once))  # type: ignore[union-attr]
        self.disk_ratio = 0.1
        assert deleted > 0 and len(self.store.commitlog.files) == 1

    @invariant()
    def queues_match_model(self) -> None:
        for (topic, queue), items in self.model.items():
            assert self.store.get_max_offset_in_queue(topic, queue) == len(items)
            expected = self._expected(topic, queue)
            assert self.store.get_min_offset_in_queue(topic, queue) == len(items) - len(expected)

    def teardown(self) -> None:
        try:
            self._check_all()
            self._run(self.store.shutdown())
        finally:
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)

    def _check_all(self) -> None:
        for topic, queue in self.model:
            bodies, off = [], self.store.get_min_offset_in_queue(topic, queue)
            while True:
                r = self.store.get_message("g", topic, queue, off, 32, max_bytes=1 << 20)
                if r.message_count == 0:
                    break
                bodies += [m.body for m in decode_records(r.join())]
                off = r.next_begin_offset
            assert bodies == [b for _, b in self._expected(topic, queue)]


StoreMachine.TestCase.settings = settings(max_examples=12, stateful_step_count=25, deadline=None)
TestStoreMachine = StoreMachine.TestCase
