"""The protocol's one home: every served code has a spec, every spec is served, headers round-trip."""

from __future__ import annotations

import ast
import subprocess
import sys
from enum import IntEnum
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.acl.resources import ADMIN_CODES, NAMESRV_CHECKED_CODES, request_needs
from rocketpy.broker.controller import BrokerController
from rocketpy.client.instance import ClientSettings, MQClientInstance
from rocketpy.config import BrokerConfig, NamesrvConfig, StoreConfig
from rocketpy.errors import HeaderError, MQBrokerError, broker_error
from rocketpy.nameserver.kv_config import KVConfigManager
from rocketpy.nameserver.processors import NamesrvProcessors
from rocketpy.nameserver.route_info import RouteInfoManager
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.header import Header, wire
from rocketpy.protocol.headers.pop import BatchAck, batch_ack_body
from rocketpy.protocol.headers.pull import PullMessageRequestHeader
from rocketpy.protocol.responses import RESPONSES
from rocketpy.protocol.specs import SPECS, check_served, codes_served_by
from rocketpy.remoting.body import encode_body
from rocketpy.remoting.command import SERIALIZE_MSGPACK, RemotingCommand

ROOT = Path(__file__).resolve().parents[2]


def _broker_codes(tmp_path: Path) -> set[int]:
    broker = BrokerConfig(brokerName="b", bindAddress="127.0.0.1", listenPort=0)
    controller = BrokerController(broker, StoreConfig(storePathRootDir=str(tmp_path)))
    return {int(c) for c in controller.processor_table()}


def _namesrv_codes(tmp_path: Path) -> set[int]:
    config = NamesrvConfig(kvConfigPath=str(tmp_path / "kv.json"))
    processors = NamesrvProcessors(
        RouteInfoManager(lambda: 0), KVConfigManager(config.kv_config_path), config
    )
    return {int(c) for c in processors.table()}


def test_every_code_a_daemon_serves_has_a_spec_and_every_spec_is_served(tmp_path: Path) -> None:
    assert _broker_codes(tmp_path) == codes_served_by("broker")
    assert _namesrv_codes(tmp_path) == codes_served_by("namesrv")
    client = MQClientInstance(["127.0.0.1:9876"], ClientSettings())
    assert set(client.remoting.served_codes()) == codes_served_by("client")
    assert set(SPECS) == codes_served_by("broker") | codes_served_by("namesrv") | codes_served_by("client")


def test_a_served_code_without_a_spec_stops_the_daemon() -> None:
    with pytest.raises(RuntimeError, match=r"END_TRANSACTION\(37\)'s spec names broker, which lacks it"):
        check_served("broker", codes_served_by("broker") - {RequestCode.END_TRANSACTION})
    with pytest.raises(RuntimeError, match=r"BROKER_HEARTBEAT\(904\) is served but no spec names namesrv"):
        check_served("namesrv", codes_served_by("namesrv") | {RequestCode.BROKER_HEARTBEAT})


def _codes_named_in(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id in ("RequestCode", "C") and node.attr.isupper():
                    names.add(node.attr)
    return names


def test_every_code_the_sdk_sends_has_a_spec() -> None:
    sent = _codes_named_in(ROOT / "client") | _codes_named_in(ROOT / "rocketpy" / "spark")
    assert sent, "the scan found no request code"
    assert sorted(name for name in sent if RequestCode[name] not in SPECS) == []


def test_every_spec_has_an_acl_rule_whose_fields_its_header_has() -> None:
    for spec in SPECS.values():
        assert spec.access is not None, spec.code.name
        for field in (spec.topic_field, spec.group_field):
            assert field is None or field in spec.wire_names.values(), spec.code.name
    assert RequestCode.UPDATE_AND_CREATE_TOPIC in ADMIN_CODES
    assert RequestCode.REGISTER_BROKER in NAMESRV_CHECKED_CODES
    assert RequestCode.GET_ROUTEINFO_BY_TOPIC not in NAMESRV_CHECKED_CODES


@pytest.mark.parametrize(
    ("code", "ext", "needs"),
    [
        (RequestCode.SEND_MESSAGE_V2, {"b": "T"}, [("topic", "T", 4)]),
        (RequestCode.SEND_MESSAGE, {"topic": "T"}, [("topic", "T", 4)]),
        (RequestCode.PULL_MESSAGE, {"topic": "%RETRY%g", "consumerGroup": "g"}, [("group", "g", 8)] * 2),
        (RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "g"}, [("group", "g", 8)]),
        (RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "g"}, [("group", "g", 8)]),
        (RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}, []),
        (
            RequestCode.POP_MESSAGE,
            {"topic": "T", "consumerGroup": "g"},
            [("topic", "T", 8), ("group", "g", 8)],
        ),
        # a redelivered POP message is acked on its POP retry topic: it needs what its topic needs
        (
            RequestCode.ACK_MESSAGE,
            {"topic": "%RETRY%g_T", "consumerGroup": "g"},
            [("topic", "T", 8), ("group", "g", 8)],
        ),
        (
            RequestCode.ACK_MESSAGE,
            {"topic": "%RETRY%h_T", "consumerGroup": "g"},
            [("group", "h_T", 8), ("group", "g", 8)],
        ),
        (RequestCode.SET_MESSAGE_REQUEST_MODE, {}, []),
    ],
)
def test_acl_needs_come_from_the_spec(code: RequestCode, ext: dict[str, object], needs: list[object]) -> None:
    assert request_needs(RemotingCommand.request(code, ext)) == needs


