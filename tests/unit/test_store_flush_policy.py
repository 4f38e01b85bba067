"""The consume-queue / index flush policy (``flush.py``): write-back without syncs in the common
pass, a paced durable pass every thorough interval, and recovery after a reboot (``Checkpoint``)."""

from __future__ import annotations

import asyncio
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rocketpy.broker.store import MessageStore
from rocketpy.broker.store import checkpoint as checkpoint_module
from rocketpy.broker.store.checkpoint import POS_BOOT_ID, POS_DURABLE_DISPATCHED_OFFSET, Checkpoint
from rocketpy.broker.store.consume_queue import UNIT, UNIT_SIZE, ConsumeQueue
from rocketpy.broker.store.mapped_file import MappedFile, WriteBackPacer
from tests.unit.test_store_helpers import bmsg, read_all, tiny_config
from tests.waiting import wait_until_async

KIB = 1024


def _config(root: Path, **kw: Any) -> Any:
    return tiny_config(
        str(root), mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 1000,
        max_hash_slot_num=256, max_index_num=4096, flush_consume_queue_least_pages=0, **kw,
    )  # fmt: skip


class FlushSpy:
    """Counts syncs (``MappedFile.flush``) per file kind, write-backs and durable checkpoint writes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.syncs: Counter[str] = Counter()
        self.write_backs: Counter[str] = Counter()
        self.durable_points: list[int] = []
        real_flush, real_write_back = MappedFile.flush, ConsumeQueue.write_back
        real_durable = Checkpoint.write_durable

        def flush(mf: MappedFile) -> None:
            parts = Path(mf.path).parts
            self.syncs[next((k for k in ("consumequeue", "index", "commitlog") if k in parts), "?")] += 1
            real_flush(mf)

        def write_back(cq: ConsumeQueue) -> None:
            self.write_backs[f"{cq.topic}/{cq.queue_id}"] += 1
            real_write_back(cq)

        def write_durable(cp: Checkpoint, logics_ts: int, index_ts: int, point: int) -> None:
            real_durable(cp, logics_ts, index_ts, point)
            self.durable_points.append(point)  # after the write: a test waiting for it reads the file

        monkeypatch.setattr(MappedFile, "flush", flush)
        monkeypatch.setattr(ConsumeQueue, "write_back", write_back)
        monkeypatch.setattr(Checkpoint, "write_durable", write_durable)

    def queue_syncs(self) -> int:
        """Syncs of consume-queue and index files."""
        return self.syncs["consumequeue"] + self.syncs["index"]


async def test_the_common_pass_writes_back_and_syncs_no_queue_or_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = FlushSpy(monkeypatch)
    store = MessageStore(_config(tmp_path, flush_interval_consume_queue=20, flush_commit_log_least_pages=0))
    await store.start()
    for i in range(40):
        assert (await store.put_message(bmsg("T", i % 2, b"m%d" % i, uniq=f"u{i}"))).ok
    await wait_until_async(
        lambda: spy.write_backs["T/0"] and spy.write_backs["T/1"], 10, message="write-backs"
    )
    assert spy.queue_syncs() == 0 and spy.durable_points == []
    flushed = lambda: _checkpoint_i64(tmp_path / "checkpoint", 32)  # noqa: E731 (the physic fields, unsynced)
    await wait_until_async(lambda: flushed() > 0, 10, message="the flushed offset in the checkpoint")
    await store.shutdown()  # the durable pass: every queue, the index, the checkpoint synced
    assert spy.syncs["consumequeue"] >= 2 and spy.syncs["index"] >= 1
    assert spy.durable_points == [store.commitlog.max_offset]


async def test_the_durable_pass_comes_every_thorough_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = FlushSpy(monkeypatch)
    store = MessageStore(
        _config(tmp_path, flush_interval_consume_queue=20, flush_consume_queue_thorough_interval=100)
    )
    await store.start()
    try:
        for i in range(10):
            assert (await store.put_message(bmsg("T", 0, b"m%d" % i))).ok
        end = store.commitlog.max_offset
        await wait_until_async(
            lambda: any(p >= end for p in spy.durable_points), 10, message="a durable pass"
        )
        assert spy.syncs["consumequeue"] >= 1
        cp = Checkpoint(str(tmp_path / "checkpoint"))
        cp.open()
        assert cp.durable_dispatched_offset >= end and cp.written_boot_id == cp.boot_id
        cp.close()
    finally:
        await store.shutdown()


def test_the_pacer_writes_back_slice_by_slice(tmp_path: Path) -> None:
    mf = MappedFile.open(str(tmp_path / "f"), 0, 1 << 20)
    pauses: list[int] = []
    try:
        mf.mm[:] = b"x" * (1 << 20)
        pacer = WriteBackPacer(256 * KIB, lambda: pauses.append(1))
        pacer.write_back(mf, 5000, 700 * KIB)  # from the page holding 5000 to 700 KiB: 3 slices
        assert len(pauses) == 3
        mf.flush()
        with open(mf.path, "rb") as f:
            assert f.read() == b"x" * (1 << 20)
    finally:
        mf.destroy(force=True)


def test_a_checkpoint_tells_a_reboot(tmp_path: Path) -> None:
    path = str(tmp_path / "checkpoint")
    cp = Checkpoint(path, boot_id=b"a" * 16)
    cp.open()
    assert not cp.rebooted  # a new file: unknown
    cp.claim_boot()
    cp.write_durable(1, 2, 300)
    cp.close()
    same, other = Checkpoint(path, boot_id=b"a" * 16), Checkpoint(path, boot_id=b"b" * 16)
    for c in (same, other):
        c.open()
        c.close()
    assert not same.rebooted and other.rebooted and other.durable_dispatched_offset == 300
    assert len(checkpoint_module.current_boot_id()) == 16
    assert checkpoint_module.current_boot_id(str(tmp_path / "missing")) == bytes(16)


def _checkpoint_i64(path: Path, pos: int) -> int:
    with open(path, "rb") as f:
        f.seek(pos)
        return int(struct.unpack(">q", f.read(8))[0])


def _mark_earlier_boot(path: Path) -> None:
    """The checkpoint as a run in an earlier boot of the machine left it."""
    with open(path, "r+b") as f:
        f.seek(POS_BOOT_ID)
        f.write(b"\x01" * 16)


def _damage_queue_past(cq_dir: Path, point: int) -> None:
    """What a lost page cache can leave of a consume queue: the first unit past ``point`` zeroed
    (its page never written back) while later ones are there (a later page was): a hole, which
    the binary search for the queue's end steps over."""
    path = next(cq_dir.iterdir())
    data = bytearray(path.read_bytes())
    units = [UNIT.unpack_from(data, i) for i in range(0, len(data), UNIT_SIZE)]
    first = next(i for i, (phys, size, _) in enumerate(units) if size and phys + size > point)
    assert units[first + 5][1], "the test needs units past the hole"
    data[first * UNIT_SIZE : (first + 1) * UNIT_SIZE] = bytes(UNIT_SIZE)
    path.write_bytes(data)


