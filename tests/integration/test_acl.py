"""Plain ACL against real daemons: the matrix through the SDK, mqadmin and raw frames, the NameServer's
write codes, a malformed file (exit 2, FILE:LINE) and reload on change."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rocketpy import Admin, LitePullConsumer, Message, Producer
from rocketpy.acl.signing import RequestSigner
from rocketpy.errors import AccessDeniedError
from rocketpy.message import MessageQueue
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.offset import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketpy.protocol.headers.pull import PullMessageRequestHeader
from rocketpy.protocol.headers.send import send_ext_v2
from rocketpy.remoting.codec import FrameDecoder, encode_frame_bytes
from rocketpy.remoting.command import SERIALIZE_JSON, RemotingCommand
from rocketpy.remoting.json_header import ext_text
from tests.conftest import DaemonPool
from tests.daemons import REPO_ROOT, daemon_env, write_properties
from tests.waiting import wait_until, wait_until_async

ADMIN = ("brokerAdmin", "adminSecret1")
USER = ("producer01", "12345678")  # the secret is an unquoted number in the file
TRUSTED = ("trusted01", "trustedSecret")

ACL_YML = """\
globalWhiteRemoteAddresses: ["10.10.103.*"]
accounts:
  - accessKey: brokerAdmin
    secretKey: adminSecret1
    admin: true
  - accessKey: producer01
    secretKey: 12345678
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [TopicA=PUB|SUB, TopicB=SUB]
    groupPerms: [GroupX=DENY]
  - accessKey: trusted01
    secretKey: trustedSecret
    whiteRemoteAddress: 127.0.0.2
    defaultTopicPerm: DENY
