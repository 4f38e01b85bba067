"""Conformance: RocketMQ's official 5.x clients (gRPC) against real rocketpy daemons.

The PyPI Python client and the npm Node.js client each run in their own process (installed apart
from rocketpy by ``rmq5.py``; skipped with the reason when pip or npm cannot install them) and
send through a broker's gRPC endpoint; what they sent is read back by rocketpy's remoting SDK
(one broker, two protocols): normal, FIFO (same group, same queue, in order), delay (not before
its time) and transactional messages (commit, rollback, and a check answered by the producer's
checker over Telemetry); and what rocketpy's remoting producer sent is received by each client's
SimpleConsumer (receive, change invisible duration, ack with the new handle) and PushConsumer (a
failed consumption redelivered after the retry policy's delay; a FIFO group in order per message
group). Neither client has a 5.x PullConsumer (the Python client's LitePush/LiteSimple consumers are
RocketMQ's Lite topics); the PullMessage RPCs are checked with a raw client in
``tests/integration/test_grpc_endpoint.py``.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketpy.client.admin import Admin
from rocketpy.client.lite_pull_consumer import LitePullConsumer
from rocketpy.client.producer import Producer
from rocketpy.message import Message
from rocketpy.testing import Daemon, start_broker, start_namesrv
from tests.compat import rmq5
from tests.waiting import wait_until_async

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SEND_TIMEOUT_S = 120.0
FAST = {"rebalance_interval": 1.0, "heartbeat_broker_interval": 1.0, "poll_name_server_interval": 1.0}
CLIENTS = ["python", "node"]
#: Short retry delays, so a push consumer's failed message comes back within seconds (its retry
#: policy is the broker's messageDelayLevel from level 3 on), and short empty long polls.
BROKER_PROPS = {
    "transactionCheckInterval": 1000,
    "transactionTimeOut": 1000,
    "messageDelayLevel": " ".join(["1s"] * 18),
    "grpcClientConsumerMinLongPollingTimeoutMillis": 1000,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Daemon]]:
    """A NameServer and a broker whose transaction check runs every second (``BROKER_PROPS``)."""
    root = tmp_path_factory.mktemp("rmq5")
    ns = start_namesrv(root / "ns")
    try:
        broker = start_broker(root / "b", ns.addr, **BROKER_PROPS)
    except Exception:
        ns.terminate()
        raise
    yield ns, broker
    broker.terminate()
    ns.terminate()


@pytest.fixture(scope="module")
def clients(request: pytest.FixtureRequest) -> dict[str, tuple[str | None, str]]:
    """Each client's launcher (interpreter or NODE_PATH) or the reason it is missing."""
    return {"python": rmq5.python_client(request.config), "node": rmq5.node_client(request.config)}


def send(clients: dict[str, Any], kind: str, mode: str, endpoint: str, topic: str) -> dict[str, Any]:
    """Run one client's worker; skips when that client could not be installed."""
    launcher, why = clients[kind]
    if launcher is None:
        pytest.skip(why)
    if kind == "python":
        argv = [launcher, str(HERE / "rmq5_python_worker.py"), mode, endpoint, topic]
        return rmq5.run_worker(argv, SEND_TIMEOUT_S)
    argv = ["node", str(HERE / "rmq5_node_worker.js"), mode, endpoint, topic]
    return rmq5.run_worker(argv, SEND_TIMEOUT_S, {"NODE_PATH": launcher})


def consume(
    clients: dict[str, Any], kind: str, mode: str, endpoint: str, topic: str, group: str, count: int
) -> dict[str, Any]:
    """Run one client's consumer worker (``rmq5_*_consumer``); skips when that client is missing."""
    launcher, why = clients[kind]
    if launcher is None:
        pytest.skip(why)
    args = [mode, endpoint, topic, group, str(count)]
    if kind == "python":
        return rmq5.run_worker([launcher, str(HERE / "rmq5_python_consumer.py"), *args], SEND_TIMEOUT_S)
    argv = ["node", str(HERE / "rmq5_node_consumer.js"), *args]
    return rmq5.run_worker(argv, SEND_TIMEOUT_S, {"NODE_PATH": launcher})


