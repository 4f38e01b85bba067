"""Disk faults in the store: a failed flush or file creation turns it read-only, reads go on.

Faults are injected through ``MessageStore.faults`` (broker/store/faults.py); the real-disk twin
(a small tmpfs filled up) is tests/integration/test_disk_faults.py.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import threading
from pathlib import Path

import pytest

from rocketpy.broker.store import MessageStore, PutMessageStatus
from rocketpy.broker.store.faults import DiskFaults
from rocketpy.broker.store.mapped_file import MappedFile
from rocketpy.config import FlushDiskType
from tests.conftest import fill
from tests.unit.test_store_helpers import bmsg, read_all, tiny_config
from tests.waiting import wait_until_async


def test_faults_parse() -> None:
    f = DiskFaults.parse(
        "flush_delay_ms=50; flush_mib_per_s=2; flush_error=EIO; flush_fail_after=3; create_error=enospc"
    )
    assert (f.flush_delay_s, f.flush_bytes_per_s, f.flush_errno, f.flush_fail_after, f.create_errno) == (
        0.05, 2 << 20, errno.EIO, 3, errno.ENOSPC,
    )  # fmt: skip
    assert DiskFaults.parse(None) == DiskFaults()
    with pytest.raises(ValueError, match="unknown fault 'flush'"):
        DiskFaults.parse("flush=1")
    with pytest.raises(ValueError, match="unknown errno name 'EWHAT'"):
        DiskFaults.parse("create_error=EWHAT")
    with pytest.raises(ValueError, match="is not a number"):
        DiskFaults.parse("flush_delay_ms=soon")


def test_new_files_reserve_their_blocks(tmp_path: Path) -> None:
    mf = MappedFile.open(str(tmp_path / "f"), 0, 1 << 20)
    try:
        assert os.stat(mf.path).st_blocks * 512 >= 1 << 20  # not sparse: a full disk fails here
    finally:
        mf.close()


def test_a_reservation_that_cannot_fit_never_takes_the_free_space(small_tmpfs: Path) -> None:
    """A failing fallocate takes every free block before it gives them back: the store's disk guard
    (and any other writer) would see a full disk meanwhile. Refused before it is tried."""
    fill(small_tmpfs / "filler", shutil.disk_usage(small_tmpfs).free - (3 << 20))  # 3 MiB left
    before = shutil.disk_usage(small_tmpfs).used
    peak, stop = before, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, shutil.disk_usage(small_tmpfs).used)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        for i in range(50):  # the old code (fallocate tried) was caught at 100 % here
            with pytest.raises(OSError) as e:
                MappedFile.open(str(small_tmpfs / f"f{i}"), 0, 4 << 20)
            assert e.value.errno == errno.ENOSPC and "No space left on device" in str(e.value)
            assert not (small_tmpfs / f"f{i}").exists()  # not left behind as a sparse file
    finally:
        stop.set()
        sampler.join()
    assert peak == before
    mf = MappedFile.open(str(small_tmpfs / "fits"), 0, 2 << 20)  # what fits is still reserved
    try:
        assert os.stat(mf.path).st_blocks * 512 >= 2 << 20
    finally:
        mf.close()


@pytest.mark.parametrize("flush_type", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
async def test_failed_flush_turns_the_store_read_only(tmp_path: Path, flush_type: FlushDiskType) -> None:
    cfg = tiny_config(
        str(tmp_path), flush_disk_type=flush_type, sync_flush_timeout=300, flush_commit_log_least_pages=0
    )
    s = MessageStore(cfg)
    await s.start()
    try:
        assert (await s.put_message(bmsg("T", 0, b"before"))).status is PutMessageStatus.PUT_OK
        await wait_until_async(lambda: s.commitlog.flushed_offset == s.commitlog.max_offset, timeout=5)
        flushed = s.commitlog.flushed_offset
        s.faults.flush_errno = errno.EIO
        r = await s.put_message(bmsg("T", 0, b"unflushed"))
        # SYNC_FLUSH: stored but never flushed; ASYNC: stored, the next flush fails
        expected = PutMessageStatus.FLUSH_DISK_TIMEOUT if flush_type == FlushDiskType.SYNC_FLUSH else None
        assert expected is None or r.status is expected
        await wait_until_async(lambda: bool(s.read_only_remark), timeout=5, message="store read-only")
        assert "msync/fdatasync" in s.read_only_remark and "Input/output error" in s.read_only_remark
        r = await s.put_message(bmsg("T", 0, b"refused"))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "read-only" in r.remark
        assert s.commitlog.flushed_offset == flushed  # never reported durable after the failure
        s.faults.flush_errno = 0  # a disk that "recovers" does not clear it: only a restart does
        await asyncio.sleep(0.1)
        assert s.read_only_remark and s.commitlog.flushed_offset == flushed
        assert read_all(s, "T", 0) == [b"before", b"unflushed"]  # reads are served
        assert s.runtime_info()["readOnlyRemark"] == s.read_only_remark
    finally:
        await s.shutdown()
    assert (tmp_path / "abort").exists()  # the next start re-checks every record
    s2 = MessageStore(cfg)
    await s2.start()
    try:
        assert not s2.read_only_remark
        assert read_all(s2, "T", 0) == [b"before", b"unflushed"]
        assert (await s2.put_message(bmsg("T", 0, b"after"))).status is PutMessageStatus.PUT_OK
    finally:
        await s2.shutdown()


async def test_failed_file_creation_is_retried_until_the_disk_has_room(tmp_path: Path) -> None:
    cfg = tiny_config(str(tmp_path), clean_resource_interval=50)
    s = MessageStore(cfg)
    await s.start()
    try:
        await wait_until_async(lambda: s.commitlog._next is not None, timeout=5)  # pre-created
        s.faults.create_errno = errno.ENOSPC
        stored = []
        for i in range(40):  # 4 KiB files: rolls into the pre-created file, whose successor fails
            body = b"%d" % i + b"x" * 300
            r = await s.put_message(bmsg("T", 0, body))
            if r.status is not PutMessageStatus.PUT_OK:
                break
            stored.append(body)
        assert r.status in (
            PutMessageStatus.SERVICE_NOT_AVAILABLE,
            PutMessageStatus.CREATE_MAPPED_FILE_FAILED,
        )
        assert "No space left on device" in r.remark
        await wait_until_async(lambda: bool(s.read_only_remark), timeout=5)
        assert "cannot create its next file" in s.read_only_remark
        r = await s.put_message(bmsg("T", 0, b"refused"))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "No space left" in r.remark
        assert read_all(s, "T", 0) == stored  # reads are served
        s.faults.create_errno = 0  # space freed: the retry creates the file, writes resume
        await wait_until_async(lambda: not s.read_only_remark, timeout=5, message="writes resumed")
        for i in range(20):
            assert (
                await s.put_message(bmsg("T", 0, b"again%d" % i + b"y" * 300))
            ).status is PutMessageStatus.PUT_OK
        assert len(read_all(s, "T", 0)) == len(stored) + 20
    finally:
        await s.shutdown()
