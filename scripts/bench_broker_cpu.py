#!/usr/bin/env python3
"""Broker CPU per request, read from ``/proc``, with the load coming from separate client processes.

Starts a NameServer and a Broker (ASYNC_FLUSH) as subprocesses and, for the ceiling, the bare uvloop
echo server of ``bench_rpc.py``. Each phase runs ``--clients`` client processes, each with one
connection keeping ``--inflight`` pre-encoded request frames in flight (a raw pipelined client: it
counts replies and checks their response code, nothing more, so the client processes take as little
of the machine as possible). Once every client is connected and warmed up, the server's user +
system CPU is read from ``/proc/<pid>/stat``, each client sends ``--requests`` requests, and the CPU
is read again: the figure is that CPU divided by the requests answered.

Phases: single-message SEND_MESSAGE_V2 (1 KiB body, 8 queues); PULL_MESSAGE of 32 messages from a
backlog (no suspend); and the same send frames echoed by the bare uvloop server (the ceiling).
Targets (issue 31): <= 15 µs per send, <= 20 µs per pull of 32.

``--sync-master`` measures a SYNC_MASTER with a connected slave instead (every send is answered once
the slave holds it; the slave runs beside the clients when pinned).

``--pin`` gives the measured server (every thread of the broker, and the echo server) a CPU of its
own and keeps the client processes on the others (``pinning.py`` says why). Run both; the pinned
figure isolates what a change to the broker does.

Usage:  .venv/bin/python scripts/bench_broker_cpu.py [--requests 20000] [--clients 2] [--inflight 64]
        [--rounds 1] [--pin] [--json] [--pure]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_core  # noqa: E402
import bench_ha  # noqa: E402
import bench_rpc  # noqa: E402
import pinning  # noqa: E402

from rocketpy import Admin  # noqa: E402
from rocketpy.message import Message  # noqa: E402
from rocketpy.protocol.codes import RequestCode  # noqa: E402
from rocketpy.record import encode_batch  # noqa: E402
from rocketpy.remoting.client import RemotingClient  # noqa: E402
from rocketpy.remoting.codec import encode_frame_bytes  # noqa: E402
from rocketpy.remoting.command import RemotingCommand  # noqa: E402
from tests.daemons import start_broker, start_namesrv  # noqa: E402
from tests.integration.test_broker_util import pull_ext, send_ext  # noqa: E402

BODY = b"b" * 1024
QUEUES = 8
PULL_BATCH = 32
BACKLOG_PER_QUEUE = 1024  # pulls cycle over this backlog
SEND_TOPIC, PULL_TOPIC = "CpuSend", "CpuPull"
_PREFIX = struct.Struct(">I")
_HEADER_AT = 8  # the msgpack header starts after u32 length | u8 type | u24 header length


def proc_cpu_s(pid: int) -> tuple[float, float]:
    """User and system CPU seconds used so far by process ``pid`` (all its threads; Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def send_frames() -> list[bytes]:
    """One SEND_MESSAGE_V2 frame per queue (opaques are reused: the broker only echoes them)."""
    return [
        encode_frame_bytes(
            RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext=send_ext(SEND_TOPIC, q), body=BODY)
        )
        for q in range(QUEUES)
    ]


def pull_frames() -> list[bytes]:
    """PULL_MESSAGE frames of 32 messages over every queue's backlog (no suspend: answered at once)."""
    return [
        encode_frame_bytes(
            RemotingCommand.request(
                RequestCode.PULL_MESSAGE, ext=pull_ext("cpu", PULL_TOPIC, q, offset, PULL_BATCH)
            )
        )
        for offset in range(0, BACKLOG_PER_QUEUE, PULL_BATCH)
        for q in range(QUEUES)
    ]


