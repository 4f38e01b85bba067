"""The store's write layer: MappedFile's write position, CommitLog.append (seal, roll), the one
dispatch (re-dispatch skips what queues and index hold), the index after a cut, side-effect-free
runtime figures."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketpy.broker.store import BrokerMessage, MessageStore, PutMessageStatus
from rocketpy.broker.store.allocate import AllocateService
from rocketpy.broker.store.commitlog import CommitLog, RecordBatch
from rocketpy.broker.store.consume_queue import ConsumeQueue
from rocketpy.broker.store.dispatch import Dispatcher
from rocketpy.broker.store.index import IndexService
from rocketpy.broker.store.mapped_file import MappedFile
from rocketpy.record import BLANK_MAGIC, SIZE_MAGIC, decode_record, decode_records, topic_part
from tests.unit.test_store_helpers import bmsg, tiny_config

HOST8 = bytes([10, 0, 0, 9, 0, 0, 42, 159])


def test_mapped_file_moves_its_own_write_position(tmp_path: Path) -> None:
    mf = MappedFile.open(str(tmp_path / "f"), 1000, 4096)

    def write_abc(mm: object, base: int, pos: int, room: int, batch: bytes) -> tuple[int, tuple[int, int]]:
        mf.mm[pos : pos + len(batch)] = batch
        return len(batch), (base + pos, room)

    assert mf.append_messages(write_abc, b"abc") == (1000, 4096)
    assert mf.append_messages(write_abc, b"de") == (1003, 4093)
    assert mf.wrote == 5 and bytes(mf.view[:5]) == b"abcde"
    mf.write(20, b"unit")
    assert mf.wrote == 24
    mf.recover_position(7)
    assert mf.wrote == 7
    with pytest.raises(AttributeError):
        mf.wrote = 9  # type: ignore[misc]
    mf.destroy(force=True)


def _batch(cq: ConsumeQueue, bodies: list[bytes]) -> RecordBatch:
    msgs = [BrokerMessage("T", 0, b, properties="TAGS\x01a\x02") for b in bodies]
    props = [m.properties.encode() for m in msgs]
    topic_b = topic_part("T")
    total = sum(88 + len(b) + len(topic_b) + 2 + len(p) for b, p in zip(bodies, props, strict=True))
    return msgs, topic_b, props, total, cq, 1_700_000_000_000, HOST8


def test_commitlog_append_numbers_packs_and_seals(tmp_path: Path) -> None:
    cl = CommitLog(str(tmp_path / "commitlog"), 1024)
    cl.ensure_first_file(0)
    cq = ConsumeQueue(str(tmp_path / "cq"), "T", 0, 200)
    cq.next_offset = 7
    r = cl.append(_batch(cq, [b"x" * 300, b"y" * 300]))
    size = 88 + 300 + 2 + 2 + 7  # head, body, topic "T", properties "TAGS\x01a\x02"
    assert r is not None and r.status is PutMessageStatus.PUT_OK
    assert r.offsets == [0, size] and r.wrote_bytes == 2 * size and r.sizes == [size, size] and r.msg_num == 2
    recs = decode_records(cl.files[0].view[: r.wrote_bytes])
    assert [(m.body[:1], m.queue_offset, m.commitlog_offset) for m in recs] == [(b"x", 7, 0), (b"y", 8, size)]
    assert recs[0].store_host == ("10.0.0.9", 10911) and recs[0].tags == "a"
    assert cl.max_offset == 2 * size
    # 300 more bytes do not fit: the file is sealed with a blank tail; no next file yet
    r = cl.append(_batch(cq, [b"z" * 300]))
    assert r is None  # the next file is not ready
    assert cl.files[0].wrote == 1024 and cl.max_offset == 1024
    assert SIZE_MAGIC.unpack_from(cl.files[0].mm, 2 * size) == (1024 - 2 * size, BLANK_MAGIC)
    cl.close()


async def test_commitlog_append_rolls_to_the_next_file(tmp_path: Path) -> None:
    cl = CommitLog(str(tmp_path / "commitlog"), 1024)
    cl.ensure_first_file(0)
    allocator = AllocateService(asyncio.get_running_loop(), "test-allocate")
    allocator.start()
    try:
        cl.attach_allocator(allocator)
        assert await cl.wait_next_file(5)
        cq = ConsumeQueue(str(tmp_path / "cq"), "T", 0, 200)
        cl.append(_batch(cq, [b"a" * 800]))
        r = cl.append(_batch(cq, [b"b" * 300]))  # seals file 0 and goes on in file 1
        assert r is not None and r.status is PutMessageStatus.PUT_OK and r.wrote_offset == 1024
        assert [mf.base_offset for mf in cl.files] == [0, 1024]
        assert decode_record(cl.files[1].view[: r.wrote_bytes]).body == b"b" * 300
        first = 88 + 800 + 2 + 2 + 7
        assert SIZE_MAGIC.unpack_from(cl.files[0].mm, first) == (1024 - first, BLANK_MAGIC)
    finally:
        await asyncio.to_thread(allocator.shutdown)
        cl.close()


def test_redispatch_skips_what_the_queue_and_index_hold(tmp_path: Path) -> None:
    index = IndexService(str(tmp_path / "index"), 16, 32, lambda: 1_700_000_000.0)
    d = Dispatcher(str(tmp_path / "cq"), 200, index, [1000])
    seen: list[int] = []
    d.listen(lambda _t, _q, off, _c, _ts: seen.append(off))
    cq = d.cq("T", 0)
    props = "KEYS\x01k1\x02UNIQ_KEY\x01AB\x02"
    d.dispatch(cq, 0, 0, 100, None, props, 1_700_000_000_000)
    d.dispatch(cq, 1, 100, 100, None, props, 1_700_000_000_000)
    entries = index.files[-1].index_count
    d.dispatch(cq, 0, 0, 100, None, props, 1_700_000_000_000)  # a recovery scan from before the end
    assert (cq.next_offset, seen, index.files[-1].index_count) == (2, [0, 1], entries)
    assert index.lookup("T", "k1", 10, 0, 2**62) == [100, 0]
    empty = d.cq("T", 1)
    d.dispatch(empty, 5, 300, 100, 0, "", 1_700_000_000_000)  # an empty queue starts where its records do
    assert (empty.min_offset, empty.next_offset, empty.unit(5)) == (5, 6, (300, 100, 0))


def _garble_magic(root: Path, offset: int) -> None:
    """Garble the magic of the record at ``offset`` (4 KiB files): recovery cuts the log there."""
    with open(root / "commitlog" / f"{offset - offset % 4096:020d}", "r+b") as f:
        f.seek(offset % 4096 + 4)
        f.write(b"\x00\x01\x02\x03")


async def test_records_written_after_a_cut_are_indexed(tmp_path: Path) -> None:
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    spans = [await s.put_message(bmsg("T", 0, b"v%d" % i, keys=f"old{i}")) for i in range(6)]
    await s.settle()
    await s.terminate()
    last = spans[-1]
    await asyncio.to_thread(_garble_magic, tmp_path, last.wrote_offset)
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    r = await s.put_message(bmsg("T", 0, b"fresh", keys="fresh"))
    assert r.wrote_offset == last.wrote_offset  # where the index held the cut record
    assert [decode_record(b).body for b in s.query_message("T", "fresh", 4, 0, 2**62).buffers] == [b"fresh"]
    await s.shutdown()


async def test_runtime_info_reading_changes_nothing(tmp_path: Path) -> None:
    now = [1_700_000_000.0]
    s = MessageStore(tiny_config(str(tmp_path)), clock=lambda: now[0])
    await s.start()
    for i in range(10):
        assert (await s.put_message(bmsg("T", 0, b"%d" % i))).status is PutMessageStatus.PUT_OK
    s.get_message("g", "T", 0, 0, 4)
    now[0] += 2.0
    first, second = s.runtime_info(), s.runtime_info()
    assert first == second
    assert (first["putTps"], first["getTransferedTps"], first["putMessageTimesTotal"]) == ("5.0", "2.0", "10")
    await s.shutdown()
