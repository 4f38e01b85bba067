"""The SYNC_FLUSH group commit (``flush.group_commit_sync``): its compiled twin against the pure one.

The function alone, fed the same kicks, offsets and descriptors (a real file, none, a pipe whose
``fdatasync`` fails with EINVAL, a full done pipe): the same result, the same offset told to the
loop, the same error. Then the store run with each twin in turn over the same puts: the same
acknowledgements, the same failure after a failing fsync, the same answers to puts that wait while
the store shuts down, and no descriptor or thread left behind by repeated starts and stops.
The compiled twin is loaded here (``rocketpy._accel.load_compiled``), so both are compared in either
mode of ``scripts/test``; those tests skip when the compiled core is not built.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy import _accel
from rocketpy.broker.store import MessageStore, PutMessageStatus
from rocketpy.broker.store import flush as flush_mod
from rocketpy.broker.store.flush import KICK_GENERAL, OFFSET, SYNC_NONE, SYNC_TOLD, SYNC_UNTOLD
from rocketpy.config import FlushDiskType
from tests.unit.test_store_helpers import bmsg, tiny_config
from tests.waiting import wait_until, wait_until_async

try:
    COMPILED: Any = _accel.load_compiled()["group_commit_sync"]
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    COMPILED = None
PURE: Any = _accel.PURE["group_commit_sync"]
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="the compiled core is not built")
TWINS = [pytest.param("pure", id="pure"), pytest.param("compiled", id="compiled", marks=needs_compiled)]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def twin_named(name: str) -> Callable[..., tuple[int, int, float]]:
    return PURE if name == "pure" else COMPILED  # type: ignore[no-any-return]


def drain(fd: int) -> bytes:
    out = b""
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return out
        if not data:
            return out
        out += data


class Pipes:
    """One call's descriptors: the kick and done pipes (non-blocking), the file to sync."""

    def __init__(self, tmp: Path, sync_kind: str, done_full: bool) -> None:
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.done_r, self.done_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.extra: list[int] = []
        self.sync_fd = -1
        if sync_kind == "file":
            self.sync_fd = os.open(tmp / f"log-{time.monotonic_ns()}", os.O_RDWR | os.O_CREAT, 0o644)
            os.write(self.sync_fd, b"x" * 1024)
        elif sync_kind == "pipe":  # fdatasync of a pipe: EINVAL
            self.sync_fd, w = os.pipe()
            self.extra.append(w)
        self.done_before = b""
        if done_full:
            chunk = OFFSET.pack(7) * 512
            while True:
                try:
                    self.done_before += chunk[: os.write(self.done_w, chunk)]
                except BlockingIOError:
                    break

    def close(self) -> None:
        for fd in (self.wake_r, self.wake_w, self.done_r, self.done_w, self.sync_fd, *self.extra):
            if fd >= 0:
                os.close(fd)


@contextlib.contextmanager
def pipes_in(tmp: Path) -> Iterator[Callable[[str, bool], Pipes]]:
    """Makes ``Pipes`` in ``tmp``; closes them all at the end."""
    made: list[Pipes] = []

    def make(sync_kind: str, done_full: bool) -> Pipes:
        made.append(Pipes(tmp, sync_kind, done_full))
        return made[-1]

    try:
        yield make
    finally:
        for p in made:
            p.close()


@pytest.fixture
def pipes_factory(tmp_path: Path) -> Iterator[Callable[[str, bool], Pipes]]:
    with pipes_in(tmp_path) as make:
        yield make


def one_call(fn: Any, p: Pipes, kicks: bytes, flushed: int, limit: int, timeout_s: float) -> tuple[Any, ...]:
    """What one ``group_commit_sync`` call did: its result or error, what it told, what it left."""
    from array import array

    os.write(p.wake_w, kicks)
    started = array("d", [0.0])
    try:
        target, state, took = fn(p.wake_r, p.sync_fd, p.done_w, flushed, limit, timeout_s, started)
        result: tuple[Any, ...] = ("ok", target, state, took > 0 if state != SYNC_NONE else took)
    except OSError as e:
        result = ("raise", type(e), e.errno, str(e))
    told = drain(p.done_r)[len(p.done_before) :]
    return result, told, drain(p.wake_r), started[0]


VALUES = st.one_of(st.just(0), st.just(KICK_GENERAL), st.integers(1, 1 << 40))