class _Pipeline(asyncio.Protocol):
    """Keeps ``inflight`` frames in flight; sends the next frame for each reply until ``total``."""

    def __init__(self, frames: list[bytes], inflight: int, check: bool) -> None:
        self.frames, self.inflight, self.check = frames, inflight, check
        self.buf = bytearray()
        self.sent = self.replies = self.total = 0
        self.bad = 0
        self.done: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def run(self, total: int) -> asyncio.Future[None]:
        self.total, self.sent, self.replies = total, 0, 0
        self.done = asyncio.get_running_loop().create_future()
        self._send(min(self.inflight, total))
        return self.done

    def _send(self, n: int) -> None:
        frames, k = self.frames, len(self.frames)
        self.transport.writelines([frames[(self.sent + i) % k] for i in range(n)])
        self.sent += n

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end, replies = 0, len(buf), 0
        while end - pos >= _HEADER_AT + 2:
            frame_end = pos + 4 + _PREFIX.unpack_from(buf, pos)[0]
            if frame_end > end:
                break
            # a msgpack header [code, ...]: 0x95 then the code, 0x00 for SUCCESS
            if self.check and buf[pos + _HEADER_AT + 1] != 0:
                self.bad += 1
            pos = frame_end
            replies += 1
        del buf[:pos]
        self.replies += replies
        more = min(replies, self.total - self.sent)
        if more > 0:
            self._send(more)
        if self.replies >= self.total and self.done is not None and not self.done.done():
            self.done.set_result(None)


