"""pytest plugin: a real rocketpy NameServer and broker for a user's own test suite.

Registered as the ``pytest11`` entry point ``rocketpy``, so installing rocketpy is enough. Fixtures:

- ``rocketpy_cluster`` (session): a NameServer and a broker started as subprocesses on free
  loopback ports with a temporary store; yields a ``RocketpyCluster`` with their addresses (the same
  ones RocketMQ's own clients use) and stops both by PID at the end of the session.
- ``rocketpy_topic``: a fresh topic (4 queues) per test, created on the cluster.
- ``rocketpy_producer``: a started blocking ``rocketpy.sync.Producer`` on the cluster.

Broker keys (any key of a broker properties file) come from ``--rocketpy-broker-key KEY=VALUE``
(repeatable) or the ``rocketpy_broker_keys`` ini option (one ``KEY=VALUE`` per line). The daemons'
stdout and stderr are kept in the temporary directory; a daemon that does not boot within
``BOOT_TIMEOUT_S`` fails the fixture with its output.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

BOOT_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
_NAMESRV_BOOT = re.compile(r"The Name Server boot success\. listen=(?P<addr>\S+)")
_BROKER_BOOT = re.compile(r"The broker\[(?P<name>[^,\]]+), (?P<addr>[^\]]+)\] boot success\.")
_topic_seq = itertools.count()


@dataclass(frozen=True)
class RocketpyCluster:
    """A running NameServer + broker pair.

    Attributes:
        namesrv_addr: ``"127.0.0.1:PORT"`` of the NameServer (what clients are given).
        broker_addr: ``"127.0.0.1:PORT"`` of the broker.
        broker_name: the broker's name.
        cluster_name: the broker's cluster.
        store_dir: the broker's temporary store root.
    """

    namesrv_addr: str
    broker_addr: str
    broker_name: str
    cluster_name: str
    store_dir: Path


class _Daemon:
    """One daemon subprocess: started, awaited until its boot line, stopped by PID."""

    def __init__(self, kind: str, workdir: Path, props: dict[str, str], boot: re.Pattern[str]) -> None:
        self.kind = kind
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / f"{kind}.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        env = {
            **os.environ,
            "ROCKETPY_LOG_DIR": str(workdir / "logs"),
            "ROCKETPY_RUN_DIR": str(workdir / "run"),
        }
        env.pop("NAMESRV_ADDR", None)
        self._stderr_path = workdir / f"{kind}.stderr"
        self._stdout_path = workdir / f"{kind}.stdout"
        self._stderr = open(self._stderr_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rocketpy.cli", kind, "-c", str(config)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self.match: re.Match[str] | None = None
        self._booted = threading.Event()
        self._reader = threading.Thread(target=self._read, args=(boot,), name=f"rocketpy-{kind}", daemon=True)
        self._reader.start()
        if not self._booted.wait(BOOT_TIMEOUT_S) or self.match is None:
            self.stop()
            raise RuntimeError(f"rocketpy {kind} did not boot within {BOOT_TIMEOUT_S:g}s\n{self.output()}")

    def _read(self, boot: re.Pattern[str]) -> None:
        assert self.process.stdout is not None
        with open(self._stdout_path, "w", encoding="utf-8") as out:
            for raw in self.process.stdout:
                line = raw.decode("utf-8", "replace")
                out.write(line)
                out.flush()
                if self.match is None and (m := boot.search(line)):
                    self.match = m
                    self._booted.set()
        self._booted.set()  # exited without booting

    def output(self) -> str:
        """The daemon's stdout and stderr so far."""

        def tail(path: Path) -> str:
            return path.read_text(encoding="utf-8", errors="replace")[-4000:] if path.exists() else ""

        return f"--- stdout ---\n{tail(self._stdout_path)}\n--- stderr ---\n{tail(self._stderr_path)}"

    def stop(self) -> None:
        """SIGTERM by PID, then SIGKILL if it does not exit in time."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(STOP_TIMEOUT_S)
        self._reader.join(STOP_TIMEOUT_S)
        if self.process.stdout is not None:
            self.process.stdout.close()
        _close(self._stderr)


def _close(f: IO[Any]) -> None:
    if not f.closed:
        f.close()


def broker_keys(config: pytest.Config) -> dict[str, str]:
    """The broker keys given by ini lines and command-line options (command line wins)."""
    out: dict[str, str] = {}
    for item in [*config.getini("rocketpy_broker_keys"), *(config.getoption("rocketpy_broker_key") or [])]:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(
                f"rocketpy broker key {item!r} must look like KEY=VALUE, e.g. brokerName=b1"
            )
        out[key.strip()] = value.strip()
    return out


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--rocketpy-broker-key KEY=VALUE`` and the ``rocketpy_broker_keys`` ini option."""
    group = parser.getgroup("rocketpy", "rocketpy broker fixtures")
    group.addoption(
        "--rocketpy-broker-key",
        action="append",
        dest="rocketpy_broker_key",
        metavar="KEY=VALUE",
        help="a broker properties key for the rocketpy_cluster fixture (repeatable)",
    )
    parser.addini(
        "rocketpy_broker_keys", "broker properties keys (KEY=VALUE lines) for rocketpy_cluster", "linelist"
    )


