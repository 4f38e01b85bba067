"""Injected disk faults: a failpoint for tests and benchmarks, inert unless configured.

Owns ``DiskFaults``: the store's flush (commitlog msync/fdatasync) and file creation ask it before
touching the disk, so a test can make them slow or fail with a chosen errno without a broken disk.
A daemon takes its faults from ``ROCKETPY_STORE_FAULTS`` (never set in production), e.g.
``flush_delay_ms=50;flush_mib_per_s=2;flush_error=EIO;flush_fail_after=3;create_error=ENOSPC``.
Unit tests change the attributes of ``MessageStore.faults`` directly. Every hook runs in a store thread.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass

ENV_VAR = "ROCKETPY_STORE_FAULTS"
_KEYS = ("flush_delay_ms", "flush_mib_per_s", "flush_error", "flush_fail_after", "create_error")


def _errno(name: str) -> int:
    code = getattr(errno, name.strip().upper(), None)
    if not isinstance(code, int):
        raise ValueError(f"{ENV_VAR}: unknown errno name {name!r}; use a name such as EIO or ENOSPC")
    return code


@dataclass(slots=True)
class DiskFaults:
    """Faults injected into the store's disk operations (all off by default).

    Attributes:
        flush_delay_s: every commitlog flush first sleeps this long (a slow disk).
        flush_bytes_per_s: and as long as writing its dirty bytes at this rate takes (0: no limit).
        flush_errno: commitlog flushes fail with this errno (0: never) ...
        flush_fail_after: ... once this many flushes succeeded.
        create_errno: store file creations fail with this errno (0: never).
    """

    flush_delay_s: float = 0.0
    flush_bytes_per_s: float = 0.0
    flush_errno: int = 0
    flush_fail_after: int = 0
    create_errno: int = 0
    _flushes: int = 0

    @classmethod
    def parse(cls, text: str | None) -> DiskFaults:
        """Read ``key=value;...`` (see the module docstring); empty or None: no faults.

        Raises:
            ValueError: an unknown key, errno name or number, naming it.
        """
        faults = cls()
        for item in (text or "").replace(",", ";").split(";"):
            if not item.strip():
                continue
            key, _, value = item.partition("=")
            key = key.strip()
            try:
                if key == "flush_delay_ms":
                    faults.flush_delay_s = float(value) / 1000
                elif key == "flush_mib_per_s":
                    faults.flush_bytes_per_s = float(value) * (1 << 20)
                elif key == "flush_error":
                    faults.flush_errno = _errno(value)
                elif key == "flush_fail_after":
                    faults.flush_fail_after = int(value)
                elif key == "create_error":
                    faults.create_errno = _errno(value)
                else:
                    raise ValueError(f"{ENV_VAR}: unknown fault {key!r}; known: {', '.join(_KEYS)}")
            except ValueError as e:
                if str(e).startswith(ENV_VAR):
                    raise
                raise ValueError(f"{ENV_VAR}: {key}={value.strip()!r} is not a number") from e
        return faults

    @classmethod
    def from_env(cls) -> DiskFaults:
        """The faults named by ``ROCKETPY_STORE_FAULTS`` (none when unset)."""
        return cls.parse(os.environ.get(ENV_VAR))

    @property
    def flush_armed(self) -> bool:
        """A flush fault is set: commitlog flushes must go through ``on_flush``."""
        return bool(self.flush_delay_s or self.flush_bytes_per_s or self.flush_errno)

    def on_flush(self, path: str, nbytes: int) -> None:
        """Before ``nbytes`` of a commitlog file are flushed (flush thread): delay, then maybe fail.

        Raises:
            OSError: the injected flush error.
        """
        delay_s = self.flush_delay_s + (nbytes / self.flush_bytes_per_s if self.flush_bytes_per_s else 0.0)
        if delay_s:
            time.sleep(delay_s)
        if self.flush_errno:
            if self._flushes >= self.flush_fail_after:
                raise OSError(self.flush_errno, f"msync of {path} failed: {os.strerror(self.flush_errno)}")
            self._flushes += 1

    def on_create(self, path: str) -> None:
        """Before a store file is created (allocate thread).

        Raises:
            OSError: the injected creation error.
        """
        if self.create_errno:
            raise OSError(self.create_errno, os.strerror(self.create_errno), path)