def _client(addr: str, kind: str, requests: int, inflight: int, ready: Any, go: Any, out: Any) -> None:
    async def main() -> None:
        frames = send_frames() if kind in ("send", "echo") else pull_frames()
        host, port = addr.rsplit(":", 1)
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(
            lambda: _Pipeline(frames, inflight, kind != "echo"), host, int(port)
        )
        await proto.run(max(requests // 10, inflight))  # warm-up
        ready.set()
        await loop.run_in_executor(None, go.wait)
        t0 = time.perf_counter()
        await proto.run(requests)
        out.put((proto.replies, proto.bad, time.perf_counter() - t0))

    asyncio.Runner(loop_factory=uvloop.new_event_loop).run(main())


def measure(pid: int, addr: str, kind: str, requests: int, clients: int, inflight: int) -> dict[str, float]:
    """Run one phase from ``clients`` processes against the server ``pid`` at ``addr`` (the client
    processes inherit this process's CPUs)."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(clients)]
    procs = [ctx.Process(target=_client, args=(addr, kind, requests, inflight, r, go, out)) for r in readies]
    for p in procs:
        p.start()
    for r in readies:
        if not r.wait(60):
            raise RuntimeError(f"{kind} client did not warm up")
    c0 = proc_cpu_s(pid)
    go.set()
    results = [out.get(timeout=300) for _ in procs]
    c1 = proc_cpu_s(pid)
    for p in procs:
        p.join()
    answered = sum(r[0] for r in results)
    bad = sum(r[1] for r in results)
    if bad:
        raise RuntimeError(f"{kind}: {bad} of {answered} answers were not SUCCESS")
    wall = max(r[2] for r in results)
    user_us, sys_us = ((b - a) / answered * 1e6 for a, b in zip(c0, c1, strict=True))
    return {"cpu_us": user_us + sys_us, "sys_us": sys_us, "rps": answered / wall}


async def _prepare(addr: str) -> None:
    client = RemotingClient()
    try:
        for topic in (SEND_TOPIC, PULL_TOPIC):
            ext = {"topic": topic, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
            r = await client.invoke(
                addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext=ext), 10
            )
            assert r.code == 0, r
        body = encode_batch([Message(PULL_TOPIC, BODY) for _ in range(64)])
        for q in range(QUEUES):
            for _ in range(BACKLOG_PER_QUEUE // 64):
                ext = {**send_ext(PULL_TOPIC, q), "m": True}
                cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext=ext, body=body)
                r = await client.invoke(addr, cmd, 10)
                assert r.code == 0, r
    finally:
        await client.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every phase ``args.rounds`` times; returns the median figures."""
    figures: dict[str, list[float]] = {}

    def note(name: str, m: dict[str, float]) -> None:
        figures.setdefault(name + "_cpu_us", []).append(m["cpu_us"])
        figures.setdefault(name + "_sys_us", []).append(m["sys_us"])
        figures.setdefault(name + "_rps", []).append(m["rps"])

    with tempfile.TemporaryDirectory(prefix="bench-broker-cpu-") as tmp:
        ns = start_namesrv(Path(tmp))
        props: dict[str, Any] = {"flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": 256 << 20}
        slave = None
        if args.sync_master:
            props.update(brokerName="bench-sync", haSendHeartbeatInterval=1000)
        role = {"brokerRole": "SYNC_MASTER"} if args.sync_master else {}
        broker = start_broker(Path(tmp), ns.addr, **props, **role)
        if args.sync_master:
            slave = start_broker(Path(tmp), ns.addr, brokerId=1, brokerRole="SLAVE", **props)
        try:
            runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
            if slave is not None:
                runner.run(_wait_slave(ns.addr, broker.addr))
            runner.run(_prepare(broker.addr))
            with bench_rpc.serve_subprocess("echo") as (echo_addr, echo_pid):
                if args.pin:
                    server_cpu, others = args.pin
                    for pid in (broker.pid, echo_pid):
                        pinning.pin_process(pid, {server_cpu})
                    if slave is not None:
                        pinning.pin_process(slave.pid, others)
                    os.sched_setaffinity(0, others)  # the client processes start from here
                for _ in range(args.rounds):
                    if "send" in args.phases:
                        note(
                            "send",
                            measure(
                                broker.pid, broker.addr, "send", args.requests, args.clients, args.inflight
                            ),
                        )
                    if "pull" in args.phases:
                        note(
                            "pull32",
                            measure(
                                broker.pid,
                                broker.addr,
                                "pull",
                                args.requests // 4,
                                args.clients,
                                args.inflight,
                            ),
                        )
                    if "echo" in args.phases:
                        note(
                            "echo",
                            measure(echo_pid, echo_addr, "echo", args.requests, args.clients, args.inflight),
                        )
        finally:
            if slave is not None:
                slave.terminate()
            broker.terminate()
            ns.terminate()
    return {k: statistics.median(v) for k, v in figures.items()}


async def _wait_slave(namesrv: str, master: str) -> None:
    async with Admin(namesrv) as admin:
        await bench_ha.wait_connected(admin, master)


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--requests", type=int, default=20_000, help="send requests per client (pulls: a quarter)"
    )
    parser.add_argument("--clients", type=int, default=2, help="client processes (default 2)")
    parser.add_argument("--inflight", type=int, default=64, help="requests in flight per client (default 64)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the phases; print medians")
    parser.add_argument("--phases", default="send,pull,echo", help="which phases to run (default all)")
    parser.add_argument(
        "--pin", action="store_true", help="the server on a CPU of its own, the clients on the others"
    )
    parser.add_argument(
        "--sync-master", action="store_true", help="a SYNC_MASTER with a connected slave (sends wait for it)"
    )
    parser.add_argument("--json", action="store_true", help="also print one JSON document")
    bench_core.add_options(parser)
    args = parser.parse_args()
    bench_core.apply(args)
    if args.pin:
        args.pin = pinning.split_cpus()
        if args.pin is None:
            parser.error("--pin needs at least 2 CPUs")
    f = run(args)
    print(f"{'phase':40} {'server cpu us/request':>22} {'of it system':>13} {'requests/s':>12}  target")
    for name, key, target in (
        ("SEND_MESSAGE_V2, 1 message of 1 KiB", "send", "<= 15"),
        ("PULL_MESSAGE of 32", "pull32", "<= 20"),
        ("bare uvloop echo of the send frame", "echo", "ceiling"),
    ):
        if key + "_cpu_us" not in f:
            continue
        cpu, system, rps = f[key + "_cpu_us"], f[key + "_sys_us"], f[key + "_rps"]
        print(f"{name:40} {cpu:22.2f} {system:13.2f} {rps:12,.0f}  {target}")
    if args.sync_master:
        print("(the broker is a SYNC_MASTER with a connected slave: every send waits for its bytes there)")
    where = f"server on cpu {args.pin[0]}, clients on cpus {sorted(args.pin[1])}" if args.pin else "unpinned"
    print(f"({args.clients} client processes x {args.inflight} in flight, {os.cpu_count()} cpus, {where})")
    if args.json:
        print(json.dumps(f))


if __name__ == "__main__":
    main()
