"""Pure parts of the consumers: allocation, process queue, subscriptions, local offset store."""

from __future__ import annotations

import json

import pytest

from rocketpy.client.allocate import (
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_by_config,
    allocate_consistent_hash,
    strategy_fn,
)
from rocketpy.client.consumer_types import (
    AllocateStrategy,
    ConsumeFromWhere,
    ExpressionType,
    MessageSelector,
    build_subscription,
    coerce_enum,
)
from rocketpy.client.offset_store import LocalFileOffsetStore
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.errors import MQClientError
from rocketpy.message import MessageExt, MessageQueue


def _mqs(n: int, broker: str = "b") -> list[MessageQueue]:
    return [MessageQueue("T", broker, i) for i in range(n)]


def _ids(mqs: list[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in mqs]


def test_averagely_8_over_3() -> None:
    mqs, cids = _mqs(8), ["c0", "c1", "c2"]
    assert [_ids(allocate_averagely(c, mqs, cids)) for c in cids] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_averagely_more_consumers_than_queues() -> None:
    mqs, cids = _mqs(2), ["a", "b", "c"]
    assert [_ids(allocate_averagely(c, mqs, cids)) for c in cids] == [[0], [1], []]
    assert allocate_averagely("zz", mqs, cids) == []


def test_by_circle_8_over_3() -> None:
    mqs, cids = _mqs(8), ["c0", "c1", "c2"]
    assert [_ids(allocate_averagely_by_circle(c, mqs, cids)) for c in cids] == [[0, 3, 6], [1, 4, 7], [2, 5]]


@pytest.mark.parametrize("n_mq,n_cid", [(8, 3), (16, 5), (4, 4), (3, 7), (32, 2)])
def test_strategies_partition_the_queues(n_mq: int, n_cid: int) -> None:
    mqs = _mqs(n_mq)
    cids = [f"10.0.0.1@i@{k}" for k in range(n_cid)]
    for fn in (allocate_averagely, allocate_averagely_by_circle, allocate_consistent_hash):
        got = [mq for c in cids for mq in fn(c, mqs, cids)]
        assert sorted(got) == mqs, fn.__name__


def test_consistent_hash_moves_few_queues() -> None:
    mqs = _mqs(64)
    before = {c: set(allocate_consistent_hash(c, mqs, ["a", "b", "c"])) for c in "abc"}
    after = {c: set(allocate_consistent_hash(c, mqs, ["a", "b", "c", "d"])) for c in "abcd"}
    for c in "abc":
        assert after[c] <= before[c]  # a join only takes queues away to the new member


def test_by_config_and_strategy_fn() -> None:
    mqs = _mqs(4)
    fn = strategy_fn(AllocateStrategy.BY_CONFIG, [mqs[1], MessageQueue("T", "gone", 0)])
    assert fn("x", mqs, ["x", "y"]) == [mqs[1]]
    assert allocate_by_config([mqs[3]])("y", mqs, []) == [mqs[3]]
    with pytest.raises(MQClientError, match="allocate_queues"):
        strategy_fn(AllocateStrategy.BY_CONFIG)


def _msg(offset: int, size: int = 10) -> MessageExt:
    return MessageExt("T", b"x" * size, queue_offset=offset)


def test_process_queue_commit_never_passes_inflight() -> None:
    pq = ProcessQueue()
    assert pq.commit_offset() == -1
    msgs = [_msg(i) for i in range(5, 10)]
    pq.put(msgs)
    assert (pq.msg_count, pq.msg_bytes) == (5, 50)
    assert pq.remove([msgs[2], msgs[4]]) == 5  # 5 still in flight
    assert pq.remove([msgs[0]]) == 6
    assert pq.remove([msgs[1], msgs[3]]) == 10
    assert (pq.msg_count, pq.msg_bytes) == (0, 0)


def test_process_queue_flow_control_and_duplicates() -> None:
    pq = ProcessQueue()
    pq.put([_msg(i, 100) for i in range(10)])
    pq.put([_msg(3, 100)])  # already held: ignored
    assert pq.msg_count == 10
    assert pq.is_full(10, 10**9) and pq.is_full(1000, 1000) and not pq.is_full(11, 1001)


def test_process_queue_orderly_take_commit_put_back() -> None:
    pq = ProcessQueue()
    pq.put([_msg(i) for i in range(4)])
    assert [m.queue_offset for m in pq.take(1)] == [0]
    assert pq.commit_offset() == 0
    assert pq.commit_taken() == 1
    taken = pq.take(2)
    pq.put_back_taken()
    assert [m.queue_offset for m in pq.take(5)] == [m.queue_offset for m in taken] + [3]
    assert pq.commit_taken() == 4 and not pq.has_waiting()


def test_subscription_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    sd = build_subscription("T", "TagA || TagB ")
    assert sd.tags_set == {"TagA", "TagB"}
    assert sd.code_set == {2598919, 2598920}  # Java "TagA".hashCode(), "TagB".hashCode()
    assert sd.matches_tag("TagA") and not sd.matches_tag("TagC") and not sd.matches_tag(None)
    wire = sd.to_wire()
    assert wire["subString"] == "TagA || TagB" and wire["expressionType"] == "TAG"
    for expr in ("*", "", None, MessageSelector.by_tag("*")):
        assert build_subscription("T", expr).is_all
    sql = build_subscription("T", MessageSelector.by_sql("a > 1"))
    assert sql.expression_type is ExpressionType.SQL92 and sql.matches_tag(None)


def test_bad_input_messages() -> None:
    with pytest.raises(MQClientError, match="non-empty"):
        build_subscription("", "*")
    with pytest.raises(MQClientError, match="MessageSelector"):
        build_subscription("T", 5)  # type: ignore[arg-type]
    with pytest.raises(MQClientError, match="CONSUME_FROM_FIRST_OFFSET"):
        coerce_enum(ConsumeFromWhere, "FROM_MOON", "consume_from_where")
    assert (
        coerce_enum(ConsumeFromWhere, "consume_from_first_offset", "x")
        is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )


async def test_local_offset_store_roundtrip(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETPY_OFFSETS_DIR", str(tmp_path))
    store = LocalFileOffsetStore("g", "1.2.3.4@inst")
    with pytest.raises(MQClientError, match="instance_name"):
        LocalFileOffsetStore("g", "1.2.3.4@inst")
    mq = MessageQueue("T", "b", 3)
    store.update(mq, 42)
    store.update(mq, 7)  # never moves back on its own
    await store.persist([mq])
    await store.close()
    doc = json.loads((tmp_path / "1.2.3.4@inst" / "g" / "offsets.json").read_text())
    assert doc["offsetTable"] == [{"topic": "T", "brokerName": "b", "queueId": 3, "offset": 42}]
    again = LocalFileOffsetStore("g", "1.2.3.4@inst")
    await again.load()
    assert await again.read(mq) == 42
    await again.close()
