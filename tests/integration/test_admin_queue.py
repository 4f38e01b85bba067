"""mqadmin queryCq and deleteExpiredCommitLog against real daemons: a consume queue's units as the
broker stores them (with a named group, which of them its TAG or SQL92 subscription takes), and
the commitlog files past fileReservedTime (changed live) deleted on request instead of at the
deleteWhen hour."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rocketpy import Admin, Message, Producer
from rocketpy.client.consumer_types import MessageSelector
from rocketpy.client.lite_pull_consumer import LitePullConsumer
from rocketpy.filter.tags import java_string_hash
from tests.conftest import DaemonPool
from tests.integration.test_admin_ops import mqadmin, mqadmin_json
from tests.waiting import wait_until_async

TOPIC = "CqT"
FAST = {"heartbeat_broker_interval": 0.5, "poll_name_server_interval": 1.0, "rebalance_interval": 1.0}


async def _online(ns: str, group: str) -> None:
    async def seen() -> bool:
        body = await mqadmin_json(ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-g", group)
        return body["subscriptionData"] is not None

    await wait_until_async(seen, 20, message=f"{group}'s subscription reached the broker")


async def test_query_cq_shows_units_and_what_a_group_takes(daemons: DaemonPool) -> None:
    ns = daemons.namesrv().addr
    broker = daemons.broker(ns, enablePropertyFilter="true")
    async with Admin(ns, timeout=3.0) as admin:
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
    producer = Producer("cq_pg", ns)
    await producer.start()
    try:
        for n in range(6):
            await producer.send(Message(TOPIC, b"m%d" % n, tags="AB"[n % 2], properties={"n": str(n)}))
    finally:
        await producer.shutdown()
    consumers: list[Any] = []
    for group, selector in (("cq_tag_g", "A"), ("cq_sql_g", MessageSelector.by_sql("n > 2"))):
        c = LitePullConsumer(group, ns, auto_commit=False, **FAST)
        c.subscribe(TOPIC, selector)
        await c.start()
        consumers.append(c)
    try:
        plain = await mqadmin_json(ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0")
        assert plain["broker"] == broker.addr  # the topic's first broker when -b is not given
        assert (plain["maxQueueIndex"], plain["minQueueIndex"]) == (6, 0)
        units = plain["queueData"]
        assert [u["tagsCode"] for u in units] == [java_string_hash("AB"[n % 2]) for n in range(6)]
        assert units[0]["physicOffset"] == 0 and all(u["physicSize"] > 0 for u in units)
        offsets = [u["physicOffset"] for u in units]
        assert offsets == [offsets[0] + sum(u["physicSize"] for u in units[:i]) for i in range(6)]
        assert not any(u["eval"] for u in units) and plain["subscriptionData"] is None

        await _online(ns, "cq_tag_g")
        tag = await mqadmin_json(ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-g", "cq_tag_g")
        assert [u["eval"] for u in tag["queueData"]] == [n % 2 == 0 for n in range(6)]
        assert tag["subscriptionData"]["subString"] == "A" and tag["filterData"] is None
        await _online(ns, "cq_sql_g")
        sql = await mqadmin_json(
            ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "1", "-c", "4", "-g", "cq_sql_g"
        )
        assert [u["eval"] for u in sql["queueData"]] == [False, False, True, True]  # n = 1..4
        assert "n > 2" in sql["filterData"] and sql["subscriptionData"]["expressionType"] == "SQL92"
        offline = await mqadmin_json(ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-g", "nobody_g")
        assert offline["filterData"] == "nobody_g@CqT is not online!"

        text = await mqadmin(ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "2", "-c", "2", "-g", "cq_tag_g")
        lines = text.splitlines()
        assert lines[0] == "Subscription data: " and '"subString": "A"' in text
        rule = "======================================"
        at = lines.index("Queue data: ")
        u2, u3 = units[2], units[3]
        assert lines[at:] == [
            "Queue data: ", "max: 6, min: 0", rule,
            "idx: 2",
            f"ConsumeQueueData{{physicOffset={u2['physicOffset']}, physicSize={u2['physicSize']}, "
            f"tagsCode={u2['tagsCode']}, extendDataJson='null', bitMap='null', eval=true, msg='null'}}",
            rule,
            "idx: 3",
            f"ConsumeQueueData{{physicOffset={u3['physicOffset']}, physicSize={u3['physicSize']}, "
            f"tagsCode={u3['tagsCode']}, extendDataJson='null', bitMap='null', eval=false, msg='null'}}",
            rule,
        ]  # fmt: skip

        past = await mqadmin_json(ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "6")
        assert past["queueData"] == [] and past["maxQueueIndex"] == 6
        err = await mqadmin(ns, "queryCq", "-t", TOPIC, "-q", "3", "-i", "0", "-b", broker.addr, ok=False)
        assert "queue 3@CqT does not exist on this broker" in err and "topicStatus" in err
        err = await mqadmin(ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "0", ok=False)
        assert "--count" in err
    finally:
        for c in consumers:
            await c.shutdown()


async def test_delete_expired_commitlog_deletes_now_not_at_the_delete_hour(
    daemons: DaemonPool, tmp_path: Path
) -> None:
    ns = daemons.namesrv().addr
    store = tmp_path / "expire-store"
    other_hour = f"{(time.localtime().tm_hour + 12) % 24:02d}"  # the periodic pass does not delete
    props = {"mappedFileSizeCommitLog": 64 * 1024, "deleteWhen": other_hour}  # fileReservedTime 72 h
    broker = daemons.broker(ns, storePathRootDir=store, **props)
    async with Admin(ns, timeout=3.0) as admin:
        await admin.create_topic("ExpireT", broker_addr=broker.addr, read_queue_nums=1, write_queue_nums=1)
    producer = Producer("expire_pg", ns)
    await producer.start()
    try:
        for i in range(100):
            await producer.send(Message("ExpireT", b"%04d" % i + b"p" * 2000))
    finally:
        await producer.shutdown()
    before = sorted(p.name for p in (store / "commitlog").iterdir())
    assert len(before) >= 4
    status = (await mqadmin_json(ns, "topicStatus", "-t", "ExpireT"))["queues"][0]
    assert (status["min_offset"], status["max_offset"]) == (0, 100)

    nothing = await mqadmin_json(ns, "deleteExpiredCommitLog", "-b", broker.addr)
    assert nothing["brokers"] == {broker.addr: {"filesDeleted": 0}}  # none is 72 h old
    # the operator shortens the reservation while the broker runs, then deletes at once
    await mqadmin(ns, "updateBrokerConfig", "-b", broker.addr, "-k", "fileReservedTime", "-v", "0")
    config = await mqadmin_json(ns, "getBrokerConfig", "-b", broker.addr)
    assert config[broker.addr]["fileReservedTime"] == "0"
    assert (await mqadmin(ns, "deleteExpiredCommitLog", "-b", broker.addr)).strip() == "success"
    after = sorted(p.name for p in (store / "commitlog").iterdir())
    # every file before the one being written was past fileReservedTime (0 h); that one stays, and
    # the next one when the allocator has made it already
    kept = before[len(before) - len(after) :]
    assert 1 <= len(after) <= 2 and after == kept and len(before) - len(after) >= 2
    status = (await mqadmin_json(ns, "topicStatus", "-t", "ExpireT"))["queues"][0]
    assert 0 < status["min_offset"] < 100 and status["max_offset"] == 100
    again = await mqadmin_json(ns, "deleteExpiredCommitLog", "-c", "DefaultCluster")
    assert again == {"success": True, "brokers": {broker.addr: {"filesDeleted": 0}}}
