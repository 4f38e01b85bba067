"""Consumers keep working when a NameServer dies, and when one of two brokers is SIGKILLed."""

from __future__ import annotations

from typing import Any

from rocketpy import Admin, Message, Producer
from rocketpy.client.consumer_types import ConsumeStatus
from rocketpy.client.push_consumer import PushConsumer
from tests.waiting import wait_until_async

FAST = {
    "rebalance_interval": 1.0,
    "persist_consumer_offset_interval": 0.3,
    "heartbeat_broker_interval": 1.0,
    "poll_name_server_interval": 1.0,
    "consume_from_where": "CONSUME_FROM_FIRST_OFFSET",
}


def _listener(got: set[bytes]) -> Any:
    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    return listener


async def _send(namesrv: str, topic: str, bodies: list[bytes]) -> None:
    producer = Producer("pg_failover", namesrv_addr=namesrv, poll_name_server_interval=1.0)
    await producer.start()
    try:
        for b in bodies:
            await producer.send(Message(topic, b))
    finally:
        await producer.shutdown()


async def test_one_of_two_nameservers_killed(daemons: Any) -> None:
    ns1, ns2 = daemons.namesrv(), daemons.namesrv()
    both = f"{ns1.addr};{ns2.addr}"
    daemons.broker(both)
    topic = "FailoverNs"
    async with Admin(both) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    got: set[bytes] = set()
    c = PushConsumer("g_ns_failover", both, **FAST)
    c.subscribe(topic, "*")
    c.register_listener(_listener(got))
    await c.start()
    try:
        await _send(both, topic, [b"a%d" % i for i in range(20)])
        await wait_until_async(lambda: len(got) == 20, 20, message="before the kill")
        ns1.kill()
        await _send(both, topic, [b"b%d" % i for i in range(20)])
        await wait_until_async(lambda: len(got) == 40, 20, message="after one NameServer died")
        assert len(c.assigned_queues()) == 2
    finally:
        await c.shutdown()


async def test_one_of_two_brokers_killed(daemons: Any) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr, brokerName="broker-a")
    doomed = daemons.broker(ns.addr, brokerName="broker-b")
    topic = "FailoverBroker"
    async with Admin(ns.addr) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    got: set[bytes] = set()
    c = PushConsumer("g_broker_failover", ns.addr, **FAST)
    c.subscribe(topic, "*")
    c.register_listener(_listener(got))
    await c.start()
    try:
        await wait_until_async(lambda: len(c.assigned_queues()) == 4, 20, message="queues of both brokers")
        await _send(ns.addr, topic, [b"a%d" % i for i in range(20)])
        await wait_until_async(lambda: len(got) == 20, 20, message="before the kill")
        doomed.kill()
        await _send(ns.addr, topic, [b"b%d" % i for i in range(20)])  # the producer fails over
        await wait_until_async(lambda: got >= {b"b%d" % i for i in range(20)}, 30, message="after the kill")
    finally:
        await c.shutdown()
