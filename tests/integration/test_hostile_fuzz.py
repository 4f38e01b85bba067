"""A live protocol fuzz against a NameServer and a broker while a well-behaved client calls both
(docs/operations.md "Hostile traffic").

The fuzz (``tests.hostile``) runs in its own process: random, mutated, truncated and malformed
frames on two connections per kind and daemon, must-close frames (oversized length prefixes,
undecodable headers, split across writes) checked one connection at a time, and 8 slow-loris
connections. Meanwhile one probe per daemon makes one call at a time. Asserted: both daemons
alive and without tracebacks, no probe call failed, the probe's p99 within ``P99_BOUND_MS``, every
must-close frame closed its connection, slow-loris connections closed by the partial-frame
deadline, broker and NameServer RSS growth bounded.

``P99_BOUND_MS``: 50 ms is the goal on a quiet machine (measured there: well under 10 ms). On a
shared 2-core CI runner the fuzzer, both daemons and the probe compete for the same two cores,
so the bound is raised with ``ROCKETPY_FUZZ_P99_MS``; before the per-turn frame bound and the
rate-limited log, the same run measured p99 600-700 ms.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocketpy.remoting.codes import RequestCode
from rocketpy.remoting.command import RemotingCommand
from tests.conftest import DaemonPool
from tests.daemons import REPO_ROOT, Daemon
from tests.hostile import Probe, rss_bytes

FUZZ_SECONDS = float(os.environ.get("ROCKETPY_FUZZ_SECONDS", "45"))
P99_BOUND_MS = float(os.environ.get("ROCKETPY_FUZZ_P99_MS", "50"))
#: RSS a daemon may gain under the fuzz (16 MiB frames are refused before they are buffered).
RSS_GROWTH_BOUND = 160 * 1024 * 1024
DEFENCES = {"partialFrameTimeoutSeconds": 3, "serverChannelMaxIdleTimeSeconds": 30}


def _route_request() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ProbeTopic"})


def _offset_request() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "ProbeTopic", "queueId": 0})


async def _sample_rss(daemons: list[Daemon], peaks: dict[int, int], until: float) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        for d in daemons:
            peaks[d.pid] = max(peaks.get(d.pid, 0), rss_bytes(d.pid))
        await asyncio.sleep(0.5)


async def _probe_both(namesrv: Daemon, broker: Daemon, seconds: float) -> tuple[Probe, Probe]:
    until = asyncio.get_running_loop().time() + seconds
    probes = (Probe(namesrv.addr, _route_request), Probe(broker.addr, _offset_request))
    await asyncio.gather(*(p.run(until) for p in probes))
    return probes


def _start_fuzzer(namesrv: Daemon, broker: Daemon, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "tests.hostile", "--namesrv", namesrv.addr, "--broker", broker.addr]
    return subprocess.Popen(
        [*args, "--seconds", str(seconds)], cwd=REPO_ROOT, stdout=out.open("wb"), stderr=subprocess.STDOUT
    )


async def _create_probe_topic(namesrv: Daemon, broker: Daemon) -> None:
    from rocketpy.remoting.client import RemotingClient

    client = RemotingClient()
    try:
        ext = {"topic": "ProbeTopic", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
        resp = await client.invoke(
            broker.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), 10.0
        )
        assert resp.code == 0, resp.remark
        for _ in range(100):  # the broker registers the new topic with the NameServer at once
            resp = await client.invoke(namesrv.addr, _route_request(), 10.0)
            if resp.code == 0:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"ProbeTopic never reached the NameServer: {resp.remark}")
    finally:
        await client.close()


async def run_fuzz_against(daemons: DaemonPool, tmp_path: Path, seconds: float) -> None:
    namesrv = daemons.namesrv(**DEFENCES)
    broker = daemons.broker(namesrv.addr, **DEFENCES)
    await _create_probe_topic(namesrv, broker)
    idle = await _probe_both(namesrv, broker, 3.0)
    baseline = {d.pid: rss_bytes(d.pid) for d in (namesrv, broker)}
    out = tmp_path / "fuzz.json"
    fuzzer = _start_fuzzer(namesrv, broker, seconds, out)
    peaks: dict[int, int] = {}
    try:
        loop = asyncio.get_running_loop()
        rss = asyncio.ensure_future(_sample_rss([namesrv, broker], peaks, loop.time() + seconds))
        probes = await _probe_both(namesrv, broker, seconds)
        await rss
        rc = await asyncio.to_thread(fuzzer.wait, 60)
    finally:
        if fuzzer.poll() is None:
            fuzzer.kill()
            fuzzer.wait()
    text = out.read_text()
    assert rc == 0, text[-4000:]
    stats = json.loads(text.strip().splitlines()[-1])
    p99s = [round(p.percentile(99), 2) for p in probes]
    report = (
        f"idle p99 {[round(p.percentile(99), 2) for p in idle]} ms, fuzz p99 {p99s} ms, "
        f"max {[round(max(p.latencies_ms), 1) for p in probes]} ms, "
        f"calls {[len(p.latencies_ms) for p in probes]}, "
        f"stats {stats}, rss MiB {[(baseline[k] >> 20, v >> 20) for k, v in peaks.items()]}"
    )
    print(report)
    for daemon in (namesrv, broker):
        assert daemon.returncode is None, f"{daemon.kind} died: {daemon.stderr_text()[-3000:]}"
        assert peaks[daemon.pid] - baseline[daemon.pid] < RSS_GROWTH_BOUND, report
    for probe in probes:
        assert not probe.failures, f"{probe.addr}: {probe.failures[:5]}"
        assert probe.percentile(99) <= P99_BOUND_MS, report
    assert stats["must_close_sent"] > 0 and stats["must_close_closed"] == stats["must_close_sent"], report
    assert stats["slow_loris_closed"] > 0, report
    assert stats["frames_total"] > 1000, report


async def test_fuzz_keeps_daemons_fair_and_alive(daemons: DaemonPool, tmp_path: Path) -> None:
    await run_fuzz_against(daemons, tmp_path, FUZZ_SECONDS)


@pytest.mark.slow
async def test_long_fuzz_keeps_daemons_fair_and_alive(daemons: DaemonPool, tmp_path: Path) -> None:
    await run_fuzz_against(daemons, tmp_path, 300.0)