async def send_remoting(ns: Daemon, topic: str, bodies: list[str], **kwargs: Any) -> list[str]:
    """Send over remoting with rocketpy's producer; the message ids."""
    producer = Producer(f"pg_{topic}", ns.addr)
    await producer.start()
    try:
        return [(await producer.send(Message(topic, b.encode(), **kwargs))).msg_id for b in bodies]
    finally:
        await producer.shutdown()


async def all_acked(ns: Daemon, group: str, topic: str) -> bool:
    """Nothing of ``topic`` in flight for ``group`` and its offsets at the end of every queue."""
    async with Admin(ns.addr) as admin:
        rows = await admin.consumer_progress(group, topic)
    return bool(rows) and all(r.get("inflight", 0) == 0 and r["diff"] == 0 for r in rows)


async def create_topic(ns: Daemon, topic: str, message_type: str) -> None:
    admin = Admin(ns.addr)
    await admin.start()
    try:
        await admin.create_topic(topic, "DefaultCluster", attributes=f"+message.type={message_type}")
    finally:
        await admin.shutdown()


async def read_back(
    ns: Daemon, topic: str, count: int, timeout_s: float = 30.0, group: str = "read"
) -> list[Any]:
    """Read ``topic`` from its start over remoting until ``count`` messages came (or the deadline)."""
    consumer = LitePullConsumer(
        f"{group}_{topic}", ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST
    )
    consumer.subscribe(topic, "*")
    await consumer.start()
    got: list[Any] = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(got) < count and time.monotonic() < deadline:
            got += await consumer.poll(timeout=0.2)
    finally:
        await consumer.shutdown()
    return got


@pytest.mark.parametrize("kind", CLIENTS)
async def test_normal_messages(cluster: tuple[Daemon, Daemon], clients: dict[str, Any], kind: str) -> None:
    ns, broker = cluster
    topic = f"Rmq5Normal_{kind}"
    await create_topic(ns, topic, "NORMAL")
    sent = send(clients, kind, "normal", str(broker.grpc_addr), topic)["sent"]
    assert len(sent) == 3 and all(s["id"] for s in sent)
    got = await read_back(ns, topic, 3)
    by_body = {m.body.decode(): m for m in got}
    assert sorted(by_body) == ["n0", "n1", "n2"]
    for s in sent:
        m = by_body[s["body"]]
        assert m.msg_id == s["id"], "the client's message id is the stored UNIQ_KEY"
        assert (m.tags, m.keys, m.properties.get("color")) == ("TagA", [f"key-{s['body']}"], "blue")


@pytest.mark.parametrize("kind", CLIENTS)
async def test_fifo_messages_keep_group_order(
    cluster: tuple[Daemon, Daemon], clients: dict[str, Any], kind: str
) -> None:
    ns, broker = cluster
    topic = f"Rmq5Fifo_{kind}"
    await create_topic(ns, topic, "FIFO")
    sent = send(clients, kind, "fifo", str(broker.grpc_addr), topic)["sent"]
    got = await read_back(ns, topic, 6)
    assert sorted(m.body.decode() for m in got) == [f"f{i}" for i in range(6)]
    for group in ("g0", "g1"):
        mine = sorted(
            (m for m in got if m.properties.get("__SHARDINGKEY") == group), key=lambda m: m.queue_offset
        )
        assert len({m.queue_id for m in mine}) == 1, f"group {group} spread over queues"
        assert [m.body.decode() for m in mine] == [s["body"] for s in sent if s["group"] == group]


@pytest.mark.parametrize("kind", CLIENTS)
async def test_delay_message_waits_for_its_time(
    cluster: tuple[Daemon, Daemon], clients: dict[str, Any], kind: str
) -> None:
    ns, broker = cluster
    topic = f"Rmq5Delay_{kind}"
    await create_topic(ns, topic, "DELAY")
    sent = send(clients, kind, "delay", str(broker.grpc_addr), topic)["sent"]
    (m,) = await read_back(ns, topic, 1, timeout_s=30.0)
    assert m.msg_id == sent[0]["id"]
    assert m.store_timestamp / 1000.0 >= sent[0]["deliver_at"] - 0.01, "delivered before its time"


