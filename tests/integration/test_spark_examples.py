"""examples/spark_batch.py and examples/spark_pipeline.py run end to end against real daemons.

Each example starts its own SparkSession (a JVM), so these are marked slow as well as spark.
"""

from __future__ import annotations

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


def test_spark_pipeline_example(addr: str, tmp_path: Path) -> None:
    args = ["--orders", "300", "--per-minute", "100", "--seconds", "6", "--out", str(tmp_path / "rev")]
    out = finish(start("spark_pipeline", addr, tmp_path, *args))
    assert "producer: sent 300 orders to Orders" in out
    # three simulated minutes; the one-minute watermark closes at least the first (<= 4 products each)
    rows = int(out.split("parquet: ")[1].split()[0])
    assert 1 <= rows <= 8, out
    assert f"topic Revenue: {rows} revenue messages" in out
