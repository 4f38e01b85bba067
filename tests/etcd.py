"""Real etcd for tests: one member or a cluster, each its own process in a tmp dir, on free ports.

``etcd_unavailable()`` says why etcd cannot run here (no binary: ``apt-get install etcd-server``, as
``.ci/run`` does); tests skip with that reason. ``EtcdCluster.start(tmp_path, n)`` starts ``n``
members (optionally each in a network namespace, with its IP) and waits until the cluster answers;
``stop`` ends every member by pid (SIGTERM, then SIGKILL). Never a system service.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ETCD_BIN = shutil.which("etcd") or "/usr/bin/etcd"
BOOT_TIMEOUT_S = 30.0


def etcd_unavailable() -> str | None:
    """Why no etcd can be started here (None: it can)."""
    if not Path(ETCD_BIN).exists():
        return "etcd is not installed (Debian: apt-get install etcd-server; .ci/run installs it)"
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class Member:
    """One etcd member process."""

    name: str
    host: str
    client_port: int
    peer_port: int
    data_dir: Path
    netns: str | None = None
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def endpoint(self) -> str:
        """``host:port`` of its client URL."""
        return f"{self.host}:{self.client_port}"


@dataclass
class EtcdCluster:
    """A running etcd cluster for one test."""

    members: list[Member] = field(default_factory=list)

    @property
    def endpoints(self) -> str:
        """The value for ``etcdEndpoints``."""
        return ",".join(m.endpoint for m in self.members)

    @classmethod
    def start(
        cls,
        root: Path,
        size: int = 1,
        hosts: list[str] | None = None,
        netns: list[str | None] | None = None,
        ports: list[tuple[int, int]] | None = None,
    ) -> EtcdCluster:
        """Start ``size`` members under ``root`` and wait until the cluster answers.

        ``ports``: each member's (client, peer) port (default: free ones).
        """
        hosts = hosts or ["127.0.0.1"] * size
        spaces = netns or [None] * size
        cluster = cls()
        for i in range(size):
            host = hosts[i]
            port_host = "127.0.0.1" if spaces[i] else host
            client, peer = ports[i] if ports else (free_port(port_host), free_port(port_host))
            cluster.members.append(Member(f"e{i}", host, client, peer, root / f"etcd-{i}", spaces[i]))
        initial = ",".join(f"{m.name}=http://{m.host}:{m.peer_port}" for m in cluster.members)
        for m in cluster.members:
            cluster._spawn(m, initial, "new")
        try:
            cluster.wait_healthy()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, m: Member, initial: str, state: str) -> None:
        m.data_dir.mkdir(parents=True, exist_ok=True)
        m.log_path = m.data_dir.parent / f"{m.name}.log"
        args = [
            ETCD_BIN, "--name", m.name, "--data-dir", str(m.data_dir / "data"),
            "--listen-client-urls", f"http://{m.host}:{m.client_port}",
            "--advertise-client-urls", f"http://{m.host}:{m.client_port}",
            "--listen-peer-urls", f"http://{m.host}:{m.peer_port}",
            "--initial-advertise-peer-urls", f"http://{m.host}:{m.peer_port}",
            "--initial-cluster", initial, "--initial-cluster-state", state,
            "--initial-cluster-token", f"rocketpy-{m.data_dir.parent.name}",
            "--heartbeat-interval", "100", "--election-timeout", "1000",
        ]  # fmt: skip
        prefix = ["ip", "netns", "exec", m.netns] if m.netns else []
        with open(m.log_path, "ab") as log:
            m.process = subprocess.Popen([*prefix, *args], stdout=log, stderr=log, stdin=subprocess.DEVNULL)

    def _answers(self, m: Member) -> bool:
        req = urllib.request.Request(
            f"http://{m.endpoint}/v3/kv/range", data=json.dumps({"key": "AA=="}).encode()
        )
        try:
            with urllib.request.urlopen(req, timeout=1.0) as resp:
                return "header" in json.loads(resp.read())
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def wait_healthy(self, timeout: float = BOOT_TIMEOUT_S) -> None:
        """Wait until every running member answers a linearizable read."""
        deadline = time.monotonic() + timeout
        running = [m for m in self.members if m.process is not None and m.process.poll() is None]
        while not all(self._answers(m) for m in running):
            for m in running:
                if m.process is not None and m.process.poll() is not None:
                    raise RuntimeError(f"etcd {m.name} exited: {self.log_tail(m)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd did not answer within {timeout:g}s: {self.log_tail(running[0])}")
            time.sleep(0.1)

    def log_tail(self, m: Member) -> str:
        """The end of a member's log."""
        return m.log_path.read_text(errors="replace")[-2000:] if m.log_path and m.log_path.exists() else ""

    def kill(self, i: int = 0) -> None:
        """SIGKILL member ``i``."""
        p = self.members[i].process
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(10)

    def restart(self, i: int = 0, wait: bool = False) -> None:
        """Start member ``i`` again on its data (after ``kill``); ``wait`` for it to answer."""
        m = self.members[i]
        initial = ",".join(f"{x.name}=http://{x.host}:{x.peer_port}" for x in self.members)
        self._spawn(m, initial, "existing")
        if wait:
            self.wait_healthy()

    def stop(self) -> None:
        """End every member by pid."""
        for m in self.members:
            p = m.process
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
