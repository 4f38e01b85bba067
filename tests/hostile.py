"""Hostile traffic against live daemons, for the fuzz tests and ``scripts/bench_hostile.py``.

The input comes from ``tests.hostile_frames`` (random, mutated, truncated, oversized, bad-header,
malformed and flood frames).

``run_fuzz`` drives several connections per kind plus slow-loris connections for a fixed time and
returns counters; ``python -m tests.hostile --namesrv A --broker B --seconds S`` runs it in its own
process (so the fuzzer's CPU use does not distort a probe measured in the test process) and prints
the counters as one JSON line. ``Probe`` measures a well-behaved client's round trips meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import struct
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketpy.addresses import parse_addr
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.command import SERIALIZE_MSGPACK, RemotingCommand
from tests.hostile_frames import (
    BURST,
    EXPENSIVE_KINDS,
    EXPENSIVE_PAUSE_S,
    KINDS,
    MUST_CLOSE,
    expensive_frame,
    frame_of_kind,
    malformed_request,
)


@dataclass
class FuzzStats:
    """What a fuzz run sent and saw."""

    frames: Counter[str] = field(default_factory=Counter)
    must_close_sent: int = 0
    must_close_closed: int = 0
    must_close_open: list[str] = field(default_factory=list)
    connections: int = 0
    slow_loris_closed: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counters."""
        return {
            "frames": dict(self.frames),
            "frames_total": sum(self.frames.values()),
            "must_close_sent": self.must_close_sent,
            "must_close_closed": self.must_close_closed,
            "must_close_open": self.must_close_open[:20],
            "connections": self.connections,
            "slow_loris_closed": self.slow_loris_closed,
        }


