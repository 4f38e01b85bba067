"""``Admin.consumer_groups`` and ``Admin.consumer_connections`` against a real NameServer + broker."""

from __future__ import annotations

from typing import Any

from rocketpy import Admin, ConsumeStatus, PushConsumer
from tests.conftest import DaemonPool
from tests.consumer_settings import FAST_CONSUMER
from tests.waiting import wait_until_async


async def test_groups_and_their_live_clients(daemons: DaemonPool) -> None:
    ns = daemons.namesrv().addr
    daemons.broker(ns)
    async with Admin(ns) as admin:
        await admin.create_topic("GroupsT", "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
        await admin.update_subscription_group("g_cfg", "DefaultCluster", retry_max_times=3)
        groups = await admin.consumer_groups()
        assert groups["g_cfg"]["retryMaxTimes"] == 3 and list(groups) == sorted(groups)
        assert await admin.consumer_connections("g_cfg") == []  # configured, nobody online

        consumer = PushConsumer("g_live", ns, **FAST_CONSUMER)
        consumer.subscribe("GroupsT", "*")
        consumer.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
        await consumer.start()
        try:

            async def online() -> list[dict[str, Any]]:
                return list(await admin.consumer_connections("g_live"))

            [client] = await wait_until_async(online, 20, interval=0.2, message="g_live online")
            assert client["clientId"] == consumer.client_id and client["brokers"] == ["broker-a"]
            assert client["clientAddr"].startswith("127.0.0.1:")
        finally:
            await consumer.shutdown()
