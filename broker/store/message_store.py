"""MessageStore: the facade the broker wraps (lifecycle, put, get, offsets, queries).

Owns the store's parts and their order: lock -> recovery (thread) -> abort marker -> allocate, flush
and cleanup threads; shutdown in reverse. Puts are single-writer memory copies into the commitlog
mmap on the event loop, followed by a synchronous dispatch (consume queue, index, listeners); under
SYNC_FLUSH a put then awaits group commit. Reads return views of the commitlog, never re-encoded.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import time
from collections.abc import Callable

from rocketpy.broker.store import reads
from rocketpy.broker.store.allocate import AllocateService
from rocketpy.broker.store.checkpoint import Checkpoint
from rocketpy.broker.store.cleanup import CleanupService, delete_queue_files
from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.dispatch import Dispatcher, Listener, parse_delay_levels
from rocketpy.broker.store.flush import FlushService
from rocketpy.broker.store.index import IndexService, index_file_size
from rocketpy.broker.store.lockfile import StoreLock, abort_path, create_abort, remove_abort
from rocketpy.broker.store.put import PutMixin
from rocketpy.broker.store.recovery import load_consume_queues, load_index_files, load_offset_files, recover
from rocketpy.broker.store.results import (
    GetMessageResult,
    MessageFilter,
    PutMessageStatus,
    QueryMessageResult,
)
from rocketpy.config import FlushDiskType, StoreConfig
from rocketpy.record import (
    pack_host,
)

log = logging.getLogger("rocketpy.store")

SHUTDOWN_SETTLE_S = 30.0
_BAD = PutMessageStatus


def default_disk_usage(path: str) -> float:
    """Used fraction (0..1) of the file system holding ``path``."""
    u = shutil.disk_usage(path)
    return u.used / u.total if u.total else 0.0


class MessageStore(PutMixin):
    """The message store.

    Args:
        config: store settings.
        store_host: ``(ip, port)`` written into records (settable until the first put).
        clock: seconds clock (store timestamps, index names, file expiry).
        disk_usage: returns the used fraction (0..1) of the disk holding a path.
    """

    def __init__(
        self,
        config: StoreConfig,
        *,
        store_host: tuple[str, int] = ("127.0.0.1", 0),
        clock: Callable[[], float] = time.time,
        disk_usage: Callable[[str], float] | None = None,
    ) -> None:
        self.config = config
        self.root = config.store_path_root_dir
        self._host8 = pack_host(store_host)
        self._store_host = store_host
        self.clock = clock
        self.disk_usage = disk_usage or default_disk_usage
        self.commitlog = CommitLog(config.commit_log_dir(), config.mapped_file_size_commit_log)
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
        self._lock = StoreLock(self.root)
        self._allocator: AllocateService | None = None  # commitlog + index files
        self._cq_allocator: AllocateService | None = None  # consume-queue files (never delays a roll)
        self._flush: FlushService | None = None
        self.cleanup: CleanupService | None = None
        self.running = False
        self.disk_full_remark = ""  # set by cleanup past the danger ratio
        self.last_store_ts = 0
        self.put_total = 0
        self.get_total = 0
        self.tps_sample = (clock(), 0, 0)
        self._max_body_bytes = config.max_message_size
        self._sync_flush = config.flush_disk_type == FlushDiskType.SYNC_FLUSH
        self.commitlog.warm_files = config.warm_mapped_file_enable and not self._sync_flush
        self._topic_parts: dict[str, bytes] = {}

    @property
    def store_host(self) -> tuple[str, int]:
        """``(ipv4, port)`` written into every record (part of the offset msg id)."""
        return self._store_host

    @store_host.setter
    def store_host(self, host: tuple[str, int]) -> None:
        self._host8 = pack_host(host)
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
        self._allocator = AllocateService(loop, "store-allocate")
        self._allocator.start()
        self._cq_allocator = AllocateService(loop, "store-allocate-cq")
        self._cq_allocator.start()
        self.commitlog.attach_allocator(self._allocator)
        self.dispatcher.allocator = self._cq_allocator  # type: ignore[assignment]
        self.dispatcher.dispatched_to = self.commitlog.max_offset
        for cq in self.dispatcher.cqs.values():
            cq.attach_allocator(self._cq_allocator, self.dispatcher)
        if self.dispatcher.index is not None:
            self.dispatcher.index.attach_allocator(self._allocator)
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
            last_store_ts=lambda: self.last_store_ts,
        )
        self._flush.start()
        self.cleanup = CleanupService(self, loop)
        self.cleanup.start()
        self.running = True

    def _load_and_recover(self) -> None:
        c = self.config
        abnormal = os.path.exists(abort_path(self.root))
        self.checkpoint.open()
        self.commitlog.load(
            load_offset_files(self.commitlog.directory, c.mapped_file_size_commit_log, "commitlog")
        )
        load_consume_queues(self.dispatcher, self.commitlog.min_offset)
        index = self.dispatcher.index
        if index is not None:
            index.load(
                load_index_files(index.directory, index_file_size(c.max_hash_slot_num, c.max_index_num))
            )
        log.info("store %s: %s start, recovering", self.root, "abnormal" if abnormal else "normal")
        end = recover(
            self.commitlog,
            self.dispatcher,
            (self.checkpoint.flushed_offset, self.checkpoint.dispatched_offset) if abnormal else None,
            c.check_crc_on_recover,
        )
        self.commitlog.ensure_first_file(end - end % c.mapped_file_size_commit_log)
        create_abort(self.root)

    async def shutdown(self) -> None:
        """Stop the threads, flush everything, remove the abort marker and unlock."""
        if not self.running:
            return
        await self.settle(SHUTDOWN_SETTLE_S)  # waiting units and index entries get their files first
        self.running = False
        if self.cleanup is not None:
            await self.cleanup.shutdown()
        if self._flush is not None:
            await asyncio.to_thread(self._flush.shutdown)
        for allocator in (self._allocator, self._cq_allocator):
            if allocator is not None:
                await asyncio.to_thread(allocator.shutdown)
        await asyncio.to_thread(self._close_files)

    async def terminate(self) -> None:
        """Stop without the clean-stop steps: no final flush, abort marker kept (as after a crash).

        The next start runs abnormal recovery. Written data stays in the page cache.
        """
        if not self.running:
            return
        self.running = False
        if self.cleanup is not None:
            await self.cleanup.shutdown()
        if self._flush is not None:
            await asyncio.to_thread(self._flush.stop)
        for allocator in (self._allocator, self._cq_allocator):
            if allocator is not None:
                await asyncio.to_thread(allocator.shutdown)
        await asyncio.to_thread(self._close_files, False)

    def _close_files(self, clean: bool = True) -> None:
        nxt = self.commitlog._next
        if nxt is not None:  # never used: do not leave an empty file behind
            nxt.destroy(force=True)
            self.commitlog._next = None
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

    # -- listeners, topics ------------------------------------------------------------------------
    def add_dispatch_listener(self, fn: Listener) -> None:
        """Call ``fn(topic, queue_id, queue_offset, tags_code, store_timestamp)`` after each dispatch."""
        self.dispatcher.listeners.append(fn)

    def delete_topics(self, topics: set[str]) -> None:
        """Drop the consume queues of ``topics``; their files are deleted in a thread."""
        removed = self.dispatcher.remove_topics(set(topics))
        for cq in removed:
            cq.deleted = True
        dirs = [self.dispatcher.topic_dir(t) for t in topics]
        if self._cq_allocator is not None:  # after any creation still queued for these queues
            self._cq_allocator.run_in_order(functools.partial(delete_queue_files, removed, dirs))

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
        r = reads.get_message(self, topic, queue_id, offset, max_msgs, max_bytes, message_filter)
        self.get_total += r.message_count
        return r

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's next offset (0 for an unknown queue)."""
        cq = self.dispatcher.cqs.get((topic, queue_id))
        return cq.next_offset if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's first offset still stored (0 for an unknown queue)."""
        cq = self.dispatcher.cqs.get((topic, queue_id))
        return reads.min_offset(self, cq) if cq else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose store time is >= ``timestamp_ms`` (max offset if none)."""
        return reads.offset_by_time(self, topic, queue_id, timestamp_ms)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the queue's first stored message, -1 when none."""
        return reads.earliest_time(self, topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Commitlog offset of a queue unit, -1 when not stored."""
        cq = self.dispatcher.cqs.get((topic, queue_id))
        u = cq.unit(queue_offset) if cq else None
        return u[0] if u else -1

    def lookup_message_by_offset(self, commitlog_offset: int) -> bytes | None:
        """The raw record at ``commitlog_offset``, or None when there is none."""
        return reads.record_at(self, commitlog_offset)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> QueryMessageResult:
        """Records of ``topic`` whose KEYS or UNIQ_KEY equal ``key``, stored in [begin_ts, end_ts]."""
        return reads.query_message(self, topic, key, max_num, begin_ts, end_ts)

    def runtime_info(self) -> dict[str, str]:
        """Store figures for GET_BROKER_RUNTIME_INFO."""
        return reads.runtime_info(self)
