"""mqadmin statsAll against real daemons: RocketMQ's per topic and group line (accumulation, in/out
TPS, the day's in/out messages) from VIEW_BROKER_STATS_DATA and GET_BROKER_CONSUME_STATS, ``-a``
and ``-t``, table and --json."""

from __future__ import annotations

from typing import Any

from rocketpy import Admin, ConsumeStatus, Message, Producer, PushConsumer
from rocketpy.client.admin_stats import broker_consume_stats, view_broker_stats_data
from rocketpy.message import MessageExt
from tests.conftest import DaemonPool
from tests.consumer_settings import FAST_CONSUMER
from tests.integration.test_admin_ops import mqadmin, mqadmin_json
from tests.waiting import wait_until_async

TOPIC, IDLE, GROUP = "StatsT", "StatsIdleT", "stats_g"


async def test_stats_all(daemons: DaemonPool) -> None:
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
        [row] = (await mqadmin_json(ns, "statsAll", "-t", TOPIC))["stats"]
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
    finally:
        await producer.shutdown()
        await consumer.shutdown()
        await admin.shutdown()
