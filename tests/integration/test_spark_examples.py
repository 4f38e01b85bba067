"""examples/spark_batch.py and examples/spark_pipeline.py run end to end against real daemons.

Each example starts its own SparkSession (a JVM), so these are marked slow as well as spark; so is
the task-retry test, whose driver needs ``local[2,2]`` (the shared session's ``local[2]`` never
tries a failed task again).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.spark_session import skip_reason
from tests.integration.test_examples import start

RUN_TIMEOUT_S = 480.0  # a JVM start and Python worker spawns on a busy 2-core machine


def finish(proc: subprocess.Popen[str]) -> str:
    """Wait (bounded) for an example; it must exit 0. Returns its output."""
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"{proc.args} did not exit within {RUN_TIMEOUT_S} s:\n{out}")
    assert proc.returncode == 0, out
    return out


pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def addr(daemons: object, tmp_path: Path) -> Iterator[str]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    ns = daemons.namesrv()  # type: ignore[attr-defined]
    daemons.broker(ns.addr)  # type: ignore[attr-defined]
    yield str(ns.addr)


def test_spark_batch_example(addr: str, tmp_path: Path) -> None:
    out = finish(start("spark_batch", addr, tmp_path, "-t", "SparkBatchEx", "-c", "60"))
    assert "sent 60 messages to SparkBatchEx" in out
    assert "tag red: 20 messages" in out
    assert "wrote 60 rows to SparkBatchExUpper, which now holds 60 messages" in out


def test_spark_pipeline_example_on_an_acl_cluster(daemons: object, tmp_path: Path) -> None:
    """``--acl`` with an admin account in the environment: the SDK and Spark's workers sign with it."""
    import os
    import subprocess
    import sys

    from tests.integration.test_acl import ADMIN, start_acl_cluster
    from tests.integration.test_examples import EXAMPLES, _env

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    ns, _ = start_acl_cluster(daemons, tmp_path / "plain_acl.yml")  # type: ignore[arg-type]
    env = {**_env(tmp_path), "ROCKETPY_ACCESS_KEY": ADMIN[0], "ROCKETPY_SECRET_KEY": ADMIN[1]}
    args = ["--orders", "300", "--per-minute", "100", "--seconds", "6", "--out", str(tmp_path / "rev")]
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "spark_pipeline.py"), "-n", ns, *args, "--acl"],
        cwd=os.getcwd(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    out = finish(proc)
    assert "producer: sent 300 orders to Orders" in out, out
    rows = int(out.split("parquet: ")[1].split()[0])  # three simulated minutes: the first closes
    assert 1 <= rows <= 8 and f"topic Revenue: {rows} revenue messages" in out, out
    assert "behind (" in out, out  # the lag figures of the progress
    assert ADMIN[1] not in out


def test_spark_pipeline_example(addr: str, tmp_path: Path) -> None:
    args = ["--orders", "300", "--per-minute", "100", "--seconds", "6", "--out", str(tmp_path / "rev")]
    out = finish(start("spark_pipeline", addr, tmp_path, *args))
    assert "producer: sent 300 orders to Orders" in out
    # three simulated minutes; the one-minute watermark closes at least the first (<= 4 products each)
    rows = int(out.split("parquet: ")[1].split()[0])
    assert 1 <= rows <= 8, out
    assert f"topic Revenue: {rows} revenue messages" in out


def test_stream_resumes_after_kill_9_of_the_driver(addr: str, tmp_path: Path) -> None:
    """kill -9 of the driver (and its JVM) mid-stream; a new driver finishes with no loss or duplicate."""
    import asyncio
    import os
    import signal
    import sys

    from rocketpy import Admin, Message, Producer
    from tests.daemons import REPO_ROOT

    async def send() -> None:
        async with Admin(addr) as admin:
            await admin.create_topic("SparkKill", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        async with Producer("pg_kill", namesrv_addr=addr) as p:
            for i in range(0, 400, 20):
                await p.send_batch([Message("SparkKill", b"%d" % j) for j in range(i, i + 20)])

    asyncio.run(send())
    out, cp = str(tmp_path / "out"), str(tmp_path / "cp")
    cmd = [sys.executable, "-m", "tests.integration.spark_stream_worker", addr, "SparkKill", out, cp]
    proc = subprocess.Popen(
        [*cmd, "forever"], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # bounded by the test timeout
            if line.startswith("batch 2 committed"):
                break
        else:
            pytest.fail("the stream driver exited before its third micro-batch")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the JVM it started (its own group)
        proc.wait(30)
    done = finish(subprocess.Popen([*cmd, "now"], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True))
    assert "drained" in done
    assert sorted(_committed_bodies(Path(out))) == list(range(400))


def _committed_bodies(out: Path) -> list[int]:
    """Bodies in the parquet files the file sink committed (its _spark_metadata log), as Spark reads them."""
    import json

    import pyarrow.parquet as pq

    files: set[str] = set()
    for log in (out / "_spark_metadata").iterdir():
        if log.name.isdigit() or log.name.endswith(".compact"):
            for line in log.read_text().splitlines()[1:]:  # the first line is the log version
                entry = json.loads(line)
                files.add(entry["path"]) if entry["action"] == "add" else files.discard(entry["path"])
    return [
        int(b)
        for f in sorted(files)
        for b in pq.read_table(f.removeprefix("file://")).column("body").to_pylist()
    ]


def test_a_retried_task_gives_each_row_once(addr: str, tmp_path: Path) -> None:
    """``local[2,2]``: partition 0's first attempt hands Spark a batch, then fails; its retry reads the
    range again. The batch read's collect() and the availableNow stream's parquet output hold every
    message exactly once."""
    import json
    import sys

    from rocketpy import Admin, Message, Producer
    from tests.daemons import REPO_ROOT

    async def send() -> None:
        async with Admin(addr) as admin:
            await admin.create_topic("SparkRetry", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        async with Producer("pg_retry", namesrv_addr=addr) as p:
            for i in range(0, 3000, 100):
                await p.send_batch([Message("SparkRetry", b"%d" % j) for j in range(i, i + 100)])

    asyncio.run(send())

    async def offsets() -> list[list[int]]:
        async with Admin(addr) as admin:
            rows = await admin.topic_status("SparkRetry")
        return sorted([r["mq"].queue_id, o] for r in rows for o in range(r["min_offset"], r["max_offset"]))

    expected = asyncio.run(offsets())
    assert len(expected) == 3000
    markers = tmp_path / "markers"
    markers.mkdir()
    cmd = [sys.executable, "-m", "tests.integration.spark_retry_worker", addr, "SparkRetry", str(markers)]
    proc = subprocess.Popen([*cmd, str(tmp_path / "out")], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    printed = [line.split(" ", 1) for line in finish(proc).splitlines() if " [" in line]
    lines = {what: json.loads(pairs) for what, pairs in printed}
    assert lines["batch"] == expected
    assert lines["stream"] == expected
    failed = {p.name.split("-")[0] for p in markers.iterdir()}
    assert failed == {"batch", "stream"}, failed  # each read's first attempt of partition 0 did fail
