"""Consume-queue cleaning on request (``broker/store/cq_clean.py``): CLEAN_EXPIRED_CONSUMEQUEUE's
files before the commitlog's start and wholly expired queues of dropped topics, CLEAN_UNUSED_TOPIC's
queues of topics not kept; reads and appends meanwhile, and a store killed mid-clean recovering."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from rocketpy.broker.store import MessageStore, cq_clean
from rocketpy.broker.store.mapped_file import MappedFile
from rocketpy.broker.store.results import PutMessageStatus
from tests.unit.test_store_helpers import bmsg, read_all, tiny_config

BODY = b"p" * 500


def _kept(topic: str) -> bool:
    return topic == "T"


def _cq_files(root: Path, topic: str, qid: int = 0) -> list[str]:
    d = root / "consumequeue" / topic / str(qid)
    return sorted(os.listdir(d)) if d.exists() else []


async def _store_with_expired_units(root: Path) -> tuple[MessageStore, int]:
    """A store whose commitlog lost its first files while the consume queues kept theirs (a crash
    between the time-based cleanup's two deletions, or files removed by hand): "Gone" (dropped from
    the topics) has units only in the lost part, "T" in both. Returns the store and T's max offset."""
    s = MessageStore(tiny_config(str(root)))
    await s.start()
    for i in range(5):
        await s.put_message(bmsg("Gone", 0, BODY + b"%d" % i))
    for i in range(40):
        await s.put_message(bmsg("T", 0, BODY + b"%d" % i))
    lost = [mf.path for mf in s.commitlog.files[:-2]]
    await s.shutdown()
    for path in lost:
        os.unlink(path)
    s = MessageStore(tiny_config(str(root)))
    await s.start()
    return s, 40


async def test_clean_expired_cq_keeps_the_live_tail_and_recovers(tmp_path: Path) -> None:
    s, top = await _store_with_expired_units(tmp_path)
    before = _cq_files(tmp_path, "T")
    lo = s.get_min_offset_in_queue("T", 0)
    assert lo > 10 and len(before) == 4  # files of 10 units; the first ones point before the commitlog
    expected = [BODY + b"%d" % i for i in range(lo, top)]
    assert read_all(s, "T", 0) == expected

    deleted = await s.clean_expired_consume_queues(_kept)
    after = _cq_files(tmp_path, "T")
    assert deleted == (len(before) - len(after)) + 1 and len(after) < len(before)  # + Gone's one file
    assert after == before[len(before) - len(after) :]  # the newest, contiguous
    assert not (tmp_path / "consumequeue" / "Gone").exists()
    assert s.get_max_offset_in_queue("T", 0) == top and read_all(s, "T", 0) == expected
    r = await s.put_message(bmsg("T", 0, b"next"))
    assert r.status is PutMessageStatus.PUT_OK and r.queue_offset == top  # offsets continue
    assert await s.clean_expired_consume_queues(_kept) == 0  # nothing more to do
    await s.shutdown()

    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    assert s.get_max_offset_in_queue("T", 0) == top + 1
    assert read_all(s, "T", 0) == [*expected, b"next"]
    assert s.get_max_offset_in_queue("Gone", 0) == 0
    await s.shutdown()


async def test_a_held_read_and_appends_during_the_clean(tmp_path: Path) -> None:
    s, top = await _store_with_expired_units(tmp_path)
    lo = s.get_min_offset_in_queue("T", 0)
    held = s.get_message("g", "T", 0, lo, 1)  # views into the commitlog and a consume-queue file
    first_cq = s.dispatcher.cqs[("T", 0)].files[0]
    view, n = s.dispatcher.cqs[("T", 0)].read_units(first_cq.base_offset // 20, 1)
    unit = bytes(view)
    puts = [s.put_message(bmsg("T", 0, b"during%d" % i)) for i in range(20)]
    deleted, *results = await asyncio.gather(s.clean_expired_consume_queues(_kept), *puts)
    assert deleted > 0 and all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert sorted(r.queue_offset for r in results) == list(range(top, top + 20))
    assert not await asyncio.to_thread(os.path.exists, first_cq.path)
    assert n == 1 and bytes(view) == unit and len(unit) == 20  # the unlinked file's mapping still reads
    assert held.message_count == 1 and held.join()
    held.release()
    if isinstance(view, memoryview):
        view.release()
    assert read_all(s, "T", 0)[-20:] == [b"during%d" % i for i in range(20)]
    await s.shutdown()


async def test_killed_mid_clean_recovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s, top = await _store_with_expired_units(tmp_path)
    lo = s.get_min_offset_in_queue("T", 0)
    expected = [BODY + b"%d" % i for i in range(lo, top)]
    before = _cq_files(tmp_path, "T")
    real_destroy = MappedFile.destroy
    calls = {"n": 0}

    def dies_on_the_second(self: MappedFile, force: bool = False) -> bool:
        calls["n"] += 1
        if calls["n"] == 2:
            raise SystemExit("killed")  # the process ends here: nothing after it runs
        return real_destroy(self, force)

    monkeypatch.setattr(MappedFile, "destroy", dies_on_the_second)
    plan = cq_clean.plan_expired(s.dispatcher, s.commitlog.min_offset, _kept)
    assert len(plan.files) >= 2
    with pytest.raises(SystemExit):
        await asyncio.to_thread(cq_clean.delete_plan, plan)
    monkeypatch.setattr(MappedFile, "destroy", real_destroy)
    await s.terminate()  # no clean stop: the next start recovers as after a crash
    assert _cq_files(tmp_path, "T") == before[1:]  # only the oldest went

    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    assert s.get_max_offset_in_queue("T", 0) == top and read_all(s, "T", 0) == expected
    assert await s.clean_expired_consume_queues(_kept) > 0  # the rest goes on the next clean
    assert read_all(s, "T", 0) == expected
    await s.shutdown()


async def test_clean_unused_topics(tmp_path: Path) -> None:
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    for topic in ("T", "Dropped", "rmq_sys_KEEP"):
        for qid in (0, 1):
            await s.put_message(bmsg(topic, qid, b"x"))
    orphan = tmp_path / "consumequeue" / "Orphan" / "0"
    await asyncio.to_thread(orphan.mkdir, parents=True)
    removed = await s.clean_unused_topics(lambda t: t == "T" or t.startswith("rmq_sys_"))
    assert removed == ["Dropped", "Orphan"]
    assert sorted(os.listdir(tmp_path / "consumequeue")) == ["T", "rmq_sys_KEEP"]
    assert s.get_max_offset_in_queue("Dropped", 1) == 0 and read_all(s, "T", 1) == [b"x"]
    r = await s.put_message(bmsg("Dropped", 0, b"again"))  # a topic made again starts afresh
    assert r.status is PutMessageStatus.PUT_OK and r.queue_offset == 0
    await s.shutdown()
