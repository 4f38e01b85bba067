#!/usr/bin/env python3
"""RocketMQ client compatibility benchmark: C++ client beside rocketpy's SDK, and header decode cost.

Starts one NameServer and one broker (``rocketpy.testing.start_cluster``), then, in the same run:

1. RocketMQ's C++ client (PyPI ``rocketmq`` 0.4.4, in a child process): ``send_sync`` of ``--count``
   messages of ``--body`` bytes one after another; throughput and RTT p50/p99 per call (JSON remoting).
2. rocketpy's blocking SDK producer doing the same, once over msgpack and once over JSON.
3. Header decode cost per request: ``FrameDecoder.feed`` of a typical SEND header, JSON (as the
   C++ client writes it) vs msgpack (as rocketpy's SDK writes it), in microseconds.

Figures are noisy on a shared machine; compare lines of one run. Bounded: fixed counts, daemons stopped.

Usage: scripts/bench_compat.py [--count 2000] [--body 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rocketpy.remoting.codec import FrameDecoder, encode_frame_bytes  # noqa: E402
from rocketpy.remoting.command import SERIALIZE_JSON, SERIALIZE_MSGPACK, RemotingCommand  # noqa: E402
from rocketpy.testing import start_cluster  # noqa: E402

CPP_SENDER = r"""
import json, sys, time
from rocketmq.client import Message, Producer
ns, topic, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = Producer("bench_cpp_pg"); p.set_namesrv_addr(ns); p.start()
body = "x" * size
def msg():
    m = Message(topic); m.set_keys("k"); m.set_tags("T"); m.set_body(body); return m
for _ in range(50):
    p.send_sync(msg())
rtts = []
start = time.perf_counter()
for _ in range(count):
    t = time.perf_counter(); p.send_sync(msg()); rtts.append(time.perf_counter() - t)
total = time.perf_counter() - start
p.shutdown()
print(json.dumps({"total": total, "rtts": rtts}))
"""


def summary(name: str, total: float, rtts: list[float]) -> str:
    q = statistics.quantiles(rtts, n=100)
    return (
        f"{name:<28} {len(rtts) / total:>8.0f} msgs/s   RTT p50 {q[49] * 1e3:6.3f} ms   "
        f"p99 {q[98] * 1e3:6.3f} ms"
    )


def cpp_send(ns: str, count: int, size: int) -> str:
    with tempfile.TemporaryDirectory() as home:
        proc = subprocess.run(
            [sys.executable, "-c", CPP_SENDER, ns, "BenchCpp", str(count), str(size)],
            capture_output=True, text=True, timeout=600, env={**os.environ, "HOME": home},
        )  # fmt: skip
    if proc.returncode != 0:
        return f"C++ client send_sync: failed ({proc.returncode}): {proc.stderr[-500:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return summary("C++ client send_sync (JSON)", out["total"], out["rtts"])


def sdk_send(ns: str, count: int, size: int, encoding: str) -> str:
    os.environ["ROCKETPY_SERIALIZE_TYPE"] = encoding
    from rocketpy.sync import Message, Producer

    producer = Producer(f"bench_sdk_{encoding}", ns)
    producer.start()
    try:
        body = b"x" * size
        for _ in range(50):
            producer.send(Message("BenchSdk", body, tags="T", keys="k"))
        rtts = []
        start = time.perf_counter()
        for _ in range(count):
            t = time.perf_counter()
            producer.send(Message("BenchSdk", body, tags="T", keys="k"))
            rtts.append(time.perf_counter() - t)
        return summary(f"rocketpy SDK send ({encoding})", time.perf_counter() - start, rtts)
    finally:
        producer.shutdown()


def decode_cost() -> list[str]:
    from rocketpy.protocol.headers.send import SendMessageRequestHeader

    h = SendMessageRequestHeader(
        "pg", "BenchTopic", 3, "KEYS\x01k\x02TAGS\x01T\x02UNIQ_KEY\x01" + "A" * 32 + "\x02"
    )
    out = []
    for name, serialize_type, ext in (
        ("msgpack (SDK, V2 names)", SERIALIZE_MSGPACK, h.to_ext()),
        (
            "JSON (C++ client, V1 names)",
            SERIALIZE_JSON,
            {**h.to_ext(v2=False), "AccessKey": "", "Signature": "x"},
        ),
    ):
        frame = encode_frame_bytes(RemotingCommand(310, 1, 0, None, ext, b"", serialize_type))
        decoder = FrameDecoder()
        n = 50_000
        start = time.perf_counter()
        for _ in range(n):
            decoder.feed(frame)
        out.append(f"header decode {name:<28} {(time.perf_counter() - start) / n * 1e6:6.2f} us/request")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--body", type=int, default=1024)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        cluster, daemons = start_cluster(Path(tmp))
        print(f"cluster boot: {time.perf_counter() - start:.2f} s")
        try:
            print(cpp_send(cluster.namesrv_addr, args.count, args.body))
            for encoding in ("msgpack", "json"):
                print(sdk_send(cluster.namesrv_addr, args.count, args.body, encoding))
        finally:
            for d in daemons:
                d.stop()
    for line in decode_cost():
        print(line)


if __name__ == "__main__":
    main()
