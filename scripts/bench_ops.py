"""Per-operation cost of the compiled core against its pure-Python twins, in one process.

Each operation runs ``--n`` times through the compiled function and through its pure twin
(``rocketpy._accel.PURE``), interleaved, and prints microseconds per operation (best of
``--repeat``) with the ratio; ``store_put`` puts 1 KiB messages over 16 queues into an in-process
store (whatever core the process runs: use ``--pure`` / ``--compare`` for it). Bounded: a few
seconds at the defaults.

For instruction counts (immune to machine load), run one operation under callgrind at two sizes
and divide the difference::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python scripts/bench_ops.py \\
        --ops frame_split --impl compiled --n 2000

Usage: ``.venv/bin/python scripts/bench_ops.py [--ops a,b] [--n N] [--impl both|compiled|pure]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import bench_core

from rocketpy import _accel
from rocketpy.acl import signing
from rocketpy.message import Message, properties_to_string
from rocketpy.msgid import new_unique_id
from rocketpy.protocol.headers.pull import PullMessageRequestHeader
from rocketpy.record import encode_record, pack_host, topic_part
from rocketpy.remoting import codec
from rocketpy.remoting.command import RemotingCommand

BODY = b"x" * 1024
PROPS = properties_to_string({"TAGS": "TagA", "UNIQ_KEY": new_unique_id()})
HOST8 = pack_host(("127.0.0.1", 10911))


def _impls(name: str, which: str) -> list[tuple[str, Callable[..., Any]]]:
    out = []
    if which in ("both", "compiled"):
        if not _accel.COMPILED:
            raise SystemExit(f"the compiled core is not loaded: {_accel.LOAD_ERROR}")
        out.append(("compiled", _accel.COMPILED[name]))
    if which in ("both", "pure"):
        out.append(("pure", _accel.PURE[name]))
    return out


def _op_record_pack(fn: Callable[..., Any]) -> Callable[[], Any]:
    buf, topic_b, props_b = bytearray(4096), topic_part("BenchTopic"), PROPS.encode()
    return lambda: fn(buf, 0, topic_b, props_b, BODY, 1, 0, 7, 123456, 0, 1_700_000_000_000, HOST8,
                      1_700_000_000_001, HOST8, 0, 0)  # fmt: skip


def _op_record_decode32(fn: Callable[..., Any]) -> Callable[[], Any]:
    data = b"".join(
        encode_record(topic="BenchTopic", body=BODY, properties=PROPS, queue_offset=i) for i in range(32)
    )
    return lambda: fn(data)


def _op_batch_encode32(fn: Callable[..., Any]) -> Callable[[], Any]:
    msgs = [Message("BenchTopic", BODY, tags="TagA") for _ in range(32)]
    return lambda: fn(msgs)


def _op_batch_decode32(fn: Callable[..., Any]) -> Callable[[], Any]:
    body = _accel.PURE["encode_batch"]([Message("BenchTopic", BODY, tags="TagA") for _ in range(32)])
    return lambda: fn(body)


def _send_command(opaque: int) -> RemotingCommand:
    ext = {"a": "pg", "b": "BenchTopic", "c": "TBW102", "d": 4, "e": 1, "f": 0, "g": 1_700_000_000_000,
           "h": 0, "i": PROPS, "j": 0, "k": False, "m": False, "n": "broker-a"}  # fmt: skip
    return RemotingCommand(310, opaque, 0, None, ext, BODY)


def _op_frame_encode(fn: Callable[..., Any]) -> Callable[[], Any]:
    cmd = _send_command(1)
    return lambda: fn(cmd)


def _op_frame_split64(fn: Callable[..., Any]) -> Callable[[], Any]:
    data = b"".join(codec.encode_frame_bytes(_send_command(i)) for i in range(64))
    decoder = codec.FrameDecoder()
    return lambda: fn(decoder, data)


def _op_acl_sign8(fn: Callable[..., Any]) -> Callable[[], Any]:
    """The ACL signature of a coalesced send: 8 x 1 KiB batch body, the send header's fields."""
    key = signing.HmacKey("benchSecret01")
    body = _accel.PURE["encode_batch"]([Message("BenchTopic", BODY, tags="TagA") for _ in range(8)])
    ext = {**_send_command(1).ext, "AccessKey": "benchAdmin"}  # type: ignore[dict-item]
    return lambda: fn(key, ext, body)


