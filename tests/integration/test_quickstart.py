"""``scripts/quickstart`` end to end: both daemons started, raw RPC demo, 10 messages sent and received.

HOME, logs, pid files and the quick start's own directory point into ``tmp_path``, and
``QS_NAMESRV_PORT=0`` / ``QS_BROKER_PORT=0`` pick free ports, so the test never touches a cluster that
is already running. The daemons it started are stopped by the pids the script recorded.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.daemons import REPO_ROOT

STOP_TIMEOUT_S = 15.0
COMMITLOG_FILE_BYTES = 16 * 1024 * 1024  # not the conf's 1 GiB: each new file is written through once


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return True
    return state != "Z"


def _stop(pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_quickstart_starts_a_cluster_and_moves_ten_messages(tmp_path: Path) -> None:
    qs_dir = tmp_path / "qs"
    env = dict(os.environ)
    env.pop("NAMESRV_ADDR", None)
    env.update(
        HOME=str(tmp_path / "home"),
        ROCKETPY_LOG_DIR=str(tmp_path / "logs"),
        ROCKETPY_RUN_DIR=str(tmp_path / "run"),
        QS_DIR=str(qs_dir),
        QS_NAMESRV_PORT="0",
        QS_BROKER_PORT="0",
        QS_NAMESRV_PROPS="bindAddress=127.0.0.1",
        QS_BROKER_PROPS=(
            f"bindAddress=127.0.0.1 grpcServerPort=0 mappedFileSizeCommitLog={COMMITLOG_FILE_BYTES}"
        ),
    )
    (tmp_path / "home").mkdir()
    try:
        result = subprocess.run(
            [str(REPO_ROOT / "scripts" / "quickstart")],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        pids = [int(p.read_text()) for p in sorted(qs_dir.glob("*.pid"))]  # broker.pid, namesrv.pid
        _stop(pids)
    out = result.stdout
    assert result.returncode == 0, f"stdout:\n{out}\nstderr:\n{result.stderr}"
    assert len(pids) == 2
    assert re.search(
        r"^The Name Server boot success\. listen=127\.0\.0\.1:\d+ \((compiled core|pure Python)\)$", out, re.M
    )
    assert re.search(
        r"^The broker\[broker-a, 127\.0\.0\.1:\d+\] boot success\. serializeType=MSGPACK", out, re.M
    )
    assert "raw pull: PULL_MESSAGE -> SUCCESS" in out and "body='Hello over the raw RPC'" in out
    sent = re.findall(r"^sent (\d+): SEND_OK ", out, re.M)
    # not anchored: the example's listener threads may interleave their lines
    received = re.findall(r"received: queue=\d+ offset=\d+ tags=TagA body=Hello RocketMQ (\d)", out)
    assert sorted(map(int, sent)) == list(range(10))
    assert sorted(map(int, received)) == list(range(10))
    assert "done: received 10 messages" in out
    assert "mqshutdown broker" in out and "mqshutdown namesrv" in out
    commitlog = tmp_path / "home" / "store" / "commitlog"  # the conf's storePathRootDir=~/store
    assert [f.stat().st_size for f in commitlog.iterdir()][:1] == [COMMITLOG_FILE_BYTES]
    for name in ("namesrv", "broker"):
        assert "Traceback" not in (qs_dir / f"{name}.err").read_text()
    assert not any(_alive(pid) for pid in pids)
