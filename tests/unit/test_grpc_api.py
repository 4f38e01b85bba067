"""The RocketMQ 5 protobuf modules and the gRPC endpoint's pure parts (no server)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketpy.acl.rules import parse_acl_text
from rocketpy.acl.validator import AccessValidator
from rocketpy.broker.grpc.convert import SendPlan, message_type_of, timestamp_ms, to_proto
from rocketpy.broker.grpc.metadata import parse_authorization, peer_host_port, read_metadata
from rocketpy.broker.grpc.status import Code, RpcError
from rocketpy.config import BrokerConfig
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.message import MessageExt, string_to_properties
from rocketpy.topic import apply_attributes

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None, reason="grpcio-tools is not installed")
def test_committed_modules_are_what_the_protos_give() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/gen_grpc.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_the_modules_live_in_rocketpys_own_pool() -> None:
    """Another package's definition.proto (another version) can join the default pool beside them."""
    code = (
        "from google.protobuf import descriptor_pb2, descriptor_pool\n"
        "from rocketpy.grpc_api.v2 import service_pb2\n"
        "f = descriptor_pb2.FileDescriptorProto(name='apache/rocketmq/v2/definition.proto',"
        " package='apache.rocketmq.v2')\n"
        "f.message_type.add(name='OnlyInTheOtherVersion')\n"
        "descriptor_pool.Default().Add(f)\n"
        "print(service_pb2.SendMessageRequest.DESCRIPTOR.file.pool is descriptor_pool.Default())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _msg(**sp: object) -> pb.Message:
    m = pb.Message(topic=pb.Resource(name="T"), body=b"hello")
    m.system_properties.message_id = "01ABC"
    for k, v in sp.items():
        setattr(m.system_properties, k, v)
    return m


def test_send_plan_maps_the_5x_message_onto_properties() -> None:
    m = _msg(tag="TagA", message_type=pb.FIFO, message_group="g1")
    m.system_properties.keys.extend(["k1", "k2"])
    m.user_properties["color"] = "blue"
    plan = SendPlan.from_proto(m, BrokerConfig(), 4 << 20)
    props = string_to_properties(plan.properties)
    assert props["UNIQ_KEY"] == "01ABC" and props["TAGS"] == "TagA" and props["KEYS"] == "k1 k2"
    assert props["__SHARDINGKEY"] == "g1" and props["color"] == "blue" and plan.message_group == "g1"
    assert message_type_of(props) == pb.FIFO
    txn = SendPlan.from_proto(_msg(message_type=pb.TRANSACTION), BrokerConfig(), 4 << 20)
    assert string_to_properties(txn.properties)["PGROUP"] == "T" and txn.sys_flag == 4


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"message_id": ""}, Code.ILLEGAL_MESSAGE_ID),
        ({"tag": " "}, Code.ILLEGAL_MESSAGE_TAG),
        ({"message_group": "x" * 65, "message_type": pb.FIFO}, Code.ILLEGAL_MESSAGE_GROUP),
        ({"message_type": pb.DELAY}, Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
    ],
)
def test_send_plan_refuses_with_the_apis_codes(change: dict[str, object], code: int) -> None:
    with pytest.raises(RpcError) as info:
        SendPlan.from_proto(_msg(**change), BrokerConfig(), 4 << 20)
    assert info.value.code == code and info.value.message


def test_reserved_and_oversized_user_properties_are_refused() -> None:
    m = _msg()
    m.user_properties["UNIQ_KEY"] = "mine"
    with pytest.raises(RpcError, match="reserved") as info:
        SendPlan.from_proto(m, BrokerConfig(), 4 << 20)
    assert info.value.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    m = _msg()
    for i in range(129):
        m.user_properties[f"p{i}"] = "v"
    with pytest.raises(RpcError, match="userPropertyMaxNum"):
        SendPlan.from_proto(m, BrokerConfig(), 4 << 20)


def test_delivery_timestamp_in_seconds_or_milliseconds() -> None:
    assert timestamp_ms(1_700_000_000, 5_000_000) == 1_700_000_000_005
    assert timestamp_ms(1_700_000_000_123, 0) == 1_700_000_000_123  # the Python client's ms in seconds
    at = int(time.time()) + 60
    m = _msg(message_type=pb.DELAY)
    m.system_properties.delivery_timestamp.seconds = at
    props = string_to_properties(SendPlan.from_proto(m, BrokerConfig(), 4 << 20).properties)
    assert props["TIMER_DELIVER_MS"] == str(at * 1000)


def test_stored_message_back_to_proto() -> None:
    ext = MessageExt("T", b"body", tags="A", keys=["k"], properties={"UNIQ_KEY": "01X", "color": "red"})
    ext.born_timestamp = ext.store_timestamp = 1000
    ext.queue_id, ext.queue_offset, ext.reconsume_times, ext.sys_flag = 2, 7, 0, 0
    ext.born_host = ext.store_host = ("127.0.0.1", 1)  # type: ignore[misc]
    m = to_proto(ext)
    sp = m.system_properties
    assert (sp.message_id, sp.tag, list(sp.keys), sp.queue_offset) == ("01X", "A", ["k"], 7)
    assert dict(m.user_properties) == {"color": "red"}
    assert (sp.body_digest.type, sp.body_digest.checksum) == (
        pb.DigestType.MD5,
        "841A2D689AD86BD1611447453C22C6FC",
    )


