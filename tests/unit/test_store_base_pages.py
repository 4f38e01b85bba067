"""Store files are cached in base pages where they are written (``MappedFile.base_pages_from``).

A page written through a mapping dirties its whole page-cache folio; where read-ahead built 2 MiB
folios, every flush wrote 2 MiB for one append. The advice is visible in ``/proc/self/smaps``
(``rr`` in VmFlags: ``MADV_RANDOM``, no read-ahead on faults); the page cache's folio sizes are not,
so these tests check the advice and that dropping the cached folios loses no data.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketpy.broker.store import MessageStore
from rocketpy.broker.store.mapped_file import LARGE_FOLIO_BYTES, MappedFile
from tests.unit.test_store_helpers import bmsg, read_all, tiny_config

MIB = 1 << 20

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc")


def advised_random(path: str) -> list[tuple[int, int, bool]]:
    """``(file offset, end, MADV_RANDOM?)`` of each mapping of ``path`` in this process, in order."""
    out = []
    with open("/proc/self/smaps") as f:
        head: list[str] | None = None
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's first line
                head = fields if len(fields) >= 6 and fields[5] == path else None
            elif head is not None and fields[0] == "VmFlags:":
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                offset = int(head[2], 16)
                out.append((offset, offset + hi - lo, "rr" in fields[1:]))
                head = None
    return sorted(out)


def test_store_files_are_mapped_without_readahead_unless_asked(tmp_path: Path) -> None:
    written = MappedFile.open(str(tmp_path / "written"), 0, MIB)
    scanned = MappedFile.open(str(tmp_path / "scanned"), 0, MIB, readahead=True)
    try:
        assert advised_random(written.path) == [(0, MIB, True)]
        assert advised_random(scanned.path) == [(0, MIB, False)]
    finally:
        written.destroy(force=True)
        scanned.destroy(force=True)


def test_base_pages_from_keeps_the_data_and_advises_from_the_large_folio_boundary(tmp_path: Path) -> None:
    size = 3 * LARGE_FOLIO_BYTES
    mf = MappedFile.open(str(tmp_path / "f"), 0, size, readahead=True)
    try:
        pos = LARGE_FOLIO_BYTES + 5000
        data = os.urandom(8192)
        mf.mm[pos - 4096 : pos + 4096] = data  # dirty, never flushed: must survive the page drop
        mf.mm[:3] = b"abc"
        mf.base_pages_from(pos)
        assert advised_random(mf.path) == [(0, LARGE_FOLIO_BYTES, False), (LARGE_FOLIO_BYTES, size, True)]
        assert bytes(mf.view[pos - 4096 : pos + 4096]) == data
        with open(mf.path, "rb") as f:
            f.seek(pos - 4096)
            assert f.read(8192) == data
        assert bytes(mf.view[:3]) == b"abc"
        mf.base_pages_from(size)  # nothing past the end: a no-op
    finally:
        mf.destroy(force=True)


def test_base_pages_from_a_file_without_a_descriptor(tmp_path: Path) -> None:
    mf = MappedFile.open(str(tmp_path / "cq"), 0, MIB, keep_fd=False, readahead=True)
    try:
        mf.mm[:4] = b"unit"
        mf.base_pages_from(0)
        assert advised_random(mf.path) == [(0, MIB, True)]
        assert bytes(mf.view[:4]) == b"unit"
    finally:
        mf.destroy(force=True)


async def test_a_recovered_store_writes_its_files_in_base_pages(tmp_path: Path) -> None:
    cfg = tiny_config(
        str(tmp_path), mapped_file_size_commit_log=8 * MIB, mapped_file_size_consume_queue=20 * 1000,
        max_hash_slot_num=1024, max_index_num=4096,
    )  # fmt: skip
    store = MessageStore(cfg)
    await store.start()
    for i in range(3000):  # ~3.2 MiB: the write position is past the first large folio
        assert (await store.put_message(bmsg("T", 0, b"%04d" % i + b"x" * 1000, uniq=f"u{i}"))).ok
    await store.shutdown()
    store = MessageStore(cfg)
    await store.start()
    try:
        last = store.commitlog.files[-1]
        boundary = last.wrote - last.wrote % LARGE_FOLIO_BYTES
        assert boundary > 0
        assert advised_random(last.path) == [(0, boundary, False), (boundary, last.size, True)]
        cq = store.dispatcher.cq("T", 0)
        assert all(random for _, _, random in advised_random(cq.files[-1].path))
        index = store.dispatcher.index
        assert index is not None and all(random for _, _, random in advised_random(index.files[-1].mf.path))
        assert (await store.put_message(bmsg("T", 0, b"after restart"))).ok
        bodies = read_all(store, "T", 0)
        assert len(bodies) == 3001 and bodies[0].startswith(b"0000") and bodies[-1] == b"after restart"
    finally:
        await store.shutdown()
