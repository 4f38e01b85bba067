"""mqnamesrv as a real subprocess: registration over the real RPC, routes, liveness, KV, CLI behaviour."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from rocketpy.perm import PERM_READ, PERM_RW
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import (
    ClusterInfo,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from tests.conftest import DaemonPool
from tests.daemons import REPO_ROOT, Daemon, daemon_env, write_properties
from tests.waiting import wait_until, wait_until_async

TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def shared_ns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One NameServer for the tests that use their own broker and topic names (saves start-ups)."""
    pool = DaemonPool(tmp_path_factory.mktemp("shared-namesrv"))
    try:
        yield pool.namesrv()
    finally:
        pool.stop_all()


async def call(
    client: RemotingClient, addr: str, code: int, ext: dict[str, Any] | None = None, body: bytes = b""
) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, ext, body), TIMEOUT_S)


def register_body(*topics: str, counter: int = 1) -> bytes:
    table = {t: TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4) for t in topics}
    wrapper = TopicConfigSerializeWrapper(
        topic_config_table=table, data_version=DataVersion(timestamp=1, counter=counter)
    )
    return msgpack.packb(RegisterBrokerBody(topic_config_serialize_wrapper=wrapper).to_wire())


async def register(
    client: RemotingClient,
    addr: str,
    name: str,
    broker_addr: str,
    *topics: str,
    broker_id: int = 0,
    cluster: str = "C1",
) -> RemotingCommand:
    ext = {
        "brokerName": name,
        "brokerAddr": broker_addr,
        "clusterName": cluster,
        "haServerAddr": broker_addr.replace(":10911", ":10912"),
        "brokerId": broker_id,
    }
    resp = await call(client, addr, RequestCode.REGISTER_BROKER, ext, register_body(*topics))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp


