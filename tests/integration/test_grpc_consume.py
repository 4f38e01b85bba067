"""POP consumption over gRPC through a raw ``grpc.aio`` client against real daemons: ReceiveMessage's
stream, acks, invisible-time changes, the DLQ, attempt ids, auto-renew, FIFO groups, filters,
QueryAssignment and the refusals (never a raw gRPC error)."""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from rocketpy.client.admin import Admin
from rocketpy.client.producer import Producer
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb
from rocketpy.message import Message
from rocketpy.testing import Daemon
from tests.conftest import DaemonPool
from tests.integration.test_grpc_endpoint import Client, create_topic
from tests.waiting import wait_until_async

Code = pb.Code
#: Short waits so an empty receive answers quickly (the proxy's minimum is 5 s), and auto-renew
#: in seconds (only receives with ``auto_renew`` use it).
FAST = {
    "grpcClientConsumerMinLongPollingTimeoutMillis": 300,
    "minInvisibleTimeMillsForRecv": 1000,
    "enablePropertyFilter": "true",
    "defaultInvisibleTimeMills": 2000,
    "renewAheadTimeMillis": 1500,
    "renewSchedulePeriodMillis": 200,
    "grpcClientIdleTimeMills": 60_000,
}


@pytest.fixture(scope="module")
def grpc_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Daemon]]:
    """One NameServer and broker for the module (each test has its own topics and groups)."""
    pool = DaemonPool(tmp_path_factory.mktemp("grpc-consume"))
    try:
        ns = pool.namesrv()
        yield ns, pool.broker(ns.addr, **FAST)
    finally:
        pool.stop_all()


@pytest.fixture
async def client(grpc_cluster: tuple[Daemon, Daemon]) -> AsyncIterator[Client]:
    c = Client(str(grpc_cluster[1].grpc_addr), client_id=f"consumer-{uuid.uuid4().hex[:8]}")
    yield c
    await c.close()


async def send(ns: Daemon, topic: str, bodies: list[bytes], **kwargs: Any) -> list[str]:
    """Send over remoting; the message ids."""
    producer = Producer(f"pg_{uuid.uuid4().hex[:6]}", ns.addr)
    await producer.start()
    try:
        return [(await producer.send(Message(topic, b, **kwargs))).msg_id for b in bodies]
    finally:
        await producer.shutdown()


def receive_request(
    topic: str, group: str, batch: int = 32, invisible_s: float | None = 30, **kw: Any
) -> Any:
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
        batch_size=batch,
        **kw,
    )
    if invisible_s is not None:
        req.invisible_duration.FromMilliseconds(int(invisible_s * 1000))
    if "long_polling_timeout" not in kw:
        req.long_polling_timeout.FromMilliseconds(300)
    return req


async def receive(client: Client, topic: str, group: str, **kw: Any) -> tuple[Any, list[pb.Message], Any]:
    """(status, messages, the last entry) of one ReceiveMessage."""
    out = await client.stream("ReceiveMessage", receive_request(topic, group, **kw))
    statuses = [r.status for r in out if r.HasField("status")]
    assert len(statuses) == 1, out
    assert out[-1].HasField("delivery_timestamp"), "the stream ends with the delivery timestamp"
    return statuses[0], [r.message for r in out if r.HasField("message")], out[-1]


async def ack(client: Client, topic: str, group: str, msgs: list[pb.Message]) -> Any:
    entries = [
        spb.AckMessageEntry(
            message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
        )
        for m in msgs
    ]
    return await client.unary(
        "AckMessage",
        spb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries),
    )


async def change(client: Client, topic: str, group: str, handle: str, ms: int, message_id: str = "m") -> Any:
    req = spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=group),
        topic=pb.Resource(name=topic),
        receipt_handle=handle,
        message_id=message_id,
    )
    req.invisible_duration.FromMilliseconds(ms)
    return await client.unary("ChangeInvisibleDuration", req)


