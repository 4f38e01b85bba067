"""Message store: put/get statuses, bad input, rolls, batches, lock, flush, restarts, queries."""

from __future__ import annotations

import asyncio
import os
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketpy.broker.store import (
    BrokerMessage,
    GetMessageStatus,
    MessageStore,
    PutMessageStatus,
    StoreLockedError,
)
from rocketpy.config import FlushDiskType
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.record import decode_record, decode_records
from tests.unit.test_store_helpers import bmsg, read_all, tiny_config
from tests.waiting import wait_until_async


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MessageStore]:
    s = MessageStore(tiny_config(str(tmp_path)), store_host=("10.0.0.9", 10911))
    await s.start()
    yield s
    await s.shutdown()


async def test_put_get_roundtrip_across_file_rolls(store: MessageStore) -> None:
    bodies = [bytes([i]) * (i * 37 % 900) for i in range(60)]
    for i, b in enumerate(bodies):
        r = await store.put_message(bmsg("T", i % 3, b, tags="A" if i % 2 else "B", keys=f"k{i}"))
        assert r.status is PutMessageStatus.PUT_OK and r.queue_offset == i // 3
        assert decode_offset_msg_id(r.offset_msg_id) == ("10.0.0.9", 10911, r.wrote_offset)
    assert len(store.commitlog.files) > 3  # 4 KiB files: many rolls
    for q in range(3):
        assert read_all(store, "T", q) == bodies[q::3]
        assert store.get_max_offset_in_queue("T", q) == 20
    assert store.topic_queue_table()[("T", 1)] == 20


async def test_get_statuses(store: MessageStore) -> None:
    S = GetMessageStatus
    assert store.get_message("g", "none", 0, 0, 32).status is S.NO_MATCHED_LOGIC_QUEUE
    for i in range(5):
        await store.put_message(bmsg("T", 0, b"m%d" % i))
    r = store.get_message("g", "T", 0, 5, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (S.OFFSET_OVERFLOW_ONE, 5, 0, 5)
    r = store.get_message("g", "T", 0, 9, 32)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_OVERFLOW_BADLY, 0)
    r = store.get_message("g", "T", 0, 2, 2)
    assert (r.status, r.next_begin_offset, r.message_count) == (S.FOUND, 4, 2)
    assert [m.queue_offset for m in decode_records(r.join())] == [2, 3]
    r = store.get_message("g", "T", 0, 0, 32, max_bytes=1)
    assert r.message_count == 1  # at least one record even over max_bytes


async def test_filter_by_tags_code(store: MessageStore) -> None:
    from rocketpy.filter.tags import java_string_hash

    for i in range(10):
        await store.put_message(bmsg("T", 0, b"%d" % i, tags="A" if i % 3 == 0 else "B"))

    class Only:
        def is_matched_by_consume_queue(self, tags_code: int) -> bool:
            return tags_code == java_string_hash("A")

        def is_matched_by_commit_log(self, record: memoryview) -> bool:
            return True

    r = store.get_message("g", "T", 0, 0, 32, message_filter=Only())
    assert [m.body for m in decode_records(r.join())] == [b"0", b"3", b"6", b"9"]
    assert r.next_begin_offset == 10
    r = store.get_message("g", "T", 0, 7, 32, message_filter=Only())
    assert r.message_count == 1 and r.next_begin_offset == 10
    r = store.get_message("g", "T", 0, 7, 1, message_filter=Only())
    assert r.message_count == 1 and r.next_begin_offset == 10


async def test_bad_input_writes_nothing(store: MessageStore) -> None:
    before = store.max_physical_offset
    r = await store.put_message(bmsg("t" * 128, 0, b"x"))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "127" in r.remark
    r = await store.put_message(BrokerMessage("T", 0, b"x", properties="a\x01" + "v" * 40000 + "\x02"))
    assert r.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED and "32767" in r.remark
    r = await store.put_message(bmsg("T", 0, b"x" * 2049))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "maxMessageSize" in r.remark
    r = await store.put_messages([bmsg("T", 0, b"ok"), bmsg("T", 0, b"x" * 4000)])
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.max_physical_offset == before and store.get_max_offset_in_queue("T", 0) == 0


