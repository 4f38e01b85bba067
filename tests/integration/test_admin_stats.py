"""mqadmin statsAll, cleanExpiredCQ and cleanUnusedTopic against real daemons: statsAll's per topic
and group line (accumulation, in/out TPS, the day's in/out messages) from VIEW_BROKER_STATS_DATA and
GET_BROKER_CONSUME_STATS, ``-a`` and ``-t``, table and --json; the cleans on a restarted store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from rocketpy import Admin, ConsumeStatus, Message, Producer, PushConsumer
from rocketpy.admin_cli import mqadmin as commands
from rocketpy.client.admin_stats import broker_consume_stats, view_broker_stats_data
from rocketpy.message import MessageExt
from tests.conftest import DaemonPool
from tests.consumer_settings import FAST_CONSUMER
from tests.integration.test_admin_ops import mqadmin, mqadmin_json
from tests.waiting import wait_until_async

TOPIC, IDLE, GROUP = "StatsT", "StatsIdleT", "stats_g"


async def test_stats_all_and_export_metrics(daemons: DaemonPool, tmp_path: Path) -> None:
    ns = daemons.namesrv().addr
    broker = daemons.broker(ns)
    admin = Admin(ns, timeout=3.0)
    await admin.start()
    for topic in (TOPIC, IDLE):
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    got: list[bytes] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        got.extend(bytes(m.body) for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, ns, **FAST_CONSUMER)
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    producer = Producer("stats_pg", ns)
    await consumer.start()
    await producer.start()
    try:
        for i in range(5):
            await producer.send(Message(TOPIC, b"s%d" % i))
        await wait_until_async(lambda: len(got) >= 5, 30, message="consumed")

        async def caught_up() -> bool:
            rows = (await mqadmin_json(ns, "statsAll", "-t", TOPIC))["stats"]
            return [(r["group"], r["accumulation"], r["outMsg24Hour"]) for r in rows] == [(GROUP, 0, 5)]

        await wait_until_async(caught_up, 30, interval=0.5, message="stats_g committed all 5")
        doc = await mqadmin_json(ns, "statsAll", "-t", TOPIC)
        [row] = doc["stats"]
        assert doc["failed"] == {}
        assert row["topic"] == TOPIC and row["inMsg24Hour"] == 5
        assert row["inTps"] > 0 and row["outTps"] > 0

        table = (await mqadmin(ns, "statsAll")).splitlines()
        head = "{:<64}  {:<64} {:>12} {:>11} {:>11} {:>14} {:>14}"
        assert table[0] == head.format(
            "#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"
        )
        mine = [line for line in table if line.startswith(TOPIC + " ")]
        assert len(mine) == 1 and mine[0].split()[:3] == [TOPIC, GROUP, "0"]
        assert mine[0].split()[-2:] == ["5", "5"]
        idle = [line.split() for line in table if line.startswith(IDLE + " ")]
        assert idle == [[IDLE, "0", "0.00", "0", "NO_CONSUMER"]]
        assert not any(line.startswith("%RETRY%") for line in table)
        usage = CliRunner().invoke(commands, ["--help"]).output
        helped = usage.split("Broker and cluster commands:")[1].split("commands:")[0]
        assert all(c in helped for c in ("statsAll", "cleanExpiredCQ", "cleanUnusedTopic"))
        active = await mqadmin(ns, "statsAll", "-a")
        assert TOPIC in active and IDLE not in active

        # the broker's answers themselves
        day = await view_broker_stats_data(admin, broker.addr, "TOPIC_PUT_NUMS", TOPIC)
        assert day is not None and day["statsDay"]["sum"] == 5 and day["statsDay"]["avgpt"] == 1.0
        assert set(day) == {"statsMinute", "statsHour", "statsDay"}
        assert await view_broker_stats_data(admin, broker.addr, "TOPIC_PUT_NUMS", "NoSuchTopic") is None
        total = await view_broker_stats_data(admin, broker.addr, "BROKER_PUT_NUMS", "DefaultCluster")
        assert total is not None and total["statsDay"]["sum"] >= 5
        listing = await broker_consume_stats(admin, broker.addr)
        assert listing["brokerAddr"] == broker.addr and listing["totalDiff"] == 0
        groups = {g for entry in listing["consumeStatsList"] for g in entry}
        assert GROUP in groups

        # exportMetrics: RocketMQ's metrics.json from the same figures
        said = await mqadmin(ns, "exportMetrics", "-c", "DefaultCluster", "-f", str(tmp_path))
        assert said.strip() == f"export {tmp_path / 'metrics.json'} success"
        metrics = json.loads((tmp_path / "metrics.json").read_text())
        report = metrics["evaluateReport"]["broker-a"]
        quota = report["runtimeQuota"]
        assert quota["oneDayNum"]["normalOneDayInNum"] >= 5 and quota["oneDayNum"]["normalOneDayOutNum"] >= 5
        assert quota["oneDayNum"]["transOneDayInNum"] == quota["oneDayNum"]["scheduleOneDayInNum"] == 0
        assert set(quota["tps"]) == {"normalInTps", "normalOutTps", "transInTps", "scheduleInTps"}
        assert quota["topicSize"] >= 2 and quota["groupSize"] >= 1 and float(quota["messageAverageSize"]) > 0
        assert set(quota["diskRatio"]) == {"commitLogDiskRatio", "consumeQueueDiskRatio"}
        assert int(report["runtimeEnv"]["totalMemKBytes"]) > 0 and int(report["runtimeEnv"]["cpuNum"]) >= 1
        version = report["runtimeVersion"]
        assert version["rocketmqVersion"].startswith("rocketpy") and version["clientInfo"]
        assert all("%" in c for c in version["clientInfo"])
        totals = metrics["totalData"]
        assert totals["totalOneDayNum"]["normalOneDayInNum"] == quota["oneDayNum"]["normalOneDayInNum"]
        assert totals["totalTps"]["totalNormalInTps"] == quota["tps"]["normalInTps"]
        unknown = await mqadmin(ns, "exportMetrics", "-c", "NoSuchCluster", "-f", str(tmp_path), ok=False)
        assert "NoSuchCluster" in unknown
    finally:
        await producer.shutdown()
        await consumer.shutdown()
        await admin.shutdown()


async def test_clean_expired_cq_and_unused_topic(daemons: DaemonPool, tmp_path: Path) -> None:
    """A broker restarted after its commitlog lost its oldest files (the consume queues kept
    theirs) and two topics were dropped from its topics.json: cleanExpiredCQ deletes the consume
    queue files before the commitlog's start and the dropped topic whose data is all gone;
    cleanUnusedTopic then removes the other dropped topic; reads and offsets stay right."""
    ns = daemons.namesrv().addr
    store = tmp_path / "clean-store"
    props = {
        "brokerName": "broker-c",
        "storePathRootDir": store,
        "mappedFileSizeCommitLog": 64 * 1024,
        "mappedFileSizeConsumeQueue": 200,  # 10 units a file
    }
    broker = daemons.broker(ns, **props)
    admin = Admin(ns, timeout=3.0)
    await admin.start()
    try:
        for topic in ("CleanT", "DropOld", "DropNew"):
            await admin.create_topic(topic, broker_addr=broker.addr, read_queue_nums=1, write_queue_nums=1)
        producer = Producer("clean_pg", ns)
        await producer.start()
        try:
            for i in range(5):
                await producer.send(Message("DropOld", b"o%d" % i))
            for i in range(120):
                await producer.send(Message("CleanT", b"%04d" % i + b"p" * 2000))
            for i in range(3):
                await producer.send(Message("DropNew", b"n%d" % i))
        finally:
            await producer.shutdown()
    finally:
        await admin.shutdown()
    broker.terminate()  # a clean stop
    commitlog = sorted((store / "commitlog").iterdir())
    assert len(commitlog) >= 4
    for path in commitlog[:-2]:
        path.unlink()
    topics_json = store / "config" / "topics.json"
    doc = json.loads(topics_json.read_text())
    for topic in ("DropOld", "DropNew"):
        del doc["topicConfigTable"][topic]
    topics_json.write_text(json.dumps(doc))
    broker = daemons.broker(ns, **props)
    cq = store / "consumequeue"

    def files(topic: str) -> list[str]:
        d = cq / topic / "0"
        return sorted(p.name for p in d.iterdir()) if d.exists() else []

    before = files("CleanT")
    assert len(before) == 12
    status = (await mqadmin_json(ns, "topicStatus", "-t", "CleanT"))["queues"][0]
    assert status["max_offset"] == 120 and status["min_offset"] > 10

    assert (await mqadmin(ns, "cleanExpiredCQ", "-b", broker.addr)).strip() == "success"
    after = files("CleanT")
    assert len(after) < len(before) and after == before[len(before) - len(after) :]
    assert not (cq / "DropOld").exists() and files("DropNew")  # DropNew's data is still stored
    again = await mqadmin_json(ns, "cleanExpiredCQ", "-c", "DefaultCluster")
    assert again == {"success": True, "brokers": {broker.addr: {"filesDeleted": 0}}}
    assert (await mqadmin_json(ns, "topicStatus", "-t", "CleanT"))["queues"][0] == status

    unused = await mqadmin_json(ns, "cleanUnusedTopic", "-c", "DefaultCluster")
    assert unused == {"success": True, "brokers": {broker.addr: {"topics": ["DropNew"]}}}
    assert sorted(
        p.name for p in cq.iterdir() if not p.name.startswith(("rmq_sys", "RMQ_SYS", "SCHEDULE"))
    ) == ["CleanT"]
    assert (await mqadmin(ns, "cleanUnusedTopic", "-b", broker.addr)).strip() == "success"

    broker.terminate()  # and it still recovers
    broker = daemons.broker(ns, **props)
    assert (await mqadmin_json(ns, "topicStatus", "-t", "CleanT"))["queues"][0]["max_offset"] == 120
    printed = await mqadmin_json(ns, "printMsgByQueue", "-t", "CleanT", "-a", "broker-c", "-i", "0")
    bodies = [m["body"][:4] for m in printed["messages"]]
    assert bodies == [f"{i:04d}" for i in range(status["min_offset"], 120)]