"""


def start_acl_cluster(daemons: DaemonPool, acl_file: Path, **extra: Any) -> tuple[str, str]:
    """A NameServer and a broker with aclEnable; the broker signs its registrations as ADMIN."""
    acl_file.write_text(ACL_YML)
    acl = {"aclEnable": True, "aclFile": acl_file, **extra}
    ns = daemons.namesrv(**acl)
    broker = daemons.broker(ns.addr, aclAccessKey=ADMIN[0], aclSecretKey=ADMIN[1], **acl)
    return ns.addr, broker.addr


def rpc(addr: str, cmd: RemotingCommand, source_ip: str = "127.0.0.1") -> RemotingCommand:
    """Send one raw frame from ``source_ip`` and read its answer."""
    host, port = addr.rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(5.0)
        sock.bind((source_ip, 0))
        sock.connect((host, int(port)))
        cmd.opaque = 7
        sock.sendall(encode_frame_bytes(cmd))
        decoder = FrameDecoder()
        while True:
            data = sock.recv(65536)
            assert data, "connection closed without an answer"
            frames = decoder.feed(data)
            if frames:
                return frames[0]


def signed(cmd: RemotingCommand, keys: tuple[str, str]) -> RemotingCommand:
    RequestSigner(*keys)(cmd)
    return cmd


async def create_topics(ns: str, *topics: str) -> None:
    admin = Admin(ns, access_key=ADMIN[0], secret_key=ADMIN[1])
    await admin.start()
    try:
        for topic in topics:
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
    finally:
        await admin.shutdown()


async def send_as(ns: str, topic: str, keys: tuple[str, str] | None) -> Any:
    credentials = {"access_key": keys[0], "secret_key": keys[1]} if keys else {}
    producer = Producer("AclProducer", ns, retry_times=0, **credentials)  # type: ignore[arg-type]
    await producer.start()
    try:
        return await producer.send(Message(topic, b"hello acl"))
    finally:
        await producer.shutdown()


# -- requests by code ------------------------------------------------------------------------


def send_cmd(topic: str) -> RemotingCommand:
    ext = send_ext_v2("AclProducer", topic, "TBW102", 4, 0, 0, 0, 0, "", 0, False, False, "broker-a")
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"raw body")


def pull_cmd(topic: str, group: str) -> RemotingCommand:
    ext = PullMessageRequestHeader(group, topic, 0, 0, 32).to_ext()
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


def update_offset_cmd(topic: str, group: str) -> RemotingCommand:
    ext = UpdateConsumerOffsetRequestHeader(group, topic, 0, 0).to_ext()
    return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)


def query_offset_cmd(topic: str, group: str) -> RemotingCommand:
    ext = QueryConsumerOffsetRequestHeader(group, topic, 0).to_ext()
    return RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, ext)


def create_topic_cmd(topic: str) -> RemotingCommand:
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
           "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}  # fmt: skip
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)


REQUESTS = {
    "send": (lambda: send_cmd("TopicA"), lambda: send_cmd("TopicB")),
    "pull": (lambda: pull_cmd("TopicA", "GroupOK"), lambda: pull_cmd("TopicA", "GroupX")),
    "update offset": (
        lambda: update_offset_cmd("TopicA", "GroupOK"), lambda: update_offset_cmd("TopicC", "GroupOK")
    ),
    "query offset": (
        lambda: query_offset_cmd("TopicA", "GroupOK"), lambda: query_offset_cmd("TopicA", "GroupX")
    ),
    "admin": (lambda: create_topic_cmd("TopicNew"), None),
}  # fmt: skip


async def test_acl_matrix_through_raw_frames(daemons: DaemonPool, tmp_path: Path) -> None:
    ns, broker = start_acl_cluster(daemons, tmp_path / "plain_acl.yml")
    await create_topics(ns, "TopicA", "TopicB", "TopicC")
    for name, (allowed, unpermitted) in REQUESTS.items():
        keys = ADMIN if name == "admin" else USER
        answer = rpc(broker, signed(allowed(), keys))
        assert answer.code != ResponseCode.NO_PERMISSION, (name, answer)
        refusals = {
            "no AccessKey": allowed(),
            "has a wrong Signature": signed(allowed(), (USER[0], "not-the-secret")),
            "no account 'stranger1'": signed(allowed(), ("stranger1", USER[1])),
            # outside trusted01's white list (127.0.0.2), an unsigned request is refused
            "not in the account's white list": RemotingCommand.request(
                allowed().code, {**(allowed().ext or {}), "AccessKey": TRUSTED[0]}, allowed().body
            ),
        }
        if unpermitted is not None:
            refusals["permission on"] = signed(unpermitted(), USER)
        if name == "admin":
            refusals["needs an admin account"] = signed(allowed(), USER)
        for words, cmd in refusals.items():
            answer = rpc(broker, cmd)
            assert answer.code == ResponseCode.NO_PERMISSION, (name, words, answer)
            assert answer.remark is not None and answer.remark.startswith("access denied: ")
            assert words in answer.remark, (name, answer.remark)
            assert USER[1] not in answer.remark and ADMIN[1] not in answer.remark
        # from inside trusted01's white list an unsigned request passes the ACL (RocketMQ's rule)
        trusted = RemotingCommand.request(allowed().code, {**(allowed().ext or {}), "AccessKey": TRUSTED[0]},
                                          allowed().body)  # fmt: skip
        assert rpc(broker, trusted, source_ip="127.0.0.2").code != ResponseCode.NO_PERMISSION, name
    # a RocketMQ Java client's JSON request (ext values all strings) verifies too
    java = query_offset_cmd("TopicA", "GroupOK")
    java.ext = {k: ext_text(v) for k, v in (java.ext or {}).items()}
    java.serialize_type = SERIALIZE_JSON
    answer = rpc(broker, signed(java, USER))
    assert answer.code != ResponseCode.NO_PERMISSION and answer.serialize_type == SERIALIZE_JSON
    # refusals are logged once per client and resource, never with a secret
    refused = "has no PUB permission on topic 'TopicB'"
    await wait_until_async(lambda: refused in daemons.started[1].stderr_text(), 10.0)  # its logging thread
    log = daemons.started[1].stderr_text()
    assert log.count(refused) == 1
    assert USER[1] not in log and ADMIN[1] not in log and TRUSTED[1] not in log


async def test_acl_matrix_through_the_sdk(daemons: DaemonPool, tmp_path: Path) -> None:
    ns, _ = start_acl_cluster(daemons, tmp_path / "plain_acl.yml")
    await create_topics(ns, "TopicA", "TopicB")
    result = await send_as(ns, "TopicA", USER)
    assert result.msg_id
    for keys, words in (
        (None, "no AccessKey"),
        ((USER[0], "wrong-secret"), "wrong Signature"),
        (("stranger1", "whatever1"), "no account 'stranger1'"),
        (USER, "no PUB permission on topic 'TopicB'"),
    ):
        topic = "TopicB" if keys == USER else "TopicA"
        with pytest.raises(AccessDeniedError) as ei:
            await send_as(ns, topic, keys)
        assert words in str(ei.value) and not ei.value.retriable
    # a consumer of a permitted group reads what was sent; its offsets commit under ACL
    consumer = LitePullConsumer("GroupOK", ns, access_key=USER[0], secret_key=USER[1])
    consumer.assign([MessageQueue("TopicA", "broker-a", 0)])
    await consumer.start()
    try:
        got: list[Any] = []

        async def polled() -> bool:
            got.extend(await consumer.poll(0.2))
            return bool(got)

        await wait_until_async(polled, 15.0, message="no message polled under ACL")
        assert got[0].body == b"hello acl"
        await consumer.commit_sync()
    finally:
        await consumer.shutdown()
    # admin codes need an admin account
    admin = Admin(ns, access_key=USER[0], secret_key=USER[1])
    await admin.start()
    try:
        with pytest.raises(AccessDeniedError, match="needs an admin account"):
            await admin.create_topic("TopicZ", "DefaultCluster", wait_route=0.5)
    finally:
        await admin.shutdown()


def test_mqadmin_global_access_key_options(daemons: DaemonPool, tmp_path: Path) -> None:
    from rocketpy.cli import admin_group

    ns, _ = start_acl_cluster(daemons, tmp_path / "plain_acl.yml")
    args = ["updateTopic", "-n", ns, "-t", "CliTopic", "-c", "DefaultCluster"]
    denied = CliRunner().invoke(admin_group, ["-a", USER[0], "-s", USER[1], *args])
    assert denied.exit_code != 0 and "needs an admin account" in str(denied.exception), denied.output
    ok = CliRunner().invoke(admin_group, ["-a", ADMIN[0], "-s", ADMIN[1], *args], catch_exceptions=False)
    assert ok.exit_code == 0, ok.output
    half = CliRunner().invoke(admin_group, ["-a", ADMIN[0], *args])
    assert half.exit_code == 2 and "go together" in half.output


async def test_namesrv_checks_its_write_codes_only(daemons: DaemonPool, tmp_path: Path) -> None:
    ns, _ = start_acl_cluster(daemons, tmp_path / "plain_acl.yml")
    put = {"namespace": "ns1", "key": "k", "value": "v"}
    unsigned = rpc(ns, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, dict(put)))
    assert unsigned.code == ResponseCode.NO_PERMISSION and "no AccessKey" in (unsigned.remark or "")
    user = rpc(ns, signed(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, dict(put)), USER))
    assert user.code == ResponseCode.NO_PERMISSION and "needs an admin account" in (user.remark or "")
    admin = rpc(ns, signed(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, dict(put)), ADMIN))
    assert admin.code == ResponseCode.SUCCESS
    unregister = RemotingCommand.request(
        RequestCode.UNREGISTER_BROKER,
        {"brokerName": "broker-a", "brokerAddr": "1.2.3.4:1", "clusterName": "DefaultCluster", "brokerId": 0},
    )
    assert rpc(ns, unregister).code == ResponseCode.NO_PERMISSION
    # reads stay open (RocketMQ's NameServer has no ACL); the broker registered with its admin account
    route = rpc(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert route.code == ResponseCode.SUCCESS and b"broker-a" in bytes(route.body)


@pytest.mark.parametrize("kind", ["namesrv", "broker"])
def test_malformed_acl_file_refuses_to_start(tmp_path: Path, kind: str) -> None:
    acl = tmp_path / "plain_acl.yml"  # the default name beside the properties file
    acl.write_text(
        "accounts:\n  - accessKey: producer01\n    secretKey: 12345678\n    topicPerms: [A=WRITE]\n"
    )
    props = {
        "listenPort": 0,
        "bindAddress": "127.0.0.1",
        "aclEnable": True,
        "storePathRootDir": tmp_path / "s",
    }
    if kind == "namesrv":
        props = {"listenPort": 0, "bindAddress": "127.0.0.1", "aclEnable": True}
    conf = write_properties(tmp_path / f"{kind}.properties", props)
    proc = subprocess.run(
        [sys.executable, "-m", "rocketpy.cli", kind, "-c", str(conf)],
        env=daemon_env(tmp_path, tmp_path),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {acl}:4: topicPerms entry 'A=WRITE'"), proc.stderr
    assert "Traceback" not in proc.stderr


async def test_acl_file_reload(daemons: DaemonPool, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    ns, _ = start_acl_cluster(daemons, acl_file, aclFileCheckInterval=100)
    await create_topics(ns, "TopicC")
    with pytest.raises(AccessDeniedError, match="no PUB permission on topic 'TopicC'"):
        await send_as(ns, "TopicC", USER)
    acl_file.write_text(ACL_YML.replace("TopicB=SUB]", "TopicB=SUB, TopicC=PUB]"))

    async def sent() -> bool:
        try:
            await send_as(ns, "TopicC", USER)
        except AccessDeniedError:
            return False
        return True

    await wait_until_async(sent, 20.0, interval=0.2, message="the changed ACL file was not picked up")
    acl_file.write_text(ACL_YML + "  - accessKey: [broken\n")
    broker = daemons.started[1]
    wait_until(
        lambda: "keeping the last good rules" in broker.stderr_text(), 20.0, message="no reload warning"
    )
    assert f"{acl_file}:" in broker.stderr_text()
    assert await sent()  # the last good rules still grant TopicC