def test_acl_needs_of_pop_bodies() -> None:
    ack = BatchAck("g", "T", True, 0, 0, 0, 1, 1, (0,))
    body = encode_body(batch_ack_body("b", [ack]), SERIALIZE_MSGPACK)
    cmd = RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, None, body)
    assert request_needs(cmd) == [("group", "g", 8), ("topic", "T", 8)]
    doc = {
        "topic": "T",
        "consumerGroup": "g",
        "clientId": "c",
        "strategyName": "AVG",
        "messageModel": "CLUSTERING",
    }
    cmd = RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, None, encode_body(doc, SERIALIZE_MSGPACK))
    assert request_needs(cmd) == [("group", "g", 8), ("topic", "T", 8)]
    assert RequestCode.SET_MESSAGE_REQUEST_MODE in ADMIN_CODES


def test_generated_response_codes_and_errors_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protocol.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_error_row_builds_its_class() -> None:
    for row in RESPONSES:
        assert ResponseCode(row.code).name == row.name
        err = broker_error(row.code, "why", "1.2.3.4:10911")
        if row.error is None:
            assert type(err) is MQBrokerError
        else:
            assert type(err).__name__ == row.error
            assert err.retriable is row.retriable
            assert err.code == row.code


class _Mode(IntEnum):
    OFF = 0
    ON = 1


class _Sample(Header):
    name: str = wire("name", nonempty=True, hint="name it")
    count: int = wire("count", lo=1, hi=10)
    mode: _Mode = wire("mode", enum=_Mode, default=_Mode.OFF)
    flag: bool = wire("flag", default=False)
    note: str | None = wire("note", default=None)


def test_a_header_reads_what_rocketmq_clients_send_and_names_bad_fields() -> None:
    # RocketMQ's JSON clients send numbers and booleans as text
    h = _Sample.from_ext({"name": "a", "count": "3", "mode": "1", "flag": "true"})
    assert (h.name, h.count, h.mode, h.flag, h.note) == ("a", 3, _Mode.ON, True, None)
    assert h.to_ext() == {"name": "a", "count": 3, "mode": 1, "flag": True}
    assert type(h.to_ext()["mode"]) is int
    with pytest.raises(HeaderError, match="'count' is missing"):
        _Sample.from_ext({"name": "a"})
    with pytest.raises(HeaderError, match="'count' must be between 1 and 10, got 11"):
        _Sample.from_ext({"name": "a", "count": 11})
    with pytest.raises(HeaderError, match="'count' must be an integer, got 'x'"):
        _Sample.from_ext({"name": "a", "count": "x"})
    with pytest.raises(HeaderError, match=r"'mode' must be one of 0 \(OFF\), 1 \(ON\), got 7"):
        _Sample.from_ext({"name": "a", "count": 1, "mode": 7})
    with pytest.raises(HeaderError, match="'name' is empty; name it"):
        _Sample.from_ext({"name": "", "count": 1})


def test_header_declarations_are_checked_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="a required field follows a field with a default"):

        class _Bad(Header):
            a: int = wire("a", default=0)
            b: int = wire("b")

    with pytest.raises(TypeError, match="str, int or bool"):

        class _Bad2(Header):
            a: float = wire("a")


@given(
    group=st.text(max_size=20),
    queue_id=st.integers(0, 65535),
    offset=st.integers(0, 2**63 - 1),
    max_msgs=st.integers(1, 1 << 31),
    max_bytes=st.none() | st.integers(0, 2**40),
)
def test_pack_to_ext_and_from_ext_agree(
    group: str, queue_id: int, offset: int, max_msgs: int, max_bytes: int | None
) -> None:
    h = PullMessageRequestHeader(group, "T", queue_id, offset, max_msgs, max_msg_bytes=max_bytes)
    values = [getattr(h, f.attr) for f in h.WIRE]
    assert PullMessageRequestHeader.pack(*values) == h.to_ext()
    assert PullMessageRequestHeader.from_ext(h.to_ext()) == h
    text = {k: str(v) for k, v in h.to_ext().items()}  # the JSON header's strings
    assert PullMessageRequestHeader.from_ext(text) == h
