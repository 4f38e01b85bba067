#!/usr/bin/env python3
"""Where a traced consumer's time goes: the consume of ``bench_trace.py`` with trace off, on, and on
with the trace messages not sent (records written, sealed and counted, then dropped instead of
going to the broker), in one run.

    .venv/bin/python scripts/bench_trace_parts.py [--rounds 2] [--pull-count 200000]

``bench_trace.py`` measures on against off; this splits on's cost in two: "unsent" is what the
hooks cost the consumer (the SubBefore / SubAfter records written per message, the listener
runner's clock), and on minus unsent is what sending the trace messages costs it (the inner
producer's send path, the compression thread beside it, the broker storing them on the same
machine). Each round runs off, on, unsent, unsent, on, off (the next round the reverse), each run
a new group reading ``--pull-count`` messages of one backlog from the first offset; each kind's
figure is the median of its runs, with its ratio to off's.

The unsent runs replace ``TraceDispatcher._send_batch`` in the bench process (``--child``): a
measurement only, never how the SDK runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_trace import bench, create_topic  # noqa: E402

from tests.daemons import start_broker, start_namesrv  # noqa: E402

KINDS = ("off", "on", "unsent")


def child(argv: list[str]) -> None:
    """Run ``rocketpy bench`` with ``argv``, the trace messages written but not sent."""
    from rocketpy.bench import bench as bench_cli
    from rocketpy.client.trace import Sealed, TraceDispatcher

    async def drop(self: TraceDispatcher, sealed: Sealed) -> None:
        self.stats.sent_records += sealed[2]  # counted as sent: the bench checks nothing was lost
        self.stats.sent_messages += 1

    TraceDispatcher._send_batch = drop  # type: ignore[method-assign]
    bench_cli.main(argv, prog_name="rocketpy bench", standalone_mode=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pull-count", type=int, default=200_000, help="Messages one consume run reads.")
    a = ap.parse_args()
    tps: dict[str, list[int]] = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-trace-parts-") as tmp:
        ns = start_namesrv(Path(tmp))
        broker = start_broker(Path(tmp), ns.addr)
        try:
            asyncio.run(create_topic(ns.addr))
            fill = ["-q", str(a.pull_count), "-b", "64", "-d", "0"]
            bench("producer", ns.addr, broker, False, *fill)
            order = ["off", "on", "unsent", "unsent", "on", "off"]
            for r in range(a.rounds):
                for i, kind in enumerate(order if r % 2 == 0 else order[::-1]):
                    group = f"parts_{r}_{i}_{kind}"
                    args = ["-g", group, "--from-first", "-q", str(a.pull_count), "-d", "120"]
                    run = bench("consumer", ns.addr, broker, kind != "off", *args,
                                child=__file__ if kind == "unsent" else None)  # fmt: skip
                    tps[kind].append(run.tps)
                    print(f"round {r + 1} consume {kind:<6}: {run.tps:>8,} msgs/s  client CPU "
                          f"{run.client_us:.1f} µs/msg  {run.trace}", flush=True)  # fmt: skip
        finally:
            broker.terminate()
            ns.terminate()
    off = statistics.median(tps["off"])
    for kind in KINDS:
        median = statistics.median(tps[kind])
        print(f"{kind:<6}: median {median:>9,.0f} msgs/s = {median / off:6.1%} of off, "
              f"{1e6 / median - 1e6 / off:+.3f} µs a message")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
    else:
        main()
