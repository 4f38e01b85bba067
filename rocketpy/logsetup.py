"""Process set-up shared by the daemons: log files, stderr logging and pid files.

Logs go to ``~/logs/rocketpylogs/{daemon}.log`` (directory overridden by ``ROCKETPY_LOG_DIR``) and
to stderr. Records pass through a bounded queue to one writer thread, so the event loop never
waits on a file write; when the queue is full, records are dropped and counted rather than
blocking. Pid files live in ``~/.rocketpy/run/{kind}-{port}.pid`` (``ROCKETPY_RUN_DIR``
overrides); ``mqshutdown`` finds daemons through them.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import os
import queue
import sys
from pathlib import Path

from rocketpy.errors import RocketpyError

LOG_DIR_ENV = "ROCKETPY_LOG_DIR"
RUN_DIR_ENV = "ROCKETPY_RUN_DIR"
LOG_LEVEL_ENV = "ROCKETPY_LOG_LEVEL"

#: Records waiting for the writer thread; past this they are dropped (and counted).
LOG_QUEUE_RECORDS = 10_000
#: Each log file rolls at this size; LOG_BACKUP_COUNT old files are kept.
LOG_FILE_MAX_BYTES = 128 * 1024 * 1024
LOG_BACKUP_COUNT = 5

_FORMAT = "%(asctime)s %(levelname)-5s [%(name)s] %(message)s"


class _DroppingQueueHandler(logging.handlers.QueueHandler):
    """A QueueHandler that drops a record instead of blocking (or raising) when the queue is full."""

    def __init__(self, q: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(q)
        self.dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


def log_dir() -> Path:
    """The log directory: ``$ROCKETPY_LOG_DIR`` or ``~/logs/rocketpylogs``."""
    env = os.environ.get(LOG_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / "logs" / "rocketpylogs"


_stderr_handler: logging.Handler | None = None


def setup_logging(daemon: str, *, to_stderr: bool = True, level: str | None = None) -> Path:
    """Send the root logger's records to ``{log_dir}/{daemon}.log`` and (optionally) stderr.

    Until ``stderr_after_boot()`` is called, stderr shows warnings and errors only, so a daemon
    that cannot start prints just its one ``error:`` line; the file gets everything from the start.

    Args:
        daemon: the file's base name (``"namesrv"``, ``"broker"``).
        to_stderr: also write to stderr (daemons in the foreground).
        level: a logging level name; default ``$ROCKETPY_LOG_LEVEL`` or INFO.

    Returns:
        The log file's path.

    Raises:
        RocketpyError: the directory or file cannot be created (the message says what to do).
    """
    path = log_dir() / f"{daemon}.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=LOG_FILE_MAX_BYTES, backupCount=LOG_BACKUP_COUNT, encoding="utf-8"
        )
    except OSError as e:
        raise RocketpyError(
            f"error: cannot write the log file {path}: {e.strerror or e}; "
            f"set {LOG_DIR_ENV} to a writable directory"
        ) from e
    global _stderr_handler
    handlers: list[logging.Handler] = [file_handler]
    if to_stderr:
        _stderr_handler = logging.StreamHandler(sys.stderr)
        _stderr_handler.setLevel(logging.WARNING)
        handlers.append(_stderr_handler)
    formatter = logging.Formatter(_FORMAT)
    for h in handlers:
        h.setFormatter(formatter)
    records: queue.Queue[logging.LogRecord] = queue.Queue(maxsize=LOG_QUEUE_RECORDS)
    listener = logging.handlers.QueueListener(records, *handlers, respect_handler_level=True)
    root = logging.getLogger()
    root.setLevel((level or os.environ.get(LOG_LEVEL_ENV) or "INFO").upper())
    root.addHandler(_DroppingQueueHandler(records))
    listener.start()
    atexit.register(_stop_listener, listener, file_handler)
    return path


def stderr_after_boot() -> None:
    """Show every record on stderr from now on (call it once the boot line is printed)."""
    if _stderr_handler is not None:
        _stderr_handler.setLevel(logging.NOTSET)


def _stop_listener(listener: logging.handlers.QueueListener, file_handler: logging.Handler) -> None:
    listener.stop()
    file_handler.close()


# --------------------------------------------------------------------------------------------
# pid files


def run_dir() -> Path:
    """The pid file directory: ``$ROCKETPY_RUN_DIR`` or ``~/.rocketpy/run``."""
    env = os.environ.get(RUN_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".rocketpy" / "run"


def write_pid_file(kind: str, port: int) -> Path:
    """Write this process's pid to ``{run_dir}/{kind}-{port}.pid`` and return the path.

    Blocking (creates a file): call it from a thread when the event loop runs.

    Raises:
        RocketpyError: the file cannot be written (the message says what to do).
    """
    path = run_dir() / f"{kind}-{port}.pid"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(f"{os.getpid()}\n", encoding="ascii")
        os.replace(tmp, path)
    except OSError as e:
        raise RocketpyError(
            f"error: cannot write the pid file {path}: {e.strerror or e}; "
            f"set {RUN_DIR_ENV} to a writable directory"
        ) from e
    return path


def remove_pid_file(path: Path) -> None:
    """Remove a pid file written by this process (left alone if another process rewrote it). Blocking."""
    if read_pid_file(path) == os.getpid():
        path.unlink(missing_ok=True)


def read_pid_file(path: Path) -> int | None:
    """The pid stored in ``path``, or None when the file is missing or not a pid."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def pid_files(kind: str) -> list[Path]:
    """Every ``{kind}-*.pid`` file in the run directory, sorted."""
    d = run_dir()
    return sorted(d.glob(f"{kind}-*.pid")) if d.is_dir() else []
