"""RocketMQ's official 5.x clients for the conformance tests, each installed apart from rocketpy.

* Python: PyPI ``rocketmq-python-client`` (5.1.x) in its own venv under the pytest cache (its
  top-level package ``rocketmq`` would clash with RocketMQ's C++ client wheel in rocketpy's venv);
* Node.js: npm ``rocketmq-client-nodejs`` under the pytest cache, run with ``node``.

``python_client(config)`` / ``node_client(config)`` return the interpreter (or ``NODE_PATH``), or
None with the reason (pip or npm cannot install, no node): the tests skip with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PYTHON_CLIENT = "rocketmq-python-client==5.1.2"
NODE_CLIENT = "rocketmq-client-nodejs@1.0.8"
INSTALL_TIMEOUT_S = 600
HERE = Path(__file__).parent


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or ["?"])[-1][:300]


def python_client(config: pytest.Config) -> tuple[str | None, str]:
    """(the 5.x client venv's python, "") or (None, why it cannot be had)."""
    venv = Path(config.cache.mkdir("rocketmq5-python-client"))
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import rocketmq.v5, rocketmq.grpc_protocol"]
    if python.exists() and subprocess.run(probe, capture_output=True, timeout=60).returncode == 0:
        return str(python), ""
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True
    )
    if made.returncode != 0:
        return None, f"cannot create a venv for {PYTHON_CLIENT}: {_last_line(made.stderr)}"
    try:
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", PYTHON_CLIENT],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"pip install {PYTHON_CLIENT} took over {INSTALL_TIMEOUT_S} s"
    if pip.returncode != 0:
        return None, f"pip cannot install {PYTHON_CLIENT}: {_last_line(pip.stderr)}"
    return str(python), ""


def node_client(config: pytest.Config) -> tuple[str | None, str]:
    """(NODE_PATH of the installed npm client, "") or (None, why it cannot be had)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return (
            None,
            "node and npm are needed for rocketmq-client-nodejs (Node 20: apt-get install nodejs npm)",
        )
    prefix = Path(config.cache.mkdir("rocketmq5-node-client"))
    modules = prefix / "node_modules"
    if (modules / "rocketmq-client-nodejs" / "package.json").exists():
        return str(modules), ""
    try:
        npm = subprocess.run(
            ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", NODE_CLIENT],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"npm install {NODE_CLIENT} took over {INSTALL_TIMEOUT_S} s"
    if npm.returncode != 0 or not (modules / "rocketmq-client-nodejs").exists():
        return None, f"npm cannot install {NODE_CLIENT}: {_last_line(npm.stderr or npm.stdout)}"
    return str(modules), ""


def run_worker(argv: list[str], timeout_s: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a client worker process; its JSON result (a failure shows its output)."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env={**os.environ, **(env or {})}
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(
            f"{argv[1]} {argv[2]} hung for {timeout_s} s\nstderr: {str(e.stderr)[-3000:]}", pytrace=False
        )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        pytest.fail(
            f"{argv[1]} {argv[2]} exited {done.returncode}\nstdout: {done.stdout[-2000:]}\n"
            f"stderr: {done.stderr[-4000:]}",
            pytrace=False,
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result
