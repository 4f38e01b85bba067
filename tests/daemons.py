"""Real daemons for integration tests: ``start_namesrv`` / ``start_broker`` -> ``Daemon``.

Each daemon runs as ``python -m rocketpy.cli namesrv|broker -c FILE`` in a subprocess, with a
properties file written under the test's ``tmp_path`` (``listenPort=0``, ``bindAddress=127.0.0.1``,
data under ``tmp_path``), ``ROCKETPY_LOG_DIR`` and ``ROCKETPY_RUN_DIR`` under ``tmp_path``. Start-up
reads stdout until the boot line (with a deadline) and learns the address from it; on failure the
exception carries the daemon's stdout and stderr. stderr goes to a file (never a pipe that could
fill up and block the daemon).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent

NAMESRV_BOOT = re.compile(r"The Name Server boot success\. listen=(?P<addr>\S+)")
BROKER_BOOT = re.compile(r"The broker\[(?P<name>[^,\]]+), (?P<addr>[^\]]+)\] boot success\.")


class DaemonStartError(RuntimeError):
    """A daemon exited or stayed silent before printing its boot line."""


def write_properties(path: Path, props: dict[str, Any]) -> Path:
    """Write ``props`` as a ``.properties`` file (bools as true/false, paths as text)."""
    lines = []
    for key, value in props.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        lines.append(f"{key}={text.replace(chr(92), chr(92) * 2)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _unique_dir(tmp_path: Path, prefix: str) -> tuple[Path, int]:
    n = 0
    while (tmp_path / f"{prefix}-{n}").exists():
        n += 1
    d = tmp_path / f"{prefix}-{n}"
    d.mkdir(parents=True)
    return d, n


def daemon_env(tmp_path: Path, workdir: Path) -> dict[str, str]:
    """The environment of a test daemon: logs in ``workdir``, pid files in ``tmp_path/run``."""
    env = dict(os.environ)
    env.pop("NAMESRV_ADDR", None)
    env["ROCKETPY_LOG_DIR"] = str(workdir / "logs")
    env["ROCKETPY_RUN_DIR"] = str(tmp_path / "run")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return env


class Daemon:
    """A running daemon subprocess.

    Attributes:
        kind: ``"namesrv"`` or ``"broker"``.
        addr: ``"127.0.0.1:PORT"`` from the boot line.
        name: the broker name from a broker's boot line (None for a NameServer).
        workdir: its directory under ``tmp_path`` (config file, logs, store).
        config_file: the properties file it was started with.
        process: the ``subprocess.Popen``.
    """

    def __init__(
        self,
        kind: str,
        args: list[str],
        workdir: Path,
        env: dict[str, str],
        config_file: Path,
        netns: str | None = None,
    ) -> None:
        self.kind = kind
        self.workdir = workdir
        self.config_file = config_file
        self.addr = ""
        self.name: str | None = None
        self.boot_line = ""
        self._stderr_path = workdir / f"{kind}.stderr"
        self._stderr = open(self._stderr_path, "wb")  # closed in _finish
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._booted = threading.Event()
        self._boot_re: re.Pattern[str] | None = None
        # ``ip netns exec`` execs the daemon: the pid stays the daemon's own
        prefix = ["ip", "netns", "exec", netns] if netns else []
        self.process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "rocketpy.cli", *args],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._reader = threading.Thread(target=self._read_stdout, name=f"{kind}-stdout", daemon=True)

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    @property
    def port(self) -> int:
        """The listening port from the boot line."""
        return int(self.addr.rsplit(":", 1)[1])

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

    def wait_boot(self, boot_re: re.Pattern[str], timeout: float) -> Daemon:
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
            f"\n--- stderr ---\n{self.stderr_text()}"
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

    def terminate(self, timeout: float = 10.0) -> int:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL; return the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10.0)
        self._finish()
        return self.process.returncode

    def kill(self) -> int:
        """SIGKILL (no clean shutdown) and reap; return the exit code."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10.0)
        self._finish()
        return self.process.returncode

    def _finish(self) -> None:
        if self._reader.is_alive():
            self._reader.join(2.0)
        if self.process.poll() is not None and self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()

    def __enter__(self) -> Daemon:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.terminate()

    def __repr__(self) -> str:
        return f"Daemon({self.kind}, addr={self.addr!r}, pid={self.pid}, rc={self.returncode})"


def start_namesrv(
    tmp_path: Path, *, boot_timeout: float = 20.0, netns: str | None = None, **props: Any
) -> Daemon:
    """Start a NameServer on a free loopback port; ``props`` are extra/overriding RocketMQ keys.

    ``netns``: run it in that network namespace (``ip netns exec``; pass its ``bindAddress``).
    """
    workdir, _ = _unique_dir(tmp_path, "namesrv")
    conf = {"listenPort": 0, "bindAddress": "127.0.0.1", "kvConfigPath": workdir / "kvConfig.json", **props}
    path = write_properties(workdir / "namesrv.properties", conf)
    env = daemon_env(tmp_path, workdir)
    daemon = Daemon("namesrv", ["namesrv", "-c", str(path)], workdir, env, path, netns)
    return daemon.wait_boot(NAMESRV_BOOT, boot_timeout)


def start_broker(
    tmp_path: Path, namesrv_addr: str, *, boot_timeout: float = 30.0, netns: str | None = None, **props: Any
) -> Daemon:
    """Start a Broker on a free loopback port registered with ``namesrv_addr``.

    ``netns``: run it in that network namespace (``ip netns exec``; pass its ``bindAddress``).

    Defaults: brokerName ``broker-a``, ``broker-b``, ... (one per broker started in ``tmp_path``),
    brokerId 0, cluster DefaultCluster, store under its own directory; ``props`` override them.
    """
    workdir, n = _unique_dir(tmp_path, "broker")
    conf = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": f"broker-{chr(ord('a') + n % 26)}{n // 26 or ''}",
        "brokerId": 0,
        "namesrvAddr": namesrv_addr,
        "listenPort": 0,
        "bindAddress": "127.0.0.1",
        "storePathRootDir": workdir / "store",
        # Small commitlog files: tests stay light on disk and still roll files.
        "mappedFileSizeCommitLog": 64 << 20,
        **props,
    }
    path = write_properties(workdir / "broker.properties", conf)
    env = daemon_env(tmp_path, workdir)
    daemon = Daemon("broker", ["broker", "-c", str(path)], workdir, env, path, netns)
    return daemon.wait_boot(BROKER_BOOT, boot_timeout)
