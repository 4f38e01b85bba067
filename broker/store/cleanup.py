"""Cleanup in a thread: expired commitlog / consume-queue / index files, and the disk-space guard.

Owns the cleanup thread. Every ``cleanResourceInterval`` it reads the disk usage (injectable), sets
the store's refusal remark past ``diskSpaceWarningLevelRatio``, and, at a ``deleteWhen`` hour or when
disk use passes ``diskMaxUsedSpaceRatio``, deletes commitlog files older than ``fileReservedTime``
hours (oldest first; past ``diskSpaceCleanForciblyRatio`` even unexpired ones, a few per run), then
the consume-queue and index files that only point before the new commitlog start. The file lists
are changed on the event loop (a hand-off); unmapping and unlinking happen here. A file still read
through views is retried and deleted anyway after ``destroyMapedFileIntervalForcibly``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable

from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.consume_queue import UNIT, UNIT_SIZE, ConsumeQueue
from rocketpy.broker.store.dispatch import Dispatcher
from rocketpy.broker.store.mapped_file import MappedFile
from rocketpy.config import StoreConfig, delete_hours

log = logging.getLogger("rocketpy.store")

FORCED_DELETE_BATCH = 10
HANDOFF_TIMEOUT_S = 10.0


class CleanupService:
    """Periodic cleanup and disk guard for one store.

    Args:
        config: the cleanup and disk settings.
        commitlog / dispatcher: the files to expire (commitlog, consume queues, index).
        loop: the store's event loop (file lists change there).
        clock: seconds clock (file expiry, deleteWhen hours).
        disk_usage: used fraction (0..1) of the disk holding a path.
        refuse_writes: told why writes are refused for disk space ("" when accepted again).
    """

    def __init__(
        self,
        config: StoreConfig,
        commitlog: CommitLog,
        dispatcher: Dispatcher,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], float],
        disk_usage: Callable[[str], float],
        refuse_writes: Callable[[str], None],
    ) -> None:
        self._config = config
        self._commitlog = commitlog
        self._dispatcher = dispatcher
        self._loop = loop
        self._clock = clock
        self._disk_usage = disk_usage
        self._refuse_writes = refuse_writes
        self._remark = ""
        self.disk_ratio = 0.0
        self._stop = threading.Event()
        self._run_lock = threading.Lock()
        self._to_destroy: list[tuple[MappedFile, float]] = []
        self._thread = threading.Thread(target=self._routine, name="store-cleanup", daemon=True)

    def start(self) -> None:
        """Start the thread (it also runs one check at once, so the disk guard is set early)."""
        self._thread.start()

    async def shutdown(self) -> None:
        """Stop the thread."""
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 10)

    def _routine(self) -> None:
        interval_s = self._config.clean_resource_interval / 1000
        while True:
            try:
                self.run_once()
            except Exception:
                log.exception("store cleanup failed; retrying in %.1f s", interval_s)
            if self._stop.wait(interval_s):
                return

    def run_once(self, manual: bool = False) -> int:
        """One cleanup pass (blocking: cleanup thread or ``asyncio.to_thread``). Returns files deleted.

        ``manual`` (an operator's DELETE_EXPIRED_COMMITLOG): expired files go now, whatever the hour
        (RocketMQ's manual delete); unexpired ones stay unless the disk is past the forced ratio.
        """
        with self._run_lock:
            ratio = self._check_disk()
            c = self._config
            now = self._clock()
            # read each pass: deleteWhen, fileReservedTime and the ratios may change while the
            # broker runs (UPDATE_BROKER_CONFIG)
            by_time = time.localtime(now).tm_hour in delete_hours(c.delete_when)
            by_space = ratio >= c.disk_max_used_space_ratio / 100
            forced = ratio >= c.disk_space_clean_forcibly_ratio / 100
            deleted = self._retry_destroy(now)
            if by_time or by_space or manual:
                count = self._expired_count(now, forced)
                if count:
                    deleted += self._destroy(self._handoff(count), now)
            return deleted

    def _check_disk(self) -> float:
        root = self._config.store_path_root_dir
        try:
            ratio = float(self._disk_usage(root))
        except OSError as e:
            log.error("cannot read disk usage of %s: %s", root, e)
            return self.disk_ratio
        self.disk_ratio = ratio
        limit = self._config.disk_space_warning_level_ratio
        if ratio >= limit / 100:
            if not self._remark:
                log.error("disk of %s is %.0f%% full: refusing writes", root, ratio * 100)
            self._remark = (
                f"disk of the store is {ratio * 100:.0f}% full (diskSpaceWarningLevelRatio {limit}%): "
                f"writes are refused until cleanup frees space; delete old data or add disk space"
            )
            self._refuse_writes(self._remark)
        elif self._remark:
            log.info("disk of %s is %.0f%% full: accepting writes again", root, ratio * 100)
            self._remark = ""
            self._refuse_writes("")
        return ratio

    def _expired_count(self, now: float, forced: bool) -> int:
        files = list(self._commitlog.files[:-1])
        reserved_s = self._config.file_reserved_time * 3600
        count = 0
        for mf in files:
            try:
                mtime = os.path.getmtime(mf.path)
            except OSError:
                mtime = 0.0
            if mtime + reserved_s <= now or (forced and count < FORCED_DELETE_BATCH):
                count += 1
            else:
                break
        return count

    def _handoff(self, count: int) -> list[MappedFile]:
        fut: concurrent.futures.Future[list[MappedFile]] = concurrent.futures.Future()

        def detach() -> None:
            try:
                fut.set_result(detach_expired(self._commitlog, self._dispatcher, count))
            except BaseException as e:
                fut.set_exception(e)

        self._loop.call_soon_threadsafe(detach)
        return fut.result(HANDOFF_TIMEOUT_S)

    def _destroy(self, files: list[MappedFile], now: float) -> int:
        done = 0
        for mf in files:
            if mf.destroy():
                done += 1
            else:
                self._to_destroy.append((mf, now))
        if files:
            log.info("cleanup deleted %d store files (%d still read, retried later)", done, len(files) - done)
        return done

    def _retry_destroy(self, now: float) -> int:
        limit_s = self._config.destroy_mapped_file_interval_forcibly / 1000
        keep, done = [], 0
        for mf, first in self._to_destroy:
            if mf.destroy(force=now - first >= limit_s):
                done += 1
            else:
                keep.append((mf, first))
        self._to_destroy = keep
        return done


def delete_queue_files(cqs: list[ConsumeQueue], dirs: list[str]) -> None:
    """Delete the files of dropped consume queues (allocate thread, after their pending creations)."""
    for cq in cqs:
        for mf in list(cq.files):
            mf.destroy(force=True)
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def detach_expired(commitlog: CommitLog, dispatcher: Dispatcher, count: int) -> list[MappedFile]:
    """On the loop: remove the ``count`` oldest commitlog files and what only points before them."""
    files = commitlog.files
    count = min(count, len(files) - 1)
    removed = files[:count]
    del files[:count]
    new_min = commitlog.min_offset
    for cq in dispatcher.cqs.values():
        while len(cq.files) > 1:
            first = cq.files[0]
            phys, size, _ = UNIT.unpack_from(first.mm, first.size - UNIT_SIZE)
            if phys + size > new_min:
                break
            removed.append(cq.files.pop(0))
        if cq.files:
            cq.min_offset = max(cq.min_offset, cq.files[0].base_offset // UNIT_SIZE)
    index = dispatcher.index
    if index is not None:
        while len(index.files) > 1 and index.files[0].end_phys < new_min:
            removed.append(index.files.pop(0).mf)
    return removed