@needs_compiled
@FUZZ
@given(
    values=st.lists(VALUES, max_size=20),
    times=st.sampled_from([1, 2, 400]),
    tail=st.binary(max_size=7),
    flushed_at=st.sampled_from([-1, 0, 1, None]),
    limit_at=st.sampled_from([-1, 0, 1, None]),
    sync_kind=st.sampled_from(["file", "none", "pipe"]),
    done_full=st.booleans(),
)
def test_twins_answer_the_same_kicks_the_same_way(
    values: list[int],
    times: int,
    tail: bytes,
    flushed_at: int | None,
    limit_at: int | None,
    sync_kind: str,
    done_full: bool,
) -> None:
    """Up to 8,000 kicks (more than one 8 KiB read), wakes, general kicks, a torn tail; the flushed
    offset and the file's end around the highest kick; a file, none, a failing fsync, a full done pipe."""
    kicks = b"".join(OFFSET.pack(v) for v in values) * times + tail
    top = max([v for v in values if v > 0], default=0)
    flushed = max(top + flushed_at, 0) if flushed_at is not None else 0
    limit = top + limit_at if limit_at is not None else 1 << 50
    with tempfile.TemporaryDirectory() as tmp, pipes_in(Path(tmp)) as pipes:
        outcomes = [
            one_call(fn, pipes(sync_kind, done_full), kicks, flushed, limit, 0.0) for fn in (PURE, COMPILED)
        ]
    assert outcomes[0] == outcomes[1]
    result, told, left, started = outcomes[0]
    assert left == b"" and started == 0.0
    if result[0] == "raise":  # the failing fsync: nothing told
        assert sync_kind == "pipe" and result[2] == errno.EINVAL and told == b""
        return
    assert result[1] == (top if kicks[:8] else 0)
    if result[2] == SYNC_NONE:
        assert told == b"" and (sync_kind == "none" or KICK_GENERAL in values or not flushed < top <= limit)
    else:  # synced the highest kick: told once, or left to the caller when the done pipe is full
        assert sync_kind == "file" and KICK_GENERAL not in values and result[3] is True
        assert (told, result[2]) == ((b"", SYNC_UNTOLD) if done_full else (OFFSET.pack(top), SYNC_TOLD))


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("timeout_s", [-1.0, float("nan"), 0.0])
def test_no_kick_and_no_wait_answers_at_once(
    pipes_factory: Callable[[str, bool], Pipes], twin: str, timeout_s: float
) -> None:
    p = pipes_factory("file", False)
    t0 = time.monotonic()
    assert one_call(twin_named(twin), p, b"", 0, 1 << 50, timeout_s) == (
        ("ok", 0, SYNC_NONE, 0.0),
        b"",
        b"",
        0.0,
    )
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize("twin", TWINS)
def test_a_kick_during_the_wait_is_synced_and_told_while_other_threads_run(
    pipes_factory: Callable[[str, bool], Pipes], twin: str
) -> None:
    """The wait lets a Python thread run (the compiled twin waits with the GIL released): the kick
    written by that thread ends the wait long before its timeout."""
    p = pipes_factory("file", False)
    kicker = threading.Timer(0.05, os.write, (p.wake_w, OFFSET.pack(4096)))
    kicker.start()
    t0 = time.monotonic()
    try:
        result, told, left, _started = one_call(twin_named(twin), p, b"", 0, 1 << 50, 30.0)
    finally:
        kicker.join()
    assert time.monotonic() - t0 < 10.0
    assert result == ("ok", 4096, SYNC_TOLD, True) and told == OFFSET.pack(4096) and left == b""


@pytest.mark.parametrize("twin", TWINS)
def test_no_kick_waits_the_timeout(pipes_factory: Callable[[str, bool], Pipes], twin: str) -> None:
    p = pipes_factory("file", False)
    t0 = time.monotonic()
    assert one_call(twin_named(twin), p, b"", 0, 1 << 50, 0.03)[0] == ("ok", 0, SYNC_NONE, 0.0)
    assert time.monotonic() - t0 >= 0.029


# -- the store with each twin ----------------------------------------------------------------------
def sync_config(root: str, **kw: Any) -> Any:
    """64 KiB commitlog files: most group commits sync the last file alone, some puts roll."""
    kw = {"sync_flush_timeout": 300, **kw}
    return tiny_config(
        root, flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=64 * 1024, **kw
    )


def use_twin(monkeypatch: pytest.MonkeyPatch, twin: str) -> list[int]:
    """Make the flush thread call ``twin``; returns the list its calls' states are appended to."""
    fn = twin_named(twin)
    states: list[int] = []

    def counted(*args: Any) -> tuple[int, int, float]:
        out = fn(*args)
        states.append(out[1])
        return out

    monkeypatch.setattr(flush_mod, "group_commit_sync", counted)
    return states


async def acknowledged_puts(root: Path) -> list[str]:
    """Sequential puts, concurrent ones, across file rolls: each status, each checked durable."""
    s = MessageStore(sync_config(str(root)))
    await s.start()
    trace = []
    try:
        for i in range(30):
            r = await s.put_message(bmsg("T", i % 4, b"s%d" % i + b"x" * 1000))
            assert s.commitlog.flushed_offset >= r.wrote_offset + r.wrote_bytes  # acked: durable
            trace.append(r.status.name)
        for _round in range(3):
            rs = await asyncio.gather(
                *(s.put_message(bmsg("T", i % 4, b"c%d" % i + b"y" * 700)) for i in range(40))
            )
            assert s.commitlog.flushed_offset >= max(r.wrote_offset + r.wrote_bytes for r in rs)
            trace += [r.status.name for r in rs]
        assert len(s.commitlog.files) > 1
    finally:
        await s.shutdown()
    return trace