@pytest.mark.parametrize("kind", CLIENTS)
async def test_transactions_commit_rollback_and_check(
    cluster: tuple[Daemon, Daemon], clients: dict[str, Any], kind: str
) -> None:
    ns, broker = cluster
    topic = f"Rmq5Txn_{kind}"
    await create_topic(ns, topic, "TRANSACTION")
    result = send(clients, kind, "transaction", str(broker.grpc_addr), topic)
    ids = {s["body"]: s["id"] for s in result["sent"]}
    assert all(s["transaction_id"] for s in result["sent"])
    assert ids["t-check"] in result["checked"], "the broker's check reached the producer's checker"
    got = await read_back(ns, topic, 2)
    assert sorted(m.body.decode() for m in got) == ["t-check", "t-commit"]
    assert {m.msg_id for m in got} == {ids["t-check"], ids["t-commit"]}
    again = await read_back(ns, topic, 3, timeout_s=3.0, group="again")  # the rollback never shows
    assert sorted(m.body.decode() for m in again) == ["t-check", "t-commit"]


async def test_message_of_the_wrong_type_is_refused(
    cluster: tuple[Daemon, Daemon], clients: dict[str, Any]
) -> None:
    ns, broker = cluster
    topic = "Rmq5Typed"
    await create_topic(ns, topic, "NORMAL")
    error = send(clients, "python", "wrong_type", str(broker.grpc_addr), topic)["error"]
    assert error is not None and "FIFO" in error


@pytest.mark.parametrize("kind", CLIENTS)
def test_readme_examples_send(cluster: tuple[Daemon, Daemon], clients: dict[str, Any], kind: str) -> None:
    """``examples/rocketmq5/producer.{py,js}``, the README's snippets, against a MIXED topic."""
    ns, broker = cluster
    launcher, why = clients[kind]
    if launcher is None:
        pytest.skip(why)
    topic = f"Rmq5Example_{kind}"
    asyncio.run(create_topic(ns, topic, "MIXED"))
    example = ROOT / "examples" / "rocketmq5" / ("producer.py" if kind == "python" else "producer.js")
    argv = [launcher if kind == "python" else "node", str(example), str(broker.grpc_addr), topic]
    env = {**os.environ, "NODE_PATH": launcher} if kind == "node" else None
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count(":") >= 2 and "normal:" in done.stdout and "delay:" in done.stdout


def test_tls_endpoint_with_the_clients_tls_switch(
    daemons: Any, clients: dict[str, Any], tmp_path: Path
) -> None:
    """grpcTlsCertPath/grpcTlsKeyPath: the Python client with tls_enable (trusting the test's CA)."""
    launcher, why = clients["python"]
    if launcher is None:
        pytest.skip(why)
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        capture_output=True, text=True,
    )  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"openssl cannot make a test certificate: {made.stderr.strip()[-200:]}")
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, grpcTlsCertPath=str(cert), grpcTlsKeyPath=str(key))
    asyncio.run(create_topic(ns, "Rmq5Tls", "NORMAL"))
    argv = [launcher, str(HERE / "rmq5_python_worker.py"), "normal", str(broker.grpc_addr), "Rmq5Tls", "tls"]
    sent = rmq5.run_worker(argv, SEND_TIMEOUT_S, {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(cert)})["sent"]
    assert len(sent) == 3
    plain = [launcher, str(HERE / "rmq5_python_worker.py"), "normal", str(broker.grpc_addr), "Rmq5Tls"]
    refused = subprocess.run(plain, capture_output=True, text=True, timeout=SEND_TIMEOUT_S)
    assert refused.returncode != 0, "a plaintext client got through a TLS endpoint"


