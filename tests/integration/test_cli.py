"""The ``rocketpy`` group as users run it: lazily loaded ``bench`` and ``admin`` sub-commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import DaemonPool
from tests.daemons import REPO_ROOT, daemon_env


def rocketpy(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rocketpy.cli", *args]
    env = daemon_env(tmp_path, tmp_path)
    return subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_bench_group_lists_producer_and_consumer(tmp_path: Path) -> None:
    top = rocketpy(tmp_path, "--help")
    assert top.returncode == 0 and re.search(r"^\s+bench\s", top.stdout, re.M)
    group = rocketpy(tmp_path, "bench")
    assert group.returncode == 1
    assert re.search(r"^\s+consumer\s", group.stdout, re.M) and re.search(
        r"^\s+producer\s", group.stdout, re.M
    )
    producer = rocketpy(tmp_path, "bench", "producer", "--help")
    assert producer.returncode == 0 and "--bodySize" in producer.stdout and "--namesrvAddr" in producer.stdout


def test_bench_argument_errors_are_one_line(tmp_path: Path) -> None:
    result = rocketpy(tmp_path, "bench", "producer", "-d", "0", "-q", "0")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "give --duration or --count" in result.stderr
    assert "Traceback" not in result.stderr
    unknown = rocketpy(tmp_path, "bench", "nothing")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: No such command 'nothing'")


def test_mqadmin_still_lists_its_commands(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from rocketpy.cli import mqadmin_main; mqadmin_main()", "--help"],
        cwd=REPO_ROOT,
        env=daemon_env(tmp_path, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for name in ("updateTopic", "topicList", "clusterList"):
        assert re.search(rf"^\s+{name}\s", result.stdout, re.M), result.stdout
    sections = re.findall(r"^(\w[\w ]*) commands:$", result.stdout, re.M)
    assert sections[:3] == ["Topic", "Consumer group", "Message"] and "Other" not in sections, sections


def test_bench_producer_through_the_rocketpy_group(daemons: DaemonPool, tmp_path: Path) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    result = rocketpy(tmp_path, "bench", "producer", "-n", ns.addr, "-t", "CliBench", "-q", "50", "-s", "64")
    assert result.returncode == 0, result.stderr
    assert re.search(r"Send Total: 50\b", result.stdout), result.stdout