def pytest_configure(config: pytest.Config) -> None:
    """Check the broker keys at start-up: a malformed one is a usage error, before any test runs."""
    broker_keys(config)


def start_cluster(root: Path, keys: dict[str, str] | None = None) -> tuple[RocketpyCluster, list[_Daemon]]:
    """Start a NameServer and a broker under ``root``; returns the cluster and its daemons (to stop)."""
    namesrv = _Daemon(
        "namesrv", root / "namesrv", {"listenPort": "0", "bindAddress": "127.0.0.1",
                                      "kvConfigPath": str(root / "namesrv" / "kv.json")}, _NAMESRV_BOOT,
    )  # fmt: skip
    assert namesrv.match is not None
    props = {
        "listenPort": "0",
        "bindAddress": "127.0.0.1",
        "brokerIP1": "127.0.0.1",
        "namesrvAddr": namesrv.match.group("addr"),
        "storePathRootDir": str(root / "store"),
        "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
        **(keys or {}),
    }
    try:
        broker = _Daemon("broker", root / "broker", props, _BROKER_BOOT)
    except BaseException:
        namesrv.stop()
        raise
    assert broker.match is not None
    cluster = RocketpyCluster(
        namesrv.match.group("addr"),
        broker.match.group("addr"),
        broker.match.group("name"),
        props.get("brokerClusterName", "DefaultCluster"),
        Path(props["storePathRootDir"]),
    )
    return cluster, [broker, namesrv]


@pytest.fixture(scope="session")
def rocketpy_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RocketpyCluster]:
    """A NameServer and a broker for the whole session (stopped by PID at its end)."""
    cluster, daemons = start_cluster(tmp_path_factory.mktemp("rocketpy"), broker_keys(request.config))
    try:
        yield cluster
    finally:
        for daemon in daemons:
            daemon.stop()


@pytest.fixture
def rocketpy_topic(rocketpy_cluster: RocketpyCluster, request: pytest.FixtureRequest) -> str:
    """A fresh topic with 4 queues on the session's broker, named after the test."""
    from rocketpy.sync import Admin

    base = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:80]
    topic = f"{base}_{os.getpid()}_{next(_topic_seq)}"
    admin = Admin(rocketpy_cluster.namesrv_addr)
    admin.start()
    try:
        admin.create_topic(
            topic, broker_addr=rocketpy_cluster.broker_addr, read_queue_nums=4, write_queue_nums=4
        )
    finally:
        admin.shutdown()
    return topic


@pytest.fixture
def rocketpy_producer(rocketpy_cluster: RocketpyCluster) -> Iterator[Any]:
    """A started blocking ``rocketpy.sync.Producer`` on the session's cluster (shut down after the test)."""
    from rocketpy.sync import Producer

    producer = Producer(f"rocketpy_test_pg_{os.getpid()}", rocketpy_cluster.namesrv_addr)
    producer.start()
    try:
        yield producer
    finally:
        producer.shutdown()
