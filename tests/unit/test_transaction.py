"""Transactions on a real store with a hand-driven clock: the window's bookkeeping, decisions that
survive a restart through the op queue, refusals that write nothing, and the commit a crash left
without its op record."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.schedule.delivery import DeliveryTimeService
from rocketpy.broker.store import BrokerMessage, MessageStore
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.broker.transaction import check
from rocketpy.broker.transaction.half import HalfRecord
from rocketpy.broker.transaction.op_log import OFFSETS_PER_OP_RECORD, op_message, parse_op
from rocketpy.broker.transaction.service import TransactionService
from rocketpy.broker.transaction.window import HalfWindow, Outcome
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.message import properties_to_string
from rocketpy.message_props import is_half_message
from rocketpy.protocol.codes import ResponseCode
from rocketpy.record import decode_records, encode_record
from rocketpy.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from tests.clock import ManualClock
from tests.waiting import wait_until_async


def test_window_advances_over_resolved_offsets_and_remembers_outcomes() -> None:
    w = HalfWindow()
    assert w.claim(1, Outcome.ROLLBACK, 10)
    assert not w.claim(1, Outcome.COMMIT, 11)  # claimed: a racing decision is refused
    w.apply(1, Outcome.ROLLBACK, 10)
    assert w.progress == 0 and w.op_floor(99) == 10
    w.note_check(0, 12)
    assert w.checks(0) == 1 and not w.resolved(0)
    w.apply(0, Outcome.COMMIT, 13)
    assert w.progress == 2 and w.entries == {} and w.op_floor(99) == 99
    assert w.outcome(1) is Outcome.ROLLBACK and w.resolved(1)
    w.claim(5, Outcome.COMMIT, 20)
    w.release(5)
    assert not w.resolved(5)
    w.skip_to(7)
    assert w.progress == 7 and 5 not in w.entries


async def start(root: Path, clock: ManualClock) -> tuple[MessageStore, TransactionService]:
    sc = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=8 << 20)
    bc = BrokerConfig(transaction_time_out=1000, transaction_check_max=2)
    store = MessageStore(sc, clock=clock)
    await store.start()
    config_dir = str(root / "config")
    delivery = DeliveryTimeService(store, sc, config_dir)
    topics = TopicConfigManager(bc, str(root / "config" / "topics.json"))
    svc = TransactionService(
        bc, store, delivery, topics, ConsumerManager(lambda g, c: None, 10_000), config_dir
    )
    await svc.start()
    return store, svc


async def stop(store: MessageStore, svc: TransactionService) -> None:
    await svc.shutdown()
    await store.shutdown()


async def half(store: MessageStore, svc: TransactionService, body: bytes) -> HalfRecord:
    props = properties_to_string({"TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": body.hex().upper()})
    assert is_half_message(props)
    result = await svc.put_half(BrokerMessage("Real", 1, body, props), "pg")
    record = store.lookup_message_by_offset(result.wrote_offset)
    assert record is not None
    return HalfRecord(record)


def real(store: MessageStore) -> list[bytes]:
    n = store.get_max_offset_in_queue("Real", 1)
    return [m.body for m in decode_records(store.get_message("g", "Real", 1, 0, n).join())] if n else []


async def test_decisions_survive_a_restart_and_duplicates_write_nothing(tmp_path: Path) -> None:
    clock = ManualClock()
    store, svc = await start(tmp_path, clock)
    a, b, c = [await half(store, svc, body) for body in (b"a", b"b", b"c")]
    assert store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 3
    assert real(store) == []  # half messages are not in the real topic
    assert await svc.decide(a, Outcome.COMMIT) == (ResponseCode.SUCCESS, None)
    assert await svc.decide(b, Outcome.ROLLBACK) == (ResponseCode.SUCCESS, None)
    committed = decode_records(store.get_message("g", "Real", 1, 0, 1).join())[0]
    assert committed.body == b"a" and "TRAN_MSG" not in committed.properties
    assert (
        committed.properties["PGROUP"] == "pg" and committed.prepared_transaction_offset == a.commitlog_offset
    )
    await stop(store, svc)

    store, svc = await start(tmp_path, clock)
    assert svc.window.progress == 2 and not svc.window.resolved(2)
    ops = store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0)
    code, remark = await svc.decide(b, Outcome.COMMIT)
    assert code == ResponseCode.TRANSACTION_SHOULD_ROLLBACK and "already rolled back" in (remark or "")
    code, remark = await svc.decide(a, Outcome.COMMIT)
    assert code == ResponseCode.SUCCESS and "already committed" in (remark or "")
    assert store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0) == ops
    assert real(store) == [b"a"]
    assert await svc.decide(c, Outcome.COMMIT) == (ResponseCode.SUCCESS, None)
    assert real(store) == [b"a", b"c"] and svc.window.progress == 3
    await stop(store, svc)


async def test_a_commit_without_its_op_record_is_recorded_not_checked(tmp_path: Path) -> None:
    clock = ManualClock()
    store, svc = await start(tmp_path, clock)
    h = await half(store, svc, b"lost-op")
    await store.put_message(h.committed())  # as if the broker died before writing the op record
    await wait_until_async(lambda: store.query_message("Real", h.unique_key, 1, 0, 2**62).buffers, 5)
    young = await half(store, svc, b"young")
    clock.t += 0.5
    assert await svc.checker.check_round() == 0  # nothing old enough yet
    clock.t += 0.6
    assert await svc.checker.check_round() == 2
    assert svc.window.outcome(h.queue_offset) is Outcome.COMMIT
    assert svc.checker.checks_sent == 0 and real(store) == [b"lost-op"]
    # "young" has no producer to ask: it waits without using up its checks
    assert not svc.window.resolved(young.queue_offset) and svc.window.checks(young.queue_offset) == 0
    await stop(store, svc)


async def test_a_batch_decision_writes_few_op_records_and_a_restart_replays_them(tmp_path: Path) -> None:
    clock = ManualClock()
    store, svc = await start(tmp_path, clock)
    n = OFFSETS_PER_OP_RECORD * 2 + 6
    halves = [await half(store, svc, b"m%d" % i) for i in range(n)]
    commits, rollbacks = halves[: n - 5], halves[n - 5 :]
    ops = store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0)
    answers = await svc.decide_many(commits, Outcome.COMMIT)
    assert answers == [(ResponseCode.SUCCESS, None)] * len(commits)
    assert store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0) == ops + 3  # 256 + 256 + 1 offsets
    await svc.decide_many(rollbacks, Outcome.ROLLBACK)
    assert store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0) == ops + 4
    assert svc.window.progress == n and len(real(store)) == n - 5
    await stop(store, svc)

    store, svc = await start(tmp_path, clock)  # the replay rebuilds every outcome
    assert svc.window.progress == n
    code, remark = await svc.decide(halves[-1], Outcome.COMMIT)
    assert code == ResponseCode.TRANSACTION_SHOULD_ROLLBACK and "already rolled back" in (remark or "")
    code, remark = await svc.decide(halves[0], Outcome.COMMIT)
    assert code == ResponseCode.SUCCESS and "already committed" in (remark or "")
    await stop(store, svc)


async def test_a_check_round_yields_while_it_steps_over_decided_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One old undecided half message keeps the walk's start in place; the many decided after it
    are stepped over a slice at a time, the loop served in between."""
    monkeypatch.setattr(check, "SKIPS_PER_YIELD", 50)
    clock = ManualClock()
    store, svc = await start(tmp_path, clock)
    stuck = await half(store, svc, b"stuck")
    later = [await half(store, svc, b"m%d" % i) for i in range(400)]
    await svc.decide_many(later, Outcome.COMMIT)
    assert svc.window.progress == stuck.queue_offset
    clock.t += 1.1  # all old enough to check; "stuck" has no producer to ask

    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = turns
    assert await svc.checker.check_round() == 1  # "stuck" examined; the 400 stepped over
    task.cancel()
    assert turns - before >= 400 // 50  # at least one loop turn per slice of 50
    await stop(store, svc)


