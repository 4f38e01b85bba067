"""2m-2s under load: one master SIGKILLed while producers send and a consumer reads.

Sends keep succeeding on the other pair, the consumer keeps reading the dead master's queues from
its slave, no acknowledged message is lost (SYNC_MASTER: every acknowledged message is on the slave
at the moment of the kill; ASYNC_MASTER: the ones the slave had not yet got come back with the
master), and the restarted master replicates again from the slave's offset.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from rocketpy import Admin, Message, Producer, SendStatus
from rocketpy.client.consumer_types import ConsumeStatus
from rocketpy.client.push_consumer import PushConsumer
from rocketpy.msgid import decode_offset_msg_id
from tests.conftest import DaemonPool
from tests.daemons import Daemon
from tests.integration.test_ha import HA_FAST, has_topic, store_of, wait_identical, written_log
from tests.waiting import wait_until, wait_until_async

TOPIC = "HaLoad"
SENDERS = 4
ACKED_BEFORE_KILL = 400
ACKED_AFTER_KILL = 400
RECORD_MAGIC = b"\xda\xa3\x20\xa7"


def start_pair(daemons: DaemonPool, ns: str, name: str, role: str, **props: Any) -> tuple[Daemon, Daemon]:
    conf = {**HA_FAST, "syncFlushTimeout": 3000, **props}
    master = daemons.broker(ns, brokerName=name, brokerRole=role, **conf)
    slave = daemons.broker(ns, brokerName=name, brokerId=1, brokerRole="SLAVE", **conf)
    return master, slave


class Load:
    """SENDERS tasks sending without pause; acknowledged results kept by body."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.acked: dict[bytes, Any] = {}
        self.failures = 0
        self.seq = 0
        self.running = True

    async def sender(self) -> None:
        while self.running:
            self.seq += 1
            body = b"m%08d" % self.seq + b"." * 120
            try:
                r = await self.producer.send(Message(TOPIC, body))
            except Exception:  # the dying master: not acknowledged, so not owed
                self.failures += 1
                await asyncio.sleep(0.01)
                continue
            if r.status is SendStatus.SEND_OK:
                self.acked[body] = r

    def acked_on(self, broker: str) -> list[Any]:
        return [r for r in self.acked.values() if r.message_queue.broker_name == broker]


@pytest.mark.parametrize("role", ["SYNC_MASTER", "ASYNC_MASTER"])
async def test_2m_2s_master_killed_under_load(daemons: DaemonPool, role: str) -> None:
    ns = daemons.namesrv()
    master_a, slave_a = start_pair(daemons, ns.addr, "broker-a", role)
    start_pair(daemons, ns.addr, "broker-b", role)
    async with Admin(ns.addr) as admin:
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
    got: set[bytes] = set()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("g_load", ns.addr, rebalance_interval=1.0, persist_consumer_offset_interval=0.3,
                            heartbeat_broker_interval=1.0, poll_name_server_interval=0.5,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    producer = Producer("g_load_p", ns.addr, send_timeout=2.0, poll_name_server_interval=0.5,
                        heartbeat_broker_interval=1.0,
                        retry_another_broker_when_not_store_ok=True)  # fmt: skip
    async with producer:
        load = Load(producer)

        async def both_pairs_ack() -> bool:  # SYNC_MASTER: each slave connected
            return {r.message_queue.broker_name for r in load.acked.values()} == {"broker-a", "broker-b"}

        await consumer.start()
        tasks = [asyncio.create_task(load.sender()) for _ in range(SENDERS)]
        try:
            await wait_until_async(both_pairs_ack, 30.0, message="acks from both pairs")
            await wait_until_async(lambda: len(load.acked) >= ACKED_BEFORE_KILL, 60.0)
            wait_until(lambda: has_topic(slave_a, TOPIC), 10.0)
            master_a.kill()
            killed_at = len(load.acked)
            acked_a = load.acked_on("broker-a")
            if role == "SYNC_MASTER":  # every acknowledged record is already in the slave's commitlog
                log = written_log(store_of(slave_a))
                for r in acked_a:
                    _, _, offset = decode_offset_msg_id(r.offset_msg_id)
                    assert log[offset + 4 : offset + 8] == RECORD_MAGIC, r
            # sends go on, to the other pair
            await wait_until_async(lambda: len(load.acked) >= killed_at + ACKED_AFTER_KILL, 60.0,
                                   message="acks after the kill")  # fmt: skip
            late = list(load.acked.values())[killed_at + SENDERS :]  # in flight at the kill excluded
            assert {r.message_queue.broker_name for r in late} == {"broker-b"}
            # the consumer reads broker-a's queues from its slave (SYNC: everything acknowledged)
            if role == "SYNC_MASTER":
                want = {m for m, r in load.acked.items() if r.message_queue.broker_name == "broker-a"}
                await wait_until_async(
                    lambda: want <= got, 30.0, message="broker-a's acks read from its slave"
                )
            # the master returns; it and the slave converge and it takes sends again
            master_a = daemons.broker(ns.addr, brokerName="broker-a", brokerRole=role,
                                      storePathRootDir=store_of(master_a),
                                      **{**HA_FAST, "syncFlushTimeout": 3000})  # fmt: skip
            restarted_at = len(load.acked)
            await wait_until_async(
                lambda: any(r.message_queue.broker_name == "broker-a"
                            for r in list(load.acked.values())[restarted_at:]),
                30.0, message="sends acknowledged by the restarted master",
            )  # fmt: skip
        finally:
            load.running = False
            with contextlib.suppress(Exception):
                await asyncio.gather(*tasks)
        try:
            wait_identical(master_a, slave_a)
            await wait_until_async(lambda: set(load.acked) <= got, 60.0,
                                   message="every acknowledged message consumed")  # fmt: skip
        finally:
            await consumer.shutdown()
    assert "stopped" not in slave_a.stderr_text()
