#!/usr/bin/env python3
"""Send and pull throughput with the metrics endpoint off and on, in one run (target: within 10 %).

Starts one NameServer and two brokers (1 KiB bodies, ASYNC_FLUSH): one with ``metricsPort`` unset
(off), one with ``metricsPort`` set and scraped every ``--scrape-interval`` seconds while it is
measured (Prometheus scrapes every 15 s by default; 0.5 s is 30 times harsher). The phases of
``bench_broker.py`` (single sends, batch sends, pulls of the backlog) run against both brokers
``--rounds`` times, each phase four times a round in ABBA order (off, on, on, off; the next round
on, off, off, on): the second run of a pair tends to be slower and the machine drifts between runs,
so each side takes both places alike. A round's ratio is its two runs on over its two runs off, and
the verdict is the median of the rounds' ratios. Pulls read as many messages from both brokers (the
smaller backlog). ``--control`` starts the second broker without the endpoint and scrapes nothing:
its ratios are the method's own noise on this machine. The counters behind the metrics are kept
whether or not the endpoint is on; their hot-path cost per request is measured in-process and
printed too.

Usage:  .venv/bin/python scripts/bench_metrics.py [--seconds 2] [--rounds 8] [--scrape-interval 0.5]
                                                  [--control]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_abba import abba, round_ratios  # noqa: E402
from bench_broker import QUEUES, _ok, _phase, bench_batches, bench_pulls, bench_sends  # noqa: E402

from rocketpy.broker.stats import BrokerStats  # noqa: E402
from rocketpy.protocol.codes import RequestCode  # noqa: E402
from rocketpy.remoting.client import RemotingClient  # noqa: E402
from rocketpy.remoting.command import RemotingCommand  # noqa: E402
from rocketpy.remoting.request_stats import RequestStats  # noqa: E402
from tests.daemons import Daemon, start_broker, start_namesrv  # noqa: E402
from tests.integration.test_metrics import free_port, http, metrics_url  # noqa: E402

PHASES = (
    ("single sends, 4 connections x 16 in flight", "send"),
    ("batch sends of 32, 16 in flight", "batch"),
    ("pull backlog in batches of 32", "pull"),
)


class Scraper:
    """Scrapes a URL every ``interval`` seconds while running; keeps the scrape times."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.times_s: list[float] = []
        self.bytes = 0

    async def run(self) -> None:
        while True:
            t0 = time.perf_counter()
            status, body = await http(self.url)
            if status != 200:
                raise RuntimeError(f"scrape failed: {status} {body[:200]!r}")
            self.times_s.append(time.perf_counter() - t0)
            self.bytes = len(body)
            await asyncio.sleep(self.interval)


async def _create_topics(addr: str) -> None:
    client = RemotingClient()
    for topic in ("BenchSend", "BenchBatch"):
        ext = {"topic": topic, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
        await _ok(client, addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext=ext))
    await client.close()


async def _run_phase(
    phase: str, broker: Daemon, seconds: float, scraper: Scraper | None, pull_per_queue: int
) -> dict[str, Any]:
    """One phase (``send``, ``batch`` or ``pull``) against ``broker``, scraped meanwhile when
    ``scraper`` is given."""
    task = asyncio.ensure_future(scraper.run()) if scraper is not None else None
    out: dict[str, Any] = {}
    try:
        if phase == "send":
            run = bench_sends(broker.addr, "BenchSend", seconds, 4, 16)
        elif phase == "batch":
            run = bench_batches(broker.addr, "BenchBatch", seconds, 16)
        else:
            run = bench_pulls(broker.addr, "BenchBatch", seconds, pull_per_queue)
        await _phase(out, phase, broker.pid, run)
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return out


