"""Transactional send benchmark: half message + local transaction + END_TRANSACTION, N in flight.

    .venv/bin/python scripts/bench_txn.py            # starts a temporary NameServer + broker
    .venv/bin/python scripts/bench_txn.py --namesrv 127.0.0.1:9876

``--count`` transactions, ``--inflight`` (64) ``send_in_transaction`` calls at once, each with a
COMMIT listener (``--listener async``: an ``async def``; ``sync``: a plain function run in the
producer's threads). Reports transactions per second from the first send until the last
``send_in_transaction`` returned (both round trips done), then waits until every committed
message is in the real topic (queue max offsets) and reports that time too. Every message must
arrive; no check may be needed.

``--batch N``: the batched mode of the Spark connector's transactional write instead: half messages
in batches of N (``--inflight`` batches at once, ``send_half_batch``), then every one committed
with END_TRANSACTION_BATCH requests (``end_transactions``); prints the rate of each phase.

    .venv/bin/python scripts/bench_txn.py --batch 256 --inflight 8 --count 200000 --body 1024
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketpy import Admin, LocalTransactionState, Message, TransactionProducer
from rocketpy.msgid import decode_offset_msg_id
from tests.waiting import wait_until_async

TOPIC = "BenchTxn"


class AsyncAnswer:
    """An ``async def`` listener answering ``state`` to the local transaction and to every check."""

    def __init__(self, state: LocalTransactionState) -> None:
        self.state = state
        self.checks = 0

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return self.state

    async def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        self.checks += 1
        return self.state


class SyncAnswer:
    """A plain-function listener (run in the producer's threads) answering ``state`` likewise."""

    def __init__(self, state: LocalTransactionState) -> None:
        self.state = state
        self.checks = 0

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return self.state

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        self.checks += 1
        return self.state


async def _stored(admin: Admin) -> int:
    return sum(int(q["max_offset"]) for q in await admin.topic_status(TOPIC))


async def bench(addr: str, count: int, inflight: int, listener_kind: str, body_bytes: int) -> None:
    async with Admin(addr) as admin:
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=8, write_queue_nums=8)
        base = await _stored(admin)
    commit = LocalTransactionState.COMMIT_MESSAGE
    listener = AsyncAnswer(commit) if listener_kind == "async" else SyncAnswer(commit)
    body = b"x" * body_bytes
    async with TransactionProducer("bench_txn_pg", addr, listener=listener) as producer:
        await producer.send_in_transaction(Message(TOPIC, body))  # warm: route, connection, heartbeat
        it = iter(range(count))

        async def worker() -> None:
            for _ in it:
                r = await producer.send_in_transaction(Message(TOPIC, body))
                assert r.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(inflight)))
        sent_s = time.perf_counter() - t0
        async with Admin(addr) as admin:
            want = base + count + 1
            got = await wait_until_async(
                lambda: _check_stored(admin, want), 120, 0.05, f"{want} committed messages in {TOPIC}"
            )
        stored_s = time.perf_counter() - t0
    print(
        f"transactions ({listener_kind} listener, {inflight} in flight, {body_bytes} B bodies): {count} in "
        f"{sent_s:.2f} s = {count / sent_s:,.0f} txn/s (half + commit acknowledged); all {got - base - 1} "
        f"committed messages in the topic after {stored_s:.2f} s; checks needed: {listener.checks}"
    )


async def bench_batched(addr: str, count: int, inflight: int, batch: int, body_bytes: int) -> None:
    """Half messages in batches (``send_half_batch``), then one decision on all of them
    (``end_transactions``: END_TRANSACTION_BATCH requests), as the Spark connector's transactional
    write does; the two phases timed apart."""
    async with Admin(addr) as admin:
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=8, write_queue_nums=8)
        base = await _stored(admin)
    body = b"x" * body_bytes
    listener = AsyncAnswer(LocalTransactionState.UNKNOW)  # every half is decided here: none is checked
    async with TransactionProducer("bench_txn_pg", addr, listener=listener) as producer:
        await producer.send_half_batch([Message(TOPIC, body)])  # warm: route, connection, heartbeat
        sizes = [batch] * (count // batch) + ([count % batch] if count % batch else [])
        it = iter(sizes)
        pairs: list[tuple[int, int]] = []
        addrs: set[str] = set()

        async def worker() -> None:
            for n in it:
                results = await producer.send_half_batch([Message(TOPIC, body) for _ in range(n)])
                addrs.add(await producer.broker_addr_of(results[0]))  # a batch goes to one queue
                pairs.extend((decode_offset_msg_id(r.offset_msg_id)[2], r.queue_offset) for r in results)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(inflight)))
        halves_s = time.perf_counter() - t0
        (broker,) = addrs  # one broker (a temporary cluster, or pass a one-broker one)
        pairs.sort(key=lambda pair: pair[1])  # half-queue order, as the connector decides them
        t1 = time.perf_counter()
        failed = await producer.end_transactions(broker, pairs, LocalTransactionState.COMMIT_MESSAGE)
        commit_s = time.perf_counter() - t1
        async with Admin(addr) as admin:
            want = base + count
            await wait_until_async(
                lambda: _check_stored(admin, want), 120, 0.05, f"{want} committed messages in {TOPIC}"
            )
    print(
        f"batched transactions ({batch} per half batch, {inflight} batches in flight, {body_bytes} B "
        f"bodies): halves {count:,} in {halves_s:.2f} s = {count / halves_s:,.0f} msgs/s; commit "
        f"(END_TRANSACTION_BATCH) {count / commit_s:,.0f} decisions/s ({commit_s:.2f} s, {failed} not "
        f"applied); both {count / (halves_s + commit_s):,.0f} msgs/s; checks needed: {listener.checks}"
    )


async def _check_stored(admin: Admin, want: int) -> int:
    n = await _stored(admin)
    return n if n >= want else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", help="use a running NameServer (else start a temporary cluster)")
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--listener", choices=["async", "sync"], default="async")
    parser.add_argument("--body", type=int, default=128, help="body bytes")
    parser.add_argument(
        "--batch", type=int, default=0,
        help="half messages per batch: the batched mode (halves, then one END_TRANSACTION_BATCH commit)",
    )  # fmt: skip
    args = parser.parse_args()

    def run(addr: str) -> None:
        if args.batch:
            asyncio.run(bench_batched(addr, args.count, args.inflight, args.batch, args.body))
        else:
            asyncio.run(bench(addr, args.count, args.inflight, args.listener, args.body))

    if args.namesrv:
        run(args.namesrv)
        return
    from tests.daemons import start_broker, start_namesrv

    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-") as tmp:
        ns = start_namesrv(Path(tmp))
        broker = start_broker(Path(tmp), ns.addr, mappedFileSizeCommitLog=1 << 30)
        try:
            run(ns.addr)
        finally:
            broker.terminate()
            ns.terminate()


if __name__ == "__main__":
    main()
