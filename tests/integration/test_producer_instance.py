"""MQClientInstance against real daemons: sharing, heartbeats, consumer-ids notifications, unregister."""

from __future__ import annotations

from typing import Any

from rocketpy import Admin, Producer
from rocketpy.client.consumer_types import build_subscription
from rocketpy.client.instance import ClientSettings, MQClientInstance, new_client_id
from tests.conftest import DaemonPool
from tests.waiting import wait_until_async

FAST = ClientSettings(heartbeat_broker_interval=0.3, poll_name_server_interval=0.3)


class RecordingConsumer:
    """The consumer shape the instance needs, recording notifications."""

    consume_type = "CONSUME_ACTIVELY"
    message_model = "CLUSTERING"
    consume_from_where = "CONSUME_FROM_LAST_OFFSET"

    def __init__(self, group: str, topic: str) -> None:
        self.group = group
        self.client_id = new_client_id()
        self.topic = topic
        self.notified = 0

    def subscriptions(self) -> list[dict[str, Any]]:
        return [build_subscription(self.topic, "*").to_wire()]

    async def on_consumer_ids_changed(self) -> None:
        self.notified += 1


async def test_instances_shared_and_released(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    async with Producer("p1", ns.addr) as p1, Producer("p2", ns.addr) as p2:
        assert p1._inst() is p2._inst()
        inst = p1._inst()
    assert inst.closed


async def test_heartbeat_notify_and_unregister(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin:
        await admin.create_topic("InstT", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    inst = await MQClientInstance.acquire(ns.addr, config=FAST)
    c1, c2 = RecordingConsumer("g-inst", "InstT"), RecordingConsumer("g-inst", "InstT")
    try:
        inst.register_consumer(c1.group, c1.client_id, c1)
        assert await inst.update_topic_route("InstT") is not None
        await inst.send_heartbeat_to_all_brokers()
        assert await inst.find_consumer_id_list("InstT", "g-inst") == [c1.client_id]

        inst.register_consumer(c2.group, c2.client_id, c2)  # joins on the next periodic heartbeat
        ids = sorted([c1.client_id, c2.client_id])
        await wait_until_async(lambda: _any(_ids_equal(inst, ids)), 5.0)
        await wait_until_async(lambda: c1.notified > 0, 5.0, message="NOTIFY_CONSUMER_IDS_CHANGED dispatched")

        await inst.unregister_consumer(c2.group, c2.client_id)
        assert await inst.find_consumer_id_list("InstT", "g-inst") == [c1.client_id]
    finally:
        await inst.release()
    other = await MQClientInstance.acquire(ns.addr)
    try:
        await other.update_topic_route("InstT")
        assert await other.find_consumer_id_list("InstT", "g-inst") == []  # release unregistered c1
    finally:
        await other.release()


async def _ids_equal(inst: MQClientInstance, ids: list[str]) -> bool:
    return await inst.find_consumer_id_list("InstT", "g-inst") == ids


async def test_route_refresh_picks_up_new_broker(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin:
        await admin.create_topic("GrowT", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        inst = await MQClientInstance.acquire(ns.addr, config=FAST)
        try:
            await inst.update_topic_route("GrowT")
            assert len(inst.subscribe_queues("GrowT")) == 2
            daemons.broker(ns.addr)
            await admin.create_topic("GrowT", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
            # the periodic refresh (0.3 s) must see the second broker without an explicit update
            await wait_until_async(lambda: len(inst.subscribe_queues("GrowT")) == 4, 10.0)
            assert len(inst.broker_names()) == 2
        finally:
            await inst.release()


def _any(value: object) -> Any:
    """Type an awaitable predicate result as Any for wait_until_async (its TypeVar cannot be solved)."""
    return value