async def test_receive_and_ack_what_remoting_sent(
    grpc_cluster: tuple[Daemon, Daemon], client: Client
) -> None:
    ns, _ = grpc_cluster
    await create_topic(ns, "PopGrpc")
    ids = await send(ns, "PopGrpc", [b"m%d" % i for i in range(5)], tags="T", keys="k")
    got: list[pb.Message] = []
    async with asyncio.timeout(20):
        while len(got) < 5:
            st, msgs, _ = await receive(client, "PopGrpc", "g1")
            assert st.code in (Code.OK, Code.MESSAGE_NOT_FOUND), st
            got += msgs
    assert sorted(m.system_properties.message_id for m in got) == sorted(ids)
    for m in got:
        sp = m.system_properties
        assert sp.receipt_handle and sp.delivery_attempt == 1 and sp.tag == "T"
        assert sp.body_digest.type == pb.DigestType.MD5  # as RocketMQ's proxy (and both clients check)
        assert sp.body_digest.checksum == hashlib.md5(m.body).hexdigest().upper()
        assert m.topic.name == "PopGrpc"
    answer = await ack(client, "PopGrpc", "g1", got)
    assert answer.status.code == Code.OK and [e.status.code for e in answer.entries] == [Code.OK] * 5
    st, msgs, _ = await receive(client, "PopGrpc", "g1")
    assert (st.code, msgs) == (Code.MESSAGE_NOT_FOUND, [])
    again = await ack(client, "PopGrpc", "g1", got[:1])  # acked before: OK, nothing changes
    assert again.status.code == Code.OK


async def test_change_invisible_duration_answers_the_new_handle(
    grpc_cluster: tuple[Daemon, Daemon], client: Client
) -> None:
    ns, _ = grpc_cluster
    await create_topic(ns, "PopChange", queues=1)
    await send(ns, "PopChange", [b"c0"])
    _, (m,), _ = await receive(client, "PopChange", "g2")
    old = m.system_properties.receipt_handle
    changed = await change(client, "PopChange", "g2", old, 0)  # visible again at once
    assert changed.status.code == Code.OK and changed.receipt_handle not in ("", old)
    stale = await change(client, "PopChange", "g2", old, 5000)
    assert stale.status.code == Code.INVALID_RECEIPT_HANDLE, stale.status
    async with asyncio.timeout(20):
        msgs: list[pb.Message] = []
        while not msgs:
            _, msgs, _ = await receive(client, "PopChange", "g2")
    (again,) = msgs
    assert again.body == b"c0" and again.system_properties.delivery_attempt == 2
    longer = await change(client, "PopChange", "g2", again.system_properties.receipt_handle, 60_000)
    assert longer.status.code == Code.OK
    fresh = spb.AckMessageEntry(message_id="x", receipt_handle=longer.receipt_handle)
    done = await client.unary(
        "AckMessage",
        spb.AckMessageRequest(
            group=pb.Resource(name="g2"), topic=pb.Resource(name="PopChange"), entries=[fresh]
        ),
    )
    assert done.status.code == Code.OK


async def test_user_mistakes_answer_the_apis_codes(
    grpc_cluster: tuple[Daemon, Daemon], client: Client
) -> None:
    ns, _ = grpc_cluster
    await create_topic(ns, "PopBad")
    cases = {
        "unknown topic": (receive_request("NoSuchTopic", "g"), Code.TOPIC_NOT_FOUND),
        "bad group name": (receive_request("PopBad", "a b"), Code.ILLEGAL_CONSUMER_GROUP),
        "short invisible": (receive_request("PopBad", "g", invisible_s=0.5), Code.ILLEGAL_INVISIBLE_TIME),
        "no invisible": (receive_request("PopBad", "g", invisible_s=None), Code.ILLEGAL_INVISIBLE_TIME),
        "bad tag filter": (
            receive_request(
                "PopBad", "g", filter_expression=pb.FilterExpression(type=pb.SQL, expression="a >")
            ),
            Code.ILLEGAL_FILTER_EXPRESSION,
        ),
        "zero batch": (receive_request("PopBad", "g", batch=0), Code.BAD_REQUEST),
    }
    for name, (req, code) in cases.items():
        out = await client.stream("ReceiveMessage", req)
        assert out[0].HasField("status") and Code.Name(out[0].status.code) == Code.Name(code), name
        assert out[0].status.message, name
    for handle in ("garbled", "0 1 2 0 0 other-broker 0 0", "0 1 2 0 0 broker-a 99 0"):
        answer = await change(client, "PopBad", "g", handle, 1000)
        assert answer.status.code == Code.INVALID_RECEIPT_HANDLE, (handle, answer.status)
        entry = spb.AckMessageEntry(message_id="m", receipt_handle=handle)
        acked = await client.unary(
            "AckMessage",
            spb.AckMessageRequest(
                group=pb.Resource(name="g"), topic=pb.Resource(name="PopBad"), entries=[entry]
            ),
        )
        assert acked.status.code == Code.INVALID_RECEIPT_HANDLE
        assert acked.entries[0].status.code == Code.INVALID_RECEIPT_HANDLE
    too_long = await change(client, "PopBad", "g", "0 1 2 0 0 broker-a 0 0", 13 * 3600 * 1000)
    assert too_long.status.code == Code.ILLEGAL_INVISIBLE_TIME


