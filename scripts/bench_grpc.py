#!/usr/bin/env python3
"""gRPC endpoint benchmark: SendMessage and ReceiveMessage+AckMessage beside the SDK over remoting.

Starts a NameServer and two idle brokers (one with the gRPC endpoint, one with
``grpcServerPort=-1``) and reports, in one run:

* the idle RSS of each broker after a settle time (target: the endpoint adds <= 30 MiB);
* **send**: SendMessage throughput, 1 KiB bodies, ``--inflight`` calls in flight from a ``grpc.aio``
  load generator in its own process (``--entries`` messages per request, 1 by default), beside the
  SDK's remoting send rate (``rocketpy bench producer``, same in-flight count, auto-batch as the SDK
  defaults) against the same broker, in ABBA order over ``--rounds`` (target: gRPC >= 50 %);
  with ``--baseline REV``, a third broker runs the source tree of git revision REV (``git
  archive`` plus this tree's compiled modules) and takes the same gRPC load in the same rounds:
  before (REV) and after (this tree) side by side;
* **receive**: each run fills a fresh backlog of ``--messages`` and drains it with
  ``--receivers`` loops of receive(32) + ack of the batch: the SDK's SimpleConsumer over
  remoting (RECEIVE and BATCH_ACK_MESSAGE) and the load generator's ReceiveMessage + AckMessage
  (one entry per message, as the official clients' batch acks), ABBA (target: gRPC >= 50 %);
* CPU per message of the broker and of each load generator (from /proc), which says where the
  time goes on a 2-core machine where client and broker share the cores;
* **floor**: grpcio's own cost, in the same run: the same send load and receive+ack loops against
  a ``grpc.aio`` server with the broker's server options whose handlers only decode the request
  and answer (SendMessage: one OK entry per message; ReceiveMessage: the broker's stream shape with
  a 1 KiB message built once; AckMessage: OK), on uvloop and on asyncio's own loop, ABBA. Its
  server CPU per message is what any servicer on ``grpc.aio`` pays before doing any work.

``--baseline-tree DIR`` runs the baseline broker from a checkout with its own built modules (as
``--baseline``, both gRPC send and receive are measured on it between the runs of this tree).

Usage:  .venv/bin/python scripts/bench_grpc.py [--seconds 10] [--inflight 64] [--rounds 2]
            [--entries 1] [--messages 20000] [--receivers 16] [--baseline REV | --baseline-tree DIR]
            [--only send receive floor]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_abba import abba  # noqa: E402
from bench_pop import drain_pop  # noqa: E402

from rocketpy import Admin, Message, Producer, testing  # noqa: E402
from tests.daemons import Daemon, start_broker, start_namesrv  # noqa: E402

_COMPLETE = re.compile(r"\[Complete\] Send Total: (\d+) \| Send TPS: (\d+)")
TOPIC = "GrpcBench"
BEFORE_TOPIC = "GrpcBenchBefore"
SETTLE_S = 5.0
RSS_TARGET_MIB = 30.0
RATIO_TARGET = 0.5
SERVICE = "/apache.rocketmq.v2.MessagingService/"


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the load generator (its own process) -------------------------------------------------------


def _metadata() -> list[tuple[str, str]]:
    return [
        ("x-mq-client-id", f"bench@{os.getpid()}"),
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "GRPC_V2"),
    ]


async def generate(
    addr: str, topic: str, seconds: float, inflight: int, entries: int, body_size: int
) -> dict[str, Any]:
    """SendMessage calls, ``inflight`` at a time, for ``seconds``; messages sent and CPU used."""
    import grpc

    from rocketpy.grpc_api.v2 import definition_pb2 as pb
    from rocketpy.grpc_api.v2 import service_pb2 as spb

    body = os.urandom(body_size)
    md = _metadata()

    def request() -> bytes:
        msgs = []
        for _ in range(entries):
            m = pb.Message(topic=pb.Resource(name=topic), body=body)
            m.system_properties.message_id = uuid.uuid4().hex.upper()
            m.system_properties.message_type = pb.NORMAL
            msgs.append(m)
        return spb.SendMessageRequest(messages=msgs).SerializeToString()

    async with grpc.aio.insecure_channel(addr) as channel:
        send = channel.unary_unary(
            SERVICE + "SendMessage", response_deserializer=spb.SendMessageResponse.FromString
        )
        await send(request(), metadata=md, timeout=10)  # warm the connection
        sent = failed = 0
        end = time.monotonic() + seconds
        cpu0, started = time.process_time(), time.monotonic()

        async def worker() -> None:
            nonlocal sent, failed
            while time.monotonic() < end:
                resp = await send(request(), metadata=md, timeout=10)
                if resp.status.code == pb.Code.OK:
                    sent += entries
                else:
                    failed += entries

        await asyncio.gather(*(worker() for _ in range(inflight)))
        elapsed = time.monotonic() - started
        return {"sent": sent, "failed": failed, "seconds": elapsed, "cpu": time.process_time() - cpu0}


async def drain(addr: str, topic: str, count: int, receivers: int) -> dict[str, Any]:
    """``receivers`` loops of ReceiveMessage(32) + AckMessage of the batch until ``count`` came."""
    import grpc

    from rocketpy.grpc_api.v2 import definition_pb2 as pb
    from rocketpy.grpc_api.v2 import service_pb2 as spb

    md = _metadata()
    group, topic_res = pb.Resource(name=f"g_{topic}"), pb.Resource(name=topic)
    req = spb.ReceiveMessageRequest(
        group=group, message_queue=pb.MessageQueue(topic=topic_res), batch_size=32
    )
    req.invisible_duration.FromSeconds(60)
    req.long_polling_timeout.FromSeconds(5)
    got, finished = 0, asyncio.Event()
    async with grpc.aio.insecure_channel(addr) as channel:
        receive = channel.unary_stream(
            SERVICE + "ReceiveMessage", request_serializer=spb.ReceiveMessageRequest.SerializeToString,
            response_deserializer=spb.ReceiveMessageResponse.FromString,
        )  # fmt: skip
        ack = channel.unary_unary(
            SERVICE + "AckMessage", request_serializer=spb.AckMessageRequest.SerializeToString,
            response_deserializer=spb.AckMessageResponse.FromString,
        )  # fmt: skip

        async def loop() -> None:
            nonlocal got
            while True:
                entries = [
                    spb.AckMessageEntry(message_id=r.message.system_properties.message_id,
                                        receipt_handle=r.message.system_properties.receipt_handle)
                    async for r in receive(req, metadata=md, timeout=30) if r.HasField("message")
                ]  # fmt: skip
                if entries:
                    answer = await ack(spb.AckMessageRequest(group=group, topic=topic_res, entries=entries),
                                       metadata=md, timeout=10)  # fmt: skip
                    if answer.status.code != pb.Code.OK:
                        raise RuntimeError(f"AckMessage answered {answer.status}")
                    got += len(entries)
                    if got >= count:
                        finished.set()

        cpu0, t0 = time.process_time(), time.perf_counter()
        loops = [asyncio.ensure_future(loop()) for _ in range(receivers)]
        done = asyncio.ensure_future(finished.wait())  # not the loops' end: the last receives wait
        try:
            await asyncio.wait([done, *loops], timeout=600, return_when=asyncio.FIRST_COMPLETED)
            took = time.perf_counter() - t0
            failed = [t for t in loops if t.done() and t.exception() is not None]
            if failed:
                raise RuntimeError(f"a receive loop failed after {got} messages") from failed[0].exception()
            if not finished.is_set():
                raise TimeoutError(f"{got} of {count} messages received in 600 s")
        finally:
            for task in [done, *loops]:
                task.cancel()
            await asyncio.gather(done, *loops, return_exceptions=True)
        return {"received": got, "seconds": took, "cpu": time.process_time() - cpu0}


# -- grpcio's floor: a servicer that does nothing --------------------------------------------------


async def echo_server(loop_kind: str) -> None:
    """A ``grpc.aio`` server with the broker's server options whose SendMessage decodes the request
    and answers one OK entry: grpcio's own cost of a call of this size, with no broker behind it.
    Prints its port, then serves until stdin closes."""
    import grpc

    from rocketpy.broker.grpc.server import server_options
    from rocketpy.config import BrokerConfig
    from rocketpy.grpc_api.v2 import definition_pb2 as pb
    from rocketpy.grpc_api.v2 import service_pb2 as spb

    async def send(request: Any, context: Any) -> Any:
        response = spb.SendMessageResponse()
        response.status.code = pb.Code.OK
        for msg in request.messages:
            entry = response.entries.add(message_id=msg.system_properties.message_id, offset=1)
            entry.status.code = pb.Code.OK
        return response

    # ReceiveMessage: the broker's stream shape (status, one entry per message, delivery time)
    # with 1 KiB messages built once; AckMessage: OK
    entry = spb.ReceiveMessageResponse()
    entry.message.topic.name = TOPIC
    entry.message.body = b"x" * 1024
    entry.message.system_properties.message_id = uuid.uuid4().hex.upper()
    entry.message.system_properties.receipt_handle = "h" * 120
    first = spb.ReceiveMessageResponse()
    first.status.code = pb.Code.OK
    last = spb.ReceiveMessageResponse()
    last.delivery_timestamp.GetCurrentTime()

    async def receive(request: Any, context: Any) -> None:
        await context.write(first)
        for _ in range(request.batch_size):
            await context.write(entry)
        await context.write(last)

    async def ack(request: Any, context: Any) -> Any:
        response = spb.AckMessageResponse()
        response.status.code = pb.Code.OK
        for e in request.entries:
            added = response.entries.add(message_id=e.message_id, receipt_handle=e.receipt_handle)
            added.status.code = pb.Code.OK
        return response

    def unary(fn: Any, req: Any, resp: Any) -> Any:
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString
        )

    table = {
        "SendMessage": unary(send, spb.SendMessageRequest, spb.SendMessageResponse),
        "AckMessage": unary(ack, spb.AckMessageRequest, spb.AckMessageResponse),
        "ReceiveMessage": grpc.unary_stream_rpc_method_handler(
            receive, request_deserializer=spb.ReceiveMessageRequest.FromString,
            response_serializer=spb.ReceiveMessageResponse.SerializeToString,
        ),
    }  # fmt: skip
    server = grpc.aio.server(options=server_options(BrokerConfig()))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("apache.rocketmq.v2.MessagingService", table),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(0)


def floor_rounds(a: argparse.Namespace) -> list[dict[str, Any]]:
    """The send generator and the receive+ack loops against the echo server on uvloop and on
    asyncio's own loop, ABBA."""
    servers = {}
    for kind in ("uvloop", "asyncio"):
        proc = subprocess.Popen([sys.executable, __file__, "--echo-server", kind], cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stdout is not None
        servers[kind] = (proc, int(proc.stdout.readline()))
    rounds: list[dict[str, Any]] = []
    try:
        for _, port in servers.values():
            run_grpc(f"127.0.0.1:{port}", TOPIC, a, seconds=2.0)  # warm-up
        for i in range(a.rounds):
            row: dict[str, Any] = {}
            for kind in abba(i, "uvloop", "asyncio"):
                proc, port = servers[kind]
                result = measured(proc.pid, lambda p=port: run_grpc(f"127.0.0.1:{p}", TOPIC, a), "sent")
                row.setdefault(kind, []).append(result)
                args = [f"127.0.0.1:{port}", "--receive", TOPIC, "--messages", str(a.messages),
                        "--receivers", str(a.receivers)]  # fmt: skip
                got = measured(proc.pid, lambda x=args: run_generator(x, 900), "received")
                got["rate"] = got["received"] / got["seconds"]
                row.setdefault(f"{kind} receive", []).append(got)
            rounds.append(row)
    finally:
        for proc, _ in servers.values():
            proc.communicate("", timeout=10)
    return rounds


# -- the runs -----------------------------------------------------------------------------------


def run_generator(args: list[str], timeout_s: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--generator", *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise SystemExit(f"gRPC load generator failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run_grpc(
    grpc_addr: str, topic: str, a: argparse.Namespace, seconds: float | None = None
) -> dict[str, Any]:
    secs = a.seconds if seconds is None else seconds
    args = [grpc_addr, "--topic", topic, "--seconds", str(secs), "--inflight", str(a.inflight),
            "--entries", str(a.entries), "--body", str(a.body)]  # fmt: skip
    result = run_generator(args, secs + 120)
    result["tps"] = result["sent"] / result["seconds"]
    return result


def run_sdk(ns: str, a: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "rocketpy.bench", "producer", "-n", ns, "-t", TOPIC, "-s", str(a.body),
           "-d", str(a.seconds), "-w", str(a.inflight), "-m", "async"]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=a.seconds + 120)
    m = _COMPLETE.search(out)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"SDK bench failed ({proc.returncode}):\n{out[-3000:]}")
    return {"sent": int(m.group(1)), "tps": float(m.group(2)), "seconds": time.monotonic() - started}


