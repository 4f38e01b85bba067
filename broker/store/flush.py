"""Flushing in threads: the commitlog flush service (async interval or SYNC_FLUSH group commit) and
the consume-queue/index flush, both updating the checkpoint.

Owns the two flush threads and the group-commit waiters. Waiters are asyncio futures completed on
the loop once the flushed offset passes their end offset; the flush itself (fdatasync) never runs
on the loop.

SYNC_FLUSH group commit has no fixed wait. The loop asks for a flush by writing an offset it has
appended up to (a kick, 8 bytes) to a non-blocking pipe: a put with no other waiter (the last flush
answered one put) kicks at once, so its sync overlaps the rest of the tick; otherwise the first
waiter of a tick schedules a kick at the end of that tick (``call_soon``), so every put of the tick
(one ``data_received``'s requests) joins one flush. The flush thread spends its wait, the sync and
the answer in one call, ``group_commit_sync`` (compiled with the GIL released, or its pure twin):
it drains the kicks, ``fdatasync``s the last commitlog file up to the highest one, and writes that
offset to a done pipe the loop reads (``add_reader``), raising ``flushed_offset`` and completing the
waiters within it. A flush takes every kick written before it starts; kicks written during a flush
start the next one right after it.

Anything the one-file sync cannot cover takes the general flush (``CommitLog.flush``, its result
told through ``call_soon_threadsafe``): bytes past the last file's start not yet durable (a roll),
an injected flush fault (``DiskFaults``: the loop kicks ``KICK_GENERAL`` and the thread offers no
descriptor, so every flush goes through ``on_flush``), an earlier failed flush (nothing is reported
durable again), and puts that did not wait (``WAIT=false``: the thread looks every
``GROUP_COMMIT_IDLE_S``). A failed sync marks the commitlog failed as the general flush does (the
store turns read-only) and nothing past the flushed offset is acknowledged: its waiters answer
FLUSH_DISK_TIMEOUT. ``stop`` joins the thread, then closes both pipes on the loop after completing
the waiters of what the thread made durable (left open only when the thread is stuck past the join's
10 s, since it may still write). The physic checkpoint is written by the consume-queue thread, off
the group-commit path.

The consume-queue thread never syncs a file in the common case, so the group commit's
``fdatasync`` does not queue behind a device cache flush or a journal commit of its: consume queues
and the index are rebuilt from the commitlog by recovery, and a killed broker's page cache keeps
them. Every ``flushIntervalConsumeQueue`` it starts the write-back of what was dispatched
(``sync_file_range``, no waiting) and writes the checkpoint's page (no sync). Every
``flushConsumeQueueThoroughInterval`` and at shutdown it makes them durable (``flush`` of every
queue written since, the index, then the checkpoint synced with the dispatch point taken before):
after a reboot, recovery rebuilds from that point (``Checkpoint.rebooted``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import select
import struct
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.broker.store.checkpoint import Checkpoint
from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.consume_queue import ConsumeQueue
from rocketpy.broker.store.dispatch import Dispatcher
from rocketpy.broker.store.mapped_file import WriteBackPacer
from rocketpy.latency import LatencyHistogram

log = logging.getLogger("rocketpy.store")

PAGE_SIZE = 4096
#: SYNC_FLUSH: how often the flush thread looks for puts that did not wait (``WAIT=false``); a
#: waiting put wakes it at once.
GROUP_COMMIT_IDLE_S = 0.01
#: ``group_commit_sync`` results: nothing synced (the caller flushes, the general way), synced and
#: the loop told through the done pipe, synced but the done pipe full (the caller tells the loop).
SYNC_NONE, SYNC_TOLD, SYNC_UNTOLD = 0, 1, 2
#: A kick or a done value in a pipe: a commitlog offset (native order, 8 bytes: one atomic pipe
#: write). A kick of ``KICK_GENERAL`` asks for the general flush (a fault is set); 0 only wakes.
OFFSET = struct.Struct("=q")
KICK_GENERAL = -1
PIPE_READ_BYTES = 8 * 1024
#: ``group_commit_sync`` waits at most this many milliseconds (poll's int), however long it is asked
MAX_WAIT_MS = 2**31 - 1
MAX_GROUP_COMMIT_WAITERS = 100_000
CHECKPOINT_MIN_INTERVAL_S = 0.2
EXPIRE_CHECK_S = 0.05
#: The durable consume-queue / index pass writes files back in slices of this many bytes (at most
#: 64 pages in the device's queue at once), and before each slice waits up to YIELD_MAX_S while a
#: group commit runs or is asked for.
WRITE_BACK_SLICE_BYTES = 256 * 1024
YIELD_MAX_S = 0.002
YIELD_POLL_S = 0.0002


@twin
def group_commit_sync(
    wake_fd: int,
    sync_fd: int,
    done_fd: int,
    flushed: int,
    limit: int,
    timeout_s: float,
    started: array[float],
) -> tuple[int, int, float]:
    """One SYNC_FLUSH group commit of the flush thread: wait up to ``timeout_s`` for kicks on
    ``wake_fd`` (a non-blocking pipe of ``OFFSET`` values, each written by the loop after the appends
    it covers), then, when the highest one is past ``flushed`` and at most ``limit`` (the end of
    ``sync_fd``'s file, every byte before that file being durable), ``fdatasync(sync_fd)`` and write
    that offset to ``done_fd`` (non-blocking; the loop reads it and completes the waiters).

    The compiled twin does all of it with the GIL released: the flush starts while the loop still runs
    the rest of its tick, and the loop hears of it without waiting for this thread's Python. While the
    sync runs, ``started[0]`` is its start (``time.monotonic()``), else 0.0.

    Returns:
        ``(highest kick, SYNC_NONE / SYNC_TOLD / SYNC_UNTOLD, seconds the sync took)``. SYNC_NONE:
        nothing was synced (no kick within ``timeout_s``, nothing past ``flushed``, a kick past
        ``limit``, ``sync_fd`` < 0, or a ``KICK_GENERAL``): the caller flushes the general way.

    Raises:
        OSError: the sync failed (nothing was told), or the wait or the read of ``wake_fd`` did
            (the caller treats both alike: nothing past ``flushed`` is reported durable again).
    """
    if len(started) < 1:
        raise ValueError("started needs one slot")
    # whole milliseconds, rounded up; none when not positive (NaN too), at most MAX_WAIT_MS
    timeout_ms = math.ceil(min(timeout_s * 1000, MAX_WAIT_MS)) if timeout_s > 0 else 0
    poller = select.poll()
    poller.register(wake_fd, select.POLLIN)
    if not poller.poll(timeout_ms):
        return 0, SYNC_NONE, 0.0
    target, general = 0, False
    while True:
        try:
            data = os.read(wake_fd, PIPE_READ_BYTES)
        except BlockingIOError:
            break
        for (value,) in OFFSET.iter_unpack(data[: len(data) - len(data) % OFFSET.size]):  # whole values
            if value < 0:
                general = True
            elif value > target:
                target = value
        if len(data) < PIPE_READ_BYTES:
            break
    if general or target <= flushed or target > limit or sync_fd < 0:
        return target, SYNC_NONE, 0.0
    started[0] = t0 = time.monotonic()
    try:
        os.fdatasync(sync_fd)
    finally:
        took = time.monotonic() - t0
        started[0] = 0.0
    try:
        os.write(done_fd, OFFSET.pack(target))
    except OSError:  # full (the loop is far behind): the caller tells it
        return target, SYNC_UNTOLD, took
    return target, SYNC_TOLD, took


class FlushService:
    """Commitlog + consume-queue flush threads.

    Args:
        loop: the store's event loop.
        commitlog: the log to flush.
        dispatcher: consume queues and index to flush.
        checkpoint: where flush progress is recorded.
        sync_flush: SYNC_FLUSH (group commit) instead of ASYNC_FLUSH.
        interval_ms / least_pages / thorough_interval_ms: ASYNC_FLUSH policy.
        cq_interval_ms / cq_least_pages / cq_thorough_interval_ms: consume-queue flush policy.
        last_store_ts: returns the store time of the last appended message (for the checkpoint).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        commitlog: CommitLog,
        dispatcher: Dispatcher,
        checkpoint: Checkpoint,
        *,
        sync_flush: bool,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        cq_interval_ms: int,
        cq_least_pages: int,
        cq_thorough_interval_ms: int,
        last_store_ts: Callable[[], int],
    ) -> None:
        self._loop = loop
        self._commitlog = commitlog
        self._dispatcher = dispatcher
        self._checkpoint = checkpoint
        self.sync_flush = sync_flush
        self._interval_s = interval_ms / 1000
        self._least_bytes = least_pages * PAGE_SIZE
        self._thorough_s = thorough_interval_ms / 1000
        self._cq_interval_s = cq_interval_ms / 1000
        self._cq_least_bytes = cq_least_pages * PAGE_SIZE
        self._cq_thorough_s = cq_thorough_interval_ms / 1000
        self._cq_durable_at = self._cq_flushed_at = time.monotonic()
        #: consume queues written back but not yet flushed (flush thread only)
        self._undurable: set[ConsumeQueue] = set()
        self._pacer = WriteBackPacer(WRITE_BACK_SLICE_BYTES, self._yield_to_group_commit)
        self._last_store_ts = last_store_ts
        #: SYNC_FLUSH: the kick pipe (loop -> flush thread: the offset to make durable) and the done
        #: pipe (flush thread -> loop: the offset made durable), both non-blocking (``group_commit_sync``)
        self._wake_r = self._wake_w = self._done_r = self._done_w = -1
        if sync_flush:
            self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            self._done_r, self._done_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        #: the highest offset kicked, and how many waiters the last flush answered (loop)
        self._kicked = 0
        self._last_group = 0
        self._stop = threading.Event()
        self._waiters: deque[tuple[int, float, asyncio.Future[bool]]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        #: how long the commitlog flushes that wrote something took (written by the flush thread)
        self.flush_latency = LatencyHistogram()
        self._kick_scheduled = False
        #: (store ts, flushed offset, dispatched offset) of the last commitlog flush, for the checkpoint
        self._flushed_point: tuple[int, int, int] | None = None
        self._written_point: tuple[int, int, int] | None = None
        self._threads = [
            threading.Thread(target=self._commitlog_routine, name="store-flush-commitlog", daemon=True),
            threading.Thread(target=self._cq_routine, name="store-flush-cq", daemon=True),
        ]

    def start(self) -> None:
        """Start both threads (on the loop)."""
        if self._done_r >= 0:
            self._loop.add_reader(self._done_r, self._on_done)
        for t in self._threads:
            t.start()

    # -- group commit (loop side) -----------------------------------------------------------
    async def wait_flushed(self, end_offset: int, timeout_s: float) -> bool:
        """Wait until the commitlog is flushed past ``end_offset``; False on timeout (SYNC_FLUSH)."""
        return await self.flushed_future(end_offset, timeout_s)

    def flushed_future(self, end_offset: int, timeout_s: float) -> asyncio.Future[bool]:
        """A future of ``wait_flushed``'s answer, the flush asked for now (on the loop).

        Waiters sit in arrival order, so their end offsets and deadlines both increase: one flush
        completes a prefix, and one timer expires a prefix (no timer per put).
        """
        fut: asyncio.Future[bool] = self._loop.create_future()
        if self._commitlog.flushed_offset >= end_offset:
            fut.set_result(True)
            return fut
        if len(self._waiters) >= MAX_GROUP_COMMIT_WAITERS:
            fut.set_result(False)
            return fut
        waiters = self._waiters
        waiters.append((end_offset, self._loop.time() + timeout_s, fut))
        if not self._kick_scheduled:
            self._kick_scheduled = True
            if len(waiters) == 1 and self._last_group <= 1 and not self._commitlog.flush_started:
                # one put at a time (the last flush answered one): its flush runs beside the rest
                # of the tick; under concurrent puts the kick waits for the tick's end, one for all
                self._kick_at(end_offset)
            self._loop.call_soon(self._kick)
        if self._timer is None:
            self._timer = self._loop.call_later(EXPIRE_CHECK_S, self._expire)
        return fut

    def _kick(self) -> None:
        """End of the tick that brought waiters: one flush for all of them not kicked yet."""
        self._kick_scheduled = False
        if self._waiters and self._waiters[-1][0] > self._kicked:
            self._kick_at(self._commitlog.max_offset)

    def _kick_at(self, offset: int) -> None:
        """Ask the flush thread to make the log durable up to ``offset``, appended already (loop)."""
        if self._wake_w < 0:
            return  # stopped
        self._kicked = offset
        value = KICK_GENERAL if self._commitlog.faults.flush_armed else offset
        try:
            os.write(self._wake_w, OFFSET.pack(value))
        except BlockingIOError:
            pass  # thousands of kicks unread: a later kick, or the idle flush, covers this one

    def _signal(self) -> None:
        """Wake the flush thread (any thread)."""
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, OFFSET.pack(0))
            except BlockingIOError:
                pass  # it has kicks to read

    def _on_done(self) -> None:
        """The flush thread made the log durable up to the offsets in the done pipe (loop)."""
        try:
            data = os.read(self._done_r, PIPE_READ_BYTES)
        except OSError:
            return
        if len(data) >= OFFSET.size:  # whole values, increasing: the last is the highest
            flushed = OFFSET.unpack_from(data, len(data) - OFFSET.size)[0]
            self._commitlog.synced(flushed)  # acknowledged puts are within the flushed offset
            self._complete(flushed)

    def _complete(self, flushed: int) -> None:
        waiters = self._waiters
        n = len(waiters)
        while waiters and waiters[0][0] <= flushed:
            fut = waiters.popleft()[2]
            if not fut.done():
                fut.set_result(True)
        if n != len(waiters):
            self._last_group = n - len(waiters)

    def _expire(self) -> None:
        self._timer = None
        now = self._loop.time()
        waiters = self._waiters
        while waiters and waiters[0][1] <= now:
            fut = waiters.popleft()[2]
            if not fut.done():
                fut.set_result(False)
        if waiters:
            self._timer = self._loop.call_later(EXPIRE_CHECK_S, self._expire)

    # -- threads ----------------------------------------------------------------------------
    def _commitlog_routine(self) -> None:
        if self.sync_flush:
            self._group_commit_routine()
            return
        last_thorough = time.monotonic()
        while not self._stop.is_set():
            self._stop.wait(self._interval_s)
            now = time.monotonic()
            dirty = self._commitlog.max_offset - self._commitlog.flushed_offset
            if dirty > 0 and (dirty >= self._least_bytes or now - last_thorough >= self._thorough_s):
                self._flush_commitlog()
                last_thorough = now

    def _group_commit_routine(self) -> None:
        """SYNC_FLUSH: each kick's flush by ``group_commit_sync`` when the last file alone holds
        what is not durable yet (the common case), else (a roll, a fault, ``WAIT=false`` puts only)
        the general flush."""
        commitlog = self._commitlog
        while not self._stop.is_set():
            mf = commitlog.group_commit_file()
            fd, limit = (mf.fd, mf.end_offset) if mf is not None else (-1, 0)
            flushed = commitlog.flushed_offset
            # taken before the flush, as _flush_commitlog does: the checkpoint never runs ahead
            ts, dispatched = self._last_store_ts(), self._dispatcher.watermark()
            try:
                target, state, took = group_commit_sync(
                    self._wake_r,
                    fd,
                    self._done_w,
                    flushed,
                    limit,
                    GROUP_COMMIT_IDLE_S,
                    commitlog.sync_started,
                )
            except OSError as e:
                commitlog.flush_failed(e)
                log.error("commitlog flush failed: %s", e)
                continue
            if state == SYNC_NONE:
                if not self._stop.is_set():
                    self._flush_commitlog()
                continue
            commitlog.synced(target)
            self.flush_latency.observe(took)
            self._flushed_point = (ts, target, dispatched)
            if state == SYNC_UNTOLD:
                self._tell_loop(target)

    def _flush_commitlog(self) -> None:
        try:
            ts = self._last_store_ts()
            dispatched = self._dispatcher.watermark()
            before = self._commitlog.flushed_offset
            started = time.monotonic()
            flushed = self._commitlog.flush()
            if flushed != before:
                self.flush_latency.observe(time.monotonic() - started)
                self._flushed_point = (ts, flushed, dispatched)  # written by _write_physic
        except (OSError, ValueError) as e:  # ValueError: a file unmapped by shutdown/cleanup meanwhile
            log.error("commitlog flush failed: %s", e)
            return
        if self._waiters:
            self._tell_loop(flushed)

    def _tell_loop(self, flushed: int) -> None:
        try:
            self._loop.call_soon_threadsafe(self._complete, flushed)
        except RuntimeError:
            pass  # loop closed: nobody waits any more

    def _cq_routine(self) -> None:
        while not self._stop.wait(min(self._cq_interval_s, CHECKPOINT_MIN_INTERVAL_S)):
            self._write_physic()
            now = time.monotonic()
            if now - self._cq_durable_at >= self._cq_thorough_s:
                self.flush_consume_queues()
            elif now - self._cq_flushed_at >= self._cq_interval_s:
                self.write_back_consume_queues()

    def _write_physic(self) -> None:
        """Record the last commitlog flush in the checkpoint's page (at most every 200 ms; not synced)."""
        point = self._flushed_point  # one read: the flush thread replaces the tuple, never mutates it
        if point is None or point is self._written_point:
            return
        self._written_point = point
        try:
            self._checkpoint.write_physic(*point)
        except (OSError, ValueError) as e:
            log.error("checkpoint write failed: %s", e)

    def _yield_to_group_commit(self) -> None:
        """Before a slice of the durable pass: wait (up to ``YIELD_MAX_S``) while a commitlog flush
        runs or puts wait for one, so the slice's writes do not go ahead of the group commit's."""
        deadline = time.monotonic() + YIELD_MAX_S
        commitlog = self._commitlog
        while (commitlog.flush_started or self._waiters) and time.monotonic() < deadline:
            time.sleep(YIELD_POLL_S)

    def write_back_consume_queues(self) -> None:
        """Start writing consume queues with enough dirty pages to disk (flush thread): no
        waiting, nothing made durable (see the module docstring). The index, whose slot pages are
        written all over its file, is left to the durable pass: written once a minute, a slot
        page carries a minute of updates."""
        self._cq_flushed_at = time.monotonic()
        d = self._dispatcher
        dirty, d.dirty_cqs = d.dirty_cqs, set()
        try:
            for cq in list(dirty):  # the loop may still add to the old set
                if cq.dirty_bytes() >= self._cq_least_bytes:
                    if not cq.deleted:
                        cq.write_back()
                        self._undurable.add(cq)
                else:
                    d.dirty_cqs.add(cq)  # not worth a write yet (flushConsumeQueueLeastPages)
        except (OSError, ValueError) as e:
            log.error("consume queue write-back failed: %s", e)

    def flush_consume_queues(self) -> None:
        """Make every consume queue written since the last time, and the index, durable, then
        record in the checkpoint (synced) the dispatch point taken before (flush thread)."""
        self._cq_durable_at = self._cq_flushed_at = time.monotonic()
        d = self._dispatcher
        point = d.watermark()  # first: every unit before it is in a file, so the flushes cover it
        ts = self._last_store_ts()
        queues, self._undurable = self._undurable, set()
        dirty, d.dirty_cqs = d.dirty_cqs, set()
        try:
            for cq in queues | dirty:  # the loop may still add to the old set
                if not cq.deleted:
                    cq.flush(self._pacer)
            if d.index is not None:
                d.index.flush(self._pacer)
            self._checkpoint.write_durable(ts, ts, point)
        except (OSError, ValueError) as e:
            log.error("consume queue flush failed: %s", e)

    def stop(self) -> None:
        """Stop the threads without a final flush (blocking: call in a thread)."""
        self._stop.set()
        self._signal()
        for t in self._threads:
            if t.is_alive():
                t.join(10)
        if self._wake_r >= 0 and not self._threads[0].is_alive():  # else leaked: a stuck sync may still tell
            try:
                self._loop.call_soon_threadsafe(self._close_pipes)
            except RuntimeError:  # loop closed: its reader went with it
                self._close_pipes(on_loop=False)

    def _close_pipes(self, on_loop: bool = True) -> None:
        """Close the kick and done pipes once the flush thread is gone (on the loop, which first
        completes the waiters of what the thread told and the loop had not read yet)."""
        fds = (self._wake_r, self._wake_w, self._done_r, self._done_w)
        if fds[0] < 0:
            return
        if on_loop:
            self._loop.remove_reader(self._done_r)
            self._complete(self._commitlog.flushed_offset)  # the thread said so before it ended
        self._wake_r = self._wake_w = self._done_r = self._done_w = -1
        for fd in fds:
            os.close(fd)

    def shutdown(self) -> None:
        """Stop the threads and flush everything (blocking: call in a thread)."""
        self.stop()
        self._flush_commitlog()
        self._write_physic()
        self.flush_consume_queues()  # syncs the checkpoint too


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.store import _speedups

    same_signature(group_commit_sync)(_speedups.group_commit_sync)
    same_signature(_speedups.group_commit_sync)(group_commit_sync)
