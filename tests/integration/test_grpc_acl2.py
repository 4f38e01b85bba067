"""ACL 2.0 on the gRPC endpoint (``rocketpy/grpc_api/auth.py``) against a real broker: calls are
authenticated by their ``authorization`` metadata (MQv2-HMAC-SHA1 over ``x-mq-date-time``) and
authorized as RocketMQ's proxy does (SendMessage: Pub on the topic; QueryRoute: Pub or Sub;
ReceiveMessage: Sub on group and topic), refusals in the RPC's own status (40100, 40300)."""

from __future__ import annotations

import json
from typing import Any

from rocketpy.client.admin import Admin
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb
from tests.conftest import DaemonPool
from tests.integration.test_grpc_endpoint import Client, message

ROOT = ("root", "rootSecret1")
ALICE = ("alice", "aliceSecret1")
PROPS = {
    "authenticationEnabled": True,
    "authorizationEnabled": True,
    "initAuthenticationUser": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
}
Code = pb.Code


async def _setup(ns: str, broker_addr: str) -> None:
    async with Admin(ns, access_key=ROOT[0], secret_key=ROOT[1]) as admin:
        for topic in ("GrpcOrders", "GrpcSecret"):
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
        await admin.auth.create_user(ALICE[0], ALICE[1], "Normal", broker_addr=broker_addr)
        acl: list[tuple[str, list[str], str]] = [
            ("Topic:Grpc*", ["Pub", "Sub"], "Allow"),  # the prefix allows both topics ...
            ("Topic:GrpcSecret", ["Pub"], "Deny"),  # ... the literal Deny is more specific
        ]
        for resource, actions, decision in acl:
            await admin.auth.create_acl(
                f"User:{ALICE[0]}", resource, actions, decision, broker_addr=broker_addr
            )


async def _code(client: Client, name: str, request: Any) -> int:
    return int((await client.unary(name, request)).status.code)


async def test_grpc_calls_are_authenticated_and_authorized(daemons: DaemonPool) -> None:
    ns = daemons.namesrv().addr
    broker = daemons.broker(ns, **PROPS)
    await _setup(ns, broker.addr)
    addr = str(broker.grpc_addr)
    route = spb.QueryRouteRequest(topic=pb.Resource(name="GrpcOrders"))
    clients = {
        "none": Client(addr),
        "empty": Client(addr, ak="", sk=""),
        "wrong": Client(addr, ak=ALICE[0], sk="not-her-password"),
        "mallory": Client(addr, ak="mallory", sk="whatever1"),
        "alice": Client(addr, ak=ALICE[0], sk=ALICE[1]),
        "root": Client(addr, ak=ROOT[0], sk=ROOT[1]),
    }
    try:
        for who in ("none", "empty", "wrong", "mallory"):
            answer = await clients[who].unary("QueryRoute", route)
            assert answer.status.code == Code.UNAUTHORIZED, who
            assert answer.status.message.startswith("access denied: "), answer.status.message
        alice, root = clients["alice"], clients["root"]
        assert await _code(alice, "QueryRoute", route) == Code.OK
        sent = await alice.unary("SendMessage", spb.SendMessageRequest(messages=[message("GrpcOrders")]))
        assert sent.status.code == Code.OK and sent.entries[0].message_id
        secret = spb.SendMessageRequest(messages=[message("GrpcSecret")])
        refused = await alice.unary("SendMessage", secret)
        assert refused.status.code == Code.FORBIDDEN
        assert "may not Pub Topic:GrpcSecret" in refused.status.message
        assert await _code(root, "SendMessage", secret) == Code.OK  # a Super user may
        # Sub on the topic is allowed, on the group nothing allows it
        receive = spb.ReceiveMessageRequest(
            group=pb.Resource(name="gGrpc"),
            message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcOrders"), id=-1),
            batch_size=1,
        )
        receive.invisible_duration.seconds = 30
        receive.long_polling_timeout.seconds = 1
        answers = await alice.stream("ReceiveMessage", receive)
        assert answers[0].status.code == Code.FORBIDDEN and "Group:gGrpc" in answers[0].status.message
        assert answers[-1].HasField("delivery_timestamp")
        heartbeat = spb.HeartbeatRequest(group=pb.Resource(name="gGrpc"), client_type=pb.SIMPLE_CONSUMER)
        assert await _code(alice, "Heartbeat", heartbeat) == Code.FORBIDDEN
        assert await _code(alice, "Heartbeat", spb.HeartbeatRequest(client_type=pb.PRODUCER)) == Code.OK
    finally:
        for c in clients.values():
            await c.close()
