"""SQL92 filter benchmark: how fast the broker scans a backlog with a SQL92 pull filter.

1. Store scan (the broker's pull path without the network): ``--messages`` messages (default
   1,000,000) in one queue, each with properties ``a`` (0..99), ``region`` and TAGS; a SQL92 filter
   matching 10 % (``a < 20 AND region = 'eu'`` by default) pulls the whole backlog through
   ``MessageStore.get_message`` with the broker's ``SqlMessageFilter`` in batches of 32 matches.
   Reported: units scanned per second (target >= 200,000) and, for comparison, the same scan
   with a match-everything tag filter.
2. End to end (``--e2e-messages``, default 20,000): a real NameServer + broker
   (``enablePropertyFilter=true``) and a LitePullConsumer with ``MessageSelector.by_sql``;
   reported: matched messages delivered per second and the bytes the pulls carried.

Figures are noisy on a shared machine; run it twice. Quick: ``python scripts/bench_sql.py --messages 200000``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.daemons starts the e2e daemons

from rocketpy.broker.store import BrokerMessage, MessageStore
from rocketpy.broker.subscription import SqlMessageFilter, TagMessageFilter
from rocketpy.config import StoreConfig
from rocketpy.message import properties_to_string
from rocketpy.subscription import ExpressionType, SubscriptionData

TOPIC = "SqlBench"
BODY = b"x" * 256
DEFAULT_SQL = "a < 20 AND region = 'eu'"


def _region(i: int) -> str:
    return "eu" if i % 200 < 100 else "us"


def _props(i: int) -> str:
    return properties_to_string(
        {
            "TAGS": "TagA",
            "a": str(i % 100),
            "region": _region(i),
            "UNIQ_KEY": f"K{i:012d}",
        }
    )


def expected_matches(n: int, sql: str) -> int | None:
    """The number of the first ``n`` messages the default expression matches (None: unknown)."""
    if sql != DEFAULT_SQL:
        return None
    return sum(1 for i in range(n) if i % 200 < 20)


async def fill(store: MessageStore, n: int) -> None:
    props = [_props(i) for i in range(200)]
    batch = 64
    for start in range(0, n, batch):
        msgs = [
            BrokerMessage(TOPIC, 0, BODY, properties=props[i % 200])
            for i in range(start, min(n, start + batch))
        ]
        r = await store.put_messages(msgs)
        assert r.ok, r


def scan(store: MessageStore, flt: object, n: int) -> tuple[int, float]:
    """Pull the whole queue through ``flt``: (messages matched, CPU seconds of this thread).

    CPU time, not wall time: on a shared machine the wall clock also counts other processes.
    """
    t0 = time.thread_time()
    off = matched = 0
    while off < n:
        g = store.get_message("g", TOPIC, 0, off, 32, None, flt)  # type: ignore[arg-type]
        matched += g.message_count
        off = g.next_begin_offset
        g.release()
    return matched, time.thread_time() - t0


async def bench_scan(root: str, n: int, sql: str) -> None:
    store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 * 1024 * 1024))
    await store.start()
    t0 = time.perf_counter()
    await fill(store, n)
    await store.settle()
    print(f"backlog: {n:,} messages in {time.perf_counter() - t0:.1f} s", flush=True)
    sql_filter = SqlMessageFilter(SubscriptionData(TOPIC, sql, ExpressionType.SQL92))
    matched, secs = scan(store, sql_filter, n)
    want = expected_matches(n, sql)
    assert want is None or matched == want, (matched, want)
    rate = n / secs
    verdict = "OK" if rate >= 200_000 else "BELOW TARGET"
    print(f"store scan, SQL92 {sql!r}: {n:,} scanned, {matched:,} matched ({100 * matched / n:.1f} %) "
          f"in {secs:.2f} CPU-s = {rate:,.0f} msgs/s scanned (target >= 200,000: {verdict})")  # fmt: skip
    all_matched, all_secs = scan(store, TagMessageFilter(None), n)
    print(f"store scan, tag '*' (no filter work): {all_matched:,} in {all_secs:.2f} CPU-s = "
          f"{n / all_secs:,.0f} msgs/s", flush=True)  # fmt: skip
    await store.shutdown()


async def bench_e2e(root: str, n: int, sql: str) -> None:
    from rocketpy import Admin, LitePullConsumer, Message, MessageSelector, Producer
    from tests.daemons import start_broker, start_namesrv

    namesrv = start_namesrv(Path(root))
    broker = start_broker(Path(root), namesrv.addr, enablePropertyFilter="true")
    try:
        async with Admin(namesrv.addr) as admin:
            await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        producer = Producer("bench_sql_p", namesrv_addr=namesrv.addr)
        await producer.start()
        for start in range(0, n, 32):
            batch = [
                Message(TOPIC, BODY, tags="TagA", properties={"a": str(i % 100), "region": _region(i)})
                for i in range(start, min(n, start + 32))
            ]
            await producer.send_batch(batch)
        await producer.shutdown()
        want = expected_matches(n, sql)
        consumer = LitePullConsumer(
            "bench_sql_c", namesrv.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        consumer.subscribe(TOPIC, MessageSelector.by_sql(sql))
        await consumer.start()
        t0 = time.perf_counter()
        got = 0
        while (want is None or got < want) and time.perf_counter() < t0 + 120:
            msgs = await consumer.poll(1.0)
            if not msgs and want is None:
                break
            got += len(msgs)
        secs = time.perf_counter() - t0
        await consumer.shutdown()
        print(f"end to end: {n:,} messages in the backlog, {got:,} matched delivered in {secs:.2f} s "
              f"({n / secs:,.0f} backlog msgs/s, {got / secs:,.0f} delivered/s)")  # fmt: skip
    finally:
        broker.terminate()
        namesrv.terminate()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--e2e-messages", type=int, default=20_000)
    ap.add_argument("--sql", default=DEFAULT_SQL)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="bench_sql_")
    try:
        uvloop.run(bench_scan(root + "/store", args.messages, args.sql))
        if args.e2e_messages > 0:
            os.makedirs(root + "/e2e")
            uvloop.run(bench_e2e(root + "/e2e", args.e2e_messages, args.sql))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