def measured(pid: int, run: Any, count_key: str) -> dict[str, Any]:
    """``run()``'s result with the broker's CPU per message added."""
    cpu0 = cpu_seconds(pid)
    row: dict[str, Any] = run()
    row["broker_cpu_us"] = (cpu_seconds(pid) - cpu0) / max(row[count_key], 1) * 1e6
    return row


def send_rounds(ns: str, on: Daemon, base: Daemon | None, a: argparse.Namespace) -> list[dict[str, Any]]:
    rounds: list[dict[str, Any]] = []
    for i in range(a.rounds):
        row: dict[str, Any] = {}
        order = list(abba(i, "sdk", "grpc"))
        if base is not None:  # before/after: the baseline broker's gRPC runs between them
            order[1:1] = ["grpc-before"]
            order[-1:-1] = ["grpc-before"]
        for kind in order:
            target = base if kind == "grpc-before" else on
            assert target is not None
            if kind == "sdk":
                result = measured(on.pid, lambda: run_sdk(ns, a), "sent")
            else:
                topic = BEFORE_TOPIC if kind == "grpc-before" else TOPIC
                result = measured(
                    target.pid, lambda t=target, x=topic: run_grpc(str(t.grpc_addr), x, a), "sent"
                )
            row.setdefault(kind, []).append(result)
        rounds.append(row)
    return rounds


