"""The broker's gRPC endpoint through a raw ``grpc.aio`` client: routes, statuses, the 5.x
PullConsumer RPCs over messages sent by remoting, Telemetry settings, ACL, and hostile input."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from rocketpy.client.admin import Admin
from rocketpy.client.producer import Producer
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb
from rocketpy.message import Message
from rocketpy.testing import Daemon, DaemonStartError
from tests.conftest import DaemonPool

Code = pb.Code
SERVICE = "/apache.rocketmq.v2.MessagingService/"


def metadata(client_id: str = "test-client", ak: str | None = None, sk: str = "") -> list[tuple[str, str]]:
    """What the 5.x clients send, signed when ``ak`` is given."""
    now = time.strftime("%Y%m%dT%H%M%SZ")
    md = [("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2"),
          ("x-mq-date-time", now), ("x-mq-request-id", uuid.uuid4().hex)]  # fmt: skip
    if ak is not None:
        sig = hmac.new(sk.encode(), now.encode(), hashlib.sha1).hexdigest().upper()
        md.append(
            (
                "authorization",
                f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}",
            )
        )
    return md


class Client:
    """A raw MessagingService client on one channel."""

    def __init__(self, addr: str, **md: Any) -> None:
        self.channel = grpc.aio.insecure_channel(addr)
        self.md = md

    def _method(self, name: str, kind: str = "unary_unary") -> Any:
        req = getattr(spb, f"{name}Request", None) or spb.TelemetryCommand
        resp = getattr(spb, f"{name}Response", None) or spb.TelemetryCommand
        return getattr(self.channel, kind)(
            SERVICE + name, request_serializer=req.SerializeToString, response_deserializer=resp.FromString
        )

    async def unary(self, name: str, request: Any, deadline_s: float = 10.0) -> Any:
        return await self._method(name)(request, metadata=metadata(**self.md), timeout=deadline_s)

    async def stream(self, name: str, request: Any, deadline_s: float = 30.0) -> list[Any]:
        call = self._method(name, "unary_stream")(request, metadata=metadata(**self.md), timeout=deadline_s)
        return [r async for r in call]

    def telemetry(self, timeout: float | None = None) -> Any:
        return self._method("Telemetry", "stream_stream")(metadata=metadata(**self.md), timeout=timeout)

    async def close(self) -> None:
        await self.channel.close()


def message(topic: str, body: bytes = b"x", **sp: Any) -> pb.Message:
    m = pb.Message(topic=pb.Resource(name=topic), body=body)
    m.system_properties.message_id = sp.pop("message_id", uuid.uuid4().hex.upper())
    for k, v in sp.items():
        setattr(m.system_properties, k, v)
    return m


@pytest.fixture
def grpc_cluster(daemons: DaemonPool) -> tuple[Daemon, Daemon]:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, maxMessageSize=64 * 1024, grpcSettingsTimeoutMills=500)
    return ns, broker


@pytest.fixture
async def client(grpc_cluster: tuple[Daemon, Daemon]) -> AsyncIterator[Client]:
    c = Client(str(grpc_cluster[1].grpc_addr))
    yield c
    await c.close()


async def create_topic(ns: Daemon, topic: str, attributes: str = "", queues: int = 4) -> None:
    admin = Admin(ns.addr)
    await admin.start()
    try:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=queues, write_queue_nums=queues,
                                 attributes=attributes)  # fmt: skip
    finally:
        await admin.shutdown()


async def test_query_route_names_each_brokers_own_endpoint(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    a = daemons.broker(ns.addr, brokerName="broker-a")
    b = daemons.broker(ns.addr, brokerName="broker-b")
    await create_topic(ns, "TwoBrokers", "+message.type=FIFO")
    c = Client(str(a.grpc_addr))
    try:
        resp = await c.unary("QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name="TwoBrokers")))
    finally:
        await c.close()
    assert resp.status.code == Code.OK
    seen = {(q.broker.name, q.broker.endpoints.addresses[0].port) for q in resp.message_queues}
    assert seen == {("broker-a", a.grpc_port), ("broker-b", b.grpc_port)}
    assert len(resp.message_queues) == 8
    q = resp.message_queues[0]
    assert (q.permission, list(q.accept_message_types), q.broker.id) == (
        pb.Permission.READ_WRITE,
        [pb.FIFO],
        0,
    )
    assert q.broker.endpoints.scheme == pb.AddressScheme.IPv4
    listed = await asyncio.to_thread(
        subprocess.run,
        [str(Path(sys.executable).parent / "mqadmin"), "clusterList", "-n", ns.addr, "--json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    brokers = json.loads(listed.stdout)["brokers"]
    assert {b["brokerName"]: b["grpcAddr"] for b in brokers} == {
        "broker-a": a.grpc_addr,
        "broker-b": b.grpc_addr,
    }


async def test_user_mistakes_answer_the_apis_codes(
    grpc_cluster: tuple[Daemon, Daemon], client: Client
) -> None:
    ns, _ = grpc_cluster
    await create_topic(ns, "Typed", "+message.type=NORMAL")
    route = await client.unary("QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")))
    assert route.status.code == Code.TOPIC_NOT_FOUND and "NoSuchTopic" in route.status.message
    cases = [
        (message("Typed", b""), Code.MESSAGE_BODY_EMPTY),
        (message("Typed", b"x" * (64 * 1024 + 1)), Code.MESSAGE_BODY_TOO_LARGE),
        (message("Typed", message_id=""), Code.ILLEGAL_MESSAGE_ID),
        (message("Typed", message_type=pb.FIFO, message_group="g"), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (
            message("Typed", message_type=pb.NORMAL, message_group="g"),
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        ),
        (message("Typed", tag="a|b"), Code.ILLEGAL_MESSAGE_TAG),
        (message("", b"x"), Code.ILLEGAL_TOPIC),
    ]
    for msg, code in cases:
        resp = await client.unary("SendMessage", spb.SendMessageRequest(messages=[msg]))
        assert (Code.Name(resp.status.code), resp.status.message != "") == (Code.Name(code), True), msg
        assert resp.entries[0].status.code == code
    too_far = message("Typed", message_type=pb.DELAY)
    too_far.system_properties.delivery_timestamp.FromSeconds(int(time.time()) + 2 * 86400)
    await create_topic(ns, "Delayed", "+message.type=DELAY")
    too_far.topic.name = "Delayed"
    resp = await client.unary("SendMessage", spb.SendMessageRequest(messages=[too_far]))
    assert resp.status.code == Code.ILLEGAL_DELIVERY_TIME
    ok = await client.unary(
        "SendMessage", spb.SendMessageRequest(messages=[message("Typed"), message("Typed")])
    )
    assert ok.status.code == Code.OK and len(ok.entries) == 2 and ok.entries[1].offset >= 0
    pop = await client.stream("ReceiveMessage", spb.ReceiveMessageRequest(group=pb.Resource(name="g")))
    assert pop[0].status.code == Code.ILLEGAL_TOPIC and pop[-1].HasField("delivery_timestamp")
    ack = await client.unary("AckMessage", spb.AckMessageRequest())
    assert ack.status.code == Code.ILLEGAL_TOPIC
    lite = await client.unary("SyncLiteSubscription", spb.SyncLiteSubscriptionRequest())
    assert lite.status.code == Code.NOT_IMPLEMENTED and "Lite" in lite.status.message
    anonymous = Client(str(grpc_cluster[1].grpc_addr), client_id="")
    try:
        resp = await anonymous.unary("Heartbeat", spb.HeartbeatRequest())
        assert resp.status.code == Code.CLIENT_ID_REQUIRED
    finally:
        await anonymous.close()


async def test_pull_consumer_rpcs_read_what_remoting_sent(
    grpc_cluster: tuple[Daemon, Daemon], client: Client
) -> None:
    ns, _ = grpc_cluster
    await create_topic(ns, "Mixed", queues=1)
    producer = Producer("remoting_pg", ns.addr)
    await producer.start()
    try:
        sent = [await producer.send(Message("Mixed", b"r%d" % i, tags="T", keys=f"k{i}")) for i in range(5)]
    finally:
        await producer.shutdown()
    mq = pb.MessageQueue(topic=pb.Resource(name="Mixed"), id=0)
    group = pb.Resource(name="grpc_pull_group")
    first = await client.unary(
        "QueryOffset", spb.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.BEGINNING)
    )
    last = await client.unary(
        "QueryOffset", spb.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.END)
    )
    assert (first.offset, last.offset) == (0, 5)
    out = await client.stream(
        "PullMessage", spb.PullMessageRequest(group=group, message_queue=mq, offset=0, batch_size=10)
    )
    assert out[0].status.code == Code.OK and out[-1].next_offset == 5
    msgs = [r.message for r in out if r.HasField("message")]
    assert [m.body for m in msgs] == [b"r%d" % i for i in range(5)]
    assert [m.system_properties.message_id for m in msgs] == [s.msg_id for s in sent]
    assert msgs[0].system_properties.tag == "T" and list(msgs[0].system_properties.keys) == ["k0"]
    upd = await client.unary("UpdateOffset", spb.UpdateOffsetRequest(group=group, message_queue=mq, offset=5))
    got = await client.unary("GetOffset", spb.GetOffsetRequest(group=group, message_queue=mq))
    assert (upd.status.code, got.offset) == (Code.OK, 5)
    # a pull at the end waits (long polling) and answers when a message lands
    held = asyncio.ensure_future(client.stream("PullMessage", spb.PullMessageRequest(
        group=group, message_queue=mq, offset=5, batch_size=10,
        long_polling_timeout={"seconds": 15})))  # fmt: skip
    await asyncio.sleep(0.5)
    assert not held.done()
    sent_one = await client.unary("SendMessage", spb.SendMessageRequest(messages=[message("Mixed", b"late")]))
    assert sent_one.status.code == Code.OK
    late = await asyncio.wait_for(held, 10)
    assert [r.message.body for r in late if r.HasField("message")] == [b"late"]
    bad = await client.stream("PullMessage", spb.PullMessageRequest(group=group, message_queue=mq, offset=-1))
    assert bad[0].status.code == Code.ILLEGAL_OFFSET


async def test_telemetry_settings_and_a_stream_without_them(client: Client) -> None:
    call = client.telemetry(timeout=10)
    settings = pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")])
    )
    await call.write(spb.TelemetryCommand(settings=settings))
    answer = await call.read()
    assert answer.status.code == Code.OK
    assert answer.settings.publishing.max_body_size == 64 * 1024
    assert answer.settings.backoff_policy.max_attempts == 3
    await call.done_writing()
    silent = client.telemetry(timeout=10)
    started = time.monotonic()
    refusal = await silent.read()
    assert refusal.status.code == Code.BAD_REQUEST and "settings" in refusal.status.message
    assert time.monotonic() - started < 5


async def test_acl_checks_the_signature_and_permissions(daemons: DaemonPool, tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(
        "accounts:\n"
        "  - accessKey: admin0001\n    secretKey: secret0001\n    admin: true\n"
        "  - accessKey: reader01\n    secretKey: secret0002\n"
        "    defaultTopicPerm: SUB\n    defaultGroupPerm: SUB\n"
    )
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, aclEnable="true", aclFile=str(acl))
    admin = Admin(ns.addr, access_key="admin0001", secret_key="secret0001")
    await admin.start()
    await admin.create_topic("Guarded", "DefaultCluster")
    await admin.shutdown()
    request = spb.SendMessageRequest(messages=[message("Guarded")])
    verdicts = {}
    for name, md in {
        "none": {},
        "wrong secret": {"ak": "admin0001", "sk": "nope"},
        "no PUB": {"ak": "reader01", "sk": "secret0002"},
        "admin": {"ak": "admin0001", "sk": "secret0001"},
    }.items():
        c = Client(str(broker.grpc_addr), **md)
        try:
            verdicts[name] = Code.Name((await c.unary("SendMessage", request)).status.code)
        finally:
            await c.close()
    assert verdicts == {
        "none": "UNAUTHORIZED",
        "wrong secret": "UNAUTHORIZED",
        "no PUB": "FORBIDDEN",
        "admin": "OK",
    }


async def test_hostile_bytes_and_many_streams_leave_other_clients_served(
    grpc_cluster: tuple[Daemon, Daemon], client: Client
) -> None:
    broker = grpc_cluster[1]
    host, port = str(broker.grpc_addr).rsplit(":", 1)
    for payload in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x00" * 64 + b"garbage" * 100):
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(payload)
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except (TimeoutError, ConnectionResetError):
                pass
    malformed = client.channel.unary_unary(  # raw bytes, not a protobuf
        SERVICE + "SendMessage", response_deserializer=spb.SendMessageResponse.FromString
    )
    answer = await malformed(b"\xff\xff\xff", metadata=metadata(), timeout=5)
    assert answer.status.code == Code.BAD_REQUEST and "SendMessageRequest" in answer.status.message
    rss_before = _rss_kib(broker.pid)
    hog = subprocess.Popen(  # noqa: ASYNC220 (a child that outlives many awaits; read once below)
        [sys.executable, "-m", "tests.grpc_hog", str(broker.grpc_addr), "10000", "20"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "opened"
        await asyncio.sleep(3.0)
        worst = 0.0
        for _ in range(5):
            started = time.monotonic()
            topic = pb.Resource(name="TBW102")
            resp = await client.unary("QueryRoute", spb.QueryRouteRequest(topic=topic), deadline_s=10)
            worst = max(worst, time.monotonic() - started)
            assert resp.status.code in (Code.OK, Code.TOPIC_NOT_FOUND)
        grown = _rss_kib(broker.pid) - rss_before
    finally:
        hog.kill()
        hog.wait()
    assert worst < 2.0, f"another client waited {worst:.2f} s for QueryRoute under 10,000 streams"
    assert grown < 64 * 1024, f"the broker grew by {grown} KiB under 10,000 streams"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def test_recall_cancels_a_waiting_delay_message(
    grpc_cluster: tuple[Daemon, Daemon], client: Client
) -> None:
    ns, _ = grpc_cluster
    await create_topic(ns, "Recall", "+message.type=DELAY", queues=1)
    at = int(time.time()) + 3
    msgs = []
    for body in (b"recalled", b"kept"):
        m = message("Recall", body, message_type=pb.DELAY)
        m.system_properties.delivery_timestamp.FromSeconds(at)
        msgs.append(m)
    sent = await client.unary("SendMessage", spb.SendMessageRequest(messages=msgs))
    assert sent.status.code == Code.OK and all(e.recall_handle for e in sent.entries)
    topic = pb.Resource(name="Recall")
    handle = sent.entries[0].recall_handle
    for _ in range(2):  # a second recall of the same message is answered the same
        done = await client.unary(
            "RecallMessage", spb.RecallMessageRequest(topic=topic, recall_handle=handle)
        )
        assert done.status.code == Code.OK and done.message_id == msgs[0].system_properties.message_id
    bogus = await client.unary(
        "RecallMessage", spb.RecallMessageRequest(topic=topic, recall_handle="bm9wZQ==")
    )
    assert bogus.status.code == Code.BAD_REQUEST
    mq = pb.MessageQueue(topic=topic, id=0)
    group = pb.Resource(name="recall_reader")
    deadline = time.monotonic() + 20
    bodies: list[bytes] = []
    while not bodies and time.monotonic() < deadline:
        out = await client.stream(
            "PullMessage", spb.PullMessageRequest(group=group, message_queue=mq, offset=0)
        )
        bodies = [r.message.body for r in out if r.HasField("message")]
    await asyncio.sleep(2.0)  # anything else due at that second has been re-put by now
    out = await client.stream("PullMessage", spb.PullMessageRequest(group=group, message_queue=mq, offset=0))
    assert [r.message.body for r in out if r.HasField("message")] == [b"kept"]
    late = await client.unary(
        "RecallMessage", spb.RecallMessageRequest(topic=topic, recall_handle=sent.entries[1].recall_handle)
    )
    assert late.status.code == Code.NOT_FOUND and "delivered" in late.status.message


def test_grpc_port_in_use_or_off(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(
            DaemonStartError, match=r"cannot listen for gRPC on 127\.0\.0\.1:\d+ \(grpcServerPort\)"
        ):
            daemons.broker(ns.addr, grpcServerPort=busy.getsockname()[1])
    off = daemons.broker(ns.addr, grpcServerPort=-1)
    assert off.boot_line.endswith(" grpcServerPort=-1") and off.grpc_addr is None


async def test_metrics_show_each_clients_protocol(daemons: DaemonPool) -> None:
    from tests.integration.test_metrics import free_port, metrics_url, scrape, value

    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, metricsPort=free_port())
    await create_topic(ns, "Counted")
    c = Client(str(broker.grpc_addr), client_id="metrics-client")
    try:
        resp = await c.unary("SendMessage", spb.SendMessageRequest(messages=[message("Counted")]))
        assert resp.status.code == Code.OK
        samples = await scrape(metrics_url(broker))
    finally:
        await c.close()
    assert value(samples, "rocketpy_client_connections", protocol="grpc", language="PYTHON") == 1
    assert value(samples, "rocketpy_grpc_requests_total", rpc="SendMessage", code="OK") == 1
    assert value(samples, "rocketpy_put_messages_total", topic="Counted") == 1