async def test_batch_is_contiguous_and_ids_listed(store: MessageStore) -> None:
    await store.put_message(bmsg("T", 1, b"a" * 1950))
    await store.put_message(bmsg("T", 1, b"a" * 1950))  # rolls into the second file
    batch = [bmsg("T", 1, b"b%d" % i + b"." * 400, uniq=f"U{i}") for i in range(5)]
    r = await store.put_messages(batch)
    assert r.status is PutMessageStatus.PUT_OK and r.msg_num == 5 and r.queue_offset == 2
    ids = r.offset_msg_ids
    assert len(ids) == 5 and r.offset_msg_id == ",".join(ids)
    offsets = [decode_offset_msg_id(i)[2] for i in ids]
    assert offsets[0] == r.wrote_offset and offsets[0] % 4096 == 0  # rolled: the whole batch in a new file
    assert read_all(store, "T", 1)[2:] == [m.body for m in batch]
    mixed = await store.put_messages([bmsg("T", 1, b"x"), bmsg("T", 2, b"y")])
    assert mixed.status is PutMessageStatus.MESSAGE_ILLEGAL


async def test_second_store_on_same_dir_is_refused(store: MessageStore, tmp_path: Path) -> None:
    other = MessageStore(tiny_config(str(tmp_path)))
    with pytest.raises(StoreLockedError, match="another broker"):
        await other.start()


async def test_listener_lookup_by_time_and_offset(store: MessageStore) -> None:
    seen: list[tuple[str, int, int, int, int]] = []
    store.listen_to_dispatches(lambda *a: seen.append(a))
    r1 = await store.put_message(bmsg("T", 0, b"one", tags="TagA"))
    r2 = await store.put_message(bmsg("T", 0, b"two"))
    assert [(s[0], s[1], s[2], s[3]) for s in seen] == [("T", 0, 0, 2598919), ("T", 0, 1, 0)]
    raw = store.lookup_message_by_offset(r2.wrote_offset)
    assert raw is not None and decode_record(raw).body == b"two"
    assert store.lookup_message_by_offset(r2.wrote_offset + 1) is None
    assert store.get_commit_log_offset_in_queue("T", 0, 1) == r2.wrote_offset
    assert store.get_earliest_message_time("T", 0) == r1.store_timestamp
    assert store.get_offset_in_queue_by_time("T", 0, r1.store_timestamp) == 0
    assert store.get_offset_in_queue_by_time("T", 0, r2.store_timestamp + 1) == 2
    assert store.get_earliest_message_time("none", 0) == -1


async def test_query_by_key_and_unique_key(store: MessageStore) -> None:
    for i in range(40):  # more entries than one 32-entry index file holds
        await store.put_message(bmsg("T", 0, b"%d" % i, keys=f"order-{i % 5} other", uniq=f"UNIQ{i:04d}"))
    await store.put_message(bmsg("Other", 0, b"x", keys="order-1"))
    assert await store.settle()
    res = store.query_message("T", "order-1", 100, 0, 2**62)
    assert sorted(decode_record(b).body for b in res.buffers) == sorted(b"%d" % i for i in range(1, 40, 5))
    assert [decode_record(b).body for b in store.query_message("T", "UNIQ0033", 5, 0, 2**62).buffers] == [
        b"33"
    ]
    assert store.query_message("T", "nope", 5, 0, 2**62).buffers == []
    assert len(store.dispatcher.index.files) >= 2  # type: ignore[union-attr]


async def test_restart_keeps_everything(tmp_path: Path) -> None:
    cfg = tiny_config(str(tmp_path))
    s = MessageStore(cfg)
    await s.start()
    for i in range(30):
        await s.put_message(bmsg("T", i % 2, b"v%d" % i, keys=f"k{i}"))
    await s.shutdown()
    assert not (tmp_path / "abort").exists()
    s = MessageStore(cfg)
    await s.start()
    assert read_all(s, "T", 0) == [b"v%d" % i for i in range(0, 30, 2)]
    r = await s.put_message(bmsg("T", 0, b"after"))
    assert r.queue_offset == 15
    assert await s.settle()
    assert len(s.query_message("T", "k3", 4, 0, 2**62).buffers) == 1
    await s.shutdown()


@pytest.mark.parametrize("lost", ["consumequeue", "index", "both"])
async def test_abnormal_restart_rebuilds_deleted_dirs(tmp_path: Path, lost: str) -> None:
    import shutil

    cfg = tiny_config(str(tmp_path))
    s = MessageStore(cfg)
    await s.start()
    for i in range(50):
        await s.put_message(bmsg("T", i % 4, b"v%d" % i, keys=f"k{i}"))
    assert await s.settle()
    await s.terminate()
    assert (tmp_path / "abort").exists()
    for d in ["consumequeue", "index"] if lost == "both" else [lost]:
        shutil.rmtree(tmp_path / d)
    s = MessageStore(cfg)
    await s.start()
    for q in range(4):
        assert read_all(s, "T", q) == [b"v%d" % i for i in range(q, 50, 4)]
    assert len(s.query_message("T", "k42", 4, 0, 2**62).buffers) == 1
    await s.shutdown()


