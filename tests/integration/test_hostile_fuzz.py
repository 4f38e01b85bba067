"""A live protocol fuzz against a NameServer and a broker while a well-behaved client calls both
(docs/operations.md "Hostile traffic").

The fuzz (``tests.hostile``) runs in its own process: random, mutated, truncated and malformed
frames on two connections per kind and daemon, must-close frames (oversized length prefixes,
undecodable headers, split across writes) checked one connection at a time, and 8 slow-loris
connections. Meanwhile one probe per daemon makes one call at a time. Asserted: both daemons
alive and without tracebacks, no probe call failed, the probe's p99 within ``P99_BOUND_MS``,
every must-close frame closed its connection, slow-loris connections closed by the partial-frame
deadline, RSS growth and log lines bounded.

``P99_BOUND_MS``: the goal is 50 ms on a quiet machine. On a shared 2-core runner the fuzzer, both
daemons and the probe compete for two cores already busy with other work, and the fuzz's
pipelining flood keeps both daemons at full CPU; measured there (load average 9): p99 64-69 ms,
and 2.7-4.3 s without the per-turn frame bound (the same run on the code before it). The default
bound, 250 ms, fails the unbounded daemon by an order of magnitude and passes the bounded one on
a loaded runner; ``ROCKETPY_FUZZ_P99_MS=50`` asks for the goal on a quiet machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import DaemonPool
from tests.daemons import REPO_ROOT
from tests.hostile import fuzz_with_probes, log_lines

FUZZ_SECONDS = float(os.environ.get("ROCKETPY_FUZZ_SECONDS", "45"))
P99_BOUND_MS = float(os.environ.get("ROCKETPY_FUZZ_P99_MS", "250"))
#: RSS a daemon may gain under the fuzz (16 MiB frames are refused before they are buffered).
RSS_GROWTH_MIB = 160
#: Log lines the daemons may write in all: bad requests are rate-limited per peer address.
MAX_LOG_LINES_PER_SECOND = 40
DEFENCES = {"partialFrameTimeoutSeconds": 3}


async def run_fuzz_against(daemons: DaemonPool, tmp_path: Path, seconds: float) -> None:
    namesrv = daemons.namesrv(**DEFENCES)
    broker = daemons.broker(namesrv.addr, **DEFENCES)
    report = await fuzz_with_probes(
        (namesrv.addr, namesrv.pid), (broker.addr, broker.pid), seconds, REPO_ROOT
    )
    lines = {d.kind: log_lines(d.workdir / "logs") for d in (namesrv, broker)}
    report["log_lines"] = lines
    print(report)
    for daemon in (namesrv, broker):
        assert daemon.returncode is None, f"{daemon.kind} died: {daemon.stderr_text()[-3000:]}"
    for baseline, peak in report["rss_mib"].values():
        assert peak - baseline < RSS_GROWTH_MIB, report
    fuzz, stats = report["fuzz"], report["fuzz_stats"]
    assert fuzz["failures"] == [[], []], report
    assert max(fuzz["p99_ms"]) <= P99_BOUND_MS, report
    assert stats["must_close_sent"] > 0 and stats["must_close_closed"] == stats["must_close_sent"], report
    assert stats["slow_loris_closed"] > 0, report
    assert stats["frames_total"] > 1000, report
    assert sum(lines.values()) < MAX_LOG_LINES_PER_SECOND * seconds + 200, report


@pytest.mark.slow
async def test_fuzz_keeps_daemons_fair_and_alive(daemons: DaemonPool, tmp_path: Path) -> None:
    await run_fuzz_against(daemons, tmp_path, FUZZ_SECONDS)


@pytest.mark.long
@pytest.mark.timeout(600)
async def test_long_fuzz_keeps_daemons_fair_and_alive(daemons: DaemonPool, tmp_path: Path) -> None:
    await run_fuzz_against(daemons, tmp_path, 400.0)
