"""A real broker (mqbroker subprocess) registers with a real NameServer and is evicted when it dies."""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack

from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicRouteData
from tests.conftest import DaemonPool
from tests.waiting import wait_until_async


async def cluster_info(client: RemotingClient, addr: str) -> dict[str, Any]:
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5.0)
    return dict(msgpack.unpackb(resp.body))


async def test_real_broker_registers_and_is_evicted_at_once_when_killed(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, brokerClusterName="RealCluster", mappedFileSizeCommitLog=1 << 20)
    client = RemotingClient(name="test")
    try:
        info = await cluster_info(client, ns.addr)
        assert info["clusterAddrTable"] == {"RealCluster": [broker.name]}
        assert info["brokerAddrTable"][broker.name] == {
            "cluster": "RealCluster",
            "brokerName": broker.name,
            "brokerAddrs": {"0": broker.addr},
            "grpcAddrs": {"0": broker.grpc_addr},  # each broker's RocketMQ 5 gRPC endpoint
        }
        ext = {"topic": "TBW102"}
        resp = await client.invoke(
            ns.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext), 5.0
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        route = TopicRouteData.from_wire(msgpack.unpackb(resp.body))
        assert [b.broker_addrs for b in route.broker_datas] == [{0: broker.addr}]
        await asyncio.to_thread(broker.kill)  # no unregistration: only the closed connection tells

        async def evicted() -> bool:
            return (await cluster_info(client, ns.addr))["brokerAddrTable"] == {}

        await wait_until_async(evicted, 5.0, message="killed broker evicted")
    finally:
        await client.close()
