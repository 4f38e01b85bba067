"""Clients through a fault-injecting proxy (``tests.faultproxy``): dropped, stalled, reset, slowed
and duplicated traffic. The RPC client times out and reconnects; a producer retries on the other
broker; no send is answered twice and every acknowledged message reaches the consumer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rocketpy import Admin, Message, Producer, SendStatus
from rocketpy.addresses import parse_addr
from rocketpy.client.consumer_types import ConsumeStatus
from rocketpy.client.push_consumer import PushConsumer
from rocketpy.errors import MQClientError, RemotingConnectError, RemotingTimeoutError
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from tests.conftest import DaemonPool
from tests.consumer_settings import FAST_CONSUMER
from tests.daemons import Daemon
from tests.faultproxy import FaultProxy, start_broker_behind_proxy
from tests.integration.test_producer import all_messages
from tests.waiting import wait_until_async


def _cluster_info() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {})


async def test_rpc_client_times_out_reconnects_and_ignores_duplicates(namesrv: Daemon) -> None:
    async with FaultProxy(("127.0.0.1", 0), parse_addr(namesrv.addr)) as proxy:
        client = RemotingClient(name="through-proxy")
        try:
            assert (await client.invoke(proxy.addr, _cluster_info(), 5.0)).code == 0
            for n, mode in enumerate(("drop", "stall"), 2):
                proxy.set_mode(mode)
                with pytest.raises(RemotingTimeoutError):
                    await client.invoke(proxy.addr, _cluster_info(), 0.3)
                # nothing came back while the call waited: the client dropped the connection
                assert client.channel(proxy.addr) is None
                proxy.set_mode("pass")  # a stalled request is delivered now; nobody waits for its answer
                assert (await client.invoke(proxy.addr, _cluster_info(), 5.0)).code == 0
                assert proxy.connections == n  # the next call connected again
            proxy.set_mode("stall")
            in_flight = asyncio.ensure_future(client.invoke(proxy.addr, _cluster_info(), 5.0))
            await asyncio.sleep(0.1)
            proxy.reset()
            with pytest.raises(RemotingConnectError, match="may or may not have been processed"):
                await in_flight
            proxy.set_mode("pass")
            assert (await client.invoke(proxy.addr, _cluster_info(), 5.0)).code == 0
            assert proxy.connections == 4 and proxy.resets == 1  # reconnected after the reset
            proxy.set_mode("slow")
            assert (await client.invoke(proxy.addr, _cluster_info(), 5.0)).code == 0
            proxy.set_mode("duplicate")
            answers = await asyncio.gather(
                *(client.invoke(proxy.addr, _cluster_info(), 5.0) for _ in range(50))
            )
            assert [a.code for a in answers] == [0] * 50
            channel = client.channel(proxy.addr)
            assert channel is not None and channel.pending_count == 0
        finally:
            await client.close()


async def _two_brokers_one_behind_proxy(
    daemons: DaemonPool, tmp_path: Path, topic: str
) -> tuple[Daemon, Daemon, FaultProxy, Daemon]:
    ns = daemons.namesrv()
    broker_a, proxy = await start_broker_behind_proxy(tmp_path, ns.addr)
    daemons.started.append(broker_a)
    broker_b = daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    return ns, broker_a, proxy, broker_b


async def _send_all(producer: Producer, topic: str, n: int, tag: str, acked: dict[str, bytes]) -> list[str]:
    brokers = []
    for i in range(n):
        body = b"%s-%d" % (tag.encode(), i)
        result = await producer.send(Message(topic, body))
        assert result.status is SendStatus.SEND_OK
        assert result.msg_id not in acked, "one send answered twice"
        acked[result.msg_id] = body
        brokers.append(result.message_queue.broker_name)
    return brokers


async def test_producer_retries_on_the_other_broker_and_never_counts_a_send_twice(
    daemons: DaemonPool, tmp_path: Path
) -> None:
    topic = "ProxyT"
    ns, broker_a, proxy, broker_b = await _two_brokers_one_behind_proxy(daemons, tmp_path, topic)
    acked: dict[str, bytes] = {}
    try:
        async with Producer("pg_proxy", ns.addr, send_timeout=3.0, poll_name_server_interval=1.0) as p:
            await _wait_routed(p, topic, 2, 15.0)
            assert set(await _send_all(p, topic, 20, "pass", acked)) == {broker_a.name, broker_b.name}
            proxy.set_mode("duplicate")  # broker-a stores each of its sends twice and answers twice
            assert broker_a.name in set(await _send_all(p, topic, 30, "dup", acked))
            proxy.set_mode("pass")
            for round_ in range(3):  # connections reset between sends: the producer reconnects
                proxy.reset()
                await _send_all(p, topic, 10, f"reset{round_}", acked)
            await proxy.close()  # broker-a unreachable (connection refused): every send retries on broker-b
            assert set(await _send_all(p, topic, 20, "refused", acked)) == {broker_b.name}
            proxy = await FaultProxy(proxy.listen, proxy.target).start()
            msgs = await all_messages(p, topic)
        stored = {m.msg_id for m in msgs}
        assert not set(acked) - stored, f"{len(set(acked) - stored)} acknowledged messages missing"
        assert len(msgs) > len(acked)  # the duplicated requests were stored twice, answered once
        print(f"proxy: {len(acked)} acked, {len(msgs) - len(acked)} extra copies stored by duplicates")
    finally:
        await proxy.close()


async def test_producer_send_to_a_dropping_broker_times_out_and_is_not_acknowledged(
    daemons: DaemonPool, tmp_path: Path
) -> None:
    topic = "ProxyD"
    ns, _, proxy, _ = await _two_brokers_one_behind_proxy(daemons, tmp_path, topic)
    acked: dict[str, bytes] = {}
    failures = 0
    try:
        async with Producer("pg_proxy_d", ns.addr, send_timeout=1.0, poll_name_server_interval=1.0) as p:
            await _wait_routed(p, topic, 2, 15.0)
            proxy.set_mode("drop")
            for i in range(20):
                try:
                    await _send_all(p, topic, 1, f"drop{i}", acked)
                except MQClientError as e:
                    assert "no response within" in str(e)
                    failures += 1
            # a timeout marks broker-a slow (send latency fault): later sends go to broker-b
            assert 1 <= failures <= 3 and len(acked) == 20 - failures
    finally:
        await proxy.close()


async def test_consumer_through_faults_sees_every_acknowledged_message(
    daemons: DaemonPool, tmp_path: Path
) -> None:
    topic = "ProxyC"
    ns, _, proxy, _ = await _two_brokers_one_behind_proxy(daemons, tmp_path, topic)
    acked: dict[str, bytes] = {}
    got: dict[bytes, int] = {}

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        for m in msgs:
            got[m.body] = got.get(m.body, 0) + 1
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("g_proxy", ns.addr, **FAST_CONSUMER)
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    try:
        async with Producer("pg_proxy_c", ns.addr, send_timeout=1.0, poll_name_server_interval=1.0) as p:
            await _wait_routed(p, topic, 2, 15.0)
            await consumer.start()
            await _send_all(p, topic, 20, "a", acked)
            proxy.set_mode("duplicate")  # pulls and offset commits reach broker-a twice
            await _send_all(p, topic, 20, "b", acked)
            await wait_until_async(lambda: set(acked.values()) <= set(got), 30.0, message="duplicated pulls")
            proxy.set_mode("pass")
            proxy.reset()  # the consumer's held pull on broker-a fails; it pulls again
            await _send_all(p, topic, 20, "c", acked)
            await wait_until_async(lambda: set(acked.values()) <= set(got), 30.0, message="after a reset")
    finally:
        await consumer.shutdown()
        await proxy.close()


async def _wait_routed(producer: Producer, topic: str, brokers: int, timeout: float) -> None:  # noqa: ASYNC109
    inst = producer._inst()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len({mq.broker_name for mq in inst.subscribe_queues(topic)}) < brokers:
        assert loop.time() < deadline, f"{topic} is not routed to {brokers} brokers"
        await inst.update_topic_route(topic)
        await asyncio.sleep(0.1)
