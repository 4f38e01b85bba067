"""ACL 2.0 on the gRPC endpoint (``rocketpy/grpc_api/auth.py``) against a real broker: calls are
authenticated by their ``authorization`` metadata (MQv2-HMAC-SHA1 over ``x-mq-date-time``) and
authorized as RocketMQ's proxy does (SendMessage: Pub on the topic; QueryRoute: Pub or Sub;
ReceiveMessage: Sub on group and topic), refusals in the RPC's own status (40100, 40300)."""

from __future__ import annotations

import json
from typing import Any

import grpc

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


async def _settings_answer(client: Client, settings: pb.Settings) -> Any:
    call = client.telemetry(timeout=10)
    await call.write(spb.TelemetryCommand(settings=settings))
    answer = await call.read()
    await call.done_writing()
    return answer


def _publishing(*topics: str) -> pb.Settings:
    return pb.Settings(
        client_type=pb.ClientType.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in topics]),
    )


def _subscription(group: str, *topics: str) -> pb.Settings:
    entries = [pb.SubscriptionEntry(topic=pb.Resource(name=t)) for t in topics]
    return pb.Settings(
        client_type=pb.ClientType.SIMPLE_CONSUMER,
        subscription=pb.Subscription(group=pb.Resource(name=group), subscriptions=entries),
    )


async def test_telemetry_settings_are_authorized(daemons: DaemonPool) -> None:
    ns = daemons.namesrv().addr
    broker = daemons.broker(ns, **PROPS)
    await _setup(ns, broker.addr)
    async with Admin(ns, access_key=ROOT[0], secret_key=ROOT[1]) as admin:
        await admin.auth.create_acl(
            f"User:{ALICE[0]}", "Group:gAlice", ["Sub"], "Allow", broker_addr=broker.addr
        )
    addr = str(broker.grpc_addr)
    alice, root = Client(addr, ak=ALICE[0], sk=ALICE[1]), Client(addr, ak=ROOT[0], sk=ROOT[1])
    try:
        ok = await _settings_answer(alice, _publishing("GrpcOrders"))
        assert ok.status.code == Code.OK and ok.HasField("settings")
        refused = await _settings_answer(alice, _publishing("GrpcOrders", "GrpcSecret"))
        assert refused.status.code == Code.FORBIDDEN, refused
        assert "may not Pub Topic:GrpcSecret" in refused.status.message
        assert not refused.HasField("settings")
        ok = await _settings_answer(alice, _subscription("gAlice", "GrpcOrders", "GrpcSecret"))
        assert ok.status.code == Code.OK  # Sub on GrpcSecret is allowed (only its Pub is denied)
        refused = await _settings_answer(alice, _subscription("gOther", "GrpcOrders"))
        assert refused.status.code == Code.FORBIDDEN and "Group:gOther" in refused.status.message
        refused = await _settings_answer(alice, _subscription("gAlice", "Unlisted"))
        assert refused.status.code == Code.FORBIDDEN and "Topic:Unlisted" in refused.status.message
        blank = await _settings_answer(alice, _subscription(" ", "GrpcOrders"))
        assert blank.status.code == Code.FORBIDDEN and "blank group" in blank.status.message
        neither = await _settings_answer(root, pb.Settings(client_type=pb.ClientType.PRODUCER))
        assert neither.status.code == Code.FORBIDDEN  # RocketMQ refuses these even to a Super user
        ok = await _settings_answer(root, _subscription("gOther", "GrpcSecret"))
        assert ok.status.code == Code.OK
        # a stream whose later settings are refused ends there, FORBIDDEN
        call = alice.telemetry(timeout=10)
        await call.write(spb.TelemetryCommand(settings=_publishing("GrpcOrders")))
        assert (await call.read()).status.code == Code.OK
        await call.write(spb.TelemetryCommand(settings=_publishing("GrpcSecret")))
        assert (await call.read()).status.code == Code.FORBIDDEN
        assert await call.read() is grpc.aio.EOF
    finally:
        await alice.close()
        await root.close()