async def test_a_half_with_no_producer_holding_too_many_decisions_is_counted_then_discarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a live producer a check is not counted, unless the window holds MAX_DECIDED_AHEAD
    decisions behind the half message: then it is, and transactionCheckMax (2 here) of them
    discard it, and the window moves past everything decided."""
    clock = ManualClock()
    store, svc = await start(tmp_path, clock)
    stuck = await half(store, svc, b"stuck")
    later = [await half(store, svc, b"m%d" % i) for i in range(20)]
    await svc.decide_many(later, Outcome.COMMIT)
    clock.t += 1.1
    assert await svc.checker.check_round() == 1
    assert svc.window.checks(stuck.queue_offset) == 0  # a small window waits for the producer
    monkeypatch.setattr(check, "MAX_DECIDED_AHEAD", 20)
    for expected_checks in (1, 2):
        assert await svc.checker.check_round() == 1
        assert svc.window.checks(stuck.queue_offset) == expected_checks
    assert svc.checker.checks_sent == 0  # counted, never sent: nobody to ask
    assert await svc.checker.check_round() == 1
    assert svc.window.outcome(stuck.queue_offset) is Outcome.DISCARD
    assert svc.window.progress == later[-1].queue_offset + 1 and not svc.window.decided
    await stop(store, svc)


def encoded(msg: BrokerMessage) -> bytes:
    return encode_record(topic=msg.topic, body=msg.body, properties=msg.properties)


def test_op_records_name_one_or_many_offsets_as_rocketmq_4_and_5_write_them() -> None:
    host = ("127.0.0.1", 10911)
    for body, offsets in ((b"7", [7]), (b"1,2,30", [1, 2, 30]), (b"4,5,", [4, 5])):
        msg = op_message([0], Outcome.ROLLBACK, host, 0)
        msg.body = body
        assert parse_op(encoded(msg)) == (offsets, Outcome.ROLLBACK)
    check = op_message([9, 10], None, host, 0)
    assert check.body == b"9,10" and parse_op(encoded(check)) == ([9, 10], None)
    bad = op_message([1], Outcome.COMMIT, host, 0)
    bad.body = b"1,x"
    assert parse_op(encoded(bad)) is None