async def receive_rounds(
    ns: str, on: Daemon, base: Daemon | None, a: argparse.Namespace
) -> list[dict[str, list[dict[str, Any]]]]:
    rounds: list[dict[str, list[dict[str, Any]]]] = []
    n = 0
    for i in range(a.rounds):
        row: dict[str, list[dict[str, Any]]] = {}
        order = list(abba(i, "sdk", "grpc"))
        if base is not None:  # before/after: the baseline broker's drains between them
            order[1:1] = ["grpc-before"]
            order[-1:-1] = ["grpc-before"]
        for kind in order:
            n += 1
            topic = f"GrpcPop{n}"
            target = base if kind == "grpc-before" and base is not None else on
            await backlog_on(ns, target.addr, topic, a.messages, a.body)
            cpu0, t0 = cpu_seconds(target.pid), time.perf_counter()
            if kind == "sdk":
                took = await drain_pop(ns, topic, a.messages, a.receivers)
                result = {"received": a.messages, "seconds": took}
            else:
                args = [str(target.grpc_addr), "--receive", topic, "--messages", str(a.messages),
                        "--receivers", str(a.receivers)]  # fmt: skip
                result = await asyncio.to_thread(run_generator, args, 900)
            result["broker_cpu_us"] = (cpu_seconds(target.pid) - cpu0) / a.messages * 1e6
            result["rate"] = a.messages / result["seconds"]
            took_s, cpu_us = time.perf_counter() - t0, result["broker_cpu_us"]
            print(f"  receive {kind:4s} {result['rate']:9,.0f} msgs/s, "
                  f"broker {cpu_us:6.1f} us/msg ({took_s:.1f} s)", flush=True)  # fmt: skip
            row.setdefault(kind, []).append(result)
        rounds.append(row)
    return rounds