async def _drain(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while await reader.read(65536):
            pass


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


async def hammer(addr: str, kind: str, until: float, stats: FuzzStats, rng: random.Random) -> None:
    """Send bursts of ``kind`` frames on one connection (reconnecting when the server closes it);
    an expensive kind's frames one at a time, each followed by its pause."""
    expensive = kind in EXPENSIVE_KINDS
    pause = EXPENSIVE_PAUSE_S.get(kind, 0.0)
    host, port = parse_addr(addr)
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        stats.connections += 1
        drain = asyncio.ensure_future(_drain(reader))
        try:
            while loop.time() < until and not drain.done():
                if expensive:
                    burst = [expensive_frame(rng, kind)]
                else:
                    burst = [frame_of_kind(rng, kind) for _ in range(BURST.get(kind) or rng.randrange(1, 32))]
                writer.write(b"".join(burst))
                stats.frames[kind] += len(burst)
                await asyncio.wait_for(writer.drain(), 5.0 if expensive else 2.0)
                await asyncio.sleep(min(pause, max(until - loop.time(), 0)))
        except (OSError, TimeoutError):
            pass
        finally:
            drain.cancel()
            writer.transport.abort()


async def must_close_check(
    addr: str,
    kind: str,
    stats: FuzzStats,
    rng: random.Random,
    timeout: float,  # noqa: ASYNC109 (one bound for the whole exchange)
) -> None:
    """Send a must-close frame (after some valid ones, split across writes) and wait for the close."""
    host, port = parse_addr(addr)
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return
    stats.connections += 1
    frame = frame_of_kind(rng, kind)
    lead = b"".join(malformed_request(rng) for _ in range(rng.randrange(0, 4)))
    data = lead + frame
    cuts = sorted(rng.sample(range(1, len(data)), min(rng.randrange(0, 3), len(data) - 1)))
    stats.must_close_sent += 1
    stats.frames[kind] += 1
    try:
        last = 0
        for cut in [*cuts, len(data)]:
            writer.write(data[last:cut])
            last = cut
            await writer.drain()
            await asyncio.sleep(rng.choice((0, 0, 0.001, 0.01)))
        await asyncio.wait_for(_drain(reader), timeout)
        stats.must_close_closed += 1
    except (OSError, ConnectionError):
        stats.must_close_closed += 1  # reset by the server
    except TimeoutError:
        stats.must_close_open.append(f"{addr} {kind} {frame[:16].hex()}")
    finally:
        writer.transport.abort()


async def must_close_loop(
    addr: str, kinds: tuple[str, ...], until: float, stats: FuzzStats, seed: int
) -> None:
    """Run ``must_close_check`` back to back until ``until``."""
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        await must_close_check(addr, rng.choice(kinds), stats, rng, timeout=5.0)


async def slow_loris(addr: str, until: float, stats: FuzzStats, interval: float) -> None:
    """Open a connection and trickle one byte of a frame every ``interval`` s; reconnect when closed."""
    host, port = parse_addr(addr)
    # A 1000-byte frame with a valid header, of which at most 60 bytes are ever sent.
    frame = struct.pack(">II", 1000, (SERIALIZE_MSGPACK << 24) | 6) + b"\x95\x01\x01\x00\xc0\xc0" + b"x" * 50
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(interval)
            continue
        stats.connections += 1
        try:
            for i in range(len(frame)):
                if loop.time() >= until or reader.at_eof():
                    break
                writer.write(frame[i : i + 1])
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    if await asyncio.wait_for(reader.read(1), interval) == b"":
                        stats.slow_loris_closed += 1
                        break
        except OSError:
            stats.slow_loris_closed += 1
        finally:
            writer.transport.abort()


async def run_fuzz(
    namesrv: str,
    broker: str,
    seconds: float,
    *,
    per_kind: int = 2,
    slow_loris_count: int = 8,
    seed: int = 1,
    loris_interval: float = 1.0,
    expensive: bool = False,
) -> FuzzStats:
    """Fuzz both daemons for ``seconds``: ``per_kind`` connections per kind per daemon, must-close
    checks on two more per daemon, and ``slow_loris_count`` slow-loris connections in all;
    ``expensive``: one more connection per daemon for each of ``EXPENSIVE_KINDS``."""
    stats = FuzzStats()
    until = asyncio.get_running_loop().time() + seconds
    jobs = []
    n = seed
    for addr in (namesrv, broker):
        for kind in KINDS:
            if kind in MUST_CLOSE:
                continue
            for _ in range(per_kind):
                n += 1
                jobs.append(hammer(addr, kind, until, stats, random.Random(n)))
        for _ in range(per_kind):
            n += 1
            jobs.append(must_close_loop(addr, MUST_CLOSE, until, stats, n))
        for kind in EXPENSIVE_KINDS if expensive else ():
            n += 1
            jobs.append(hammer(addr, kind, until, stats, random.Random(n)))
    for i in range(slow_loris_count):
        jobs.append(slow_loris((namesrv, broker)[i % 2], until, stats, loris_interval))
    await asyncio.gather(*jobs)
    return stats


class Probe:
    """A well-behaved client: one request at a time on one connection; records each round trip.

    Args:
        addr: the daemon.
        request: builds the next request.
        ok_codes: response codes that count as success.
    """

    def __init__(
        self, addr: str, request: Callable[[], RemotingCommand], ok_codes: tuple[int, ...] = (0,)
    ) -> None:
        self.addr = addr
        self.request = request
        self.ok_codes = ok_codes
        self.latencies_ms: list[float] = []
        self.failures: list[str] = []

    async def run(self, until: float, pause: float = 0.005) -> None:
        """Call until loop time ``until``; a failed or late call is recorded in ``failures``."""
        from rocketpy.remoting.client import RemotingClient  # the SDK-side RPC, never imported by daemons

        client = RemotingClient()
        loop = asyncio.get_running_loop()
        try:
            while loop.time() < until:
                started = time.perf_counter()
                try:
                    response = await client.invoke(self.addr, self.request(), 5.0)
                except Exception as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                else:
                    self.latencies_ms.append((time.perf_counter() - started) * 1000)
                    if response.code not in self.ok_codes:
                        self.failures.append(f"code {response.code}: {response.remark}")
                await asyncio.sleep(pause)
        finally:
            await client.close()

    def percentile(self, p: float) -> float:
        """The ``p``-th percentile latency in ms (nan when nothing was measured)."""
        values = sorted(self.latencies_ms)
        if not values:
            return float("nan")
        return values[min(len(values) - 1, int(len(values) * p / 100))]


def _route_request() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": PROBE_TOPIC})


def _offset_request() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": PROBE_TOPIC, "queueId": 0})


PROBE_TOPIC = "ProbeTopic"


async def create_probe_topic(namesrv: str, broker: str) -> None:
    """Create ``PROBE_TOPIC`` on ``broker`` and wait until ``namesrv`` routes it."""
    from rocketpy.remoting.client import RemotingClient

    client = RemotingClient()
    try:
        ext = {"topic": PROBE_TOPIC, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
        create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        resp = await client.invoke(broker, create, 10.0)
        assert resp.code == 0, resp.remark
        for _ in range(100):  # the broker registers the new topic with the NameServer at once
            resp = await client.invoke(namesrv, _route_request(), 10.0)
            if resp.code == 0:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{PROBE_TOPIC} never reached the NameServer: {resp.remark}")
    finally:
        await client.close()


async def probe_both(namesrv: str, broker: str, seconds: float) -> tuple[Probe, Probe]:
    """Route queries to the NameServer and offset queries to the broker for ``seconds``."""
    until = asyncio.get_running_loop().time() + seconds
    probes = (Probe(namesrv, _route_request), Probe(broker, _offset_request))
    await asyncio.gather(*(p.run(until) for p in probes))
    return probes


async def _sample_rss(pids: list[int], peaks: dict[int, int], until: float) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        for pid in pids:
            peaks[pid] = max(peaks.get(pid, 0), rss_bytes(pid))
        await asyncio.sleep(0.5)


def _probe_figures(probes: tuple[Probe, Probe]) -> dict[str, Any]:
    return {
        "p50_ms": [round(p.percentile(50), 2) for p in probes],
        "p99_ms": [round(p.percentile(99), 2) for p in probes],
        "max_ms": [round(max(p.latencies_ms, default=float("nan")), 1) for p in probes],
        "calls": [len(p.latencies_ms) for p in probes],
        "failures": [p.failures[:5] for p in probes],
    }


async def fuzz_with_probes(
    namesrv: tuple[str, int],
    broker: tuple[str, int],
    seconds: float,
    repo_root: Path,
    expensive: bool = False,
) -> dict[str, Any]:
    """Probe both daemons idle (3 s), then under a ``python -m tests.hostile`` fuzz for ``seconds``.

    Args:
        namesrv / broker: each daemon's ``(addr, pid)``.
        seconds: the fuzz's duration.
        repo_root: the checkout whose ``tests.hostile`` runs the fuzz.
        expensive: add the legal-but-expensive kinds (``--expensive``; the fuzzer builds them
            before it says READY, and the probe starts then).

    Returns:
        ``idle`` and ``fuzz`` probe figures ([namesrv, broker] each), ``rss_mib`` (baseline, peak)
        per daemon, and the fuzzer's counters as ``fuzz_stats``.
    """
    (ns_addr, ns_pid), (broker_addr, broker_pid) = namesrv, broker
    await create_probe_topic(ns_addr, broker_addr)
    idle = await probe_both(ns_addr, broker_addr, 3.0)
    baseline = {pid: rss_bytes(pid) for pid in (ns_pid, broker_pid)}
    args = [sys.executable, "-m", "tests.hostile", "--namesrv", ns_addr, "--broker", broker_addr]
    args += ["--expensive"] if expensive else []
    fuzzer = await asyncio.create_subprocess_exec(
        *args, "--seconds", str(seconds), cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    peaks: dict[int, int] = {}
    try:
        loop = asyncio.get_running_loop()
        assert fuzzer.stdout is not None
        ready = await asyncio.wait_for(fuzzer.stdout.readline(), 120)
        if ready.strip() != b"READY":
            raise RuntimeError(f"the fuzzer did not start: {ready!r}")
        output = asyncio.ensure_future(asyncio.wait_for(fuzzer.communicate(), seconds + 60))
        rss = asyncio.ensure_future(_sample_rss([ns_pid, broker_pid], peaks, loop.time() + seconds))
        probes = await probe_both(ns_addr, broker_addr, seconds)
        await rss
        text = (await output)[0].decode(errors="replace")
    finally:
        if fuzzer.returncode is None:
            fuzzer.kill()
            await fuzzer.wait()
    if fuzzer.returncode != 0:
        raise RuntimeError(f"the fuzzer failed ({fuzzer.returncode}):\n{text[-4000:]}")
    return {
        "idle": _probe_figures(idle),
        "fuzz": _probe_figures(probes),
        "rss_mib": {
            name: (baseline[pid] >> 20, peaks[pid] >> 20)
            for name, pid in (("namesrv", ns_pid), ("broker", broker_pid))
        },
        "fuzz_stats": json.loads(text.strip().splitlines()[-1]),
    }


def log_lines(log_dir: Path) -> int:
    """Lines in every log file (rotated ones included) under ``log_dir``."""
    total = 0
    for path in log_dir.glob("*.log*"):
        with path.open("rb") as f:
            total += sum(1 for _ in f)
    return total


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid``."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.hostile --namesrv A --broker B --seconds S``: fuzz, print counters as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--broker", required=True)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--per-kind", type=int, default=2)
    parser.add_argument("--slow-loris", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--expensive", action="store_true", help="add the legal-but-expensive kinds")
    args = parser.parse_args(argv)
    if args.expensive:  # built before the clock starts (seconds of CPU), so they all are sent
        for kind in EXPENSIVE_KINDS:
            expensive_frame(random.Random(0), kind)
    print("READY", flush=True)  # the probe under fuzz starts now (fuzz_with_probes)
    stats = asyncio.run(
        run_fuzz(
            args.namesrv,
            args.broker,
            args.seconds,
            per_kind=args.per_kind,
            slow_loris_count=args.slow_loris,
            seed=args.seed,
            expensive=args.expensive,
        )
    )
    print(json.dumps(stats.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
