#!/usr/bin/env python3
"""POP consumption: SimpleConsumer receive+ack beside the push consumer, broker CPU per consumed
message POP vs pull, and the revive of a large unacked backlog (one broker, 1 KiB bodies).

    .venv/bin/python scripts/bench_pop.py [--messages 50000] [--rounds 2] [--receivers 16]
                                          [--revive 100000] [--invisible 10] [--only drain revive]

1. drain (targets: SimpleConsumer >= 50,000 msgs/s; POP's broker CPU per message <= 1.2 x pull's):
   each round fills a backlog of ``--messages`` messages per run and drains it with a SimpleConsumer
   (``--receivers`` concurrent receive loops, each ``receive(32)`` then ``ack`` of the batch: a
   BATCH_ACK_MESSAGE, shared by the acks of one loop tick) and with a PushConsumer in its default
   pull mode, in ABBA order (pop, pull, pull, pop; the next round pull, pop, pop, pull: the second
   run of a pair tends to be slower and the machine drifts), then once with the PushConsumer in POP
   mode. A drain's time ends when the last message was acked / consumed (the receive loops still
   waiting for more are cancelled then). The broker's CPU (utime + stime of its process in /proc)
   over each drain, divided by the messages, is its cost per consumed message (the client's, from
   this process, is printed beside it); a round's ratio is its two POP runs over its two pull
   runs, the verdict the median of the rounds.
2. revive (target: done within the invisible time + 5 s): fills ``--revive`` messages, pops them all
   with ``--invisible`` seconds and acks none, then times how long after the last pop's invisible
   time ended every one of them was copied to the POP retry topic (consumerProgress: nothing in
   flight, the retry topic holding them all).

Everything runs on one machine: client and broker share its cores (the load average is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_abba import abba, round_ratios  # noqa: E402

from rocketpy import (  # noqa: E402
    Admin,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    Producer,
    PushConsumer,
    SimpleConsumer,
)
from rocketpy.topic import pop_retry_topic  # noqa: E402
from tests.daemons import Daemon, start_broker, start_namesrv  # noqa: E402

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
QUEUES = 8
DEADLINE_S = 600.0
_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process used so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


async def backlog(ns: str, topic: str, count: int, body_size: int) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    body = b"x" * body_size
    async with Producer(f"pg_{topic}", namesrv_addr=ns) as p:
        for i in range(0, count, 256):
            await p.send_batch([Message(topic, body) for _ in range(min(256, count - i))])


async def drain_pop(ns: str, topic: str, count: int, receivers: int) -> float:
    """Drain ``topic`` with one SimpleConsumer; seconds taken."""
    c = SimpleConsumer(
        f"g_{topic}", ns, subscriptions={topic: "*"}, await_duration=1, consume_from_where=FIRST
    )
    await c.start()
    done = 0
    finished = asyncio.Event()

    async def loop() -> None:
        nonlocal done
        while True:
            msgs = await c.receive(32, 60)
            if msgs:
                await c.ack(msgs)
                done += len(msgs)
                if done >= count:
                    finished.set()

    t0 = time.perf_counter()
    loops = [asyncio.ensure_future(loop()) for _ in range(receivers)]
    try:
        async with asyncio.timeout(DEADLINE_S):
            await finished.wait()  # not the loops' end: the last receives wait for more
        took = time.perf_counter() - t0
    finally:
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
    await c.shutdown()
    return took


async def drain_pull(ns: str, topic: str, count: int, mode: str = "PULL") -> float:
    """Drain ``topic`` with one PushConsumer (``mode``: PULL, its default, or POP); seconds taken."""
    consumed = 0
    lock = threading.Lock()
    finished = asyncio.Event()
    loop = asyncio.get_running_loop()

    def listener(msgs: list, ctx: object) -> ConsumeStatus:
        nonlocal consumed
        with lock:
            consumed += len(msgs)
            if consumed >= count:
                loop.call_soon_threadsafe(finished.set)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(
        f"g_{topic}", ns, consume_from_where=FIRST, pull_batch_size=32, message_request_mode=mode
    )
    c.subscribe(topic, "*")
    c.register_listener(listener)
    t0 = time.perf_counter()
    await c.start()
    async with asyncio.timeout(DEADLINE_S):
        await finished.wait()
    took = time.perf_counter() - t0
    await c.shutdown()
    return took


async def one_run(
    ns: str, broker: Daemon, kind: str, n: int, args: argparse.Namespace
) -> tuple[float, float]:
    """One drain of a fresh backlog: (msgs/s, broker CPU µs per message)."""
    topic = f"BenchPop{kind.capitalize()}{n}"
    await backlog(ns, topic, args.messages, args.body_size)
    cpu0, mine0 = cpu_s(broker.pid), time.process_time()
    if kind == "pop":
        took = await drain_pop(ns, topic, args.messages, args.receivers)
    else:
        took = await drain_pull(ns, topic, args.messages, "POP" if kind == "push-pop" else "PULL")
    cpu_us = (cpu_s(broker.pid) - cpu0) * 1e6 / args.messages
    client_us = (time.process_time() - mine0) * 1e6 / args.messages
    rate = args.messages / took
    print(
        f"  {kind:8s} drain of {args.messages}: {rate:9,.0f} msgs/s, broker CPU {cpu_us:6.1f} us/msg "
        f"({cpu_us * rate / 1e4:3.0f}% of a core), client CPU {client_us:6.1f} us/msg "
        f"({client_us * rate / 1e4:3.0f}%)",
        flush=True,
    )
    return rate, cpu_us


async def bench_drain(ns: str, broker: Daemon, args: argparse.Namespace) -> None:
    results: dict[str, list[tuple[float, float]]] = {"pop": [], "pull": [], "push-pop": []}
    n = 0
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}/{args.rounds}", flush=True)
        for kind in [*abba(rnd, "pop", "pull"), "push-pop"]:
            n += 1
            results[kind].append(await one_run(ns, broker, kind, n, args))
    pop, pull = results["pop"], results["pull"]
    pop_rate = statistics.median(r for r, _ in pop)
    pull_rate = statistics.median(r for r, _ in pull)
    cpu_ratios = round_ratios([c for _, c in pop], [c for _, c in pull])
    ratio = statistics.median(cpu_ratios)
    print(
        f"SimpleConsumer receive+ack (batches of 32, {args.receivers} receivers): median "
        f"{pop_rate:,.0f} msgs/s (target >= 50,000); push consumer: median {pull_rate:,.0f} msgs/s pulling, "
        f"{statistics.median(r for r, _ in results['push-pop']):,.0f} msgs/s in POP mode"
    )
    print(
        f"broker CPU per consumed message: POP {statistics.median(c for _, c in pop):.1f} us, pull "
        f"{statistics.median(c for _, c in pull):.1f} us; POP/pull per round "
        f"{', '.join(f'{r:.2f}' for r in cpu_ratios)}, median {ratio:.2f} (target <= 1.20)"
    )


async def bench_revive(ns: str, args: argparse.Namespace) -> None:
    topic, group = f"BenchRevive{int(time.time())}", "g_bench_revive"
    await backlog(ns, topic, args.revive, args.body_size)
    c = SimpleConsumer(group, ns, subscriptions={topic: "*"}, await_duration=1, consume_from_where=FIRST)
    await c.start()
    popped, t0 = 0, time.monotonic()
    while popped < args.revive:
        popped += len(await c.receive(32, args.invisible))  # never acked
    last_pop = time.monotonic()
    await c.shutdown()
    print(
        f"revive: {args.revive} popped in {last_pop - t0:.1f} s with invisible time "
        f"{args.invisible} s, none acked",
        flush=True,
    )
    async with Admin(ns) as admin:
        retry = pop_retry_topic(group, topic)
        while True:
            rows = await admin.consumer_progress(group, topic)
            inflight = sum(r.get("inflight", 0) for r in rows)
            copies = 0
            if inflight == 0:
                copies = sum(r["max_offset"] for r in await admin.topic_status(retry))
            if inflight == 0 and copies >= args.revive:
                break
            if time.monotonic() - last_pop > args.invisible + 120:
                raise SystemExit(f"revive: still {inflight} in flight after {args.invisible + 120} s")
            await asyncio.sleep(0.1)
    done = time.monotonic()
    after = done - (last_pop + args.invisible)
    print(
        f"revive: all {args.revive} back in {retry} {done - last_pop:.1f} s after the last pop = "
        f"{after:.1f} s after its invisible time ended (target <= 5 s); "
        f"{done - t0 - args.invisible:.1f} s after the first pop's"
    )


async def main(ns: str, broker: Daemon, args: argparse.Namespace) -> None:
    if "drain" in args.only:
        await bench_drain(ns, broker, args)
    if "revive" in args.only:
        await bench_revive(ns, args)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000, help="backlog of one drain")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds of the drain")
    parser.add_argument(
        "--receivers", type=int, default=16, help="concurrent receive loops of the SimpleConsumer"
    )
    parser.add_argument("--body-size", type=int, default=1024)
    parser.add_argument("--revive", type=int, default=100_000, help="unacked messages to revive")
    parser.add_argument("--invisible", type=int, default=10, help="invisible time (s) of the revive phase")
    parser.add_argument("--only", nargs="+", default=["drain", "revive"], choices=["drain", "revive"])
    parsed = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-pop-") as tmp:
        namesrv = start_namesrv(Path(tmp))
        broker_daemon = start_broker(Path(tmp), namesrv.addr)
        try:
            asyncio.run(main(namesrv.addr, broker_daemon, parsed))
        finally:
            broker_daemon.terminate()
            namesrv.terminate()
