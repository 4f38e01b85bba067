"""File allocation in a thread: the next commitlog file, consume-queue and index files.

Owns one worker thread and its bounded request queue. A request creates and maps a file off the event
loop and hands the ``MappedFile`` (or the error) back to the loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from collections.abc import Callable

from rocketpy.broker.store.faults import DiskFaults
from rocketpy.broker.store.mapped_file import MappedFile

log = logging.getLogger("rocketpy.store")

MAX_PENDING_REQUESTS = 65_536
#: What a file created while the service stops is faulted in: its first page.
STOPPING_PREFAULT_BYTES = 4096

Callback = Callable[[MappedFile | None, BaseException | None], None]


class AllocateService:
    """Creates mapped files in a worker thread and reports them on the event loop.

    Args:
        loop: the loop that receives the results.
        name: the worker thread's name.
        faults: injected creation errors (tests).
        on_result: told (in the worker thread) of each file's directory and creation error (None:
            created), before the file's own callback; the store turns read-only on errors.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        name: str = "store-allocate",
        faults: DiskFaults | None = None,
        on_result: Callable[[str, OSError | None], None] | None = None,
    ) -> None:
        self._loop = loop
        self._faults = faults or DiskFaults()
        self._on_result = on_result
        self._requests: queue.Queue[tuple[str, int, int, Callback, int, bool] | Callable[[], None] | None] = (
            queue.Queue(MAX_PENDING_REQUESTS)
        )
        self._thread = threading.Thread(target=self._routine, name=name, daemon=True)
        self._stopped = False
        self.in_flight = 0  # requests whose callback has not run yet (loop-side counter)

    @property
    def stopped(self) -> bool:
        """True once ``shutdown`` began: no more work may be queued."""
        return self._stopped

    def start(self) -> None:
        """Start the worker thread."""
        self._thread.start()

    def request(
        self,
        path: str,
        base_offset: int,
        size: int,
        callback: Callback,
        prefault: int = 0,
        keep_fd: bool = True,
    ) -> None:
        """Ask for ``path`` to be created and mapped; ``callback(file, error)`` runs on the loop.

        ``prefault`` bytes are faulted in writable first (-1: the whole file).

        Raises:
            queue.Full: more than ``MAX_PENDING_REQUESTS`` requests are waiting (a bug or a dead disk).
        """
        assert not self._stopped, "allocation requested after shutdown"
        self._requests.put_nowait((path, base_offset, size, self._wrap(callback), prefault, keep_fd))
        self.in_flight += 1

    def _wrap(self, callback: Callback) -> Callback:
        def done(mf: MappedFile | None, err: BaseException | None) -> None:
            self.in_flight -= 1
            callback(mf, err)

        return done

    def run_in_order(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` in the worker after every request queued so far (e.g. deleting a topic's files)."""
        assert not self._stopped, "work queued after shutdown"
        self._requests.put_nowait(fn)

    def _routine(self) -> None:
        while True:
            req = self._requests.get()
            if req is None:
                return
            if not isinstance(req, tuple):
                try:
                    req()
                except Exception:
                    log.exception("store file work failed")
                continue
            path, base, size, callback, prefault, keep_fd = req
            mf: MappedFile | None = None
            err: OSError | None = None
            try:
                self._faults.on_create(path)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                mf = MappedFile.open(path, base, size, keep_fd)
                if prefault:
                    mf.prefault(self._prefault_length(prefault))
            except OSError as e:
                log.error("cannot create store file %s: %s", path, e)
                err = e
            if self._on_result is not None:
                self._on_result(os.path.dirname(path), err)
            try:
                self._loop.call_soon_threadsafe(callback, mf, err)
            except RuntimeError:  # loop closed during shutdown: nobody wants the file any more
                if mf is not None:
                    mf.close()

    def _prefault_length(self, prefault: int) -> int | None:
        """Bytes to fault in for a request's ``prefault`` (None: the whole file). While stopping only
        the first page: a whole-file warm-up would slow the shutdown, but the first write into a new
        file is the costly fault (~1 ms here: the file's blocks and inode), and a consume queue's
        units still waiting for their file are written on the event loop."""
        if self._stopped:
            return STOPPING_PREFAULT_BYTES
        return None if prefault < 0 else prefault

    def shutdown(self, timeout_s: float = 60.0) -> None:
        """Stop the worker after the queued requests (blocking: call in a thread)."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():
            self._requests.put(None)
            self._thread.join(timeout_s)
