#!/usr/bin/env python3
"""Hostile-traffic benchmark: a NameServer and a broker under a protocol fuzz, with a probe.

Starts both daemons as subprocesses, probes them idle for 3 s (one route query to the NameServer
and one offset query to the broker at a time), then runs the fuzz of ``tests/hostile.py`` in its
own process for ``--seconds`` (random, mutated, truncated, malformed frames on 2 connections per
kind and daemon, must-close frames, 8 slow-loris connections, and one connection per daemon for
each legal-but-expensive kind: 1-8 MiB remarks, 200,000-entry ext maps, 1,000,000-element arrays,
nesting 64 to 100,000 deep, in headers and structured bodies, msgpack and JSON, and a 15 MiB frame
every 3 s; ``--no-expensive`` leaves those out) while probing again. Prints:

  * the probe's p50 / p99 / max round trip, idle and under fuzz, per daemon;
  * each daemon's RSS before and at its peak;
  * frames sent per kind, and the share of must-close frames whose connection was closed;
  * log lines the daemons wrote;
  * the load average (the machine may be shared: compare A/B runs back to back).

``--base DIR`` runs the daemons from another checkout too (e.g. a clone of main), in ABBA order
over ``--rounds`` rounds, and prints both sides' figures; the fuzz itself always comes from this
checkout.

Usage:  .venv/bin/python scripts/bench_hostile.py [--seconds 20] [--base DIR [--rounds N]]
                                                  [--no-expensive] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_abba import abba, same_core  # noqa: E402

import tests.daemons as test_daemons  # noqa: E402
from tests.hostile import fuzz_with_probes, log_lines  # noqa: E402

#: Shortened deadlines so slow-loris connections are closed within the run (rocketpy >= these keys).
DEFENCES = {"partialFrameTimeoutSeconds": 3}
#: The well-behaved client's p99 under the fuzz must stay within this, on both daemons.
TARGET_P99_MS = 50.0


def run(seconds: float, base: Path | None, expensive: bool) -> dict[str, Any]:
    """Start the daemons (from ``base`` when given), fuzz and probe them, stop them; the figures."""
    test_daemons.REPO_ROOT = base or ROOT  # daemons run with cwd and PYTHONPATH at that checkout
    props = {} if base is not None else DEFENCES
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        tmp_path = Path(tmp)
        namesrv = test_daemons.start_namesrv(tmp_path, **props)
        broker = test_daemons.start_broker(tmp_path, namesrv.addr, **props)
        try:
            report = asyncio.run(
                fuzz_with_probes(
                    (namesrv.addr, namesrv.pid), (broker.addr, broker.pid), seconds, ROOT, expensive
                )
            )
            report["alive"] = {d.kind: d.returncode is None for d in (namesrv, broker)}
        finally:
            broker.terminate()
            namesrv.terminate()
        report["log_lines"] = {d.kind: log_lines(d.workdir / "logs") for d in (namesrv, broker)}
        report["tracebacks"] = {d.kind: d.has_traceback() for d in (namesrv, broker)}
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    report["daemons_from"] = str(base or ROOT)
    return report


def print_report(r: dict[str, Any]) -> None:
    """The figures as a short table."""
    stats = r["fuzz_stats"]
    closed = stats["must_close_closed"] / max(stats["must_close_sent"], 1) * 100
    print(f"daemons from {r['daemons_from']} ({r.get('side', 'this')}); load average {r['load_average']}")
    for i, name in enumerate(("namesrv", "broker")):
        idle, fuzz = r["idle"], r["fuzz"]
        print(
            f"{name:8} idle p50/p99/max {idle['p50_ms'][i]}/{idle['p99_ms'][i]}/{idle['max_ms'][i]} ms"
            f" | fuzz p50/p99/max {fuzz['p50_ms'][i]}/{fuzz['p99_ms'][i]}/{fuzz['max_ms'][i]} ms"
            f" ({fuzz['calls'][i]} calls, {len(fuzz['failures'][i])} failed)"
            f" | RSS {r['rss_mib'][name][0]} -> {r['rss_mib'][name][1]} MiB"
            f" | {r['log_lines'][name]} log lines | alive {r['alive'][name]}"
        )
    print(f"frames {stats['frames_total']}: {stats['frames']}")
    print(
        f"must-close closed {stats['must_close_closed']}/{stats['must_close_sent']} ({closed:.1f} %)"
        f"; slow-loris connections closed {stats['slow_loris_closed']}; tracebacks {r['tracebacks']}"
    )
    worst = max(r["fuzz"]["p99_ms"])
    verdict = "OK" if worst <= TARGET_P99_MS else "MISSED"
    print(f"target: probe p99 under fuzz <= {TARGET_P99_MS:.0f} ms on both daemons: {worst} ms, {verdict}")


def main() -> int:
    """Parse arguments, run (ABBA against ``--base`` when given), print."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="fuzz duration (default 20)")
    parser.add_argument("--base", type=Path, help="also run the daemons from this checkout (ABBA)")
    parser.add_argument("--rounds", type=int, default=1, help="ABBA rounds with --base (default 1)")
    parser.add_argument("--no-expensive", action="store_true", help="leave out the legal-but-expensive kinds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    base = args.base.resolve() if args.base else None
    if base is not None:
        same_core(ROOT, base)
    reports = []
    for n in range(args.rounds if base is not None else 1):
        for side in abba(n, "this", "base") if base is not None else ("this",):
            report = run(args.seconds, base if side == "base" else None, not args.no_expensive)
            report["side"] = side
            reports.append(report)
            if not args.json:
                print_report(report)
    if args.json:
        print(json.dumps(reports))
    elif base is not None:
        print_p99_summary(reports)
    return 0


def print_p99_summary(reports: list[dict[str, Any]]) -> None:
    """Each side's probe p99 under fuzz, run by run, per daemon."""
    for side in ("base", "this"):
        runs = [r for r in reports if r["side"] == side]
        cells = ", ".join(f"{r['fuzz']['p99_ms'][0]}/{r['fuzz']['p99_ms'][1]}" for r in runs)
        print(f"{side}: probe p99 under fuzz NameServer/broker (ms), run by run: {cells}")


if __name__ == "__main__":
    sys.exit(main())
