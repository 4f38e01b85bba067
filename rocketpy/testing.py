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

The launcher under the fixtures is public: ``start_namesrv`` / ``start_broker`` start one daemon in
a directory and return a ``Daemon`` (address from its boot line, stdout/stderr, ``terminate`` and
``kill`` by PID). rocketpy's own integration tests start every daemon through it.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketpy.errors import RocketpyError

BOOT_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
NAMESRV_BOOT = re.compile(r"The Name Server boot success\. listen=(?P<addr>\S+)")
BROKER_BOOT = re.compile(r"The broker\[(?P<name>[^,\]]+), (?P<addr>[^\]]+)\] boot success\.")
#: the end of a broker's boot line: its gRPC port (-1 when the endpoint is off)
GRPC_PORT = re.compile(r" grpcServerPort=(-?\d+)$")
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


class DaemonStartError(RocketpyError, RuntimeError):
    """A daemon exited or stayed silent before printing its boot line."""


def write_properties(path: Path, props: dict[str, Any]) -> Path:
    """Write ``props`` as a ``.properties`` file (bools as true/false, paths as text)."""
    lines = []
    for key, value in props.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        lines.append(f"{key}={text.replace(chr(92), chr(92) * 2)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def daemon_env(workdir: Path, run_dir: Path | None = None) -> dict[str, str]:
    """A daemon's environment: logs under ``workdir``, pid files in ``run_dir`` (default ``workdir/run``)."""
    env = dict(os.environ)
    env.pop("NAMESRV_ADDR", None)
    env["ROCKETPY_LOG_DIR"] = str(workdir / "logs")
    env["ROCKETPY_RUN_DIR"] = str(run_dir or workdir / "run")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Daemon:
    """A daemon subprocess (``python -m rocketpy.cli namesrv|broker -c FILE``), stopped by PID.

    stdout is read by a thread (kept in memory; the boot line gives the address); stderr goes to a
    file in ``workdir``, never a pipe that could fill up and block the daemon.

    Attributes:
        kind: ``"namesrv"`` or ``"broker"``.
        addr: ``"127.0.0.1:PORT"`` from the boot line.
        name: the broker name from a broker's boot line (None for a NameServer).
        boot_line: the boot line.
        workdir: its directory (config file, logs, store).
        config_file: the properties file it was started with.
        process: the ``subprocess.Popen``.
    """

    def __init__(
        self,
        kind: str,
        config_file: Path,
        env: dict[str, str],
        *,
        cwd: Path | None = None,
        netns: str | None = None,
    ) -> None:
        self.kind = kind
        self.workdir = config_file.parent
        self.config_file = config_file
        self.addr = ""
        self.name: str | None = None
        self.boot_line = ""
        self._stderr_path = self.workdir / f"{kind}.stderr"
        self._stderr = open(self._stderr_path, "wb")  # closed in _finish
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._booted = threading.Event()
        self._boot_re: re.Pattern[str] | None = None
        # in a network namespace: ``ip netns exec`` execs the daemon, so the pid stays the daemon's
        prefix = ["ip", "netns", "exec", netns] if netns else []
        self.process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "rocketpy.cli", kind, "-c", str(config_file)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._reader = threading.Thread(target=self._read_stdout, name=f"rocketpy-{kind}", daemon=True)

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    @property
    def port(self) -> int:
        """The listening port from the boot line."""
        return int(self.addr.rsplit(":", 1)[1])

    @property
    def grpc_port(self) -> int | None:
        """A broker's gRPC port (``grpcServerPort=N`` in its boot line); None when it serves none."""
        m = GRPC_PORT.search(self.boot_line or "")
        return int(m.group(1)) if m and int(m.group(1)) > 0 else None

    @property
    def grpc_addr(self) -> str | None:
        """A broker's gRPC endpoint ``host:port`` (its advertised host), None when it serves none."""
        port = self.grpc_port
        return f"{self.addr.rsplit(':', 1)[0]}:{port}" if port is not None else None

    @property
    def returncode(self) -> int | None:
        """The exit code, or None while it runs."""
        return self.process.poll()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._lock:
                self._lines.append(line)
            m = self._boot_re.search(line) if self._boot_re is not None else None
            if m and not self._booted.is_set():
                self.addr, self.boot_line = m.group("addr"), line
                self.name = m.groupdict().get("name")
                self._booted.set()

    def wait_boot(self, boot_re: re.Pattern[str], timeout: float = BOOT_TIMEOUT_S) -> Daemon:
        """Wait for the boot line; raise ``DaemonStartError`` with the output when it does not come."""
        self._boot_re = boot_re
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not self._booted.wait(0.02):
            if self.process.poll() is not None:
                self._reader.join(2.0)
                if self._booted.is_set():
                    break
                self._finish()
                raise DaemonStartError(self._describe(f"exited with code {self.process.returncode}"))
            if time.monotonic() > deadline:
                self.kill()
                raise DaemonStartError(self._describe(f"printed no boot line within {timeout:g}s"))
        return self

    def _describe(self, what: str) -> str:
        return (
            f"{self.kind} ({self.config_file}) {what}\n--- stdout ---\n{self.stdout_text()}"
            f"\n--- stderr ---\n{self.stderr_text()[-4000:]}"
        )

    def stdout_text(self) -> str:
        """Everything the daemon printed on stdout so far."""
        with self._lock:
            return "\n".join(self._lines)

    def stderr_text(self) -> str:
        """Everything the daemon printed on stderr so far (its log lines included)."""
        try:
            return self._stderr_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def has_traceback(self) -> bool:
        """True when the daemon printed a Python traceback (a bug, never a user error)."""
        return "Traceback (most recent call last)" in self.stderr_text()

    def wait(self, timeout: float) -> int:
        """Wait for the process to exit on its own; return its exit code."""
        rc = self.process.wait(timeout)
        self._finish()
        return rc

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM by PID, wait up to ``timeout`` s, then SIGKILL; return the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        self._finish()
        return self.process.returncode

    def kill(self) -> int:
        """SIGKILL (no clean shutdown) and reap; return the exit code."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
        self._finish()
        return self.process.returncode

    def _finish(self) -> None:
        if self._reader.is_alive():
            self._reader.join(2.0)
        if self.process.poll() is not None and self.process.stdout is not None:
            self.process.stdout.close()
        if not self._stderr.closed:
            self._stderr.close()

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.terminate()

    def __repr__(self) -> str:
        return f"Daemon({self.kind}, addr={self.addr!r}, pid={self.pid}, rc={self.returncode})"


def start_namesrv(
    workdir: Path,
    *,
    env: dict[str, str] | None = None,
    boot_timeout: float = BOOT_TIMEOUT_S,
    cwd: Path | None = None,
    netns: str | None = None,
    **props: Any,
) -> Daemon:
    """Start a NameServer in ``workdir`` on a free loopback port; ``props`` add or override keys.

    ``env`` defaults to ``daemon_env(workdir)``; ``cwd`` is the daemon's working directory;
    ``netns`` runs it in that network namespace (``ip netns exec``; give its ``bindAddress``).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    conf = {"listenPort": 0, "bindAddress": "127.0.0.1", "kvConfigPath": workdir / "kvConfig.json", **props}
    path = write_properties(workdir / "namesrv.properties", conf)
    daemon = Daemon("namesrv", path, env or daemon_env(workdir), cwd=cwd, netns=netns)
    return daemon.wait_boot(NAMESRV_BOOT, boot_timeout)


def start_broker(
    workdir: Path,
    namesrv_addr: str,
    *,
    env: dict[str, str] | None = None,
    boot_timeout: float = BOOT_TIMEOUT_S,
    cwd: Path | None = None,
    netns: str | None = None,
    **props: Any,
) -> Daemon:
    """Start a broker in ``workdir`` on a free loopback port, registered with ``namesrv_addr``.

    ``netns`` runs it in that network namespace (``ip netns exec``; give its ``bindAddress``).

    Defaults: brokerName ``broker-a``, cluster DefaultCluster, brokerId 0, the store in
    ``workdir/store`` with 64 MiB commitlog files and 8 MiB index files (a broker reserves its
    files' blocks, and the production index file is 420 MB: light on disk, still rolls);
    ``props`` override.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    conf = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": 0,
        "namesrvAddr": namesrv_addr,
        "listenPort": 0,
        "grpcServerPort": 0,  # the gRPC endpoint on a free port too (the boot line names it)
        "bindAddress": "127.0.0.1",
        "storePathRootDir": workdir / "store",
        "mappedFileSizeCommitLog": 64 << 20,
        "maxHashSlotNum": 100_000,
        "maxIndexNum": 400_000,
        **props,
    }
    path = write_properties(workdir / "broker.properties", conf)
    daemon = Daemon("broker", path, env or daemon_env(workdir), cwd=cwd, netns=netns)
    return daemon.wait_boot(BROKER_BOOT, boot_timeout)


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


def start_cluster(root: Path, keys: dict[str, str] | None = None) -> tuple[RocketpyCluster, list[Daemon]]:
    """Start a NameServer and a broker under ``root``; returns the cluster and its daemons (to stop)."""
    props: dict[str, Any] = {"brokerIP1": "127.0.0.1", "storePathRootDir": root / "store", **(keys or {})}
    namesrv = start_namesrv(root / "namesrv")
    try:
        broker = start_broker(root / "broker", namesrv.addr, **props)
    except BaseException:
        namesrv.terminate()
        raise
    assert broker.name is not None
    cluster = RocketpyCluster(
        namesrv.addr,
        broker.addr,
        broker.name,
        str(props.get("brokerClusterName", "DefaultCluster")),
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
            daemon.terminate()


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