def _op_acl_sign_pull(fn: Callable[..., Any]) -> Callable[[], Any]:
    """The ACL signature of a pull: no body, the pull header's fields."""
    key = signing.HmacKey("benchSecret01")
    header = PullMessageRequestHeader("BenchGroup", "BenchTopic", 3, 12_345, 32)
    ext = {**header.to_ext(), "AccessKey": "benchAdmin"}
    return lambda: fn(key, ext, b"")


OPS: dict[str, tuple[str, Callable[[Callable[..., Any]], Callable[[], Any]]]] = {
    "record_pack": ("pack_record", _op_record_pack),
    "record_decode32": ("decode_records", _op_record_decode32),
    "batch_encode32": ("encode_batch", _op_batch_encode32),
    "batch_decode32": ("decode_batch", _op_batch_decode32),
    "frame_encode": ("encode_frame", _op_frame_encode),
    "frame_split64": ("split_frames", _op_frame_split64),
    "acl_sign8": ("hmac_signature", _op_acl_sign8),
    "acl_sign_pull": ("hmac_signature", _op_acl_sign_pull),
}


def _time(op: Callable[[], Any], n: int) -> float:
    t0 = time.thread_time()  # CPU time of this thread: less sensitive to the machine's load
    for _ in range(n):
        op()
    return (time.thread_time() - t0) / n * 1e6


async def _store_put(n: int) -> float:
    from rocketpy.broker.store import BrokerMessage, MessageStore
    from rocketpy.config import StoreConfig

    root = tempfile.mkdtemp(prefix="bench-ops-")
    try:
        store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=64 << 20))
        await store.start()
        msgs = [BrokerMessage("BenchTopic", i % 16, BODY, properties=PROPS) for i in range(min(n, 4096))]
        for m in msgs[:64]:  # warm the queues
            await store.put_message(m)
        await store.settle()  # their files and the index file exist: measure the steady state
        t0 = time.thread_time()
        for i in range(n):
            await store.put_message(msgs[i % len(msgs)])
        us = (time.thread_time() - t0) / n * 1e6
        await store.shutdown()
        return us
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=",".join([*OPS, "store_put"]), help="comma-separated operations")
    parser.add_argument("--n", type=int, default=3000, help="operations per timing")
    parser.add_argument("--repeat", type=int, default=3, help="timings per implementation (best kept)")
    parser.add_argument("--impl", choices=["both", "compiled", "pure"], default="both")
    bench_core.add_options(parser)
    args = parser.parse_args()
    bench_core.apply(args)
    print(f"(load average {os.getloadavg()[0]:.2f}; microseconds per operation, best of {args.repeat})")
    for name in args.ops.split(","):
        if name == "store_put":
            us = min(asyncio.run(_store_put(args.n)) for _ in range(args.repeat))
            print(f"{'store_put (loop thread CPU per message)':44} {us:10.2f} us")
            continue
        fn_name, make = OPS[name]
        impls = [(label, make(fn)) for label, fn in _impls(fn_name, args.impl)]
        best = {label: float("inf") for label, _ in impls}
        for _ in range(args.repeat):  # interleaved: both see the same machine load
            for label, op in impls:
                best[label] = min(best[label], _time(op, args.n))
        figures = "  ".join(f"{label} {us:9.2f} us" for label, us in best.items())
        ratio = f"  pure/compiled {best['pure'] / best['compiled']:.2f}x" if len(best) == 2 else ""
        print(f"{name:44} {figures}{ratio}")


if __name__ == "__main__":
    sys.exit(main())
