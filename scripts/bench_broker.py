#!/usr/bin/env python3
"""Broker benchmark over raw RPC (no SDK), with a NameServer and a Broker as subprocesses.

Measures, with 1 KiB bodies and ASYNC_FLUSH:
  * single sends (SEND_MESSAGE_V2) with 64 in flight on 1 connection, and on 4 connections;
  * batch sends (SEND_BATCH_MESSAGE) of 32 messages;
  * pulls of a backlog in batches of 32;
  * long-poll wake-up latency: from a send's ack to the answer of a pull held on that queue;
and, for reference, the bare-RPC ceiling of ``scripts/bench_rpc.py`` on the same machine.
Every phase is bounded by ``--seconds``. Targets (DESIGN): sends >= 40,000/s, batches >= 150,000
msgs/s, pulls >= 200,000 msgs/s, wake-up p99 <= 5 ms.

Usage:  .venv/bin/python scripts/bench_broker.py [--seconds 3] [--json] [--no-rpc]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_core  # noqa: E402

from rocketpy.message import Message  # noqa: E402
from rocketpy.protocol.codes import RequestCode  # noqa: E402
from rocketpy.record import encode_batch  # noqa: E402
from rocketpy.remoting.client import RemotingClient  # noqa: E402
from rocketpy.remoting.command import RemotingCommand  # noqa: E402
from tests.daemons import Daemon, start_broker, start_namesrv  # noqa: E402
from tests.integration.test_broker_util import pull_ext, send_ext  # noqa: E402

BODY = b"b" * 1024
QUEUES = 8
TIMEOUT_S = 10.0


def _send_cmd(topic: str, qid: int) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext=send_ext(topic, qid), body=BODY)


async def _ok(client: RemotingClient, addr: str, cmd: RemotingCommand) -> RemotingCommand:
    r = await client.invoke(addr, cmd, TIMEOUT_S)
    if r.code != 0:
        raise RuntimeError(f"request failed: {r.code} {r.remark}")
    return r


class CallWindow:
    """Keeps ``inflight`` requests in flight on one client with ``invoke_future`` until a deadline.

    Each completion checks the answer and sends the next request (callback-driven, no coroutine
    per request), so the bench client costs far less CPU per message than the broker.
    """

    def __init__(
        self, client: RemotingClient, addr: str, make: Callable[[int], RemotingCommand], per_call: int
    ) -> None:
        self.client, self.addr, self.make, self.per_call = client, addr, make, per_call
        self.count = 0
        self.outstanding = 0
        self.deadline = 0.0
        self.error: BaseException | None = None
        self.idle: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def run(self, seconds: float, inflight: int) -> None:
        """Run ``inflight`` call chains (chain n sends ``make(n)``) for ``seconds``; raise the first error."""
        self.deadline = time.perf_counter() + seconds
        for n in range(inflight):
            self._fire(n)
        await self.idle
        if self.error is not None:
            raise self.error

    def _fire(self, n: int) -> None:
        self.outstanding += 1
        fut = self.client.invoke_future(self.addr, self.make(n), TIMEOUT_S)
        fut.add_done_callback(lambda f: self._done(n, f))

    def _done(self, n: int, fut: asyncio.Future[RemotingCommand]) -> None:
        self.outstanding -= 1
        exc = fut.exception()
        if exc is None and fut.result().code != 0:
            exc = RuntimeError(f"request failed: {fut.result().code} {fut.result().remark}")
        if exc is not None:
            self.error = self.error or exc
        else:
            self.count += self.per_call
        if self.error is None and time.perf_counter() < self.deadline:
            self._fire(n)
        elif self.outstanding == 0 and not self.idle.done():
            self.idle.set_result(None)


async def bench_sends(
    addr: str, topic: str, seconds: float, connections: int, inflight: int
) -> tuple[float, int]:
    """Single sends, ``inflight`` in flight per connection; returns (msgs/s, msgs)."""
    clients = [RemotingClient() for _ in range(connections)]
    try:
        for c in clients:  # connect first
            await _ok(c, addr, _send_cmd(topic, 0))
        exts = [
            send_ext(topic, q) for q in range(QUEUES)
        ]  # built once: the broker does not see the difference

        def make(n: int) -> RemotingCommand:
            return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext=exts[n % QUEUES], body=BODY)

        windows = [CallWindow(c, addr, make, 1) for c in clients]
        t0 = time.perf_counter()
        await asyncio.gather(*(w.run(seconds, inflight) for w in windows))
        count = sum(w.count for w in windows)
        return count / (time.perf_counter() - t0), count
    finally:
        for c in clients:
            await c.close()


async def bench_batches(
    addr: str, topic: str, seconds: float, inflight: int, batch: int = 32
) -> tuple[float, int]:
    """Batch sends of ``batch`` messages, ``inflight`` batches in flight; returns (msgs/s, msgs)."""
    client = RemotingClient()
    body = encode_batch([Message(topic, BODY) for _ in range(batch)])
    exts = [{**send_ext(topic, q), "m": True} for q in range(QUEUES)]

    def make(n: int) -> RemotingCommand:
        return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext=exts[n % QUEUES], body=body)

    try:
        await _ok(client, addr, make(0))  # connect first
        window = CallWindow(client, addr, make, batch)
        t0 = time.perf_counter()
        await window.run(seconds, inflight)
        return window.count / (time.perf_counter() - t0), window.count
    finally:
        await client.close()


async def bench_pulls(
    addr: str, topic: str, seconds: float, per_queue: int | None = None
) -> tuple[float, int]:
    """Pull the topic's backlog in batches of 32, one puller per queue, each stopping after
    ``per_queue`` messages (None: the whole backlog or ``seconds``); returns (msgs/s, msgs)."""
    client = RemotingClient()
    count = 0
    deadline = time.perf_counter() + seconds

    async def puller(qid: int) -> None:
        nonlocal count
        offset = 0
        while time.perf_counter() < deadline and (per_queue is None or offset < per_queue):
            cmd = RemotingCommand.request(
                RequestCode.PULL_MESSAGE, ext=pull_ext("bench", topic, qid, offset, 32)
            )
            r = await client.invoke(addr, cmd, TIMEOUT_S)
            if r.code != 0:
                return  # backlog drained
            assert r.ext is not None
            count += r.ext["nextBeginOffset"] - offset
            offset = r.ext["nextBeginOffset"]

    try:
        await client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, ext={"topic": topic, "queueId": 0}), 5
        )
        t0 = time.perf_counter()
        await asyncio.gather(*(puller(q) for q in range(QUEUES)))
        return count / (time.perf_counter() - t0), count
    finally:
        await client.close()


async def bench_wakeup(addr: str, seconds: float, max_samples: int = 500) -> tuple[list[float], list[float]]:
    """Latencies (s) from a send's ack, and from its start, to the answer of a pull held on that queue."""
    client, sender = RemotingClient(), RemotingClient()
    topic = "BenchWake"
    samples: list[float] = []
    from_send: list[float] = []
    try:
        offset = (await _ok(sender, addr, _send_cmd(topic, 0))).ext["queueOffset"] + 1  # type: ignore[index]
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and len(samples) < max_samples:
            ext = pull_ext("wake", topic, 0, offset, 32, sys_flag=0x4 | 0x2, suspend_ms=5000)
            held = asyncio.ensure_future(
                client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext=ext), 10)
            )
            await _wait_held(sender, addr)
            t_send = time.perf_counter()
            await _ok(sender, addr, _send_cmd(topic, 0))
            t_ack = time.perf_counter()
            r = await held
            t_answer = time.perf_counter()
            samples.append(t_answer - t_ack)
            from_send.append(t_answer - t_send)
            assert r.code == 0 and r.ext is not None, r
            offset = r.ext["nextBeginOffset"]
        return samples, from_send
    finally:
        await client.close()
        await sender.close()