async def test_filters_fifo_and_the_dlq(grpc_cluster: tuple[Daemon, Daemon], client: Client) -> None:
    ns, _ = grpc_cluster
    await create_topic(ns, "PopFilter", queues=2)
    await send(ns, "PopFilter", [b"a", b"b"], tags="TagA")
    await send(ns, "PopFilter", [b"c"], tags="TagB", properties={"n": "7"})
    tag = pb.FilterExpression(type=pb.TAG, expression="TagB")
    _, msgs, _ = await receive(client, "PopFilter", "gf", filter_expression=tag)
    assert [m.body for m in msgs] == [b"c"]
    sql = pb.FilterExpression(type=pb.SQL, expression="n > 5")
    _, msgs, _ = await receive(client, "PopFilter", "gs", filter_expression=sql)
    assert [m.body for m in msgs] == [b"c"] and msgs[0].user_properties["n"] == "7"
    # ForwardMessageToDeadLetterQueue: the record goes to %DLQ%gs and is not delivered again
    (m,) = msgs
    req = spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="gs"), topic=pb.Resource(name="PopFilter"),
        receipt_handle=m.system_properties.receipt_handle, message_id=m.system_properties.message_id,
        delivery_attempt=1, max_delivery_attempts=3,
    )  # fmt: skip
    fwd = await client.unary("ForwardMessageToDeadLetterQueue", req)
    assert fwd.status.code == Code.OK, fwd.status
    dlq = pb.MessageQueue(topic=pb.Resource(name="%DLQ%gs"), id=0)
    out = await client.stream(
        "PullMessage", spb.PullMessageRequest(group=pb.Resource(name="reader"), message_queue=dlq, offset=0)
    )
    assert [r.message.system_properties.message_id for r in out if r.HasField("message")] == [
        m.system_properties.message_id
    ]
    bad = await client.unary("ForwardMessageToDeadLetterQueue", req)  # acked by the forward
    assert bad.status.code in (Code.OK, Code.INVALID_RECEIPT_HANDLE)


async def test_fifo_group_receives_each_message_group_in_order(
    grpc_cluster: tuple[Daemon, Daemon], client: Client
) -> None:
    ns, _ = grpc_cluster
    await create_topic(ns, "PopFifo", "+message.type=FIFO", queues=2)
    async with Admin(ns.addr) as admin:
        await admin.update_subscription_group("gfifo", "DefaultCluster", consume_message_orderly=True)
    sent = []
    for i in range(8):
        m = pb.Message(topic=pb.Resource(name="PopFifo"), body=b"f%d" % i)
        sp = m.system_properties
        sp.message_id, sp.message_type, sp.message_group = uuid.uuid4().hex.upper(), pb.FIFO, f"g{i % 2}"
        answer = await client.unary("SendMessage", spb.SendMessageRequest(messages=[m]))
        assert answer.status.code == Code.OK
        sent.append(m)
    seen: dict[str, list[bytes]] = {"g0": [], "g1": []}
    async with asyncio.timeout(30):
        while sum(map(len, seen.values())) < 8:
            _, msgs, _ = await receive(client, "PopFifo", "gfifo", batch=2)
            for m in msgs:
                seen[m.system_properties.message_group].append(m.body)
            if msgs:
                assert (await ack(client, "PopFifo", "gfifo", msgs)).status.code == Code.OK
    assert seen == {"g0": [b"f0", b"f2", b"f4", b"f6"], "g1": [b"f1", b"f3", b"f5", b"f7"]}