async def test_sync_flush_group_commit(tmp_path: Path) -> None:
    s = MessageStore(tiny_config(str(tmp_path), flush_disk_type=FlushDiskType.SYNC_FLUSH))
    await s.start()
    results = await asyncio.gather(*(s.put_message(bmsg("T", i % 4, b"s%d" % i)) for i in range(64)))
    assert all(r.status is PutMessageStatus.PUT_OK for r in results), [r for r in results if not r.ok][:2]
    assert s.commitlog.flushed_offset >= max(r.wrote_offset + r.wrote_bytes for r in results)
    await s.shutdown()


async def test_compressed_body_and_crc(store: MessageStore) -> None:
    body = zlib.compress(b"z" * 500)
    await store.put_message(BrokerMessage("T", 0, body, sys_flag=1))
    m = decode_records(store.get_message("g", "T", 0, 0, 1).join())[0]
    assert m.body == b"z" * 500 and m.body_crc == zlib.crc32(body)


async def test_delete_topics(store: MessageStore, tmp_path: Path) -> None:
    for i in range(30):
        await store.put_message(bmsg("Gone", 0, b"x%d" % i))
    await store.put_message(bmsg("Kept", 0, b"y"))
    store.delete_topics({"Gone"})
    assert store.get_max_offset_in_queue("Gone", 0) == 0
    gone_dir = tmp_path / "consumequeue" / "Gone"
    # deleted by the consume-queue allocator's thread, after the file creations queued before it
    # (a loaded CI disk took over 2 s)
    await wait_until_async(lambda: not gone_dir.exists(), 20, message="Gone's consume queue deleted")
    assert read_all(store, "Kept", 0) == [b"y"]


async def test_disk_full_refuses_writes(tmp_path: Path) -> None:
    usage = {"ratio": 0.5}
    s = MessageStore(tiny_config(str(tmp_path)), disk_usage=lambda _p: usage["ratio"])
    await s.start()
    assert (await s.put_message(bmsg("T", 0, b"a"))).status is PutMessageStatus.PUT_OK
    usage["ratio"] = 0.95
    await asyncio.to_thread(s.cleanup.run_once)  # type: ignore[union-attr]
    r = await s.put_message(bmsg("T", 0, b"b"))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "95%" in r.remark and "disk" in r.remark
    usage["ratio"] = 0.5
    await asyncio.to_thread(s.cleanup.run_once)  # type: ignore[union-attr]
    assert (await s.put_message(bmsg("T", 0, b"c"))).status is PutMessageStatus.PUT_OK
    await s.shutdown()


async def test_cleanup_expired_files_with_injected_clock(tmp_path: Path) -> None:
    now = {"t": 1_000_000.0}
    cfg = tiny_config(str(tmp_path), file_reserved_time=1, delete_when="99")
    usage = {"ratio": 0.1}
    s = MessageStore(cfg, clock=lambda: now["t"], disk_usage=lambda _p: usage["ratio"])
    await s.start()
    for i in range(40):
        await s.put_message(bmsg("T", 0, b"p" * 500 + b"%d" % i))
    n_files = len(s.commitlog.files)
    assert n_files >= 5
    now["t"] = await asyncio.to_thread(os.path.getmtime, s.commitlog.files[-1].path) + 2 * 3600
    # not a deleteWhen hour and the disk is fine: nothing to do
    assert await asyncio.to_thread(s.cleanup.run_once) == 0  # type: ignore[union-attr]
    usage["ratio"] = 0.8  # past diskMaxUsedSpaceRatio: delete expired files at any hour
    assert await asyncio.to_thread(s.cleanup.run_once) > 0  # type: ignore[union-attr]
    assert len(s.commitlog.files) == 1 and s.min_physical_offset > 0
    lo = s.get_min_offset_in_queue("T", 0)
    assert lo > 0
    assert s.get_message("g", "T", 0, 0, 32).status is GetMessageStatus.OFFSET_TOO_SMALL
    assert read_all(s, "T", 0) == [b"p" * 500 + b"%d" % i for i in range(lo, 40)]
    await s.shutdown()
    s = MessageStore(cfg, clock=lambda: now["t"], disk_usage=lambda _p: usage["ratio"])
    await s.start()
    assert s.get_min_offset_in_queue("T", 0) == lo
    await s.shutdown()