async def backlog_on(ns: str, broker_addr: str, topic: str, count: int, body_size: int) -> None:
    """``count`` messages in ``topic``, created on the measured broker only (the baseline broker,
    when there is one, is in the same cluster and must not take half of them)."""
    async with Admin(ns) as admin:
        await admin.create_topic(topic, broker_addr=broker_addr, read_queue_nums=8, write_queue_nums=8)
    body = b"x" * body_size
    async with Producer(f"pg_{topic}", namesrv_addr=ns) as producer:
        for i in range(0, count, 256):
            await producer.send_batch([Message(topic, body) for _ in range(min(256, count - i))])


def baseline_tree(rev: str, dest: Path) -> Path:
    """Revision ``rev``'s source tree in ``dest`` with this tree's compiled modules copied in."""
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    listed = subprocess.run(["git", "ls-files", "-o", "--exclude-standard", "-i", "--", "*.so"],
                            cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    for built in listed.stdout.split():
        if not built.startswith((".venv", ".pytest_cache")):
            (dest / built).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / built, dest / built)
    return dest


def start_baseline(tree: Path, tmp: Path, ns: str) -> Daemon:
    workdir = tmp / "broker-before"
    workdir.mkdir()
    env = testing.daemon_env(workdir, tmp / "run")
    env["PYTHONPATH"] = str(tree)
    return testing.start_broker(workdir, ns, env=env, cwd=tree, brokerName="broker-before")