async def test_attempt_id_retry_gets_the_same_messages(
    grpc_cluster: tuple[Daemon, Daemon], client: Client
) -> None:
    ns, _ = grpc_cluster
    await create_topic(ns, "PopAttempt")
    await send(ns, "PopAttempt", [b"x%d" % i for i in range(3)])
    first: list[pb.Message] = []
    async with asyncio.timeout(20):
        while not first:
            _, first, _ = await receive(client, "PopAttempt", "ga", attempt_id="attempt-1")
    _, again, _ = await receive(client, "PopAttempt", "ga", attempt_id="attempt-1")
    key = [(m.system_properties.message_id, m.system_properties.receipt_handle) for m in first]
    assert [(m.system_properties.message_id, m.system_properties.receipt_handle) for m in again] == key
    rest: list[pb.Message] = []
    async with asyncio.timeout(20):
        while len(first) + len(rest) < 3:
            _, more, _ = await receive(client, "PopAttempt", "ga", attempt_id=uuid.uuid4().hex)
            rest += more
    assert {m.body for m in first + rest} == {b"x0", b"x1", b"x2"}
    assert (await ack(client, "PopAttempt", "ga", again + rest)).status.code == Code.OK


async def test_auto_renew_keeps_messages_invisible_while_the_client_lives(
    grpc_cluster: tuple[Daemon, Daemon],
) -> None:
    ns, broker = grpc_cluster
    await create_topic(ns, "PopRenew", queues=1)
    await send(ns, "PopRenew", [b"r0", b"r1"])
    worker = Client(str(broker.grpc_addr), client_id="renewing-worker")
    other = Client(str(broker.grpc_addr), client_id="other-worker")
    try:
        held: list[pb.Message] = []
        async with asyncio.timeout(20):
            while len(held) < 2:
                _, msgs, _ = await receive(worker, "PopRenew", "gr", invisible_s=None, auto_renew=True)
                held += msgs
        assert all(m.system_properties.invisible_duration.ToMilliseconds() == 2000 for m in held)
        deadline = time.monotonic() + 5.0  # well past the 2 s invisible time
        while time.monotonic() < deadline:
            _, msgs, _ = await receive(other, "PopRenew", "gr")
            assert msgs == [], "a message being worked on was delivered again"
        assert (await ack(worker, "PopRenew", "gr", held[:1])).status.code == Code.OK  # its first handle
        await worker.unary("NotifyClientTermination", spb.NotifyClientTerminationRequest())
        back: list[pb.Message] = []
        async with asyncio.timeout(20):  # the ended session's message shows again ~1 s later
            while not back:
                _, back, _ = await receive(other, "PopRenew", "gr")
        assert [m.body for m in back] == [held[1].body]
    finally:
        await worker.close()
        await other.close()


async def test_query_assignment_gives_each_broker_as_any_queue(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    a = daemons.broker(ns.addr, brokerName="broker-a")
    b = daemons.broker(ns.addr, brokerName="broker-b")
    await create_topic(ns, "PopAssigned")
    c = Client(str(a.grpc_addr), client_id="assigned-consumer")
    try:
        settings = pb.Settings(
            client_type=pb.ClientType.PUSH_CONSUMER,
            subscription=pb.Subscription(
                group=pb.Resource(name="gq"),
                subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name="PopAssigned"))],
            ),
        )
        call = c.telemetry(timeout=30)
        await call.write(spb.TelemetryCommand(settings=settings))
        answer = await call.read()
        assert answer.status.code == Code.OK and answer.settings.subscription.long_polling_timeout.seconds > 0
        req = spb.QueryAssignmentRequest(topic=pb.Resource(name="PopAssigned"), group=pb.Resource(name="gq"))
        got = await wait_until_async(lambda: _assignment(c, req), 20, 0.2, "both brokers assigned")
        queues = [x.message_queue for x in got.assignments]
        seen = {(q.broker.name, q.id, q.broker.endpoints.addresses[0].port) for q in queues}
        assert seen == {("broker-a", -1, a.grpc_port), ("broker-b", -1, b.grpc_port)}
        call.cancel()
    finally:
        await c.close()


async def _assignment(c: Client, req: Any) -> Any:
    answer = await c.unary("QueryAssignment", req)
    assert answer.status.code == Code.OK, answer.status
    return answer if len(answer.assignments) == 2 else None