def test_topic_attributes() -> None:
    assert apply_attributes({}, "+message.type=fifo") == {"message.type": "FIFO"}
    assert apply_attributes({"message.type": "FIFO"}, "-message.type") == {}
    for bad in ("+message.type=SOMETIMES", "+other=1", "message.type=FIFO"):
        with pytest.raises(ValueError, match=r"message\.type|KEY"):
            apply_attributes({}, bad)


def test_metadata_and_authorization() -> None:
    auth = "MQv2-HMAC-SHA1 Credential=ak1, SignedHeaders=x-mq-date-time, Signature=ABCD"
    assert parse_authorization(auth) == ("ak1", "ABCD")
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=0") == (
        "",
        "0",
    )
    assert parse_authorization("Bearer x") == (None, None)
    meta = read_metadata([("x-mq-client-id", "c1"), ("authorization", auth), ("bin-bin", b"\x00")])
    assert (meta.client_id, meta.access_key, meta.signature) == ("c1", "ak1", "ABCD")
    assert peer_host_port("ipv4:127.0.0.1:5555") == ("127.0.0.1", 5555)
    assert peer_host_port("ipv6:[::1]:7") == ("::1", 7) and peer_host_port("unix:/x") is None


def test_grpc_signature_check() -> None:
    rules = parse_acl_text(
        "accounts:\n  - accessKey: user0001\n    secretKey: secret01\n    admin: true\n", "acl.yml"
    )
    validator = AccessValidator(rules)
    when = "20260101T000000Z"
    good = hmac.new(b"secret01", when.encode(), hashlib.sha1).hexdigest().upper()
    assert validator.check_grpc("10.0.0.1", "user0001", good, when, None) is None
    assert validator.check_grpc("10.0.0.1", "user0001", "00" + good[2:], when, None) is not None
    assert validator.check_grpc("10.0.0.1", "", None, when, None) is not None
    assert validator.check_grpc("10.0.0.1", "nobody", good, when, None) is not None


async def test_admin_questions_are_matched_with_the_clients_answers() -> None:
    """``Streams.ask``: a PrintThreadStackTrace command goes to the client's Telemetry outbox and the
    client's ThreadStackTrace answer (same nonce) comes back; an unknown client is NOT_FOUND."""
    from typing import Any

    from rocketpy.broker.grpc.clients import GrpcClients
    from rocketpy.broker.grpc.service import Call
    from rocketpy.broker.grpc.streams import Streams
    from rocketpy.grpc_api.v2 import service_pb2 as spb
    from rocketpy.remoting.processor import ProcessorTable

    def never(*_: Any) -> Any:
        raise AssertionError("not called")

    clients = GrpcClients(ProcessorTable("t"), never, never, lambda _: None, never)
    client = clients.touch("c1", ("127.0.0.1", 1), "JAVA")
    client.outbox = asyncio.Queue(8)
    streams = Streams(None, clients)  # type: ignore[arg-type]  # the service is not needed here

    async def answer() -> None:
        command = await client.outbox.get()  # type: ignore[union-attr]
        assert command is not None
        nonce = command.print_thread_stack_trace_command.nonce
        trace = spb.ThreadStackTrace(nonce=nonce, thread_stack_trace="main: waiting")
        call = Call(read_metadata([]), client, "127.0.0.1")
        assert streams._on_command(spb.TelemetryCommand(thread_stack_trace=trace), call) is None

    helper = asyncio.ensure_future(answer())
    question = spb.TelemetryCommand(print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand())
    got = await streams.ask("c1", question, 5.0)
    await helper
    assert got.thread_stack_trace.thread_stack_trace == "main: waiting"
    with pytest.raises(RpcError) as info:
        await streams.ask("nobody", question, 0.1)
    assert info.value.code == Code.NOT_FOUND


async def test_a_client_session_costs_a_few_kib() -> None:
    """``MAX_CLIENTS`` sessions must fit in memory: a stand-in channel keeps no frame decoder."""
    from typing import Any

    from rocketpy.broker.grpc.clients import GrpcClients
    from rocketpy.remoting.processor import ProcessorTable

    def rss_kib() -> int:
        return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))

    def never(*_: Any) -> Any:
        raise AssertionError("not called")

    clients = GrpcClients(ProcessorTable("t"), never, never, lambda _: None, never)
    before = rss_kib()
    for i in range(4000):
        clients.touch(f"client-{i}", ("127.0.0.1", i), "PYTHON")
    per_session = (rss_kib() - before) / 4000
    assert per_session < 12, f"{per_session:.1f} KiB resident per gRPC client session"
