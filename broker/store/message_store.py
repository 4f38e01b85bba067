"""MessageStore: the facade the broker wraps (lifecycle, put, get, offsets, queries).

Owns the store's parts and their order: lock -> recovery (thread) -> abort marker -> allocate, flush
and cleanup threads; shutdown in reverse. The parts get what they use, not the store: ``PutService``
(put.py) appends through ``CommitLog.append`` and dispatches through ``Dispatcher.dispatch`` on the
event loop (under SYNC_FLUSH a put then awaits group commit); reads (reads.py) get the commitlog and
a consume queue or the index and return views of the commitlog, never re-encoded; cleanup gets the
commitlog and the dispatcher.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import operator
import os
import shutil
import time
from collections.abc import Callable, Coroutine
from typing import Any, cast

from rocketpy.broker.store import cq_clean, reads
from rocketpy.broker.store.allocate import AllocateService
from rocketpy.broker.store.checkpoint import Checkpoint
from rocketpy.broker.store.cleanup import CleanupService, delete_queue_files
from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.consume_queue import units_struct
from rocketpy.broker.store.dispatch import Dispatcher, Listener, parse_delay_levels
from rocketpy.broker.store.faults import DiskFaults
from rocketpy.broker.store.flush import FlushService
from rocketpy.broker.store.health import StoreHealth
from rocketpy.broker.store.index import IndexService, index_file_size
from rocketpy.broker.store.lockfile import StoreLock, abort_path, create_abort, remove_abort
from rocketpy.broker.store.mapped_file import MappedFile
from rocketpy.broker.store.message import BrokerMessage
from rocketpy.broker.store.put import PutService, put_now
from rocketpy.broker.store.recovery import (
    base_pages_at_write_ends,
    load_consume_queues,
    load_index_files,
    load_offset_files,
    recover,
)
from rocketpy.broker.store.replica import ReplicaAppender, read_raw
from rocketpy.broker.store.results import (
    GetMessageResult,
    MessageFilter,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    StoreError,
)
from rocketpy.broker.store.stats import StoreStats
from rocketpy.broker.store.truncate import cut_store
from rocketpy.config import FlushDiskType, StoreConfig
from rocketpy.latency import LatencyHistogram
from rocketpy.record import (
    pack_host,
)

log = logging.getLogger("rocketpy.store")

SHUTDOWN_SETTLE_S = 30.0
STATS_SAMPLE_S = 1.0
_BAD = PutMessageStatus


def default_disk_usage(path: str) -> float:
    """Used fraction (0..1) of the file system holding ``path``."""
    u = shutil.disk_usage(path)
    return u.used / u.total if u.total else 0.0


class MessageStore:
    """The message store.

    Args:
        config: store settings.
        store_host: ``(ip, port)`` written into records (settable until the first put).
        clock: seconds clock (store timestamps, index names, file expiry).
        disk_usage: returns the used fraction (0..1) of the disk holding a path.
        faults: injected disk faults (tests; default none).
    """

    def __init__(
        self,
        config: StoreConfig,
        *,
        store_host: tuple[str, int] = ("127.0.0.1", 0),
        clock: Callable[[], float] = time.time,
        disk_usage: Callable[[str], float] | None = None,
        faults: DiskFaults | None = None,
    ) -> None:
        self.config = config
        self.root = config.store_path_root_dir
        self._store_host = store_host
        self.clock = clock
        self.disk_usage = disk_usage or default_disk_usage
        self.commitlog = CommitLog(config.commit_log_dir(), config.mapped_file_size_commit_log)
        self.faults = self.commitlog.faults = faults or DiskFaults()
        #: When the running commitlog flush began (``time.monotonic()``; 0: none runs): the
        #: commitlog's ``sync_started`` slot read by ``operator.getitem``, a call with no Python
        #: frame (the send queue makes it on every send).
        self.flush_started = cast(
            "Callable[[], float]", functools.partial(operator.getitem, self.commitlog.sync_started, 0)
        )
        index = None
        if config.message_index_enable:
            index = IndexService(
                os.path.join(self.root, "index"), config.max_hash_slot_num, config.max_index_num, clock
            )
        self.dispatcher = Dispatcher(
            os.path.join(self.root, "consumequeue"),
            config.mapped_file_size_consume_queue,
            index,
            parse_delay_levels(config.message_delay_level),
        )
        self.checkpoint = Checkpoint(os.path.join(self.root, "checkpoint"))
        self.stats = StoreStats(clock)
        self._put = PutService(
            self.commitlog,
            self.dispatcher,
            self.stats,
            clock,
            max_message_size=config.max_message_size,
            sync_flush_timeout_ms=config.sync_flush_timeout,
            allocating=self._allocations_in_flight,
        )
        self._put.store_host8 = pack_host(store_host)
        self.health = StoreHealth(self._refuse_writes_read_only)
        self.commitlog.on_flush_error = self.health.on_flush_error
        self._retry_timer: asyncio.TimerHandle | None = None
        self._lock = StoreLock(self.root)
        self._allocator: AllocateService | None = None  # commitlog + index files
        self._cq_allocator: AllocateService | None = None  # consume-queue files (never delays a roll)
        self._flush: FlushService | None = None
        self._stats_timer: asyncio.TimerHandle | None = None
        self.cleanup: CleanupService | None = None
        self._replica: ReplicaAppender | None = None
        self._sync_flush = config.flush_disk_type == FlushDiskType.SYNC_FLUSH
        self.commitlog.warm_files = config.warm_mapped_file_enable and not self._sync_flush

    @property
    def running(self) -> bool:
        """True between ``start`` and ``shutdown`` / ``terminate`` (puts are accepted)."""
        return self._put.running

    @property
    def disk_full_remark(self) -> str:
        """Why writes are refused for disk space ("" when they are accepted)."""
        return self._put.disk_full_remark

    def _refuse_writes(self, remark: str) -> None:
        self._put.disk_full_remark = remark

    def _refuse_writes_read_only(self, remark: str) -> None:
        self._put.read_only_remark = remark

    @property
    def read_only_remark(self) -> str:
        """Why writes are refused after a disk error ("" when they are accepted); see health.py."""
        return self._put.read_only_remark

    def _allocations_in_flight(self) -> bool:
        """True while a file creation's callback has not run yet."""
        a, b = self._allocator, self._cq_allocator
        return bool((a is not None and a.in_flight) or (b is not None and b.in_flight))

    @property
    def store_host(self) -> tuple[str, int]:
        """``(ipv4, port)`` written into every record (part of the offset msg id)."""
        return self._store_host

    @store_host.setter
    def store_host(self, host: tuple[str, int]) -> None:
        self._put.store_host8 = pack_host(host)
        self._store_host = host

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Lock the directory, recover, create the abort marker and start the threads.

        Raises:
            StoreLockedError: another store uses the directory.
            StoreError: the directory or configuration is unusable.
        """
        await asyncio.to_thread(self._lock.acquire)
        try:
            await asyncio.to_thread(self._load_and_recover)
        except BaseException:
            await asyncio.to_thread(self._lock.release)
            raise
        loop = asyncio.get_running_loop()
        on_result = self.health.on_create_result
        self._allocator = AllocateService(loop, "store-allocate", self.faults, on_result)
        self._allocator.start()
        self._cq_allocator = AllocateService(loop, "store-allocate-cq", self.faults, on_result)
        self._cq_allocator.start()
        self.commitlog.attach_allocator(self._allocator)
        self.dispatcher.allocator = self._cq_allocator  # type: ignore[assignment]
        self.dispatcher.dispatched_to = self.commitlog.max_offset
        for cq in self.dispatcher.cqs.values():
            cq.attach_allocator(self._cq_allocator, self.dispatcher)
        if self.dispatcher.index is not None:
            self.dispatcher.index.attach_allocator(self._allocator)
        c = self.config
        self._start_flush(loop)
        self.cleanup = CleanupService(
            c, self.commitlog, self.dispatcher, loop, self.clock, self.disk_usage, self._refuse_writes
        )
        self.cleanup.start()
        self._stats_timer = loop.call_later(STATS_SAMPLE_S, self._sample_stats)
        self._retry_timer = loop.call_later(c.clean_resource_interval / 1000, self._retry_creates)
        self._put.running = True

    def _start_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        c = self.config
        self._flush = FlushService(
            loop,
            self.commitlog,
            self.dispatcher,
            self.checkpoint,
            sync_flush=c.flush_disk_type == FlushDiskType.SYNC_FLUSH,
            interval_ms=c.flush_interval_commit_log,
            least_pages=c.flush_commit_log_least_pages,
            thorough_interval_ms=c.flush_commit_log_thorough_interval,
            cq_interval_ms=c.flush_interval_consume_queue,
            cq_least_pages=c.flush_consume_queue_least_pages,
            cq_thorough_interval_ms=c.flush_consume_queue_thorough_interval,
            last_store_ts=lambda: self.stats.last_store_ts,
        )
        self._flush.start()
        self._put.flush = self._flush if self._sync_flush else None

    def _retry_creates(self) -> None:
        """Every cleanResourceInterval: ask again for files whose creation failed (health.py)."""
        self.health.retry(self.commitlog, self.dispatcher)
        self._retry_timer = asyncio.get_running_loop().call_later(
            self.config.clean_resource_interval / 1000, self._retry_creates
        )

    def _sample_stats(self) -> None:
        self.stats.sample()
        self._stats_timer = asyncio.get_running_loop().call_later(STATS_SAMPLE_S, self._sample_stats)

    def _load_and_recover(self) -> None:
        c = self.config
        abnormal = os.path.exists(abort_path(self.root))
        self.checkpoint.open()
        self.commitlog.load(
            load_offset_files(
                self.commitlog.directory, c.mapped_file_size_commit_log, "commitlog", readahead=True
            )
        )
        load_consume_queues(self.dispatcher, self.commitlog.min_offset)
        index = self.dispatcher.index
        if index is not None:
            index.load(
                load_index_files(index.directory, index_file_size(c.max_hash_slot_num, c.max_index_num))
            )
        cp = self.checkpoint
        rebooted = abnormal and cp.rebooted  # the page cache of the last run is gone
        log.info("store %s: %s start%s, recovering", self.root, "abnormal" if abnormal else "normal",
                 " after a reboot" if rebooted else "")  # fmt: skip
        dispatched = cp.durable_dispatched_offset if rebooted else cp.dispatched_offset
        flushed = (cp.flushed_offset, dispatched) if abnormal else None
        end = recover(self.commitlog, self.dispatcher, flushed, c.check_crc_on_recover, rebooted)
        self.commitlog.ensure_first_file(end - end % c.mapped_file_size_commit_log)
        base_pages_at_write_ends(self.commitlog, self.dispatcher)
        cp.claim_boot()
        create_abort(self.root)

    async def shutdown(self) -> None:
        """Stop the threads, flush everything, remove the abort marker and unlock."""
        if not self.running:
            return
        await self.settle(SHUTDOWN_SETTLE_S)  # waiting units and index entries get their files first
        self._stop_accepting()
        if self.cleanup is not None:
            await self.cleanup.shutdown()
        if self._flush is not None:
            await asyncio.to_thread(self._flush.shutdown)
        for allocator in (self._allocator, self._cq_allocator):
            if allocator is not None:
                await asyncio.to_thread(allocator.shutdown)
        # after a failed flush the abort marker stays: the next start re-checks every record
        await asyncio.to_thread(self._close_files, self.health.flush_error is None)

    async def terminate(self) -> None:
        """Stop without the clean-stop steps: no final flush, abort marker kept (as after a crash).

        The next start runs abnormal recovery. Written data stays in the page cache.
        """
        if not self.running:
            return
        self._stop_accepting()
        if self.cleanup is not None:
            await self.cleanup.shutdown()
        if self._flush is not None:
            await asyncio.to_thread(self._flush.stop)
        for allocator in (self._allocator, self._cq_allocator):
            if allocator is not None:
                await asyncio.to_thread(allocator.shutdown)
        await asyncio.to_thread(self._close_files, False)

    def _stop_accepting(self) -> None:
        self._put.running = False
        for timer in (self._stats_timer, self._retry_timer):
            if timer is not None:
                timer.cancel()
        self._stats_timer = self._retry_timer = None

    def _close_files(self, clean: bool = True) -> None:
        self.commitlog.close()
        for cq in self.dispatcher.cqs.values():
            cq.close()
        if self.dispatcher.index is not None:
            self.dispatcher.index.close()
        self.checkpoint.close()
        if clean:
            remove_abort(self.root)
        self._lock.release()

    async def settle(self, timeout_s: float = 5.0) -> bool:
        """Wait until no file allocation is in flight (all units and index entries are in files)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self._allocations_in_flight():
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.001)
        return True

    # -- put (see put.py) --------------------------------------------------------------------------
    # Plain methods returning the put coroutine: one coroutine per put on the hot path, not two.
    def put_message(self, msg: BrokerMessage) -> Coroutine[Any, Any, PutMessageResult]:
        """Append one message (a batch of one), dispatch it and (SYNC_FLUSH) wait for the flush (await it)."""
        return self._put.put([msg])

    def put_messages(self, msgs: list[BrokerMessage]) -> Coroutine[Any, Any, PutMessageResult]:
        """Append a batch of one topic and queue, all or nothing, contiguously in one file (await it)."""
        return self._put.put(msgs)

    def put_now(self, msgs: list[BrokerMessage]) -> PutMessageResult | None:
        """``put_messages`` at once when it would not suspend; None (nothing written) when it would."""
        return put_now(self._put, msgs)

    def put_then_flush(
        self, msgs: list[BrokerMessage]
    ) -> tuple[PutMessageResult, asyncio.Future[bool]] | None:
        """``put_messages`` of messages that wait for their flush (SYNC_FLUSH), without its coroutine:
        the result and the future of the flush (``flush_outcome`` turns a timeout into the result's
        FLUSH_DISK_TIMEOUT); None, with nothing written, when ``put_messages`` must do it."""
        return self._put.put_then_flush(msgs)

    def flush_outcome(self, result: PutMessageResult, flushed: bool) -> PutMessageResult:
        """``result`` once its flush wait (``put_then_flush``) ended: FLUSH_DISK_TIMEOUT if it timed out."""
        return self._put.flush_outcome(result, flushed)

    # -- raw commitlog bytes (replication; see replica.py) ------------------------------------------
    async def append_replica(self, offset: int, data: bytes | memoryview) -> int:
        """Append a master's raw commitlog bytes at ``offset``; returns the new max offset.

        Raises:
            ReplicaError: wrong offset, a chunk across a file end, or an invalid record (not kept).
        """
        if self._replica is None:
            self._replica = ReplicaAppender(self.commitlog, self.dispatcher, self.config.check_crc_on_recover)
        return await self._replica.append(offset, data)

    async def truncate(self, end: int) -> int:
        """Cut the commitlog, its consume queues and its index back to ``end``; returns the bytes cut.

        For controller mode (a new master's torn replica tail; a rejoining broker's bytes past the
        end its new master confirms). Only while nothing writes: no put (the broker is not a master)
        and no replica append. The flush threads stop meanwhile; dropped files are destroyed and
        the cut files flushed in a thread (``truncate.py``).

        Raises:
            StoreError: ``end`` lies before the oldest stored byte.
        """
        cl = self.commitlog
        if end >= cl.max_offset:
            return 0
        if end < cl.min_offset:
            raise StoreError(f"cannot truncate the commitlog to {end}: its oldest byte is {cl.min_offset}")
        await self.settle()
        cut = cl.max_offset - end
        flush = self._flush
        if flush is not None:
            await asyncio.to_thread(flush.stop)
        try:
            dropped = cut_store(cl, self.dispatcher, end)
            self._replica = None
            await asyncio.to_thread(self._finish_cut, dropped, flush, end)
        finally:
            if flush is not None:
                self._start_flush(asyncio.get_running_loop())
        cl.retry_next()
        log.warning("store %s truncated from %d to %d (%d bytes)", self.root, end + cut, end, cut)
        return cut

    def _finish_cut(self, dropped: list[MappedFile], flush: FlushService | None, end: int) -> None:
        """Destroy the files past a cut and make the cut durable (blocking: a thread)."""
        for mf in dropped:
            mf.destroy(force=True)
        self.commitlog.files[-1].flush()
        if flush is not None:
            flush.flush_consume_queues()
        self.checkpoint.write_physic(self.stats.last_store_ts, end, end)

    def reset_replica(self) -> None:
        """Forget the replica appender's progress: this log is written by puts now (a new master),
        or replication starts afresh from its end (a new master to follow)."""
        self._replica = None

    @property
    def confirm_offset(self) -> int:
        """Commitlog offset up to which replicated records are complete and dispatched."""
        return self._replica.confirm_offset if self._replica is not None else self.commitlog.max_offset

    def read_commitlog(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` raw commitlog bytes at ``offset`` within one file (None: none yet)."""
        return read_raw(self.commitlog, offset, max_bytes)

    # -- listeners, topics ------------------------------------------------------------------------
    def listen_to_dispatches(self, fn: Listener, on: bool = True) -> None:
        """Call ``fn(topic, queue_id, queue_offset, tags_code, store_timestamp)`` after each dispatch
        from now on (``on``), or no longer (see ``Dispatcher.listen``)."""
        self.dispatcher.listen(fn, on)

    def delete_topics(self, topics: set[str]) -> None:
        """Drop the consume queues of ``topics``; their files are deleted in a thread."""
        removed = self.dispatcher.remove_topics(set(topics))
        for cq in removed:
            cq.deleted = True
        dirs = [self.dispatcher.topic_dir(t) for t in topics]
        if self._cq_allocator is not None:  # after any creation still queued for these queues
            self._cq_allocator.run_in_order(functools.partial(delete_queue_files, removed, dirs))

    async def clean_expired_consume_queues(self, retain: Callable[[str], bool]) -> int:
        """CLEAN_EXPIRED_CONSUMEQUEUE: delete the consume-queue files wholly before the commitlog's
        start, and the wholly expired queues of topics ``retain`` rejects (``cq_clean``). Returns the
        files deleted."""
        plan = cq_clean.plan_expired(self.dispatcher, self.commitlog.min_offset, retain)
        return await self._in_cq_thread(functools.partial(cq_clean.delete_plan, plan))

    async def clean_unused_topics(self, retain: Callable[[str], bool]) -> list[str]:
        """CLEAN_UNUSED_TOPIC: delete the consume queues and directories of every topic ``retain``
        rejects (``cq_clean``). Returns those topics."""
        on_disk = await asyncio.to_thread(cq_clean.topic_dirs, self.dispatcher.cq_root)
        plan = cq_clean.plan_unused(self.dispatcher, on_disk, retain)  # after the await: retain is now
        topics = sorted(
            {os.path.basename(d) for d in plan.dirs if os.path.dirname(d) == self.dispatcher.cq_root}
        )
        await self._in_cq_thread(functools.partial(cq_clean.delete_plan, plan))
        return topics

    async def delete_expired_commitlog(self) -> int:
        """DELETE_EXPIRED_COMMITLOG: one cleanup pass now, whatever the hour (``CleanupService.run_once``
        in a thread); the files it deleted (0 before ``start``)."""
        cleanup = self.cleanup
        if cleanup is None:
            return 0
        return await asyncio.to_thread(cleanup.run_once, True)

    async def _in_cq_thread(self, fn: Callable[[], int]) -> int:
        """``fn()`` in the consume-queue allocate thread after the file creations queued so far."""
        allocator = self._cq_allocator
        if allocator is None:  # not started
            return await asyncio.to_thread(fn)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def run() -> None:
            try:
                result = fn()
            except BaseException as e:
                loop.call_soon_threadsafe(_settle, done, None, e)
                raise
            loop.call_soon_threadsafe(_settle, done, result, None)

        allocator.run_in_order(run)
        return await done

    def topic_queue_table(self) -> dict[tuple[str, int], int]:
        """Next queue offset of every (topic, queue id)."""
        return {k: cq.next_offset for k, cq in self.dispatcher.cqs.items()}

    @property
    def max_physical_offset(self) -> int:
        """Commitlog offset where the next record goes."""
        return self.commitlog.max_offset

    @property
    def min_physical_offset(self) -> int:
        """Commitlog offset of the oldest stored byte."""
        return self.commitlog.min_offset

    # -- reads (see reads.py) -------------------------------------------------------------------------
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int,
        max_bytes: int | None = None,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Up to ``max_msgs`` raw records of a queue from ``offset`` (views of the commitlog)."""
        if max_bytes is None:
            max_bytes = self.config.max_transfer_bytes_on_message_in_memory
        cq = self.dispatcher.cqs.get((topic, queue_id))
        r = None
        if message_filter is None or getattr(message_filter, "matches_all", False):
            r = reads.get_now(self.commitlog, cq, offset, max_msgs, max_bytes)  # one view, or None
        if r is None:
            r = reads.get_message(self.commitlog, cq, offset, max_msgs, max_bytes, message_filter)
        self.stats.get_total += r.message_count
        return r

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's next offset (0 for an unknown queue)."""
        cq = self.dispatcher.cqs.get((topic, queue_id))
        return cq.next_offset if cq else 0

    def queue_max_offsets(self) -> list[tuple[str, int, int]]:
        """``(topic, queue_id, next offset)`` of every consume queue that exists (was ever written)."""
        return [(cq.topic, cq.queue_id, cq.next_offset) for cq in list(self.dispatcher.cqs.values())]

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's first offset still stored (0 for an unknown queue)."""
        cq = self.dispatcher.cqs.get((topic, queue_id))
        return reads.min_offset(self.commitlog, cq) if cq else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose store time is >= ``timestamp_ms`` (max offset if none)."""
        return reads.offset_by_time(self.commitlog, self.dispatcher.cqs.get((topic, queue_id)), timestamp_ms)

    def get_message_store_time(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time (ms) of the message at ``queue_offset`` of a queue, -1 when it is not stored
        (past the end, or removed by cleanup): one consume-queue unit and 8 bytes of the commitlog."""
        return reads.store_time_at(self.commitlog, self.dispatcher.cqs.get((topic, queue_id)), queue_offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the queue's first stored message, -1 when none."""
        return reads.earliest_time(self.commitlog, self.dispatcher.cqs.get((topic, queue_id)))

    def read_queue_units(self, topic: str, queue_id: int, offset: int, max_count: int) -> tuple[int, ...]:
        """Up to ``max_count`` units of a queue from ``offset`` (within one file), flattened:
        ``(commitlog offset, size, tag code)`` per unit. Empty for an unknown queue, past its end,
        or while the unit's file is being created."""
        cq = self.dispatcher.cqs.get((topic, queue_id))
        if cq is None:
            return ()
        raw, n = cq.read_units(offset, max_count)
        return units_struct(n).unpack_from(raw) if n else ()

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Commitlog offset of a queue unit, -1 when not stored."""
        cq = self.dispatcher.cqs.get((topic, queue_id))
        u = cq.unit(queue_offset) if cq else None
        return u[0] if u else -1

    def lookup_message_by_offset(self, commitlog_offset: int) -> bytes | None:
        """The raw record at ``commitlog_offset``, or None when there is none."""
        return reads.record_at(self.commitlog, commitlog_offset)

    def record_view(self, commitlog_offset: int) -> memoryview | None:
        """A view of the record at ``commitlog_offset`` (no copy; valid while its file is), or None."""
        return reads.record_view(self.commitlog, commitlog_offset)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> QueryMessageResult:
        """Records of ``topic`` whose KEYS or UNIQ_KEY equal ``key``, stored in [begin_ts, end_ts]."""
        return reads.query_message(
            self.commitlog, self.dispatcher.index, topic, key, max_num, begin_ts, end_ts
        )

    @property
    def disk_ratio(self) -> float:
        """Used fraction (0..1) of the commitlog's disk at the cleanup's last look (0 before ``start``)."""
        return self.cleanup.disk_ratio if self.cleanup is not None else 0.0

    @property
    def flush_latency(self) -> LatencyHistogram | None:
        """Durations of the commitlog flushes that wrote something (None before ``start``)."""
        return self._flush.flush_latency if self._flush is not None else None

    def runtime_info(self) -> dict[str, str]:
        """Store figures for GET_BROKER_RUNTIME_INFO (reading them changes nothing)."""
        cl = self.commitlog
        info = {
            "commitLogMinOffset": str(cl.min_offset),
            "commitLogMaxOffset": str(cl.max_offset),
            "commitLogFlushedOffset": str(cl.flushed_offset),
            "putMessageTimesTotal": str(self.stats.put_total),
            "getMessageTransferedMsgCount": str(self.stats.get_total),
            "consumeQueueCount": str(len(self.dispatcher.cqs)),
            "commitLogDiskRatio": f"{self.disk_ratio:.4f}",
            # the consume queues live under the same root (storePathRootDir): the same disk
            "consumeQueueDiskRatio": f"{self.disk_ratio:.4f}",
            "diskFullRemark": self.disk_full_remark,
            "readOnlyRemark": self.read_only_remark,
            "storeRootDir": self.root,
        }
        tps = self.stats.tps()
        if tps is not None:
            info["putTps"] = f"{tps[0]:.1f}"
            info["getTransferedTps"] = f"{tps[1]:.1f}"
        return info


def _settle(fut: asyncio.Future[int], result: int | None, err: BaseException | None) -> None:
    """Complete ``fut`` from a worker's outcome (on the loop; a cancelled wait is left alone)."""
    if fut.done():
        return
    if err is not None:
        fut.set_exception(err)
    else:
        assert result is not None
        fut.set_result(result)
