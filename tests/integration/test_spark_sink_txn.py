"""The Spark sink's transactional delivery against real daemons, without a JVM.

The task side (``send_partition``) and the driver side (``commit`` / ``abort``) are called as
Spark calls them, in this process: rows are invisible until the commit, an abort or a failed task
leaves nothing visible, and half messages whose driver died are rolled back by a later write's
producer when the broker checks them.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from rocketpy import Admin
from rocketpy.broker.transaction.op_log import parse_op
from rocketpy.errors import MQClientError
from rocketpy.message import MessageQueue
from rocketpy.spark.options import parse_write_options
from rocketpy.spark.rows import check_layout
from rocketpy.spark.sink import (
    BATCH_ROWS,
    JobListener,
    PlainDelivery,
    StreamBatch,
    TransactionalDelivery,
    _record_or_drop,
    _txn_producer,
)
from rocketpy.topic import TRANS_OP_HALF_TOPIC
from tests.conftest import DaemonPool
from tests.integration.test_ha import store_of
from tests.waiting import wait_until, wait_until_async

CHECK = {"transactionCheckInterval": 300, "transactionTimeOut": 500, "transactionCheckMax": 5}


def setup(daemons: DaemonPool, topic: str, **broker: Any) -> tuple[str, Any]:
    ns = daemons.namesrv()
    b = daemons.broker(ns.addr, **broker)

    async def create() -> None:
        async with Admin(ns.addr) as admin:
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)

    asyncio.run(create())
    return ns.addr, b


async def visible_async(ns: str, topic: str) -> int:
    async with Admin(ns) as admin:
        return sum(r["max_offset"] for r in await admin.topic_status(topic))


def visible(ns: str, topic: str) -> int:
    return asyncio.run(visible_async(ns, topic))


def decisions(broker: Any) -> int:
    """Half offsets named by the op records (decisions and checks) of the broker's transaction op
    queue, read from its files (an op record may name many)."""
    root = store_of(broker) / "consumequeue" / TRANS_OP_HALF_TOPIC / "0"
    if not root.is_dir():
        return 0
    units = b"".join(f.read_bytes() for f in sorted(root.iterdir()))
    files = sorted((int(f.name), f) for f in (store_of(broker) / "commitlog").iterdir())
    named = 0
    for i in range(0, len(units), 20):
        phys, size = struct.unpack_from(">qi", units, i)
        if units[i : i + 20] == bytes(20):
            continue
        base, path = max((b, f) for b, f in files if b <= phys)
        with path.open("rb") as f:
            f.seek(phys - base)
            parsed = parse_op(f.read(size))
        named += len(parsed[0]) if parsed else 0
    return named


def rows(n: int) -> Iterator[tuple[bytes]]:
    return ((b"row-%d" % i,) for i in range(n))


def writer(ns: str, topic: str, **extra: str) -> tuple[Any, Any]:
    opts = parse_write_options({"namesrvAddr": ns, "topic": topic, **extra})
    return opts, check_layout([("body", "binary")], topic)


def test_rows_are_invisible_until_the_driver_commits(daemons: DaemonPool) -> None:
    ns, _ = setup(daemons, "TxnSink")
    opts, layout = writer(ns, "TxnSink")
    d = TransactionalDelivery()
    parts = [d.send_partition(opts, layout, "job-1", rows(40), None) for _ in range(2)]
    assert [p.rows for p in parts] == [40, 40]
    assert sum(len(a) // 2 for p in parts for a in p.halves.values()) == 80
    assert visible(ns, "TxnSink") == 0
    d.commit(opts, parts, "job-1")
    assert visible(ns, "TxnSink") == 80
    d.commit(opts, parts, "job-1")  # a repeated commit changes nothing
    assert visible(ns, "TxnSink") == 80


def test_abort_and_a_failed_task_leave_nothing_visible(daemons: DaemonPool) -> None:
    ns, broker = setup(daemons, "TxnAbort")
    opts, layout = writer(ns, "TxnAbort")
    d = TransactionalDelivery()
    done = d.send_partition(opts, layout, "job-2", rows(30), None)
    d.abort(opts, [done, None], "job-2")  # Spark passes None for tasks without a message
    wait_until(lambda: decisions(broker) == 30, 10.0, message="30 rollbacks recorded")
    with pytest.raises(MQClientError, match="30 of 30 rows could not be committed"):
        d.commit(opts, [done], "job-2")  # rolled back for good

    def failing() -> Iterator[tuple[bytes]]:
        yield from rows(BATCH_ROWS + 20)  # one batch is sent, the rest still buffered
        raise ValueError("the task's input failed")

    with pytest.raises(ValueError, match="input failed"):
        d.send_partition(opts, layout, "job-3", failing(), None)
    wait_until(
        lambda: decisions(broker) == 30 + BATCH_ROWS, 10.0, message="the failed attempt rolled back its batch"
    )
    assert visible(ns, "TxnAbort") == 0


def test_halves_of_a_dead_driver_are_rolled_back_by_a_later_write(
    daemons: DaemonPool, tmp_path: Path
) -> None:
    ns, broker = setup(daemons, "TxnOrphan", **CHECK)
    opts, layout = writer(ns, "TxnOrphan", transactionTimeoutMs="1000")
    orphan = TransactionalDelivery().send_partition(opts, layout, "job-dead", rows(10), None)
    assert visible(ns, "TxnOrphan") == 0  # the driver never decides: the halves wait

    async def later_write() -> None:  # a live producer of the group, as a later write's task is
        producer = _txn_producer(opts, "job-later")
        assert isinstance(producer.listener, JobListener)
        async with producer:
            await producer.send_half(_message("TxnOrphan"))  # registers the group with the broker
            # a check (op record) and a rollback for each orphan, answered by this producer
            await wait_until_async(lambda: decisions(broker) >= 10 + 10, 30.0, message="orphans rolled back")

    asyncio.run(later_write())
    with pytest.raises(MQClientError, match="could not be committed"):
        TransactionalDelivery().commit(opts, [orphan], "job-dead")
    assert visible(ns, "TxnOrphan") == 0


@pytest.mark.parametrize("transactional", ["true", "false"])
def test_routed_rows_keep_their_queue_and_order(daemons: DaemonPool, transactional: str) -> None:
    ns, _ = setup(daemons, f"TxnRouted{transactional}")
    topic = f"TxnRouted{transactional}"
    opts = parse_write_options({"namesrvAddr": ns, "topic": topic, "transactional": transactional})
    layout = check_layout([("body", "binary"), ("orderKey", "string")], topic)
    d = TransactionalDelivery() if transactional == "true" else PlainDelivery()
    keyed = [(b"%s-%d" % (k.encode(), i), k) for i in range(300) for k in ("a", "b", "c")]
    d.commit(opts, [d.send_partition(opts, layout, "w", iter(keyed), None)], "w")

    async def read_back() -> dict[int, list[bytes]]:
        async with Admin(ns) as admin:
            out: dict[int, list[bytes]] = {}
            for q in (0, 1):
                offset = 0
                while True:
                    msgs, offset, _ = await admin.pull(MessageQueue(topic, "broker-a", q), offset, 32)
                    if not msgs:
                        break
                    out.setdefault(q, []).extend(m.body for m in msgs)
            return out

    by_queue = asyncio.run(read_back())
    assert sum(len(v) for v in by_queue.values()) == 900
    for key in (b"a", b"b", b"c"):
        holders = [q for q, bodies in by_queue.items() if any(b.startswith(key + b"-") for b in bodies)]
        assert len(holders) == 1, key  # one key, one queue
        mine = [b for b in by_queue[holders[0]] if b.startswith(key + b"-")]
        assert mine == [b"%s-%d" % (key, i) for i in range(300)]  # in order


def test_a_replayed_micro_batch_is_not_written_twice(daemons: DaemonPool) -> None:
    ns, broker = setup(daemons, "TxnReplay")
    opts, layout = writer(ns, "TxnReplay")
    d = TransactionalDelivery()
    first = StreamBatch("query-1", 0, "run-1")
    parts = [d.send_partition(opts, layout, "w1", rows(20), first) for _ in range(2)]
    d.commit(opts, parts, "w1/0")
    assert visible(ns, "TxnReplay") == 40

    # the driver died before Spark's commit log: the restarted query (a new run) replays batch 0
    replay = StreamBatch("query-1", 0, "run-2")
    again = d.send_partition(opts, layout, "w2", rows(20), replay)
    assert again.replay and again.rows == 0 and not again.halves  # the task sends nothing
    d.commit(opts, [again], "w2/0")

    # tasks that ran before the original's commit was recorded: their driver rolls them back
    early = [d.send_partition(opts, layout, "w3", rows(15), StreamBatch("query-1", 1, "run-3"))]
    on_time = [d.send_partition(opts, layout, "w2", rows(15), StreamBatch("query-1", 1, "run-2"))]
    d.commit(opts, on_time, "w2/1")
    d.commit(opts, early, "w3/1")
    wait_until(lambda: decisions(broker) == 40 + 15 + 15, 10.0, message="commits and rollbacks recorded")
    assert visible(ns, "TxnReplay") == 40 + 15

    plain = PlainDelivery()
    p_opts, _ = writer(ns, "TxnReplay", transactional="false")
    sent = plain.send_partition(p_opts, layout, "w4", rows(5), StreamBatch("query-2", 0, "run-1"))
    plain.commit(p_opts, [sent], "w4/0")
    replayed = plain.send_partition(p_opts, layout, "w5", rows(5), StreamBatch("query-2", 0, "run-2"))
    assert replayed.replay and replayed.rows == 0
    assert visible(ns, "TxnReplay") == 40 + 15 + 5


def test_rows_of_a_driver_that_died_during_the_commit_are_committed_by_the_check(daemons: DaemonPool) -> None:
    ns, broker = setup(daemons, "TxnHalfDone", **CHECK)
    opts, layout = writer(ns, "TxnHalfDone", transactionTimeoutMs="1000")
    d = TransactionalDelivery()
    decided = StreamBatch("query-9", 0, "run-1")
    parts = [d.send_partition(opts, layout, "w", rows(10), decided)]
    assert not _record_or_drop(opts, parts)  # the driver recorded batch 0 ... and died before committing
    undecided = StreamBatch("query-9", 1, "run-1")
    d.send_partition(opts, layout, "w", rows(7), undecided)  # batch 1: its driver never got that far
    assert visible(ns, "TxnHalfDone") == 0

    async def later_write() -> None:  # the restarted query's producer answers the broker's checks
        async with _txn_producer(opts, StreamBatch("query-9", 1, "run-2").key) as producer:
            await producer.send_half(_message("TxnHalfDone"))  # registers the group with the broker

            async def batch_0_visible() -> bool:
                return await visible_async(ns, "TxnHalfDone") == 10

            await wait_until_async(batch_0_visible, 30.0, interval=0.2, message="batch 0 committed")
            # each orphan: a check and a decision (batch 1's rows rolled back)
            await wait_until_async(lambda: decisions(broker) >= 2 * 17, 30.0, message="all decided")

    asyncio.run(later_write())
    assert visible(ns, "TxnHalfDone") == 10  # batch 1's rows were rolled back, batch 0's committed


def _message(topic: str) -> Any:
    from rocketpy import Message

    return Message(topic, b"probe")
