"""Shared fixtures: real daemons started per test, stopped afterwards, checked for tracebacks.

* ``namesrv``: a started NameServer ``Daemon`` (``.addr`` is "127.0.0.1:PORT").
* ``daemons``: a pool to start more (``daemons.namesrv(**props)``, ``daemons.broker(addr, **props)``);
  all are stopped at teardown.

A daemon that printed a Python traceback fails the test at teardown: tracebacks are bugs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemons import Daemon, start_broker, start_namesrv


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
