#!/usr/bin/env python3
"""RPC benchmark: rocketpy's remoting layer against a bare uvloop echo of the same frames.

Measures, for a no-op request code over ONE connection to a server in another process:
  * pipelined round trips per second with ``--inflight`` requests in flight;
  * sequential round-trip time p50 / p99 (one request at a time).
The ceiling is a bare uvloop echo server returning the same frame bytes, driven by a minimal client
that still splits the byte stream into frames to count replies. Both servers are started as
subprocesses listening on 127.0.0.1 port 0; their port is read from their first stdout line.

Usage:  .venv/bin/python scripts/bench_rpc.py [--seconds 3] [--inflight 64] [--json]

Reusable from other benchmarks (``sys.path.insert(0, "scripts"); import bench_rpc``):
``measure_echo_ceiling(seconds, inflight)`` and ``measure_rpc(seconds, inflight)`` return a
``BenchResult``; ``serve_subprocess(mode)`` starts a server process and yields its address.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import uvloop

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import bench_core

from rocketpy.remoting import RemotingClient, RemotingCommand, RemotingServer
from rocketpy.remoting.codec import encode_frame_bytes

NOOP_CODE = 9999
_PREFIX = struct.Struct(">I")
_BOOT_TIMEOUT_S = 20.0


@dataclass
class BenchResult:
    """What one side of the comparison measured.

    Attributes:
        name: "rpc" or "echo".
        pipelined_rps: completed round trips per second with ``inflight`` in flight.
        inflight: requests kept in flight during the pipelined run.
        seq_p50_us: median sequential round trip, microseconds.
        seq_p99_us: 99th percentile sequential round trip, microseconds.
        seq_count: sequential samples taken.
        pipelined_cpu_us: client + server CPU time per pipelined round trip, microseconds (less
            sensitive than rps to other load on the machine).
    """

    name: str
    pipelined_rps: float
    inflight: int
    seq_p50_us: float
    seq_p99_us: float
    seq_count: int
    pipelined_cpu_us: float


@dataclass
class _Window:
    """One timed pipelined run: replies counted, wall time, CPU of both processes."""

    count: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0


def _proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux /proc; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _timed_window(seconds: float, server_pid: int, counter: Callable[[], int]) -> _Window:
    """Warm up, then measure ``counter()``'s growth, wall and CPU time over ``seconds``."""
    await asyncio.sleep(min(0.5, seconds / 4))  # warm-up: the bench's own timing, not synchronization
    start_count, start_wall = counter(), time.perf_counter()
    start_cpu = time.process_time() + _proc_cpu_s(server_pid)
    await asyncio.sleep(seconds)
    return _Window(
        counter() - start_count,
        time.perf_counter() - start_wall,
        time.process_time() + _proc_cpu_s(server_pid) - start_cpu,
    )


def request_frame() -> bytes:
    """The no-op request frame both sides send (the echo returns it unchanged)."""
    return encode_frame_bytes(RemotingCommand(NOOP_CODE, opaque=1))


# -- servers (child processes) -------------------------------------------------------------------


class _EchoProtocol(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)  # type: ignore[attr-defined]


