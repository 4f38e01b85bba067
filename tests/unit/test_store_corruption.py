"""Corruption: truncate, zero or garble the tail of the last commitlog file; recovery keeps every
complete record before the damage, logs what it cut, and never fails start-up."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

from rocketpy.broker.store import MessageStore, PutMessageStatus
from tests.unit.test_store_helpers import bmsg, read_all, tiny_config

N = 30


async def _fill(root: Path, clean: bool) -> list[tuple[int, int]]:
    s = MessageStore(tiny_config(str(root)))
    await s.start()
    spans = []
    for i in range(N):
        r = await s.put_message(bmsg("T", i % 2, b"body-%03d-" % i + b"z" * (i * 23 % 700), keys=f"k{i}"))
        spans.append((r.wrote_offset, r.wrote_bytes))
    assert await s.settle()
    await (s.shutdown() if clean else s.terminate())
    return spans


def _damage(root: Path, spans: list[tuple[int, int]], how: str) -> int:
    """Damage the last record; returns how many records must survive."""
    off, size = spans[-1]
    path = root / "commitlog" / f"{off - off % 4096:020d}"
    pos = off % 4096
    with open(path, "r+b") as f:
        if how == "truncate":
            f.truncate(pos + size // 2)
        elif how == "zero":
            f.seek(pos + 10)
            f.write(bytes(size - 10))
        elif how == "garble_body":
            f.seek(pos + size - 40)
            f.write(b"\xff" * 8)
        elif how == "garble_magic":
            f.seek(pos + 4)
            f.write(b"\x00\x01\x02\x03")
    return N - 1


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("how", ["truncate", "zero", "garble_body", "garble_magic"])
async def test_damaged_tail_is_cut(
    tmp_path: Path, how: str, clean: bool, caplog: pytest.LogCaptureFixture
) -> None:
    spans = await _fill(tmp_path, clean)
    keep = _damage(tmp_path, spans, how)
    caplog.set_level(logging.WARNING, logger="rocketpy.store")
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    bodies = {q: read_all(s, "T", q) for q in (0, 1)}
    expected = {q: [b"body-%03d-" % i + b"z" * (i * 23 % 700) for i in range(q, keep, 2)] for q in (0, 1)}
    assert bodies == expected
    assert s.max_physical_offset == spans[keep - 1][0] + spans[keep - 1][1]
    if how != "zero":
        assert "cutting the log" in caplog.text
    r = await s.put_message(bmsg("T", (N - 1) % 2, b"after"))
    assert r.status is PutMessageStatus.PUT_OK and r.queue_offset == len(expected[(N - 1) % 2])
    await s.shutdown()
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    assert read_all(s, "T", (N - 1) % 2)[-1] == b"after"
    await s.shutdown()


def _add_junk(tmp_path: Path) -> Path:
    (tmp_path / "commitlog" / "notes.txt").write_text("x")
    (tmp_path / "commitlog" / f"{10**9:020d}").write_bytes(b"\x01" * 100)  # breaks the sequence
    cq_file = next((tmp_path / "consumequeue" / "T" / "0").iterdir())
    with open(cq_file, "r+b") as f:
        f.truncate(50)  # a torn consume queue file
    index_file = next((tmp_path / "index").iterdir())
    with open(index_file, "r+b") as f:
        f.truncate(100)  # wrong size: set aside, rebuilt from the commitlog
    return index_file


async def test_junk_files_do_not_stop_startup(tmp_path: Path) -> None:
    await _fill(tmp_path, clean=False)
    index_file = _add_junk(tmp_path)
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    for q in (0, 1):
        assert read_all(s, "T", q) == [b"body-%03d-" % i + b"z" * (i * 23 % 700) for i in range(q, N, 2)]
    assert len(s.query_message("T", "k7", 3, 0, 2**62).buffers) == 1
    assert await asyncio.to_thread(Path(str(index_file) + ".bad").exists)
    await s.shutdown()


async def test_missing_commitlog_drops_queues(tmp_path: Path) -> None:
    await _fill(tmp_path, clean=True)
    await asyncio.to_thread(shutil.rmtree, tmp_path / "commitlog")
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    assert s.get_max_offset_in_queue("T", 0) == 0 and read_all(s, "T", 0) == []
    r = await s.put_message(bmsg("T", 0, b"fresh", keys="k0"))
    assert r.queue_offset == 0 and read_all(s, "T", 0) == [b"fresh"]
    assert await s.settle()
    assert [b for b in s.query_message("T", "k0", 5, 0, 2**62).buffers] != []
    await s.shutdown()


async def test_damage_in_an_earlier_file_cuts_queues_across_files(tmp_path: Path) -> None:
    spans = await _fill(tmp_path, clean=False)
    off, size = spans[5]
    path = tmp_path / "commitlog" / f"{off - off % 4096:020d}"
    await asyncio.to_thread(_garble, path, off % 4096 + size - 30)
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    for q in (0, 1):
        assert read_all(s, "T", q) == [b"body-%03d-" % i + b"z" * (i * 23 % 700) for i in range(q, 5, 2)]
    assert s.max_physical_offset == spans[4][0] + spans[4][1]
    r = await s.put_message(bmsg("T", 1, b"next"))
    assert r.queue_offset == 2 and read_all(s, "T", 1)[-1] == b"next"
    await s.shutdown()


def _garble(path: Path, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(b"\xee" * 8)
