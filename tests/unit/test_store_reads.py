"""Store reads: the unfiltered single-view fast path and the filter hints (matches_all, tag_codes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketpy.broker.store import GetMessageStatus, MessageStore
from rocketpy.filter.tags import java_string_hash
from rocketpy.record import decode_records
from tests.unit.test_store_helpers import bmsg, tiny_config


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MessageStore]:
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    yield s
    await s.shutdown()


class _Hinted:
    """A filter that must be decided by its hints: any per-message call fails the test."""

    def __init__(self, matches_all: bool, tag_codes: frozenset[int] | None) -> None:
        self.matches_all = matches_all
        self.tag_codes = tag_codes

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        raise AssertionError("per-unit filter call despite the hints")

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        raise AssertionError("per-record filter call despite the hints")


async def _fill(store: MessageStore, n: int) -> tuple[list[bytes], list[int]]:
    bodies = [b"%03d" % i + b"x" * 300 for i in range(n)]
    phys = [(await store.put_message(bmsg("T", 0, b, tags="A" if i % 2 else "B"))).wrote_offset
            for i, b in enumerate(bodies)]  # fmt: skip
    return bodies, phys


async def test_contiguous_run_is_one_view(store: MessageStore) -> None:
    bodies, _ = await _fill(store, 4)
    r = store.get_message("g", "T", 0, 0, 4)
    assert (r.status, r.message_count, r.next_begin_offset) == (GetMessageStatus.FOUND, 4, 4)
    assert len(r.buffers) == 1 and r.buffer_total_size == len(r.buffers[0])
    assert r.queue_offsets == [0, 1, 2, 3]
    assert [m.body for m in decode_records(r.join())] == bodies
    assert [m.queue_offset for m in decode_records(r.join())] == [0, 1, 2, 3]


async def test_run_across_two_commitlog_files_is_split(store: MessageStore) -> None:
    bodies, phys = await _fill(store, 30)
    size = store.commitlog.file_size
    k = next(i for i in range(len(phys) - 3) if phys[i] // size != phys[i + 3] // size)
    r = store.get_message("g", "T", 0, k, 4)
    assert (r.status, r.message_count, r.next_begin_offset) == (GetMessageStatus.FOUND, 4, k + 4)
    assert len(r.buffers) == 4 and r.buffer_total_size == sum(len(b) for b in r.buffers)
    assert [m.body for m in decode_records(r.join())] == bodies[k : k + 4]


async def test_interleaved_queues_and_max_bytes(store: MessageStore) -> None:
    for i in range(6):
        await store.put_message(bmsg("T", i % 2, b"%d" % i))
    r = store.get_message("g", "T", 1, 0, 3)
    assert len(r.buffers) == 3 and [m.body for m in decode_records(r.join())] == [b"1", b"3", b"5"]
    r = store.get_message("g", "T", 0, 0, 3, max_bytes=len(store.get_message("g", "T", 0, 0, 1).join()) * 2)
    assert (r.message_count, r.next_begin_offset) == (2, 2)
    assert [m.body for m in decode_records(r.join())] == [b"0", b"2"]


async def test_filter_hints_replace_per_message_calls(store: MessageStore) -> None:
    bodies, _ = await _fill(store, 8)
    r = store.get_message("g", "T", 0, 0, 8, message_filter=_Hinted(True, None))
    assert r.message_count == 8 and len(r.buffers) == 1
    only_a = _Hinted(False, frozenset({java_string_hash("A") & 0xFFFFFFFF}))
    r = store.get_message("g", "T", 0, 0, 32, message_filter=only_a)
    assert [m.body for m in decode_records(r.join())] == bodies[1::2]
    assert (r.message_count, r.next_begin_offset) == (4, 8)
    a_or_b = _Hinted(False, frozenset(java_string_hash(t) & 0xFFFFFFFF for t in ("A", "B")))
    r = store.get_message("g", "T", 0, 0, 8, message_filter=a_or_b)  # every unit passes: one view
    assert r.message_count == 8 and len(r.buffers) == 1
    assert [m.body for m in decode_records(r.join())] == bodies
