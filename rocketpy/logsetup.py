"""Process set-up shared by the daemons: log files, stderr logging and pid files.

Logs go to ``~/logs/rocketpylogs/{daemon}.log`` (directory overridden by ``ROCKETPY_LOG_DIR``) and
to stderr. Records pass through a bounded queue to one writer thread, so the event loop never
waits on a file write; when the queue is full, records are dropped and counted rather than
blocking, and the next record that fits is preceded by one line saying how many were dropped. The
file rolls over at ``ROCKETPY_LOG_MAX_BYTES`` (on the writer thread), keeping
``ROCKETPY_LOG_BACKUPS`` old files. Pid files live in ``~/.rocketpy/run/{kind}-{port}.pid``
(``ROCKETPY_RUN_DIR`` overrides); ``mqshutdown`` finds daemons through them.
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
LOG_MAX_BYTES_ENV = "ROCKETPY_LOG_MAX_BYTES"
LOG_BACKUPS_ENV = "ROCKETPY_LOG_BACKUPS"

#: Records waiting for the writer thread; past this they are dropped (and counted).
LOG_QUEUE_RECORDS = 10_000
#: Each log file rolls at this size; LOG_BACKUP_COUNT old files are kept.
LOG_FILE_MAX_BYTES = 128 * 1024 * 1024
LOG_BACKUP_COUNT = 5

_FORMAT = "%(asctime)s %(levelname)-5s [%(name)s] %(message)s"


class _DroppingQueueHandler(logging.handlers.QueueHandler):
    """A QueueHandler that drops a record instead of blocking (or raising) when the queue is full.

    Drops are counted (``dropped``); the first record that fits again is preceded by a warning
    with the number dropped since the last such warning.
    """

    def __init__(self, q: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(q)
        self.dropped = 0
        self._unreported = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            if self._unreported:
                self.queue.put_nowait(self._dropped_record())
                self._unreported = 0
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1
            self._unreported += 1

    def _dropped_record(self) -> logging.LogRecord:
        msg = f"{self._unreported} log records dropped: the log writer could not keep up"
        return logging.LogRecord("rocketpy.log", logging.WARNING, __file__, 0, msg, None, None)


def _env_int(name: str, default: int, minimum: int) -> int:
    """An integer setting from the environment, with a clear error for a bad value."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise RocketpyError(f"error: {name}={raw!r} must be an integer >= {minimum}; unset it for {default}")
    return value


def log_rotation() -> tuple[int, int]:
    """``(max_bytes, backups)`` of the log files: ``$ROCKETPY_LOG_MAX_BYTES``, ``$ROCKETPY_LOG_BACKUPS``.

    Raises:
        RocketpyError: a value that is not a positive size or a count >= 1.
    """
    return _env_int(LOG_MAX_BYTES_ENV, LOG_FILE_MAX_BYTES, 4096), _env_int(
        LOG_BACKUPS_ENV, LOG_BACKUP_COUNT, 1
    )


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
        RocketpyError: the directory or file cannot be created, or the rotation settings are bad
            (the message says what to do).
    """
    path = log_dir() / f"{daemon}.log"
    max_bytes, backups = log_rotation()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
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


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie has exited; another user's process counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def pid_files(kind: str) -> list[Path]:
    """Every ``{kind}-*.pid`` file in the run directory, sorted."""
    d = run_dir()
    return sorted(d.glob(f"{kind}-*.pid")) if d.is_dir() else []
