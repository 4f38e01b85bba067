"""`rocketpy bench producer|consumer` (rocketpy.bench) against real daemons: bounded runs, output asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocketpy.bench import Stats, bench, progress_bar
from tests.conftest import DaemonPool

ROOT = Path(__file__).resolve().parents[2]


def test_stats_window_and_summary() -> None:
    s = Stats()
    s.ok(10, 2.0)
    s.ok(10, 4.0)
    s.fail(3)
    w = s.take_window()
    assert w["avg_rt_ms"] == 3.0 and w["max_rt_ms"] == 4.0 and w["failed"] == 3 and w["tps"] > 0
    assert s.take_window()["failed"] == 0
    summary = s.summary()
    assert summary["total"] == 20
    # Little's law: 20 messages of 2-4 ms each over the run's elapsed time
    assert summary["in_flight"] == pytest.approx(0.06 / summary["seconds"], rel=0.01)
    assert progress_bar(5, 10, width=10) == "[#####.....]  50.0%"


def test_bench_producer_then_consumer(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    cmd = [
        sys.executable,
        "-m",
        "rocketpy.bench",
        "producer",
        "-n",
        ns.addr,
        "-t",
        "BenchT",
        "-s",
        "100",
        "-q",
        "300",
        "-w",
        "8",
        "-d",
        "30",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"\[Complete\] Send Total: (\d+) \| Send TPS: \d+ .*\| Send Failed: (\d+)", proc.stdout)
    assert m and m.group(1) == "300" and m.group(2) == "0", proc.stdout
    assert "[#" not in proc.stdout + proc.stderr  # no progress bar when not on a terminal
    in_flight = re.search(r"In flight \(mean\): ([\d.]+)", proc.stdout)
    assert in_flight and 0 < float(in_flight.group(1)) <= 8.05, proc.stdout  # -w 8 bounds the window

    batch = CliRunner().invoke(
        bench, ["producer", "-n", ns.addr, "-t", "BenchT", "-b", "50", "-q", "200", "-w", "2"]
    )
    assert batch.exit_code == 0, batch.output
    assert "Send Total: 200" in batch.output

    # plain callbacks count the sends (in the SDK's callback thread): all of them, before the summary
    callbacks = CliRunner().invoke(
        bench, ["producer", "-n", ns.addr, "-t", "BenchT", "-m", "callback", "-q", "400", "-w", "16"]
    )
    assert callbacks.exit_code == 0, callbacks.output
    assert "Send Total: 400" in callbacks.output and "Send Failed: 0" in callbacks.output

    cons = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocketpy.bench",
            "consumer",
            "-n",
            ns.addr,
            "-t",
            "BenchT",
            "--from-first",
            "-q",
            "500",
            "-d",
            "60",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert cons.returncode == 0, cons.stderr
    m = re.search(r"\[Complete\] Consume Total: (\d+)", cons.stdout)
    assert m and int(m.group(1)) >= 500, cons.stdout


def test_bench_rejects_unbounded_run() -> None:
    r = CliRunner().invoke(bench, ["producer", "-d", "0", "-q", "0"])
    assert r.exit_code == 2 and "--duration or --count" in r.output
