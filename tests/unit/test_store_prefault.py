"""The commitlog's rolling prefault: the allocator thread faults pages in ahead of the writer."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rocketpy.broker.store import BrokerMessage, GetMessageStatus, MessageStore
from rocketpy.broker.store import allocate as allocation
from rocketpy.broker.store import commitlog as commitlog_module
from rocketpy.broker.store.allocate import AllocateService
from rocketpy.broker.store.mapped_file import MappedFile
from rocketpy.record import decode_records
from tests.unit.test_store_helpers import tiny_config
from tests.waiting import wait_until_async

MIB = 1 << 20
STEP = commitlog_module.PREFAULT_STEP_BYTES
AHEAD = commitlog_module.PREFAULT_AHEAD_BYTES
HEAD = commitlog_module.HEAD_PREFAULT_BYTES
BODY = b"p" * 1000
#: Prefaults seen: (file name, start, length).
Prefaults = list[tuple[str, int, int | None]]


def record_prefaults(monkeypatch: pytest.MonkeyPatch, readable_only: bool) -> Prefaults:
    """Every prefault (or only the readable ones: the rolling steps) as (file name, start, length),
    appended as they happen; they still run."""
    calls: Prefaults = []
    real = MappedFile.prefault

    def spy(self: MappedFile, length: int | None = None, start: int = 0, write: bool = True) -> bool:
        if not (readable_only and write):
            calls.append((Path(self.path).name, start, length))
        return real(self, length, start, write)

    monkeypatch.setattr(MappedFile, "prefault", spy)
    return calls


@pytest.fixture
def readable_prefaults(monkeypatch: pytest.MonkeyPatch) -> Prefaults:
    """Every readable prefault (the rolling steps) as (file name, start, length)."""
    return record_prefaults(monkeypatch, readable_only=True)


def _config(root: Path, file_mib: int) -> Any:
    return tiny_config(
        str(root), mapped_file_size_commit_log=file_mib * MIB, max_message_size=4096,
        mapped_file_size_consume_queue=20 * 300_000, max_hash_slot_num=1024, max_index_num=4096,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def running_store(root: Path, file_mib: int) -> AsyncIterator[MessageStore]:
    """A started store with commitlog files of ``file_mib`` MiB, shut down on the way out."""
    store = MessageStore(_config(root, file_mib))
    await store.start()
    try:
        yield store
    finally:
        await store.shutdown()


async def _put_mib(store: MessageStore, mib: int) -> None:
    for _ in range(mib):  # ~1 MiB per append, into one queue
        result = await store.put_messages([BrokerMessage("T", 0, BODY) for _ in range(1000)])
        assert result.ok, result


async def _steps_done(calls: Prefaults, n: int) -> None:
    await wait_until_async(lambda: len(calls) >= n, 10, message=f"{n} prefault steps (have {calls})")


async def test_the_writer_is_faulted_in_ahead_in_steps_and_reads_back(
    tmp_path: Path, readable_prefaults: Prefaults
) -> None:
    async with running_store(tmp_path, 64) as store:
        await _put_mib(store, 20)
        written = store.commitlog.max_offset
        # steps of STEP from the head on, always at least AHEAD - STEP past the write position
        needed = (written + AHEAD - STEP - HEAD) // STEP + 1
        await _steps_done(readable_prefaults, needed)
        first = "0" * 20
        assert readable_prefaults[:needed] == [(first, HEAD + i * STEP, STEP) for i in range(needed)]
        assert HEAD + len(readable_prefaults) * STEP >= written + AHEAD - STEP
        assert HEAD + (len(readable_prefaults) - 1) * STEP < written + AHEAD  # not further than needed
        got = store.get_message("g", "T", 0, 19_999, 1)
        assert got.status is GetMessageStatus.FOUND
        assert [(m.queue_offset, m.body) for m in decode_records(got.join())] == [(19_999, BODY)]


async def test_no_step_starts_past_a_file_end_and_the_next_file_starts_after_its_head(
    tmp_path: Path, readable_prefaults: Prefaults
) -> None:
    async with running_store(tmp_path, 16) as store:
        await _put_mib(store, 24)  # into the second 16 MiB file
        second = f"{16 * MIB:020d}"
        await wait_until_async(lambda: any(name == second for name, _, _ in readable_prefaults), 10)
        assert all(start < 16 * MIB for _, start, _ in readable_prefaults)
        assert [s for name, s, _ in readable_prefaults if name == "0" * 20] == [
            HEAD + i * STEP for i in range(3)
        ]
        assert min(s for name, s, _ in readable_prefaults if name == second) == HEAD


async def test_a_recovered_file_is_faulted_in_from_its_write_position(
    tmp_path: Path, readable_prefaults: Prefaults
) -> None:
    async with running_store(tmp_path, 64) as store:
        await _put_mib(store, 30)
    readable_prefaults.clear()
    async with running_store(tmp_path, 64) as store:
        await _put_mib(store, 1)  # one append: the step is asked for right after it
        wrote = store.commitlog.max_offset
        await _steps_done(readable_prefaults, 1)
        assert readable_prefaults[0] == ("0" * 20, wrote - wrote % 4096, STEP)  # not the written head again


async def test_a_full_allocator_queue_skips_the_step_and_the_put_goes_on(
    tmp_path: Path, readable_prefaults: Prefaults
) -> None:
    async with running_store(tmp_path, 64) as store:
        allocator = store.commitlog._allocator
        assert allocator is not None

        def full(fn: Any) -> None:
            raise queue.Full

        allocator.run_in_order = full  # type: ignore[method-assign]
        await _put_mib(store, 2)  # every put is stored though no step could be queued
        assert store.commitlog.max_offset > 2 * MIB and readable_prefaults == []
        del allocator.run_in_order  # the class's method again
        await _put_mib(store, 1)  # asked again once the thread takes work
        await _steps_done(readable_prefaults, 1)
        assert readable_prefaults[0] == ("0" * 20, HEAD, STEP)


async def test_files_created_while_stopping_get_their_first_page_faulted_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole-file warm-up is skipped at shutdown, but not the first page: the first write into a
    new file is the costly fault, and a consume queue's waiting units are written on the loop."""
    prefaults = record_prefaults(monkeypatch, readable_only=False)
    loop = asyncio.get_running_loop()
    allocator = AllocateService(loop, "test-allocate")
    allocator.start()
    gate = threading.Event()
    allocator.run_in_order(lambda: gate.wait(10))  # holds the worker until shutdown has begun
    created: list[MappedFile | None] = []
    for name, prefault in (("whole", -1), ("head", 8192)):
        allocator.request(str(tmp_path / name), 0, 64 << 10, lambda mf, err: created.append(mf), prefault)
    stopping = loop.run_in_executor(None, allocator.shutdown)
    await wait_until_async(lambda: allocator.stopped, 5)
    gate.set()
    await stopping
    assert [length for _, _, length in prefaults] == [allocation.STOPPING_PREFAULT_BYTES] * 2
    await wait_until_async(lambda: len(created) == 2, 5)
    for mf in created:
        assert mf is not None
        mf.close()
