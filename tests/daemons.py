"""Real daemons for integration tests: ``start_namesrv`` / ``start_broker`` -> ``Daemon``.

The launcher is the pytest plugin's (``rocketpy.testing``): one way to start a daemon, for users'
tests and ours. This module adds the test layout: each daemon in its own directory under the test's
``tmp_path`` (``namesrv-N``, ``broker-N``), pid files in ``tmp_path/run``, the source tree first on
``PYTHONPATH`` and as the working directory, and brokers named ``broker-a``, ``broker-b``, ... in the
order they start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rocketpy import testing
from rocketpy.testing import BROKER_BOOT, NAMESRV_BOOT, Daemon, DaemonStartError, write_properties

__all__ = [
    "BROKER_BOOT",
    "NAMESRV_BOOT",
    "REPO_ROOT",
    "Daemon",
    "DaemonStartError",
    "daemon_env",
    "start_broker",
    "start_namesrv",
    "write_properties",
]

REPO_ROOT = Path(__file__).resolve().parent.parent


def _unique_dir(tmp_path: Path, prefix: str) -> tuple[Path, int]:
    n = 0
    while (tmp_path / f"{prefix}-{n}").exists():
        n += 1
    d = tmp_path / f"{prefix}-{n}"
    d.mkdir(parents=True)
    return d, n


def daemon_env(tmp_path: Path, workdir: Path) -> dict[str, str]:
    """The environment of a test daemon: logs in ``workdir``, pid files in ``tmp_path/run``."""
    env = testing.daemon_env(workdir, tmp_path / "run")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return env


def start_namesrv(
    tmp_path: Path, *, boot_timeout: float = 20.0, netns: str | None = None, **props: Any
) -> Daemon:
    """Start a NameServer on a free loopback port; ``props`` are extra/overriding RocketMQ keys.

    ``netns``: run it in that network namespace (pass its ``bindAddress`` too).
    """
    workdir, _ = _unique_dir(tmp_path, "namesrv")
    env = daemon_env(tmp_path, workdir)
    return testing.start_namesrv(
        workdir, env=env, boot_timeout=boot_timeout, cwd=REPO_ROOT, netns=netns, **props
    )


def start_broker(
    tmp_path: Path, namesrv_addr: str, *, boot_timeout: float = 30.0, netns: str | None = None, **props: Any
) -> Daemon:
    """Start a Broker on a free loopback port registered with ``namesrv_addr``.

    ``netns``: run it in that network namespace (pass its ``bindAddress`` too).

    Defaults: brokerName ``broker-a``, ``broker-b``, ... (one per broker started in ``tmp_path``),
    brokerId 0, cluster DefaultCluster, store under its own directory; ``props`` override them.
    """
    workdir, n = _unique_dir(tmp_path, "broker")
    props = {"brokerName": f"broker-{chr(ord('a') + n % 26)}{n // 26 or ''}", **props}
    return testing.start_broker(
        workdir, namesrv_addr, env=daemon_env(tmp_path, workdir), boot_timeout=boot_timeout, cwd=REPO_ROOT,
        netns=netns, **props,
    )  # fmt: skip