async def _serve(mode: str) -> None:
    loop = asyncio.get_running_loop()
    if mode == "echo":
        server = await loop.create_server(_EchoProtocol, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
    else:
        rpc = RemotingServer("127.0.0.1", 0, name="bench")
        rpc.register_processor(NOOP_CODE, lambda ch, req: RemotingCommand.response(req))
        _, port = await rpc.start()
    print(f"listening 127.0.0.1:{port}", flush=True)
    stdin_closed: asyncio.Future[None] = loop.create_future()

    def on_stdin() -> None:
        if not stdin_closed.done():
            stdin_closed.set_result(None)

    loop.add_reader(sys.stdin.fileno(), on_stdin)
    await stdin_closed  # the parent closes our stdin to stop us


@contextlib.contextmanager
def serve_subprocess(mode: str) -> Iterator[tuple[str, int]]:
    """Run a bench server ("rpc" or "echo") in a child process; yield ("127.0.0.1:port", pid)."""
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve", mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the child prints it once it listens
        if not line.startswith("listening "):
            raise RuntimeError(f"bench {mode} server did not start (exit code {proc.poll()}): {line!r}")
        yield line.split()[1], proc.pid
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- echo client (the ceiling) --------------------------------------------------------------------


class _EchoClient(asyncio.Protocol):
    """Keeps ``inflight`` frames in flight; splits replies into frames; sends one per reply."""

    def __init__(self, frame: bytes, inflight: int, on_reply: Callable[[], None]) -> None:
        self.frame = frame
        self.inflight = inflight
        self.on_reply = on_reply
        self.buf = bytearray()
        self.running = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self.transport.write(self.frame * self.inflight)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end, replies = 0, len(buf), 0
        while end - pos >= 4:
            frame_end = pos + 4 + _PREFIX.unpack_from(buf, pos)[0]
            if frame_end > end:
                break
            pos = frame_end
            replies += 1
        del buf[:pos]
        for _ in range(replies):
            self.on_reply()
        if replies and self.running:
            self.transport.write(self.frame * replies)


async def _echo_pipelined(addr: str, seconds: float, inflight: int, frame: bytes, server_pid: int) -> _Window:
    loop = asyncio.get_running_loop()
    host, port = addr.rsplit(":", 1)
    count = 0

    def on_reply() -> None:
        nonlocal count
        count += 1

    transport, proto = await loop.create_connection(
        lambda: _EchoClient(frame, inflight, on_reply), host, int(port)
    )
    proto.start()
    window = await _timed_window(seconds, server_pid, lambda: count)
    proto.running = False
    transport.close()
    return window


async def _echo_sequential(addr: str, seconds: float, frame: bytes) -> list[float]:
    loop = asyncio.get_running_loop()
    host, port = addr.rsplit(":", 1)
    samples: list[float] = []
    done = loop.create_future()
    deadline = time.perf_counter() + seconds
    sent_at = 0.0

    def on_reply() -> None:
        nonlocal sent_at
        now = time.perf_counter()
        samples.append(now - sent_at)
        if now >= deadline:
            proto.running = False
            if not done.done():
                done.set_result(None)
        sent_at = now

    transport, proto = await loop.create_connection(lambda: _EchoClient(frame, 1, on_reply), host, int(port))
    sent_at = time.perf_counter()
    proto.start()
    await done
    transport.close()
    return samples


# -- rpc client -----------------------------------------------------------------------------------


class _Window64:
    """Keeps ``inflight`` calls in flight with ``invoke_future``; each completion sends the next.

    Callback-driven like the echo client, so the client's own cost stays small next to the
    server's (no coroutine per request).
    """

    def __init__(self, client: RemotingClient, addr: str, inflight: int) -> None:
        self.client, self.addr, self.inflight = client, addr, inflight
        self.count = 0
        self.outstanding = 0
        self.running = True
        self.idle: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def start(self) -> None:
        for _ in range(self.inflight):
            self._fire()

    def _fire(self) -> None:
        self.outstanding += 1
        fut = self.client.invoke_future(self.addr, RemotingCommand.request(NOOP_CODE), 5.0)
        fut.add_done_callback(self._done)

    def _done(self, fut: asyncio.Future[RemotingCommand]) -> None:
        self.outstanding -= 1
        if fut.result().code != 0:
            raise RuntimeError(f"no-op failed: {fut.result()!r}")
        self.count += 1
        if self.running:
            self._fire()
        elif self.outstanding == 0 and not self.idle.done():
            self.idle.set_result(None)

    async def stop(self) -> None:
        self.running = False
        if self.outstanding:
            await self.idle


async def _rpc_pipelined(addr: str, seconds: float, inflight: int, server_pid: int) -> _Window:
    client = RemotingClient()
    await client.invoke(addr, RemotingCommand.request(NOOP_CODE), 5.0)  # connect first
    window64 = _Window64(client, addr, inflight)
    window64.start()
    window = await _timed_window(seconds, server_pid, lambda: window64.count)
    await window64.stop()
    await client.close()
    return window


async def _rpc_sequential(addr: str, seconds: float) -> list[float]:
    client = RemotingClient()
    await client.invoke(addr, RemotingCommand.request(NOOP_CODE), 5.0)
    samples: list[float] = []
    deadline = time.perf_counter() + seconds
    while True:
        start = time.perf_counter()
        await client.invoke_future(addr, RemotingCommand.request(NOOP_CODE), 5.0)
        now = time.perf_counter()
        samples.append(now - start)
        if now >= deadline:
            break
    await client.close()
    return samples


def _percentile_us(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6


def _result(name: str, window: _Window, inflight: int, samples: list[float]) -> BenchResult:
    return BenchResult(
        name,
        window.count / window.wall_s,
        inflight,
        _percentile_us(samples, 0.50),
        _percentile_us(samples, 0.99),
        len(samples),
        window.cpu_s / max(window.count, 1) * 1e6,
    )


def measure_echo_ceiling(seconds: float = 3.0, inflight: int = 64) -> BenchResult:
    """Run the bare uvloop echo ceiling (server in a child process) and return its numbers."""
    frame = request_frame()
    with (
        serve_subprocess("echo") as (addr, pid),
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        window = runner.run(_echo_pipelined(addr, seconds, inflight, frame, pid))
        samples = runner.run(_echo_sequential(addr, seconds, frame))
    return _result("echo", window, inflight, samples)


def measure_echo_sequential_p50_us(seconds: float = 1.0, frame: bytes | None = None) -> float:
    """The bare uvloop echo's sequential round trip p50 (microseconds) for ``frame`` (default the
    no-op request): the ceiling other benchmarks print beside their own sequential round trips."""
    with (
        serve_subprocess("echo") as (addr, _pid),
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        samples = runner.run(_echo_sequential(addr, seconds, frame or request_frame()))
    return _percentile_us(samples, 0.50)


def measure_rpc(seconds: float = 3.0, inflight: int = 64) -> BenchResult:
    """Run RemotingClient against a RemotingServer (in a child process) and return its numbers."""
    with serve_subprocess("rpc") as (addr, pid), asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        window = runner.run(_rpc_pipelined(addr, seconds, inflight, pid))
        samples = runner.run(_rpc_sequential(addr, seconds))
    return _result("rpc", window, inflight, samples)


def _report(rpc: BenchResult, echo: BenchResult) -> dict[str, float]:
    ratio = {
        "pipelined_ratio": rpc.pipelined_rps / echo.pipelined_rps,
        "seq_p50_ratio": rpc.seq_p50_us / echo.seq_p50_us,
        "seq_p99_ratio": rpc.seq_p99_us / echo.seq_p99_us,
    }
    print(
        f"{'':6} {'pipelined rps':>14} {'cpu us/rt':>10} {'seq p50 us':>11} {'seq p99 us':>11} {'seq n':>8}"
    )
    for r in (rpc, echo):
        print(
            f"{r.name:6} {r.pipelined_rps:14,.0f} {r.pipelined_cpu_us:10.2f} {r.seq_p50_us:11.1f} "
            f"{r.seq_p99_us:11.1f} {r.seq_count:8,}"
        )
    print(
        f"rpc/echo: pipelined {ratio['pipelined_ratio']:.0%} (target >= 60%), "
        f"seq p50 {ratio['seq_p50_ratio']:.2f}x, seq p99 {ratio['seq_p99_ratio']:.2f}x (target <= 2x); "
        f"{rpc.inflight} in flight, one connection"
    )
    return ratio


def main() -> None:
    """Command-line entry: run both measurements and print the comparison."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each timed run (default 3)")
    parser.add_argument("--inflight", type=int, default=64, help="requests in flight when pipelining (64)")
    parser.add_argument("--json", action="store_true", help="also print one JSON document")
    parser.add_argument("--serve", choices=["rpc", "echo"], help=argparse.SUPPRESS)
    bench_core.add_options(parser)
    args = parser.parse_args()
    if args.serve:
        asyncio.Runner(loop_factory=uvloop.new_event_loop).run(_serve(args.serve))
        return
    bench_core.apply(args)
    if args.seconds <= 0 or args.inflight <= 0:
        parser.error("--seconds and --inflight must be positive")
    rpc = measure_rpc(args.seconds, args.inflight)
    echo = measure_echo_ceiling(args.seconds, args.inflight)
    ratio = _report(rpc, echo)
    if args.json:
        print(json.dumps({"rpc": asdict(rpc), "echo": asdict(echo), **ratio}))


if __name__ == "__main__":
    main()