async def _wait_held(client: RemotingClient, addr: str) -> None:
    import msgpack

    for _ in range(500):
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        if int(msgpack.unpackb(r.body)["table"]["heldPulls"]) >= 1:
            return
    raise RuntimeError("the pull was never held")


def _pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000 if s else float("nan")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _phase(out: dict[str, Any], name: str, pid: int, run: Any) -> None:
    c0, own0 = cpu_s(pid), time.process_time()
    rate, count = await run
    out[name] = rate
    out[name + "_broker_cpu_us_per_msg"] = (cpu_s(pid) - c0) / max(count, 1) * 1e6
    out[name + "_client_cpu_us_per_msg"] = (time.process_time() - own0) / max(count, 1) * 1e6
    out[name + "_msgs"] = count


async def run_broker_phases(addr: str, pid: int, seconds: float) -> dict[str, Any]:
    """All broker phases against a running broker (process ``pid``); returns the figures."""
    client = RemotingClient()
    for topic in ("BenchSend", "BenchBatch", "BenchWake"):
        ext = {"topic": topic, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
        await _ok(client, addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext=ext))
    await client.close()
    out: dict[str, Any] = {}
    await _phase(out, "send_1conn_64inflight", pid, bench_sends(addr, "BenchSend", seconds, 1, 64))
    await _phase(out, "send_4conn_16inflight_each", pid, bench_sends(addr, "BenchSend", seconds, 4, 16))
    await _phase(out, "batch32_16inflight", pid, bench_batches(addr, "BenchBatch", seconds, 16))
    await _phase(out, "pull32_backlog", pid, bench_pulls(addr, "BenchBatch", seconds))
    samples, from_send = await bench_wakeup(addr, seconds)
    out["wakeup_p50_ms"], out["wakeup_p99_ms"], out["wakeup_n"] = (
        _pct(samples, 0.5),
        _pct(samples, 0.99),
        len(samples),
    )
    out["wakeup_from_send_p99_ms"] = _pct(from_send, 0.99)
    return out


