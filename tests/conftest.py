"""Shared fixtures: real daemons started per test, stopped afterwards, checked for tracebacks.

* ``namesrv``: a started NameServer ``Daemon`` (``.addr`` is "127.0.0.1:PORT").
* ``daemons``: a pool to start more (``daemons.namesrv(**props)``, ``daemons.broker(addr, **props)``);
  all are stopped at teardown.

A daemon that printed a Python traceback fails the test at teardown: tracebacks are bugs.

Async tests run on uvloop, the daemons' loop (``pytest_asyncio_loop_factories``). Every test loop
records calls of its exception handler (a task exception nobody retrieved, an error in a callback)
and the test fails at teardown when there were any: they are bugs the test would otherwise hide.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import uvloop

from tests.daemons import Daemon, start_broker, start_namesrv

_loop_errors: list[dict[str, Any]] = []


def _record_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    _loop_errors.append(context)
    loop.default_exception_handler(context)  # logs it, with the traceback


def _new_test_loop() -> asyncio.AbstractEventLoop:
    loop = uvloop.new_event_loop()
    loop.set_exception_handler(_record_loop_error)
    return loop


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> Mapping[str, Any]:
    """Run every async test on a uvloop loop that records exception-handler calls."""
    return {"uvloop": _new_test_loop}


@pytest.fixture(autouse=True)
def _fail_on_loop_exception_handler_calls() -> Iterator[None]:
    """Fail a test whose event loop called its exception handler (checked after the loop closed)."""
    _loop_errors.clear()
    yield
    errors, _loop_errors[:] = list(_loop_errors), []
    if errors:
        described = "\n".join(_describe_loop_error(c) for c in errors[:5])
        pytest.fail(
            f"the event loop's exception handler was called {len(errors)}x:\n{described}", pytrace=False
        )


def _describe_loop_error(context: dict[str, Any]) -> str:
    exc = context.get("exception")
    what = f"{type(exc).__name__}: {exc}" if exc is not None else ""
    return (
        f"  {context.get('message', '')} {what} {context.get('task') or context.get('future') or ''}".rstrip()
    )


def _check_no_traceback(daemon: Daemon) -> None:
    if daemon.has_traceback():
        pytest.fail(f"{daemon.kind} printed a traceback:\n{daemon.stderr_text()[-6000:]}", pytrace=False)


class DaemonPool:
    """Starts daemons for one test and stops them all at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[Daemon] = []

    def namesrv(self, **props: Any) -> Daemon:
        """Start a NameServer (see ``tests.daemons.start_namesrv``)."""
        daemon = start_namesrv(self.tmp_path, **props)
        self.started.append(daemon)
        return daemon

    def broker(self, namesrv_addr: str, **props: Any) -> Daemon:
        """Start a Broker (see ``tests.daemons.start_broker``)."""
        daemon = start_broker(self.tmp_path, namesrv_addr, **props)
        self.started.append(daemon)
        return daemon

    def stop_all(self) -> None:
        """Terminate every daemon still running (brokers first), then check for tracebacks."""
        for daemon in sorted(self.started, key=lambda d: d.kind != "broker"):
            daemon.terminate()
        for daemon in self.started:
            _check_no_traceback(daemon)


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[DaemonPool]:
    """A pool of daemons for this test, stopped at teardown."""
    pool = DaemonPool(tmp_path)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture
def namesrv(daemons: DaemonPool) -> Daemon:
    """A NameServer started for this test on a free loopback port."""
    return daemons.namesrv()


TMPFS_MIB = 32


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A fresh ``TMPFS_MIB`` MiB tmpfs (a disk to fill), unmounted at teardown (after the daemons
    stopped). Mounting needs root (CAP_SYS_ADMIN), as in CI; elsewhere the test is skipped."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MIB}m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root/CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(path: Path, nbytes: int) -> None:
    """Take ``nbytes`` of the file system (written, so tmpfs really holds them)."""
    with open(path, "wb") as f:
        chunk = bytes(1 << 20)
        left = nbytes
        while left > 0:
            f.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
