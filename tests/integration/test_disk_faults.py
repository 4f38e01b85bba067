"""A broker on a small tmpfs: writes refused before the disk fills, a full disk turns it read-only,
reads go on, and writes resume once space is freed. Flush errors are injected into a real daemon.

Mounting needs root (CAP_SYS_ADMIN), as in CI; elsewhere the tmpfs tests are skipped with the
reason, and the injected-fault test still runs (the store-level twins are in
tests/unit/test_store_disk_faults.py).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from rocketpy.protocol.codes import ResponseCode
from rocketpy.record import decode_records
from rocketpy.remoting.client import RemotingClient
from tests.conftest import TMPFS_MIB, DaemonPool, fill
from tests.daemons import Daemon
from tests.integration.test_broker_util import pull, send
from tests.waiting import wait_until_async

MIB = 1 << 20


def store_props(store: Path, **extra: object) -> dict[str, object]:
    return {
        "storePathRootDir": store,
        "mappedFileSizeCommitLog": 4 * MIB,
        "mappedFileSizeConsumeQueue": 6000,
        "maxHashSlotNum": 1000,
        "maxIndexNum": 4000,
        "cleanResourceInterval": 100,
        "fileReservedTime": 72,
        **extra,
    }


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


async def _pull_all(client: RemotingClient, addr: str, topic: str) -> list[bytes]:
    bodies, offset = [], 0
    while True:
        r = await pull(client, addr, group="g", topic=topic, queue_id=0, offset=offset, max_msgs=32)
        if r.code != ResponseCode.SUCCESS:
            return bodies
        bodies += [m.body for m in decode_records(r.body)]
        offset = r.ext["nextBeginOffset"]  # type: ignore[index]


async def test_writes_refused_above_the_warning_ratio_and_resumed_after_cleanup(
    small_tmpfs: Path, daemons: DaemonPool, namesrv: Daemon, client: RemotingClient
) -> None:
    store = small_tmpfs / "store"
    b = daemons.broker(namesrv.addr, **store_props(store, diskSpaceWarningLevelRatio=60))
    assert (await send(client, b.addr, "Disk", b"first")).code == ResponseCode.SUCCESS
    filler = small_tmpfs / "filler"
    await asyncio.to_thread(fill, filler, int(TMPFS_MIB * MIB * 0.7))  # usage well past 60 %

    stored = [b"first"]

    async def refused() -> bool:
        r = await send(client, b.addr, "Disk", b"x")
        if r.code == ResponseCode.SUCCESS:  # the guard reads the disk every cleanResourceInterval
            stored.append(b"x")
        return r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "diskSpaceWarningLevelRatio 60%" in (
            r.remark or ""
        )

    await wait_until_async(refused, timeout=10, message="writes refused by the disk guard")
    assert await _pull_all(client, b.addr, "Disk") == stored  # reads are served
    filler.unlink()
    await wait_until_async(
        lambda: _sent(client, b.addr, b"after"), timeout=10, message="writes accepted after cleanup"
    )
    assert b.returncode is None


async def test_full_disk_turns_the_broker_read_only_until_space_is_freed(
    small_tmpfs: Path, daemons: DaemonPool, namesrv: Daemon, client: RemotingClient
) -> None:
    store = small_tmpfs / "store"
    # every ratio at its maximum: neither the guard nor forced cleanup acts before the disk is full
    full = {"diskSpaceWarningLevelRatio": 95, "diskMaxUsedSpaceRatio": 95, "diskSpaceCleanForciblyRatio": 95}
    b = daemons.broker(namesrv.addr, **store_props(store, **full))
    assert (await send(client, b.addr, "Full", b"first")).code == ResponseCode.SUCCESS
    filler = small_tmpfs / "filler"
    # leave less room than one commitlog file (4 MiB): the file after the next one cannot be
    # created; 3 MiB keep usage under 95 %, where forced cleanup would delete the oldest file
    await asyncio.to_thread(fill, filler, free_bytes(small_tmpfs) - 3 * MIB)
    stored = [b"first"]
    body = b"z" * (100 * 1024)
    r = None
    for i in range(200):  # 4 MiB files: a roll or two is enough
        r = await send(client, b.addr, "Full", b"%d" % i + body)
        if r.code != ResponseCode.SUCCESS:
            break
        stored.append(b"%d" % i + body)
    assert r is not None and r.code in (ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR)
    assert "No space left on device" in (r.remark or ""), r.remark
    r = await send(client, b.addr, "Full", b"refused")
    assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "read-only" in (r.remark or "")
    assert await _pull_all(client, b.addr, "Full") == stored  # every acknowledged message, intact
    filler.unlink()
    await wait_until_async(
        lambda: _sent(client, b.addr, b"after", "Full"), timeout=10, message="writes resumed"
    )
    assert b.returncode is None


async def test_injected_flush_error_turns_a_live_broker_read_only(
    daemons: DaemonPool, namesrv: Daemon, client: RemotingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROCKETPY_STORE_FAULTS", "flush_error=EIO;flush_fail_after=2")
    b = daemons.broker(namesrv.addr, flushDiskType="SYNC_FLUSH", syncFlushTimeout=500)
    codes = []
    for i in range(10):
        r = await send(client, b.addr, "Eio", b"m%d" % i)
        codes.append(r.code)
        if r.code == ResponseCode.SERVICE_NOT_AVAILABLE:
            assert "failed commitlog flush" in (r.remark or "") and "restart" in (r.remark or "")
            break
    assert codes[-1] == ResponseCode.SERVICE_NOT_AVAILABLE, codes
    assert ResponseCode.FLUSH_DISK_TIMEOUT in codes  # the put whose flush failed was not acknowledged
    assert len(await _pull_all(client, b.addr, "Eio")) == len(codes) - 1  # reads are served
    assert b.returncode is None


async def _sent(client: RemotingClient, addr: str, body: bytes, topic: str = "Disk") -> bool:
    return (await send(client, addr, topic, body)).code == ResponseCode.SUCCESS
