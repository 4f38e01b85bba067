"""POP bookkeeping across ``kill -9`` of the broker: thousands in flight, every one accounted for.

A group pops every message of a backlog and acks a third of them; the broker is killed with
SIGKILL and started again on the same store. Then, counting: every popped-but-unacked message is
in flight again (consumerProgress) and comes back after its invisible time, exactly the unacked
ones, and no acked one ever does. Run twice: with ASYNC_FLUSH
and no ``popState.json`` ever written (the whole revive log is replayed), and with SYNC_FLUSH and
the snapshot written every 200 ms (replay starts where the last one says).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rocketpy import Admin, ConsumeFromWhere, Message, MessageExt, Producer, SimpleConsumer
from tests.integration.test_pop import mqadmin_json

MESSAGES = 6000
INVISIBLE_S = 60  # the pops, the kill and the restart all fit well within it, on a loaded machine too
TOPIC = "PopCrash"


def broker_props(store: Path, flush_type: str, snapshot_ms: int) -> dict[str, object]:
    return {
        "brokerName": "broker-p",  # receipt handles name it: the same after the restart
        "storePathRootDir": store,
        "flushDiskType": flush_type,
        "flushConsumerOffsetInterval": snapshot_ms,  # popState.json (and consumerOffset.json)
    }


async def _backlog(ns: str) -> list[str]:
    async with Admin(ns) as admin:
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
    ids: list[str] = []
    async with Producer("pg_crash", namesrv_addr=ns) as p:
        for start in range(0, MESSAGES, 100):
            results = await p.send_batch([Message(TOPIC, b"%d" % i) for i in range(start, start + 100)])
            ids += [r.msg_id for r in results]
    return ids


async def _pop_all(ns: str) -> tuple[set[str], set[str]]:
    """Pop the whole backlog; ack every third message. Returns (acked ids, unacked ids)."""
    acked: set[str] = set()
    unacked: set[str] = set()
    c = SimpleConsumer("g_crash", ns, subscriptions={TOPIC: "*"}, await_duration=1,
                       consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    async with c:
        while len(acked) + len(unacked) < MESSAGES:
            msgs = await c.receive(32, INVISIBLE_S)
            assert msgs, "the backlog ran dry early"
            to_ack = [m for m in msgs if int(m.body) % 3 == 0]
            await c.ack(to_ack)
            acked |= {m.msg_id for m in to_ack}
            unacked |= {m.msg_id for m in msgs if m not in to_ack}
    return acked, unacked


async def _drain_again(ns: str, want: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    c = SimpleConsumer("g_crash", ns, subscriptions={TOPIC: "*"}, await_duration=3)
    async with c:
        for _ in range(want // 16 + 30):  # the in-flight messages revive INVISIBLE_S after their pop
            msgs = await c.receive(32, 60)
            await c.ack(msgs)
            got += msgs
            if len(got) >= want:
                break
        assert await c.receive(32, 60) == []
    return got


@pytest.mark.parametrize(("flush_type", "snapshot_ms"), [("ASYNC_FLUSH", 600_000), ("SYNC_FLUSH", 200)])
async def test_kill_9_with_thousands_in_flight(
    daemons: Any, tmp_path: Path, flush_type: str, snapshot_ms: int
) -> None:
    namesrv = daemons.namesrv()
    ns = namesrv.addr
    props = broker_props(tmp_path / "pop-store", flush_type, snapshot_ms)
    broker = daemons.broker(ns, **props)
    ids = await _backlog(ns)
    acked, unacked = await _pop_all(ns)
    assert len(acked) == MESSAGES // 3 and len(unacked) == MESSAGES - len(acked)
    before = await mqadmin_json(ns, "consumerProgress", "-g", "g_crash", "-t", TOPIC)
    assert before["inflightTotal"] == len(unacked)

    broker.kill()  # SIGKILL: no shutdown step runs
    daemons.broker(ns, **props)

    after = await mqadmin_json(ns, "consumerProgress", "-g", "g_crash", "-t", TOPIC)
    assert after["inflightTotal"] == len(unacked), "every popped, unacked message is in flight again"
    assert {r["consumer_offset"] for r in after["queues"]} == {r["consumer_offset"] for r in before["queues"]}
    again = await _drain_again(ns, len(unacked))
    got = [m.msg_id for m in again]
    assert len(got) == len(set(got)) == len(unacked), "each unacked message comes back exactly once"
    assert set(got) == unacked and not set(got) & acked, "no acked message comes back"
    assert {m.reconsume_times for m in again} == {1}
    assert sorted(acked | unacked) == sorted(ids)
    final = await mqadmin_json(ns, "consumerProgress", "-g", "g_crash", "-t", TOPIC)
    assert final["inflightTotal"] == 0 and final["diffTotal"] == 0