async def test_manual_delete_takes_expired_files_only_and_at_any_hour(tmp_path: Path) -> None:
    """DELETE_EXPIRED_COMMITLOG (``delete_expired_commitlog``): outside the deleteWhen hours and
    with the disk fine, expired files go on request; unexpired ones stay."""
    now = {"t": 1_000_000.0}
    cfg = tiny_config(str(tmp_path), file_reserved_time=1, delete_when="99")
    s = MessageStore(cfg, clock=lambda: now["t"], disk_usage=lambda _p: 0.1)
    await s.start()
    for i in range(40):
        await s.put_message(bmsg("T", 0, b"p" * 500 + b"%d" % i))
    assert len(s.commitlog.files) >= 5
    now["t"] = await asyncio.to_thread(os.path.getmtime, s.commitlog.files[-1].path) + 1800  # half an hour
    assert await s.delete_expired_commitlog() == 0  # none is an hour old yet
    assert s.min_physical_offset == 0
    now["t"] += 3600
    assert await asyncio.to_thread(s.cleanup.run_once) == 0  # type: ignore[union-attr]  # not the hour
    assert await s.delete_expired_commitlog() > 0
    assert len(s.commitlog.files) == 1 and s.get_min_offset_in_queue("T", 0) > 0
    await s.shutdown()


async def test_schedule_topic_unit_holds_delivery_time(store: MessageStore) -> None:
    from rocketpy.message import properties_to_string

    r = await store.put_message(
        BrokerMessage("SCHEDULE_TOPIC_XXXX", 2, b"later", properties=properties_to_string({"DELAY": "3"}))
    )
    unit = store.dispatcher.cqs[("SCHEDULE_TOPIC_XXXX", 2)].unit(0)
    assert unit is not None and unit[2] == r.store_timestamp + 10_000  # level 3 = 10 s


async def test_file_still_read_is_deleted_after_the_forced_interval(tmp_path: Path) -> None:
    now = {"t": 0.0}
    cfg = tiny_config(str(tmp_path), file_reserved_time=0, destroy_mapped_file_interval_forcibly=60_000)
    s = MessageStore(cfg, clock=lambda: now["t"], disk_usage=lambda _p: 0.8)
    await s.start()
    for i in range(12):
        await s.put_message(bmsg("T", 0, b"q" * 900 + b"%d" % i))
    held = s.get_message("g", "T", 0, 0, 1)  # a view into the first file
    first_path = s.commitlog.files[0].path
    now["t"] = 10**10
    await asyncio.to_thread(s.cleanup.run_once)  # type: ignore[union-attr]
    assert await asyncio.to_thread(os.path.exists, first_path)  # still read: retried later
    now["t"] += 61
    await asyncio.to_thread(s.cleanup.run_once)  # type: ignore[union-attr]
    assert not await asyncio.to_thread(os.path.exists, first_path)  # forced after the interval
    assert decode_records(held.join())[0].body.startswith(b"qqq")  # the mapping outlives the file name
    held.release()
    await s.shutdown()


async def test_batch_dispatches_each_message(store: MessageStore) -> None:
    """The one-loop batch append gives every message its tag code, index keys and listener call."""
    from rocketpy.filter.tags import java_string_hash

    seen: list[tuple[str, int, int, int]] = []
    store.listen_to_dispatches(lambda t, q, off, code, _ts: seen.append((t, q, off, code)))
    await store.put_message(bmsg("B", 2, b"first"))
    batch = [bmsg("B", 2, b"m%d" % i, tags=f"Tag{i}", keys=f"bk{i} shared", uniq=f"BU{i}") for i in range(4)]
    batch.append(bmsg("B", 2, b"plain"))
    r = await store.put_messages(batch)
    assert r.status is PutMessageStatus.PUT_OK and r.queue_offset == 1 and r.msg_num == 5
    codes = [java_string_hash(f"Tag{i}") for i in range(4)] + [0]
    assert seen[1:] == [("B", 2, 1 + i, codes[i]) for i in range(5)]
    assert store.get_max_offset_in_queue("B", 2) == 6
    assert read_all(store, "B", 2) == [b"first"] + [m.body for m in batch]
    await store.settle()
    for i in range(4):
        for key in (f"bk{i}", f"BU{i}"):
            found = store.query_message("B", key, 10, 0, 2**62).buffers
            assert [decode_record(b).body for b in found] == [b"m%d" % i]
    assert len(store.query_message("B", "shared", 10, 0, 2**62).buffers) == 4