async def route(client: RemotingClient, addr: str, topic: str) -> TopicRouteData | None:
    resp = await call(client, addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return TopicRouteData.from_wire(msgpack.unpackb(resp.body))


async def topic_list(client: RemotingClient, addr: str) -> list[str]:
    resp = await call(client, addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    return list(msgpack.unpackb(resp.body)["topicList"])


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = daemon_env(tmp_path, tmp_path)
    cmd = [sys.executable, "-m", "rocketpy.cli", *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=30)


# ---------------------------------------------------------------- routes


async def test_two_brokers_routes_cluster_info_and_topic_list(
    shared_ns: Daemon, client: RemotingClient
) -> None:
    ns = shared_ns.addr
    a, b = RemotingClient(name="broker-a"), RemotingClient(name="broker-b")
    try:
        await register(a, ns, "two-a", "10.0.1.1:10911", "Two1", "Two2", cluster="TwoC1")
        await register(b, ns, "two-b", "10.0.1.2:10911", "Two1", cluster="TwoC2")
        r = await route(client, ns, "Two1")
        assert r is not None
        assert [(q.broker_name, q.write_queue_nums, q.perm) for q in r.queue_datas] == [
            ("two-a", 4, PERM_RW),
            ("two-b", 4, PERM_RW),
        ]
        assert {bd.broker_name: bd.broker_addrs for bd in r.broker_datas} == {
            "two-a": {0: "10.0.1.1:10911"},
            "two-b": {0: "10.0.1.2:10911"},
        }
        resp = await call(client, ns, RequestCode.GET_BROKER_CLUSTER_INFO)
        wire = msgpack.unpackb(resp.body)
        assert wire["clusterAddrTable"]["TwoC1"] == ["two-a"] and wire["clusterAddrTable"]["TwoC2"] == [
            "two-b"
        ]
        assert wire["brokerAddrTable"]["two-b"]["brokerAddrs"] == {"0": "10.0.1.2:10911"}
        assert ClusterInfo.from_wire(wire).broker_addr_table["two-a"].cluster == "TwoC1"
        assert {"Two1", "Two2"} <= set(await topic_list(client, ns))
    finally:
        await a.close()
        await b.close()


async def test_unknown_topic_says_what_to_do(shared_ns: Daemon, client: RemotingClient) -> None:
    resp = await call(client, shared_ns.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark is not None and "Nope" in resp.remark and "updateTopic" in resp.remark


async def test_missing_header_field_is_invalid_parameter(shared_ns: Daemon, client: RemotingClient) -> None:
    ns = shared_ns.addr
    resp = await call(client, ns, RequestCode.REGISTER_BROKER, {"brokerName": "x"})
    assert resp.code == ResponseCode.INVALID_PARAMETER and "clusterName" in (resp.remark or "")
    bad = await call(client, ns, RequestCode.QUERY_DATA_VERSION, {"brokerAddr": "a:1"}, b"\xc1junk")
    assert bad.code == ResponseCode.INVALID_PARAMETER and "DataVersion" in (bad.remark or "")


async def test_slave_gets_master_and_ha_address(shared_ns: Daemon, client: RemotingClient) -> None:
    ns = shared_ns.addr
    await register(client, ns, "ms-a", "10.0.2.1:10911", "Ms1")
    resp = await register(client, ns, "ms-a", "10.0.2.9:10911", "Ms1", broker_id=1)
    assert resp.ext == {"masterAddr": "10.0.2.1:10911", "haServerAddr": "10.0.2.1:10912"}
    r = await route(client, ns, "Ms1")
    assert r is not None and r.broker_datas[0].broker_addrs == {0: "10.0.2.1:10911", 1: "10.0.2.9:10911"}


async def test_query_data_version_and_unregister(shared_ns: Daemon, client: RemotingClient) -> None:
    ns = shared_ns.addr
    await register(client, ns, "dv-a", "10.0.3.1:10911", "Dv1")
    ext = {"brokerName": "dv-a", "brokerAddr": "10.0.3.1:10911", "clusterName": "C1", "brokerId": 0}
    same = msgpack.packb(DataVersion(timestamp=1, counter=1).to_wire())
    resp = await call(client, ns, RequestCode.QUERY_DATA_VERSION, ext, same)
    assert resp.ext == {"changed": False}
    assert DataVersion.from_wire(msgpack.unpackb(resp.body)) == DataVersion(timestamp=1, counter=1)
    newer = msgpack.packb(DataVersion(timestamp=1, counter=2).to_wire())
    resp = await call(client, ns, RequestCode.QUERY_DATA_VERSION, ext, newer)
    assert resp.ext == {"changed": True}
    resp = await call(client, ns, RequestCode.UNREGISTER_BROKER, ext)
    assert resp.code == ResponseCode.SUCCESS
    assert await route(client, ns, "Dv1") is None


async def test_delete_topic(shared_ns: Daemon, client: RemotingClient) -> None:
    ns = shared_ns.addr
    await register(client, ns, "del-a", "10.0.4.1:10911", "Del1", "Del2")
    resp = await call(client, ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Del1"})
    assert resp.code == ResponseCode.SUCCESS
    topics = await topic_list(client, ns)
    assert "Del1" not in topics and "Del2" in topics


async def test_wipe_write_perm_is_reflected_in_routes(shared_ns: Daemon, client: RemotingClient) -> None:
    ns = shared_ns.addr
    await register(client, ns, "wp-a", "10.0.5.1:10911", "Wp1", "Wp2")
    await register(client, ns, "wp-b", "10.0.5.2:10911", "Wp1")
    resp = await call(client, ns, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "wp-a"})
    assert resp.code == ResponseCode.SUCCESS and resp.ext == {"wipeTopicCount": 2}
    r = await route(client, ns, "Wp1")
    assert r is not None and {q.broker_name: q.perm for q in r.queue_datas} == {
        "wp-a": PERM_READ,
        "wp-b": PERM_RW,
    }
    resp = await call(client, ns, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "wp-a"})
    assert resp.ext == {"addTopicCount": 2}
    r = await route(client, ns, "Wp2")
    assert r is not None and r.queue_datas[0].perm == PERM_RW


# ---------------------------------------------------------------- liveness


async def test_connection_close_evicts_broker_at_once(shared_ns: Daemon, client: RemotingClient) -> None:
    ns = shared_ns.addr
    broker = RemotingClient(name="cc-a")
    await register(broker, ns, "cc-a", "10.0.6.1:10911", "Cc1")
    await register(client, ns, "cc-b", "10.0.6.2:10911", "Cc2")
    assert {"Cc1", "Cc2"} <= set(await topic_list(client, ns))
    await broker.close()

    async def evicted() -> bool:
        topics = await topic_list(client, ns)
        return "Cc1" not in topics and "Cc2" in topics

    await wait_until_async(evicted, 3.0, message="cc-a evicted after its connection closed")
    resp = await call(client, ns, RequestCode.GET_BROKER_CLUSTER_INFO)
    names = msgpack.unpackb(resp.body)["brokerAddrTable"]
    assert "cc-a" not in names and "cc-b" in names


async def test_silent_broker_is_evicted_after_expiry(daemons: DaemonPool, client: RemotingClient) -> None:
    ns = daemons.namesrv(scanNotActiveBrokerInterval=100, brokerChannelExpiredTime=600)
    silent, alive = RemotingClient(name="silent"), RemotingClient(name="alive")
    try:
        await register(silent, ns.addr, "broker-s", "10.0.0.1:10911", "TS")
        await register(alive, ns.addr, "broker-l", "10.0.0.2:10911", "TL")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5.0
        while loop.time() < deadline:  # the live one keeps registering, as a broker does
            await register(alive, ns.addr, "broker-l", "10.0.0.2:10911", "TL")
            if await topic_list(client, ns.addr) == ["TL"]:
                break
            await asyncio.sleep(0.1)
        assert await topic_list(client, ns.addr) == ["TL"]
        channel = silent.channel(ns.addr)
        await wait_until_async(
            lambda: channel is None or channel.closed, 3.0, message="expired channel closed"
        )
    finally:
        await silent.close()
        await alive.close()


# ---------------------------------------------------------------- KV config


async def test_kv_config_round_trip_and_persistence(
    daemons: DaemonPool, client: RemotingClient, tmp_path: Path
) -> None:
    kv_path = tmp_path / "kv" / "kvConfig.json"
    ns = daemons.namesrv(kvConfigPath=kv_path)
    key = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1"}
    resp = await call(client, ns.addr, RequestCode.PUT_KV_CONFIG, {**key, "value": "broker-a:4"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await call(client, ns.addr, RequestCode.PUT_KV_CONFIG, {**key, "key": "T2", "value": "x"})
    resp = await call(client, ns.addr, RequestCode.GET_KV_CONFIG, key)
    assert (resp.code, resp.ext) == (ResponseCode.SUCCESS, {"value": "broker-a:4"})
    assert json.loads(kv_path.read_text())["configTable"]["ORDER_TOPIC_CONFIG"] == {
        "T1": "broker-a:4",
        "T2": "x",
    }
    resp = await call(client, ns.addr, RequestCode.DELETE_KV_CONFIG, {**key, "key": "T2"})
    assert resp.code == ResponseCode.SUCCESS
    resp = await call(client, ns.addr, RequestCode.GET_KV_CONFIG, {**key, "key": "T2"})
    assert resp.code == ResponseCode.QUERY_NOT_FOUND and "T2" in (resp.remark or "")
    assert ns.terminate() == 0
    ns2 = daemons.namesrv(kvConfigPath=kv_path)
    resp = await call(client, ns2.addr, RequestCode.GET_KV_CONFIG, key)
    assert resp.ext == {"value": "broker-a:4"}
    assert await asyncio.to_thread(os.path.exists, f"{kv_path}.bak")


# ---------------------------------------------------------------- command line


def test_print_config(tmp_path: Path) -> None:
    conf = write_properties(tmp_path / "ns.properties", {"listenPort": 19876, "orderMessageEnable": True})
    result = run_cli(tmp_path, "namesrv", "-c", str(conf), "-p")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "listenPort=19876" in lines and "orderMessageEnable=true" in lines
    assert "scanNotActiveBrokerInterval=10000" in lines and result.stderr == ""


def test_config_error_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    conf = tmp_path / "bad.properties"
    conf.write_text("listenPort=0\nlisenPort=1\n")
    result = run_cli(tmp_path, "namesrv", "-c", str(conf))
    assert result.returncode == 2
    assert result.stderr == f"error: {conf}:2: unknown key 'lisenPort' (did you mean 'listenPort'?)\n"
    assert result.stdout == ""


def test_bad_argument_is_one_line(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "namesrv", "--nope")
    assert result.returncode == 2
    assert result.stderr == "error: No such option '--nope' (see 'rocketpy namesrv --help')\n"


def test_port_in_use_is_one_clear_line(shared_ns: Daemon, tmp_path: Path) -> None:
    port = shared_ns.addr.rsplit(":", 1)[1]
    conf = write_properties(
        tmp_path / "dup.properties",
        {"listenPort": port, "bindAddress": "127.0.0.1", "kvConfigPath": tmp_path / "dup-kv.json"},
    )
    result = run_cli(tmp_path, "namesrv", "-c", str(conf))
    assert result.returncode == 1
    assert result.stderr == (
        f"error: namesrv cannot listen on 127.0.0.1:{port}: Address already in use; "
        "choose another listenPort or stop the process using it\n"
    )
    assert result.stdout == ""


def test_sigterm_stops_and_removes_pid_file(namesrv: Daemon, tmp_path: Path) -> None:
    port = namesrv.addr.rsplit(":", 1)[1]
    pid_file = tmp_path / "run" / f"namesrv-{port}.pid"
    assert pid_file.read_text().strip() == str(namesrv.pid)
    log_file = namesrv.workdir / "logs" / "namesrv.log"
    wait_until(lambda: "boot success" in log_file.read_text(), 5.0, message="boot line in namesrv.log")
    assert namesrv.terminate() == 0
    assert not pid_file.exists()


def test_sigint_stops_gracefully(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    ns.process.send_signal(signal.SIGINT)
    assert ns.wait(10.0) == 0
    assert "The Name Server shut down" in ns.stderr_text()


def test_mqshutdown_namesrv(namesrv: Daemon, tmp_path: Path) -> None:
    result = run_cli(tmp_path, "shutdown", "namesrv")
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip() == f"stopped namesrv pid {namesrv.pid} (port {namesrv.addr.rsplit(':', 1)[1]})"
    )
    assert wait_until(lambda: namesrv.returncode is not None, 10.0) is not None
    assert namesrv.returncode == 0
    again = run_cli(tmp_path, "shutdown", "namesrv")
    assert again.returncode == 1 and again.stderr.startswith("error: no namesrv is running")


# ---------------------------------------------------------------- hostile clients


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(4096) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
async def test_garbage_truncated_and_huge_frames_do_not_hurt_other_clients(
    shared_ns: Daemon, client: RemotingClient
) -> None:
    namesrv = shared_ns
    await register(client, namesrv.addr, "bad-a", "10.0.7.1:10911", "Bad1")
    rss_before = _rss_kib(namesrv.pid)
    host, port = namesrv.addr.rsplit(":", 1)
    bad = [socket.create_connection((host, int(port)), timeout=5.0) for _ in range(3)]
    try:
        bad[0].sendall(b"\x00\x00\x00\x10\x77" + os.urandom(64))  # garbage: unknown serialize type
        bad[1].sendall(struct.pack(">I", 1000) + b"\x10\x00\x00\x05abc")  # truncated frame, left hanging
        bad[2].sendall(struct.pack(">I", 2**31) + b"\x10\x00\x00\x05" + b"x" * 1000)  # 2 GiB announced
        for s in bad:
            s.setblocking(False)
        r = await route(client, namesrv.addr, "Bad1")  # a well-behaved client is still served
        assert r is not None and r.queue_datas[0].broker_name == "bad-a"
        await wait_until_async(lambda: _closed_by_peer(bad[0]), 5.0, message="garbage connection closed")
        await wait_until_async(lambda: _closed_by_peer(bad[2]), 5.0, message="2 GiB frame connection closed")
        assert not _closed_by_peer(bad[1])  # a slow sender is not a protocol error
        fresh = RemotingClient(name="fresh")
        try:
            assert "Bad1" in await topic_list(fresh, namesrv.addr)
        finally:
            await fresh.close()
        grown_kib = _rss_kib(namesrv.pid) - rss_before
        assert grown_kib < 64 * 1024, f"RSS grew by {grown_kib} KiB"
    finally:
        for s in bad:
            s.close()
