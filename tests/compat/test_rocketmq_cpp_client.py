"""Conformance: RocketMQ's own C++ client (PyPI ``rocketmq`` 0.4.4) against real rocketpy daemons.

The client runs in child processes (``cpp_client_worker.py``): a bad answer can crash it, which is
reported as a failure with its output and the client's own log. Skips where the wheel is missing
or its bundled library cannot load (it exists for Linux x86_64 only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DaemonPool

WORKER = Path(__file__).with_name("cpp_client_worker.py")
CONSUME_DEADLINE_S = 60.0


def _client_loads() -> str | None:
    """None when the C++ client loads, else why not."""
    probe = subprocess.run(
        [sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"RocketMQ's C++ client (pip install rocketmq==0.4.4, Linux x86_64 only) does not load: {last}"
    return None


_SKIP = _client_loads()
pytestmark = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")


def _client_log(home: Path) -> str:
    logs = (
        sorted((home / "logs").rglob("*"), key=lambda p: p.stat().st_mtime)
        if (home / "logs").exists()
        else []
    )
    text = "".join(p.read_text(errors="replace")[-4000:] for p in logs if p.is_file())
    return text[-8000:] or "(no client log)"


class Worker:
    """One child process running the C++ client."""

    def __init__(self, home: Path, *args: str) -> None:
        self.home = home
        self.args = args
        env = {**os.environ, "HOME": str(home)}
        home.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )

    def result(self, timeout: float) -> dict[str, Any]:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            pytest.fail(
                f"C++ client {self.args[0]} hung\n{err[-3000:]}\n{_client_log(self.home)}", pytrace=False
            )
        if self.proc.returncode != 0 or not out.strip():
            pytest.fail(
                f"C++ client {self.args[0]} exited with {self.proc.returncode}\nstdout: {out[-2000:]}\n"
                f"stderr: {err[-3000:]}\nclient log:\n{_client_log(self.home)}",
                pytrace=False,
            )
        return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _check_per_queue_order(got: list[dict[str, Any]]) -> None:
    by_queue: dict[int, list[int]] = defaultdict(list)
    for m in got:
        by_queue[m["queue_id"]].append(m["queue_offset"])
    for queue_id, offsets in by_queue.items():
        assert offsets == sorted(offsets), f"queue {queue_id} delivered out of order: {offsets}"


@pytest.mark.slow
def test_cpp_client_produces_and_consumes(daemons: DaemonPool, tmp_path: Path) -> None:
    namesrv = daemons.namesrv()
    daemons.broker(namesrv.addr, mappedFileSizeCommitLog=16 * 1024 * 1024, mappedFileSizeConsumeQueue=60000)
    ns = namesrv.addr
    sent = Worker(tmp_path / "p1", "produce", ns, "CppTopic").result(120)["sent"]
    assert [s["status"] for s in sent] == [0] * 100  # SEND_OK
    assert len({s["msg_id"] for s in sent}) == 100 and all(len(s["msg_id"]) == 32 for s in sent)
    assert sorted(s["offset"] for s in sent)[-1] > 0
    ordered = Worker(tmp_path / "p2", "produce_orderly", ns, "CppOrdered").result(120)["sent"]
    assert [s["status"] for s in ordered] == [0] * 40
    deadline = str(CONSUME_DEADLINE_S)
    consumers = {
        "all": Worker(tmp_path / "c1", "consume", ns, "CppTopic", "cpp_all", "*", "110", deadline),
        "tags": Worker(
            tmp_path / "c2", "consume", ns, "CppTopic", "cpp_tags", "TagA || TagB", "74", deadline
        ),
        "orderly": Worker(
            tmp_path / "c3", "consume_orderly", ns, "CppOrdered", "cpp_ord", "*", "40", deadline
        ),
    }
    results = {name: w.result(CONSUME_DEADLINE_S + 60)["got"] for name, w in consumers.items()}

    # CLUSTERING consumer: every message once, intact, per-queue order.
    got = results["all"]
    assert sorted(Counter(m["seq"] for m in got).items()) == [(i, 1) for i in range(110)]
    ids = {s["seq"]: s["msg_id"] for s in sent}
    for m in got:
        i = m["seq"]
        assert (
            m["body"].startswith(f"body {i} café ✓ ")
            and len(m["body"]) == len(f"body {i} café ✓ ") + i * 37 % 300
        )
        assert (m["tags"], m["keys"], m["color"]) == (
            ("TagA", "TagB", "TagC")[i % 3],
            f"key-{i} k{i % 7}",
            "café ✓",
        )
        if i in ids:
            assert m["id"] == ids[i]
    _check_per_queue_order(got)
    # Tag-filtered subscription: exactly TagA and TagB.
    tagged = results["tags"]
    assert sorted(m["seq"] for m in tagged) == [i for i in range(110) if i % 3 != 2]
    # Orderly consumer (LOCK_BATCH_MQ): every message, each queue in send order, queue = arg % 4.
    got = results["orderly"]
    assert sorted(m["seq"] for m in got) == list(range(40))
    for m in got:
        assert m["queue_id"] == m["seq"] % 4
    for q in range(4):
        seqs = [m["seq"] for m in got if m["queue_id"] == q]
        assert seqs == sorted(seqs) and len(seqs) == 10
