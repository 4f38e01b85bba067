"""Truncating a running store (controller mode's rejoin) and the epoch file's consistent point."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rocketpy.broker.store import MessageStore
from rocketpy.broker.store.epoch import EpochFile, check_entries, consistent_point
from tests.unit.test_store_helpers import bmsg, read_all, tiny_config


def _files(store: MessageStore) -> bytes:
    return b"".join(bytes(mf.view[: mf.wrote]) for mf in store.commitlog.files)


async def _replicate(master: MessageStore, slave: MessageStore, rng: random.Random) -> None:
    while slave.max_physical_offset < master.max_physical_offset:
        off = slave.max_physical_offset
        data = master.read_commitlog(off, rng.randint(1, 700))
        assert data is not None
        await slave.append_replica(off, data)


async def test_old_master_truncates_to_the_new_masters_history(tmp_path: Path) -> None:
    """A writes 120 messages, B has the first 80, B takes over and writes 20 of its own: A cuts its
    40 unconfirmed messages (log, queues, index) and then copies B byte for byte."""
    rng = random.Random(3)
    a = MessageStore(tiny_config(str(tmp_path / "a")))
    b = MessageStore(tiny_config(str(tmp_path / "b")))
    await a.start()
    await b.start()
    bodies = [bytes([65 + i % 26]) * rng.randint(10, 500) for i in range(120)]
    for i, body in enumerate(bodies[:80]):
        await a.put_message(bmsg("T", i % 2, body, keys=f"k{i}"))
    await _replicate(a, b, rng)
    confirmed = b.max_physical_offset
    for i, body in enumerate(bodies[80:], 80):
        await a.put_message(bmsg("T", i % 2, body, keys=f"k{i}"))
    assert len(a.commitlog.files) > len(b.commitlog.files)  # the lost tail spans files
    ours = [b"new%03d" % i * 20 for i in range(20)]
    for i, body in enumerate(ours):
        await b.put_message(bmsg("T", i % 2, body, keys=f"n{i}"))

    assert await a.truncate(confirmed) > 0
    assert a.max_physical_offset == confirmed
    assert a.query_message("T", "k100", 10, 0, 1 << 62).buffers == []  # the index lost its entries
    assert len(a.query_message("T", "k10", 10, 0, 1 << 62).buffers) == 1
    await _replicate(b, a, rng)
    assert _files(a) == _files(b)
    for q in range(2):
        assert read_all(a, "T", q) == bodies[:80][q::2] + ours[q::2]
    assert len(a.query_message("T", "n3", 10, 0, 1 << 62).buffers) == 1
    assert a.query_message("T", "k100", 10, 0, 1 << 62).buffers == []
    await a.shutdown()
    await b.shutdown()
    a = MessageStore(tiny_config(str(tmp_path / "a")))  # recovery agrees with the cut
    await a.start()
    assert read_all(a, "T", 0) == bodies[:80][0::2] + ours[0::2]
    await a.shutdown()


async def test_a_cut_store_takes_puts_at_its_new_end(tmp_path: Path) -> None:
    store = MessageStore(tiny_config(str(tmp_path / "s")))
    await store.start()
    for i in range(60):
        await store.put_message(bmsg("T", 0, b"x%02d" % i * 40, keys=f"k{i}"))
    mid = store.get_commit_log_offset_in_queue("T", 0, 30)
    await store.truncate(mid)
    assert store.get_max_offset_in_queue("T", 0) == 30
    for i in range(40):
        await store.put_message(bmsg("T", 0, b"y%02d" % i * 40))
    got = read_all(store, "T", 0)
    assert got[:30] == [b"x%02d" % i * 40 for i in range(30)] and len(got) == 70
    assert await store.truncate(store.max_physical_offset) == 0
    with pytest.raises(Exception, match="oldest byte"):
        await store.truncate(-1)
    await store.shutdown()


def test_consistent_point_rules() -> None:
    # the old master (epoch 1 to 150) rejoins a master elected at 100: cut to 100
    assert consistent_point([(1, 0)], 150, [(1, 0), (2, 100)], 300) == 100
    # a follower that had less than the new master: nothing to cut
    assert consistent_point([(1, 0)], 80, [(1, 0), (2, 100)], 300) == 80
    # the newest common epoch wins; the master's epoch 2 began where this log's epoch 1 did not end
    assert consistent_point([(1, 0), (2, 100)], 200, [(1, 0), (3, 90)], 120) == 90
    # an empty log follows from 0; a log with no common epoch diverged
    assert consistent_point([], 0, [(4, 0)], 50) == 0
    assert consistent_point([(0, 0)], 10, [(1, 0)], 50) is None
    with pytest.raises(ValueError):
        check_entries([[2, 10], [1, 20]])


def test_epoch_file_begin_cut_and_reload(tmp_path: Path) -> None:
    ef = EpochFile(str(tmp_path))
    ef.load(max_offset=500)
    assert ef.entries == [(0, 0)]  # a store from before controller mode
    ef.adopt([[0, 0], [1, 400], [2, 900]])
    ef.begin(3, 600)  # it never got epoch 2's bytes
    assert ef.entries == [(0, 0), (1, 400), (3, 600)]
    ef.save()
    again = EpochFile(str(tmp_path))
    again.load(max_offset=0)
    assert again.entries == [(0, 0), (1, 400), (3, 600)] and again.last_epoch == 3
    again.cut(500)
    assert again.entries == [(0, 0), (1, 400)]