async def create_topic(ns: str, broker_addr: str, topic: str) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(topic, broker_addr=broker_addr, read_queue_nums=8, write_queue_nums=8)


def measure(a: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-grpc-") as tmp:
        tmp_path = Path(tmp)
        ns = start_namesrv(tmp_path)
        on = start_broker(tmp_path, ns.addr, brokerName="broker-grpc")
        off = start_broker(tmp_path, ns.addr, brokerName="broker-nogrpc", grpcServerPort=-1)
        base = None
        try:
            if a.baseline_tree:
                base = start_baseline(Path(a.baseline_tree).resolve(), tmp_path, ns.addr)
            elif a.baseline:
                base = start_baseline(
                    baseline_tree(a.baseline, Path(tempfile.mkdtemp(dir=tmp))), tmp_path, ns.addr
                )
            time.sleep(SETTLE_S)
            out: dict[str, Any] = {"rss_mib": {"on": rss_mib(on.pid), "off": rss_mib(off.pid)}}
            off.terminate()
            if "send" in a.only:
                for b, topic in ((on, TOPIC), (base, BEFORE_TOPIC)):
                    if b is not None:  # each broker its own topic: the SDK sends to the measured one only
                        asyncio.run(create_topic(ns.addr, b.addr, topic))
                        run_grpc(str(b.grpc_addr), topic, a, seconds=2.0)  # warm-up
                out["send"] = send_rounds(ns.addr, on, base, a)
            if "receive" in a.only:
                out["receive"] = asyncio.run(receive_rounds(ns.addr, on, base, a))
            if "floor" in a.only:
                out["floor"] = floor_rounds(a)
        finally:
            for d in (base, on, ns):
                if d is not None:
                    d.terminate()
    return out


def report(result: dict[str, Any], a: argparse.Namespace) -> None:
    rss = result["rss_mib"]
    grown = rss["on"] - rss["off"]
    print(f"idle broker RSS: gRPC on {rss['on']:.1f} MiB, off {rss['off']:.1f} MiB: +{grown:.1f} MiB "
          f"(target <= {RSS_TARGET_MIB:.0f}) {'OK' if grown <= RSS_TARGET_MIB else 'ABOVE'}")  # fmt: skip
    if "send" in result:
        report_send(result["send"], a)
    if "receive" in result:
        report_receive(result["receive"], a)
    if "floor" in result:
        report_floor(result["floor"], a)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.fmean(r[key] for r in rows)


def report_send(rounds: list[dict[str, Any]], a: argparse.Namespace) -> None:
    print(
        f"send: 1 KiB, {a.inflight} in flight, {a.entries} message(s) per gRPC request, {a.seconds:g} s a run"
    )
    print(f"{'round':>5} {'SDK msgs/s':>11} {'gRPC msgs/s':>12} {'ratio':>6} {'broker us/msg SDK':>18} "
          f"{'gRPC':>6} {'generator us/msg':>17}   "
          f"before: {'gRPC msgs/s':>11} {'broker us/msg':>13}")  # fmt: skip
    ratios = []
    for i, r in enumerate(rounds):
        sdk_tps, g_tps = _mean(r["sdk"], "tps"), _mean(r["grpc"], "tps")
        ratios.append(g_tps / max(sdk_tps, 1))
        gen = sum(g["cpu"] for g in r["grpc"]) / max(sum(g["sent"] for g in r["grpc"]), 1) * 1e6
        cpu_sdk, cpu_grpc = _mean(r["sdk"], "broker_cpu_us"), _mean(r["grpc"], "broker_cpu_us")
        line = (f"{i + 1:>5} {sdk_tps:>11,.0f} {g_tps:>12,.0f} {ratios[-1]:>6.1%} "
                f"{cpu_sdk:>18.1f} {cpu_grpc:>6.1f} {gen:>17.1f}")  # fmt: skip
        if "grpc-before" in r:
            b = r["grpc-before"]
            line += f"   before: {_mean(b, 'tps'):>11,.0f} {_mean(b, 'broker_cpu_us'):>13.1f}"
        print(line)
    median = statistics.median(ratios)
    print(f"gRPC / SDK send rate (median of {len(ratios)} rounds): {median:.1%} "
          f"(target >= {RATIO_TARGET:.0%}) {'OK' if median >= RATIO_TARGET else 'BELOW'}")  # fmt: skip


def report_receive(rounds: list[dict[str, list[dict[str, Any]]]], a: argparse.Namespace) -> None:
    print(f"receive+ack: {a.messages} x 1 KiB a drain, {a.receivers} loops of receive(32) + ack of the batch")
    print(f"{'round':>5} {'SDK msgs/s':>11} {'gRPC msgs/s':>12} {'ratio':>6} {'broker us/msg SDK':>18} "
          f"{'gRPC':>6} {'generator us/msg':>17}")  # fmt: skip
    ratios = []
    for i, r in enumerate(rounds):
        sdk, g = _mean(r["sdk"], "rate"), _mean(r["grpc"], "rate")
        ratios.append(g / max(sdk, 1))
        gen = sum(x["cpu"] for x in r["grpc"]) / (a.messages * len(r["grpc"])) * 1e6
        cpu_sdk, cpu_grpc = _mean(r["sdk"], "broker_cpu_us"), _mean(r["grpc"], "broker_cpu_us")
        line = (f"{i + 1:>5} {sdk:>11,.0f} {g:>12,.0f} {ratios[-1]:>6.1%} {cpu_sdk:>18.1f} "
                f"{cpu_grpc:>6.1f} {gen:>17.1f}")  # fmt: skip
        if "grpc-before" in r:
            b = r["grpc-before"]
            gen_b = sum(x["cpu"] for x in b) / (a.messages * len(b)) * 1e6
            line += (f"   before: {_mean(b, 'rate'):>11,.0f} msgs/s, broker {_mean(b, 'broker_cpu_us'):.1f}, "
                     f"generator {gen_b:.1f} us/msg")  # fmt: skip
        print(line)
    median = statistics.median(ratios)
    print(f"gRPC / SDK receive+ack rate (median of {len(ratios)} rounds): {median:.1%} "
          f"(target >= {RATIO_TARGET:.0%}) {'OK' if median >= RATIO_TARGET else 'BELOW'}")  # fmt: skip


def report_floor(rounds: list[dict[str, Any]], a: argparse.Namespace) -> None:
    print(f"grpcio's floor: the same SendMessage load ({a.entries} message(s) a request) against a "
          "grpc.aio servicer that only decodes and answers")  # fmt: skip
    print(f"{'round':>5} {'loop':>15} {'msgs/s':>9} {'server us/msg':>14} {'generator us/msg':>17}")
    for i, r in enumerate(rounds):
        for kind, rows in r.items():
            n = "received" if kind.endswith("receive") else "sent"
            gen = sum(g["cpu"] for g in rows) / max(sum(g[n] for g in rows), 1) * 1e6
            rate = _mean(rows, "rate" if n == "received" else "tps")
            print(f"{i + 1:>5} {kind:>15} {rate:>9,.0f} {_mean(rows, 'broker_cpu_us'):>14.1f} "
                  f"{gen:>17.1f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--entries", type=int, default=1, help="messages per SendMessage request")
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--messages", type=int, default=20_000, help="backlog of one receive drain")
    ap.add_argument("--receivers", type=int, default=16, help="concurrent receive loops")
    ap.add_argument("--baseline", metavar="REV", help="also run REV's broker under the same gRPC send load")
    ap.add_argument("--baseline-tree", metavar="DIR",
                    help="as --baseline, from a checkout with its own built modules")  # fmt: skip
    ap.add_argument("--only", nargs="+", default=["send", "receive", "floor"],
                    choices=["send", "receive", "floor"])  # fmt: skip
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--generator", metavar="ADDR", help=argparse.SUPPRESS)
    ap.add_argument("--receive", metavar="TOPIC", help=argparse.SUPPRESS)
    ap.add_argument("--echo-server", choices=["uvloop", "asyncio"], help=argparse.SUPPRESS)
    ap.add_argument("--topic", default=TOPIC, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.echo_server:
        if a.echo_server == "uvloop":
            import uvloop

            uvloop.run(echo_server(a.echo_server))
        else:
            asyncio.run(echo_server(a.echo_server))
        return
    if a.generator:
        job = (
            drain(a.generator, a.receive, a.messages, a.receivers)
            if a.receive
            else generate(a.generator, a.topic, a.seconds, a.inflight, a.entries, a.body)
        )
        print(json.dumps(asyncio.run(job)))
        return
    result = measure(a)
    if a.json:
        print(json.dumps(result))
    report(result, a)


if __name__ == "__main__":
    main()
