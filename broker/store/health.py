"""The store's read-only state after a disk error (RocketMQ's RunningFlags NOT_WRITEABLE bits).

Owns why the store refuses writes because the disk failed (the disk-space guard is cleanup.py's):

* a failed commitlog flush (msync/fdatasync: EIO, ENOSPC on a thin volume, a file system remounted
  read-only) makes the store read-only **until restart**: after a failed flush the kernel may have
  dropped the dirty pages, so nothing written since the last good flush can be reported durable
  (the flush is not retried, the abort marker stays so the next start re-checks every record);
* a failed file creation (ENOSPC, EROFS, EACCES: the next commitlog, consume-queue or index file)
  makes it read-only **until a retry creates the file**: ``retry`` asks again every
  ``cleanResourceInterval``, and writes resume by themselves once the disk has room.

Reads are served throughout. The remark tells the producer what happened and what to do; the
state is set from the flush and allocate threads (plain attribute writes) and read on the loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.dispatch import Dispatcher

log = logging.getLogger("rocketpy.store")


class StoreHealth:
    """Disk errors of one store and the refusal remark they cause.

    Args:
        refuse_writes: told the remark puts are refused with ("" when writes are accepted again).
    """

    def __init__(self, refuse_writes: Callable[[str], None]) -> None:
        self._refuse_writes = refuse_writes
        self._lock = threading.Lock()  # two allocate threads and the flush thread report here
        self._create_failures: dict[str, OSError] = {}  # directory -> last creation error
        self.flush_error: OSError | None = None
        self.remark = ""

    @property
    def read_only(self) -> bool:
        """True while a disk error keeps writes refused."""
        return bool(self.remark)

    def on_flush_error(self, err: OSError) -> None:
        """A commitlog flush failed (flush thread): read-only until restart."""
        with self._lock:
            if self.flush_error is None:
                self.flush_error = err
                log.error(
                    "commitlog flush failed: %s; the store is read-only until the broker is restarted "
                    "(reads are still served)",
                    err,
                )
            self._update()

    def on_create_result(self, directory: str, err: OSError | None) -> None:
        """A store file in ``directory`` was created (``err`` None) or not (allocate thread)."""
        with self._lock:
            if err is None:
                if self._create_failures.pop(directory, None) is not None and not self._create_failures:
                    log.info("store files can be created again in %s: accepting writes", directory)
            else:
                if not self._create_failures:
                    log.error("cannot create store files (%s): the store is read-only until it can", err)
                self._create_failures[directory] = err
            self._update()

    def _update(self) -> None:
        if self.flush_error is not None:
            remark = (
                f"the store is read-only after a failed commitlog flush (msync/fdatasync: "
                f"{self.flush_error}); reads are still served; check the disk and restart the broker "
                f"(recovery re-checks every record), and send to another broker meanwhile"
            )
        elif self._create_failures:
            err = next(iter(self._create_failures.values()))
            remark = (
                f"the store is read-only: it cannot create its next file ({err}); free disk space or "
                f"fix the store directory's permissions: writes resume by themselves once a file can "
                f"be created (retried every cleanResourceInterval); send to another broker meanwhile"
            )
        else:
            remark = ""
        if remark != self.remark:
            self.remark = remark
            self._refuse_writes(remark)

    def retry(self, commitlog: CommitLog, dispatcher: Dispatcher) -> None:
        """Ask again for every file whose creation failed (on the loop; a no-op when none did)."""
        if not self._create_failures:
            return
        commitlog.retry_next()
        for cq in list(dispatcher.cqs.values()):
            cq.retry_file()
        if dispatcher.index is not None:
            dispatcher.index.retry_file()
