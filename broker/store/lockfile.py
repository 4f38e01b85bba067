"""The store's ``lock`` file (one broker per store directory) and its ``abort`` marker.

``lock`` is held with an exclusive ``flock`` for the store's lifetime; a second store on the same
directory fails at once with ``StoreLockedError``. ``abort`` exists while the store runs: finding it
at start means the last stop was not clean. All functions block: call them in a thread.
"""

from __future__ import annotations

import fcntl
import os

from rocketpy.broker.store.results import StoreError, StoreLockedError


class StoreLock:
    """Exclusive lock on ``{root}/lock``."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.path = os.path.join(root, "lock")
        self._fd = -1

    def acquire(self) -> None:
        """Take the lock.

        Raises:
            StoreLockedError: another process (or store object) holds it.
            StoreError: the directory cannot be created or opened.
        """
        try:
            os.makedirs(self.root, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StoreError(f"cannot open store directory {self.root}: {e}; check storePathRootDir") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            raise StoreLockedError(
                f"store directory {self.root} is locked: another broker is using it; stop that broker "
                f"or set a different storePathRootDir"
            ) from e
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        """Release the lock."""
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def abort_path(root: str) -> str:
    """Path of the abort marker."""
    return os.path.join(root, "abort")


def create_abort(root: str) -> None:
    """Create the abort marker (fsynced)."""
    fd = os.open(abort_path(root), os.O_RDWR | os.O_CREAT, 0o644)
    os.fsync(fd)
    os.close(fd)


def remove_abort(root: str) -> None:
    """Remove the abort marker after a clean stop."""
    try:
        os.unlink(abort_path(root))
    except FileNotFoundError:
        pass
