"""Flushing in threads: the commitlog flush service (async interval or SYNC_FLUSH group commit) and
the consume-queue/index flush, both updating the checkpoint.

Owns the two flush threads and the group-commit waiters. Waiters are asyncio futures completed on
the loop through ``call_soon_threadsafe`` once the flushed offset passes their end offset; the
flush itself (fdatasync) never runs on the loop.

SYNC_FLUSH group commit has no fixed wait: the first waiter of a loop tick schedules a kick at the
end of that tick (``call_soon``), so every put of the tick (one ``data_received``'s requests) joins
one flush, and the kick wakes the flush thread when the loop is about to go idle: the thread then
gets the GIL at once instead of after a forced switch interval (5 ms) behind a busy loop. A flush
takes everything appended before it starts; waiters that come during a flush signal the flush thread
again, so the next flush starts right after it and takes them all. The physic checkpoint (an
fsync of its own) is written by the consume-queue thread, off the group-commit path.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from rocketpy.broker.store.checkpoint import Checkpoint
from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.dispatch import Dispatcher
from rocketpy.latency import LatencyHistogram

log = logging.getLogger("rocketpy.store")

PAGE_SIZE = 4096
#: SYNC_FLUSH: how often the flush thread looks for puts that did not wait (``WAIT=false``); a
#: waiting put wakes it at once.
GROUP_COMMIT_IDLE_S = 0.01
MAX_GROUP_COMMIT_WAITERS = 100_000
CHECKPOINT_MIN_INTERVAL_S = 0.2
EXPIRE_CHECK_S = 0.05


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
        self._cq_thorough_at = self._cq_flushed_at = time.monotonic()
        self._last_store_ts = last_store_ts
        #: The group-commit signal, a binary semaphore: released = a flush is asked for. A plain lock,
        #: not a ``threading.Event``: the flush thread blocks in C with the GIL released and takes
        #: the signal atomically, so both hand-offs of a sequential SYNC_FLUSH put (loop -> flush
        #: thread, and back while the thread returns to its wait) are shorter.
        self._wake = threading.Lock()
        self._wake.acquire()
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
        """Start both threads."""
        for t in self._threads:
            t.start()

    # -- group commit (loop side) -----------------------------------------------------------
    async def wait_flushed(self, end_offset: int, timeout_s: float) -> bool:
        """Wait until the commitlog is flushed past ``end_offset``; False on timeout (SYNC_FLUSH).

        Waiters sit in arrival order, so their end offsets and deadlines both increase: one flush
        completes a prefix, and one timer expires a prefix (no timer per put).
        """
        if self._commitlog.flushed_offset >= end_offset:
            return True
        if len(self._waiters) >= MAX_GROUP_COMMIT_WAITERS:
            return False
        fut: asyncio.Future[bool] = self._loop.create_future()
        self._waiters.append((end_offset, self._loop.time() + timeout_s, fut))
        if not self._kick_scheduled:
            self._kick_scheduled = True
            self._loop.call_soon(self._kick)
        if self._timer is None:
            self._timer = self._loop.call_later(EXPIRE_CHECK_S, self._expire)
        return await fut

    def _kick(self) -> None:
        """End of the tick that brought waiters: start a flush for all of them."""
        self._kick_scheduled = False
        self._signal()

    def _signal(self) -> None:
        try:
            self._wake.release()
        except RuntimeError:
            pass  # already signalled, not yet taken by the flush thread

    def _complete(self, flushed: int) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed:
            fut = waiters.popleft()[2]
            if not fut.done():
                fut.set_result(True)

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
        last_thorough = time.monotonic()
        while not self._stop.is_set():
            if self.sync_flush:
                self._wake.acquire(timeout=GROUP_COMMIT_IDLE_S)  # a kick during the flush signals again
                self._flush_commitlog()
                continue
            self._stop.wait(self._interval_s)
            now = time.monotonic()
            dirty = self._commitlog.max_offset - self._commitlog.flushed_offset
            if dirty > 0 and (dirty >= self._least_bytes or now - last_thorough >= self._thorough_s):
                self._flush_commitlog()
                last_thorough = now

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
            try:
                self._loop.call_soon_threadsafe(self._complete, flushed)
            except RuntimeError:
                pass  # loop closed: nobody waits any more

    def _cq_routine(self) -> None:
        while not self._stop.wait(min(self._cq_interval_s, CHECKPOINT_MIN_INTERVAL_S)):
            self._write_physic()
            if time.monotonic() - self._cq_flushed_at >= self._cq_interval_s:
                self.flush_consume_queues()

    def _write_physic(self) -> None:
        """Record the last commitlog flush in the checkpoint (an fsync; at most every 200 ms)."""
        point = self._flushed_point  # one read: the flush thread replaces the tuple, never mutates it
        if point is None or point is self._written_point:
            return
        self._written_point = point
        try:
            self._checkpoint.write_physic(*point)
        except (OSError, ValueError) as e:
            log.error("checkpoint write failed: %s", e)

    def flush_consume_queues(self, thorough: bool = False) -> None:
        """fdatasync consume queues with enough dirty pages (all when ``thorough``), the index, and
        update the checkpoint (flush thread)."""
        now = self._cq_flushed_at = time.monotonic()
        if now - self._cq_thorough_at >= self._cq_thorough_s:
            thorough = True
            self._cq_thorough_at = now
        ts = self._last_store_ts()
        d = self._dispatcher
        dirty, d.dirty_cqs = d.dirty_cqs, set()
        try:
            for cq in list(dirty):  # the loop may still add to the old set
                if thorough or cq.dirty_bytes() >= self._cq_least_bytes:
                    cq.flush()
                else:
                    d.dirty_cqs.add(cq)  # not worth a write yet (flushConsumeQueueLeastPages)
            if d.index is not None:
                d.index.flush()
            self._checkpoint.write_logics(ts, ts)
        except (OSError, ValueError) as e:
            log.error("consume queue flush failed: %s", e)

    def stop(self) -> None:
        """Stop the threads without a final flush (blocking: call in a thread)."""
        self._stop.set()
        self._signal()
        for t in self._threads:
            if t.is_alive():
                t.join(10)

    def shutdown(self) -> None:
        """Stop the threads and flush everything (blocking: call in a thread)."""
        self.stop()
        self._flush_commitlog()
        self._write_physic()
        self.flush_consume_queues(thorough=True)