def _start(workdir: Path) -> tuple[Daemon, Daemon]:
    ns = start_namesrv(workdir)
    broker = start_broker(
        workdir, ns.addr, flushDiskType="ASYNC_FLUSH", mappedFileSizeCommitLog=256 * 1024 * 1024
    )
    return ns, broker


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each timed phase (default 3)")
    parser.add_argument("--json", action="store_true", help="also print one JSON document")
    parser.add_argument("--no-rpc", action="store_true", help="skip the bare-RPC ceiling")
    bench_core.add_options(parser)
    args = parser.parse_args()
    bench_core.apply(args)
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as tmp:
        ns, broker = _start(Path(tmp))
        try:
            print(f"broker pid {broker.pid} at {broker.addr}", flush=True)
            figures = asyncio.Runner(loop_factory=uvloop.new_event_loop).run(
                run_broker_phases(broker.addr, broker.pid, args.seconds)
            )
        finally:
            broker.terminate()
            ns.terminate()
    if not args.no_rpc:
        import bench_rpc

        rpc = bench_rpc.measure_rpc(args.seconds, 64)
        figures["rpc_ceiling_rps_64inflight"] = rpc.pipelined_rps
    _print(figures)
    if args.json:
        print(json.dumps(figures))


def _print(f: dict[str, Any]) -> None:
    phases = [
        ("single sends, 1 connection, 64 in flight", "send_1conn_64inflight", ">= 40,000"),
        ("single sends, 4 connections x 16 in flight", "send_4conn_16inflight_each", ">= 40,000"),
        ("batch sends of 32, 16 in flight", "batch32_16inflight", ">= 150,000"),
        ("pull backlog in batches of 32", "pull32_backlog", ">= 200,000"),
    ]
    print(
        f"{'phase':48} {'msgs/s':>14} {'broker cpu us/msg':>18} {'= cpu-bound msgs/s':>19} "
        f"{'client cpu us/msg':>18}  target"
    )
    for name, key, target in phases:
        us = f[key + "_broker_cpu_us_per_msg"]
        client_us = f[key + "_client_cpu_us_per_msg"]
        print(
            f"{name:48} {f[key]:14,.0f} {us:18.2f} {1e6 / max(us, 1e-9):19,.0f} {client_us:18.2f}  {target}"
        )
    rows = [
        (f"long-poll wake-up p50 (n={f['wakeup_n']})", f["wakeup_p50_ms"], "ms", ""),
        ("long-poll wake-up p99", f["wakeup_p99_ms"], "ms", "<= 5"),
        ("long-poll send start -> held pull answered p99", f["wakeup_from_send_p99_ms"], "ms", ""),
    ]
    if "rpc_ceiling_rps_64inflight" in f:
        rows.append(
            ("bare RPC ceiling (bench_rpc, 64 in flight)", f["rpc_ceiling_rps_64inflight"], "req/s", "")
        )
    for name, value, unit, target in rows:
        print(f"{name:48} {value:14,.2f} {unit:7} {target}")
    print(f"(1 KiB bodies, ASYNC_FLUSH, {os.cpu_count()} cpus, client and broker on the same host)")


if __name__ == "__main__":
    main()