@needs_compiled
async def test_twins_acknowledge_the_same_puts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traces = []
    for twin in ("pure", "compiled"):
        states = use_twin(monkeypatch, twin)
        traces.append(await acknowledged_puts(tmp_path / twin))
        assert SYNC_TOLD in states  # the group commit synced and told, not only the general flush
    assert traces[0] == traces[1] == ["PUT_OK"] * 150


async def failing_fsync(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """Every group commit's fdatasync fails (its descriptor is a pipe: EINVAL). A put may still be
    made durable by the idle general flush (the flush thread's look for ``WAIT=false`` puts) if it
    comes just then: the first put not acknowledged is the one the failure answers."""
    bad_r, bad_w = os.pipe()
    s = MessageStore(sync_config(str(root)))
    real = s.commitlog.group_commit_file

    def failing() -> Any:
        mf = real()
        return None if mf is None else SimpleNamespace(fd=bad_r, end_offset=mf.end_offset)

    monkeypatch.setattr(s.commitlog, "group_commit_file", failing)
    await s.start()
    try:
        for i in range(5):
            first = await s.put_message(bmsg("T", 0, b"never durable %d" % i))
            if first.status is not PutMessageStatus.PUT_OK:
                break
        flushed = s.commitlog.flushed_offset
        await wait_until_async(lambda: bool(s.read_only_remark), timeout=5, message="store read-only")
        second = await s.put_message(bmsg("T", 0, b"refused"))
        remark = s.read_only_remark
        assert s.commitlog.flushed_offset == flushed  # never reported durable after the failure
    finally:
        await s.shutdown()
        os.close(bad_r)
        os.close(bad_w)
    return first.status.name, second.status.name, "Invalid argument" in remark, type(s.commitlog.flush_error)


@needs_compiled
async def test_twins_fail_the_same_way_on_a_failing_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes = []
    for twin in ("pure", "compiled"):
        use_twin(monkeypatch, twin)
        outcomes.append(await failing_fsync(tmp_path / twin, monkeypatch))
    assert outcomes[0] == outcomes[1] == ("FLUSH_DISK_TIMEOUT", "SERVICE_NOT_AVAILABLE", True, OSError)


async def stop_with_waiters(root: Path, monkeypatch: pytest.MonkeyPatch, twin: str, how: str) -> list[str]:
    """Puts wait while the flush thread is held; the store shuts down (or stops as after a crash:
    no final flush); then the thread runs on: what it synced answers them."""
    fn = twin_named(twin)
    gate, at_gate = threading.Event(), threading.Event()
    gate.set()

    def gated(*args: Any) -> tuple[int, int, float]:
        if not gate.is_set():
            at_gate.set()
        gate.wait(30)
        return fn(*args)

    monkeypatch.setattr(flush_mod, "group_commit_sync", gated)
    s = MessageStore(sync_config(str(root), sync_flush_timeout=30_000))
    await s.start()
    flush = s._flush
    assert flush is not None
    assert (await s.put_message(bmsg("T", 0, b"before"))).status is PutMessageStatus.PUT_OK
    try:
        gate.clear()
        await wait_until_async(at_gate.is_set, timeout=10, message="the flush thread held")
        waiting = [asyncio.create_task(s.put_message(bmsg("T", i % 4, b"w%d" % i))) for i in range(20)]
        await asyncio.sleep(0.05)
        assert not any(t.done() for t in waiting)  # appended, kicked, not durable yet
        stopping = asyncio.create_task(s.shutdown() if how == "shutdown" else s.terminate())
        await wait_until_async(flush._stop.is_set, timeout=10, message="flush service stopping")
    finally:
        gate.set()
    await stopping
    results = [(await t).status.name for t in waiting]
    assert not flush._threads[0].is_alive() and flush._wake_r == -1  # joined, pipes closed
    return results


@needs_compiled
@pytest.mark.parametrize("how", ["shutdown", "terminate"])
async def test_twins_answer_the_same_puts_waiting_at_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    outcomes = [
        await stop_with_waiters(tmp_path / twin, monkeypatch, twin, how) for twin in ("pure", "compiled")
    ]
    assert outcomes[0] == outcomes[1] == ["PUT_OK"] * 20


def _store_threads() -> Counter[str]:
    return Counter(t.name for t in threading.enumerate() if not t.name.startswith("asyncio_"))


@pytest.mark.parametrize("twin", TWINS)
async def test_repeated_start_and_stop_leave_no_descriptor_or_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, twin: str
) -> None:
    use_twin(monkeypatch, twin)

    async def cycle(n: int) -> None:
        s = MessageStore(sync_config(str(tmp_path / "store")))
        await s.start()
        assert (await s.put_message(bmsg("T", 0, b"m%d" % n))).status is PutMessageStatus.PUT_OK
        await (s.shutdown() if n % 2 else s.terminate())

    await cycle(0)  # the executor's threads and anything else made once
    fds, threads = len(os.listdir("/proc/self/fd")), _store_threads()
    for n in range(1, 7):
        await cycle(n)
    await asyncio.sleep(0)  # the loop's callbacks queued by the last stop (the pipes' close)
    wait_until(lambda: not _store_threads() - threads, timeout=10, message=f"threads back to {threads}")
    assert len(os.listdir("/proc/self/fd")) <= fds