async def test_after_a_reboot_recovery_rebuilds_queues_from_the_durable_point(tmp_path: Path) -> None:
    cfg = _config(tmp_path, flush_interval_consume_queue=20)
    store = MessageStore(cfg)
    await store.start()
    for i in range(30):
        assert (await store.put_message(bmsg("T", 0, b"m%02d" % i, uniq=f"k{i}"))).ok
    await store.settle()  # every unit in a file: the dispatch point is the log's end
    assert store._flush is not None
    await asyncio.to_thread(store._flush.flush_consume_queues)  # a durable pass: the point is here
    point = store.commitlog.max_offset
    for i in range(30, 60):
        assert (await store.put_message(bmsg("T", 0, b"m%02d" % i, uniq=f"k{i}"))).ok
    await asyncio.to_thread(store.commitlog.flush)  # the log itself is durable (SYNC_FLUSH would be)
    await store.terminate()  # killed: no clean-stop flush, abort marker kept
    _damage_queue_past(tmp_path / "consumequeue" / "T" / "0", point)
    _mark_earlier_boot(tmp_path / "checkpoint")
    assert _checkpoint_i64(tmp_path / "checkpoint", POS_DURABLE_DISPATCHED_OFFSET) == point
    store = MessageStore(cfg)
    await store.start()
    try:
        assert read_all(store, "T", 0) == [b"m%02d" % i for i in range(60)]
        found = store.query_message("T", "k45", 4, 0, 2**62)
        assert len(found.buffers) == 1
    finally:
        await store.shutdown()


async def test_after_a_kill_recovery_trusts_the_page_cache(tmp_path: Path) -> None:
    cfg = _config(tmp_path, flush_interval_consume_queue=20)
    store = MessageStore(cfg)
    await store.start()
    for i in range(20):
        assert (await store.put_message(bmsg("T", 0, b"m%02d" % i))).ok
    await store.terminate()
    store = MessageStore(cfg)
    await store.start()
    try:
        assert not store.checkpoint.rebooted
        assert read_all(store, "T", 0) == [b"m%02d" % i for i in range(20)]
    finally:
        await store.shutdown()