async def run(off: Daemon, on: Daemon, args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Every phase over both brokers, ABBA, ``args.rounds`` times."""
    await _create_topics(off.addr)
    await _create_topics(on.addr)
    scraper = None if args.control else Scraper(metrics_url(on), args.scrape_interval)
    results: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    backlog = {"off": 0, "on": 0}  # messages in BenchBatch: pulls read as many from both
    for r in range(args.rounds):
        runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
        for _, phase in PHASES:
            per_queue = max(min(backlog.values()) // QUEUES - 32, 32)  # batches land round robin
            for side, broker in abba(r, ("off", off), ("on", on)):
                out = await _run_phase(
                    phase, broker, args.seconds, scraper if side == "on" else None, per_queue
                )
                if phase == "batch":
                    backlog[side] += out["batch_msgs"]
                runs[side].append(out)
        for side in ("off", "on"):  # per phase, that side's two runs in order: merge the 1st, the 2nd
            results[side] += [_merge(runs[side][0::2]), _merge(runs[side][1::2])]
    if scraper is not None:
        times = sorted(scraper.times_s)
        results["scrape"] = [
            {"n": len(times), "p50_ms": times[len(times) // 2] * 1000, "bytes": scraper.bytes}
        ]
    return results


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's figures of every phase in one dict."""
    return {k: v for part in parts for k, v in part.items()}


def hot_path_ns() -> tuple[float, float]:
    """In-process cost (ns) of one request's counting, and of one put's per-topic counting
    (best of 5 runs, less the cost of the empty call: the machine's other load only adds)."""
    stats = RequestStats()
    started = time.perf_counter()
    code = int(RequestCode.SEND_MESSAGE_V2)  # as decoded from the wire
    stats.observe(code, 0, started)
    broker = BrokerStats()

    def best(fn: Any, n: int = 200_000) -> float:
        return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e9

    empty = best(lambda: None)
    per_request = best(lambda: stats.observe(code, 0, started))
    per_put = best(lambda: broker.on_put("BenchSend", 1, 1024))
    return per_request - empty, per_put - empty


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each timed phase (default 2)")
    # 8, as bench_acl: one round's ratio moves by 10-20 % on a busy 2-core machine
    parser.add_argument("--rounds", type=int, default=8, help="ABBA rounds (default 8)")
    parser.add_argument("--scrape-interval", type=float, default=0.5, help="seconds between scrapes")
    parser.add_argument(
        "--control", action="store_true", help="no endpoint on either broker: the method's own noise (A/A)"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        work = Path(tmp)
        ns = start_namesrv(work)
        common = {"flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": 256 * 1024 * 1024}
        off = start_broker(work, ns.addr, **common)
        endpoint = {} if args.control else {"metricsPort": free_port()}
        on = start_broker(work, ns.addr, **endpoint, **common)
        try:
            results = asyncio.Runner(loop_factory=uvloop.new_event_loop).run(run(off, on, args))
        finally:
            on.terminate()
            off.terminate()
            ns.terminate()
    _print(results, load_before, os.getloadavg(), hot_path_ns(), args)


def _print(
    results: dict[str, list[dict[str, Any]]],
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
    hot: tuple[float, float],
    args: argparse.Namespace,
) -> None:
    if args.control:
        print("control run: no metrics endpoint on either broker; 'on' is the second broker, not scraped")
    title = f"phase (median of {args.rounds} ABBA rounds)"
    print(f"{title:46} {'off msgs/s':>12} {'on msgs/s':>12} "
          f"{'on/off':>7} {'cpu us/msg off':>15} {'on':>6}  on/off per round")  # fmt: skip
    for name, key in PHASES:
        off, on = results["off"], results["on"]
        ratios = round_ratios([r[key] for r in on], [r[key] for r in off])
        cpu_off = statistics.median(r[key + "_broker_cpu_us_per_msg"] for r in off)
        cpu_on = statistics.median(r[key + "_broker_cpu_us_per_msg"] for r in on)
        print(f"{name:46} {statistics.median(r[key] for r in off):12,.0f} "
              f"{statistics.median(r[key] for r in on):12,.0f} {statistics.median(ratios):7.1%} "
              f"{cpu_off:15.2f} {cpu_on:6.2f}  {', '.join(f'{x:.1%}' for x in ratios)}")  # fmt: skip
    if not args.control:
        scrape = results["scrape"][0]
        print(f"scrapes of the 'on' broker: {scrape['n']} every {args.scrape_interval:g} s while measured, "
              f"p50 {scrape['p50_ms']:.1f} ms, {scrape['bytes']:,} bytes each")  # fmt: skip
    print(f"hot-path counting (always on): {hot[0]:.0f} ns per request (count + latency bucket), "
          f"{hot[1]:.0f} ns per put (per-topic counters)")  # fmt: skip
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} on {os.cpu_count()} cpus "
          "(client and brokers on the same host)")  # fmt: skip


if __name__ == "__main__":
    main()