@pytest.mark.parametrize("kind", CLIENTS)
async def test_simple_consumer_receives_changes_and_acks_what_remoting_sent(
    cluster: tuple[Daemon, Daemon], clients: dict[str, Any], kind: str
) -> None:
    ns, broker = cluster
    topic, group = f"Rmq5Simple_{kind}", f"simple_{kind}"
    await create_topic(ns, topic, "NORMAL")
    ids = await send_remoting(
        ns, topic, [f"s{i}" for i in range(5)], tags="TagS", properties={"color": "red"}
    )
    out = consume(clients, kind, "simple", str(broker.grpc_addr), topic, group, 5)
    got = {r["id"]: r for r in out["received"]}
    assert sorted(got) == sorted(ids), "each message once, with the remoting producer's id"
    assert sorted(r["body"] for r in got.values()) == [f"s{i}" for i in range(5)]
    assert all((r["tag"], r["props"].get("color"), r["attempt"]) == ("TagS", "red", 1) for r in got.values())
    assert out["changed"] == {"id": out["received"][0]["id"], "new_handle": True}
    await wait_until_async(lambda: all_acked(ns, group, topic), 30, 0.5, "every message acked")


@pytest.mark.parametrize("kind", CLIENTS)
async def test_push_consumer_consumes_and_retries_a_failed_message(
    cluster: tuple[Daemon, Daemon], clients: dict[str, Any], kind: str
) -> None:
    ns, broker = cluster
    topic, group = f"Rmq5Push_{kind}", f"push_{kind}"
    await create_topic(ns, topic, "NORMAL")
    bodies = ["fail-once", *(f"p{i}" for i in range(5))]
    ids = await send_remoting(ns, topic, bodies)
    out = consume(clients, kind, "push", str(broker.grpc_addr), topic, group, len(bodies))
    assert out["finished"], out
    ok = [r for r in out["consumed"] if r["result"] == "SUCCESS"]
    assert sorted(r["id"] for r in ok) == sorted(ids), "each message consumed once"
    failing = [r["attempt"] for r in out["consumed"] if r["body"] == "fail-once"]
    assert failing == [1, 2], "the failed message came back as its second delivery"
    await wait_until_async(lambda: all_acked(ns, group, topic), 30, 0.5, "every message acked")


async def test_push_consumer_of_a_fifo_group_keeps_each_message_groups_order(
    cluster: tuple[Daemon, Daemon], clients: dict[str, Any]
) -> None:
    ns, broker = cluster
    topic, group = "Rmq5FifoPush", "fifo_push"
    await create_topic(ns, topic, "FIFO")
    async with Admin(ns.addr) as admin:
        await admin.update_subscription_group(group, "DefaultCluster", consume_message_orderly=True)
    sent = send(clients, "python", "fifo", str(broker.grpc_addr), topic)["sent"]
    out = consume(clients, "python", "fifo", str(broker.grpc_addr), topic, group, len(sent))
    assert out["finished"], out
    for g in ("g0", "g1"):
        order = [r["body"] for r in out["consumed"] if r["group"] == g]
        assert order == [s["body"] for s in sent if s["group"] == g], f"group {g} out of order"


@pytest.mark.parametrize("kind", CLIENTS)
async def test_readme_examples_consume(
    cluster: tuple[Daemon, Daemon], clients: dict[str, Any], kind: str
) -> None:
    """``examples/rocketmq5/{simple,push}_consumer.{py,js}``, the README's snippets."""
    ns, broker = cluster
    launcher, why = clients[kind]
    if launcher is None:
        pytest.skip(why)
    env = {**os.environ, "NODE_PATH": launcher} if kind == "node" else None
    suffix = "py" if kind == "python" else "js"
    runner = launcher if kind == "python" else "node"
    for example, extra, word in (
        ("simple_consumer", [], "received:"),
        ("push_consumer", ["10"], "consumed:"),
    ):
        topic = f"Rmq5Example_{example}_{kind}"  # a new group reads its topic from the start
        await create_topic(ns, topic, "MIXED")
        ids = await send_remoting(ns, topic, [f"{example}-{i}" for i in range(2)])
        script = ROOT / "examples" / "rocketmq5" / f"{example}.{suffix}"
        argv = [runner, str(script), str(broker.grpc_addr), topic, f"{example}_{kind}", *extra]
        done = await asyncio.to_thread(
            subprocess.run, argv, capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr[-3000:]
        seen = re.findall(rf"{word} ([0-9A-F]+)", done.stdout)  # the listener's threads may interleave
        assert sorted(seen) == sorted(ids), done.stdout
