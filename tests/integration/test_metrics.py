"""The daemons' /metrics endpoint against real daemons: exact counts after a known load, the
NameServer's broker table and evictions, HTTP edge cases, a busy port, and metrics off."""

from __future__ import annotations

import asyncio
import os
import re
import socket
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketpy.metrics.server import MAX_CONNECTIONS
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.client import RemotingClient
from tests.conftest import DaemonPool
from tests.daemons import Daemon, DaemonStartError
from tests.integration.test_broker_util import FLAG_SUBSCRIPTION, FLAG_SUSPEND, call, pull, send
from tests.waiting import wait_until, wait_until_async

METRICS_LINE = re.compile(r"serves metrics at (?P<url>http://\S+)")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    """A loopback port free right now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def metrics_url(daemon: Daemon) -> str:
    """The URL the daemon printed before its boot line."""
    m = METRICS_LINE.search(daemon.stdout_text())
    assert m, f"no metrics line in:\n{daemon.stdout_text()}"
    return m.group("url")


async def http(url: str, request: bytes | None = None, timeout_s: float = 10.0) -> tuple[int, bytes]:
    """One HTTP exchange (``request`` defaults to GET of the URL's path); returns (status, body)."""
    m = re.fullmatch(r"http://([^:/]+):(\d+)(/.*)", url)
    assert m, url
    reader, writer = await asyncio.open_connection(m.group(1), int(m.group(2)))
    try:
        writer.write(request or f"GET {m.group(3)} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        raw = await asyncio.wait_for(reader.read(), timeout_s)  # the server closes after answering
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def scrape(url: str) -> Samples:
    """Every sample of the exposition, keyed by (sample name, labels)."""
    status, body = await http(url)
    assert status == 200, body
    out: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def listening_ports(pid: int) -> set[int]:
    """TCP ports the process listens on (its socket inodes matched in /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture
def broker(daemons: DaemonPool, namesrv: Daemon) -> Daemon:
    """A SYNC_FLUSH broker (every send waits for a flush) serving metrics."""
    return daemons.broker(namesrv.addr, metricsPort=free_port(), flushDiskType="SYNC_FLUSH")


async def test_broker_counts_after_known_load(broker: Daemon, client: RemotingClient) -> None:
    url = metrics_url(broker)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    before = await scrape(url)
    assert ("rocketpy_put_messages_total", frozenset({("topic", "TopicM")})) not in before
    # load: 10 messages to queue 0 and 5 to queue 1, 100 bytes each
    for i in range(15):
        r = await send(client, broker.addr, "TopicM", b"%03d" % i + b"x" * 97, queue_id=0 if i < 10 else 1)
        assert r.code == ResponseCode.SUCCESS, r.remark
    # group gm takes 4 of queue 0 and all 5 of queue 1, and commits what it took
    got_bytes = 0
    for qid, n in ((0, 4), (1, 5)):
        r = await pull(client, broker.addr, group="gm", topic="TopicM", queue_id=qid, offset=0, max_msgs=n)
        assert r.code == ResponseCode.SUCCESS, r.remark
        got_bytes += len(r.body)
        ext = {"consumerGroup": "gm", "topic": "TopicM", "queueId": qid, "commitOffset": n}
        assert (await call(client, broker.addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)).code == 0
    # a pull held 100 ms on an empty queue ends by its timeout
    held = await pull(client, broker.addr, group="gm", topic="TopicM", queue_id=2, offset=0,
                      sys_flag=FLAG_SUBSCRIPTION | FLAG_SUSPEND, suspend_ms=100)  # fmt: skip
    assert held.code == ResponseCode.PULL_NOT_FOUND
    # a code the broker does not serve, and a refused pull
    assert (await call(client, broker.addr, 987_654)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    r = await pull(client, broker.addr, group="gm", topic="NoSuchTopic", queue_id=0, offset=0)
    assert r.code == ResponseCode.TOPIC_NOT_EXIST

    s = await scrape(url)
    assert value(s, "rocketpy_put_messages_total", topic="TopicM") == 15
    assert value(s, "rocketpy_put_bytes_total", topic="TopicM") == 1500
    assert value(s, "rocketpy_get_messages_total", group="gm", topic="TopicM") == 9
    assert value(s, "rocketpy_get_bytes_total", group="gm", topic="TopicM") == got_bytes
    for qid, max_offset, committed in ((0, 10, 4), (1, 5, 5)):
        q = {"topic": "TopicM", "queue_id": str(qid)}
        assert value(s, "rocketpy_consume_queue_max_offset", **q) == max_offset
        assert value(s, "rocketpy_consumer_offset", group="gm", **q) == committed
        assert value(s, "rocketpy_consumer_lag", group="gm", **q) == max_offset - committed
        # lag in seconds: queue 0's oldest unconsumed message has waited since it was stored
        latency = value(s, "rocketpy_consumer_lag_latency_seconds", group="gm", **q)
        assert (0 < latency < 120) if committed < max_offset else latency == 0
    never_written = ("rocketpy_consume_queue_max_offset", frozenset({("topic", "TopicM"), ("queue_id", "3")}))
    assert never_written not in s
    # requests by code and response code; latency counts match
    assert value(s, "rocketpy_requests_total", code="SEND_MESSAGE_V2", response_code="SUCCESS") == 15
    assert value(s, "rocketpy_requests_total", code="PULL_MESSAGE", response_code="SUCCESS") == 2
    assert value(s, "rocketpy_requests_total", code="PULL_MESSAGE", response_code="TOPIC_NOT_EXIST") == 1
    assert (
        value(s, "rocketpy_requests_total", code="PULL_MESSAGE", response_code="PULL_NOT_FOUND") == 1
    )  # held
    assert (
        value(s, "rocketpy_requests_total", code="unknown", response_code="REQUEST_CODE_NOT_SUPPORTED") == 1
    )
    assert value(s, "rocketpy_send_latency_seconds_count") == 15
    assert value(s, "rocketpy_send_latency_seconds_bucket", le="+Inf") == 15
    assert value(s, "rocketpy_pull_latency_seconds_count") == 3  # the held pull is not in it
    assert value(s, "rocketpy_request_latency_seconds_count", code="SEND_MESSAGE_V2") == 15
    assert value(s, "rocketpy_flush_latency_seconds_count") >= 1  # SYNC_FLUSH: sends wait for flushes
    # long polling
    assert value(s, "rocketpy_pull_holds_started_total") == 1
    assert value(s, "rocketpy_pull_hold_ends_total", reason="timeout") == 1
    assert value(s, "rocketpy_pull_holds") == 0
    # store, connections, identity, process
    assert value(s, "rocketpy_commitlog_max_offset") >= 15 * 100
    assert value(s, "rocketpy_commitlog_bytes") == value(s, "rocketpy_commitlog_max_offset")
    assert 0.0 < value(s, "rocketpy_disk_used_ratio") < 1.0
    assert value(s, "rocketpy_connections") >= 1
    info = {"cluster": "DefaultCluster", "broker": broker.name or "", "broker_id": "0",
            "role": "ASYNC_MASTER", "version": "rocketpy-0.1.0"}  # fmt: skip
    assert value(s, "rocketpy_broker_info", **info) == 1
    assert value(s, "process_resident_memory_bytes") > 0


async def test_namesrv_counts_brokers_and_evictions(daemons: DaemonPool) -> None:
    ns = daemons.namesrv(metricsPort=free_port())
    url = metrics_url(ns)
    broker = daemons.broker(ns.addr)
    s = await scrape(url)
    assert value(s, "rocketpy_namesrv_brokers") == 1
    assert value(s, "rocketpy_namesrv_clusters") == 1
    assert value(s, "rocketpy_namesrv_topics") >= 1  # the broker's system topics
    assert value(s, "rocketpy_namesrv_registrations_total") >= 1
    assert value(s, "rocketpy_requests_total", code="REGISTER_BROKER", response_code="SUCCESS") >= 1
    assert value(s, "rocketpy_namesrv_evictions_total", reason="closed") == 0
    broker.kill()  # no unregistration: its connection closes and the NameServer evicts it

    async def evicted() -> bool:
        s = await scrape(url)
        return value(s, "rocketpy_namesrv_evictions_total", reason="closed") == 1

    await wait_until_async(evicted, 10.0, message="the killed broker was not counted as evicted")
    s = await scrape(url)
    assert value(s, "rocketpy_namesrv_brokers") == 0
    assert value(s, "rocketpy_namesrv_evictions_total", reason="expired") == 0


async def test_http_edges_do_not_block(daemons: DaemonPool) -> None:
    ns = daemons.namesrv(metricsPort=free_port())
    url = metrics_url(ns)
    base = url.removesuffix("/metrics")
    status, body = await http(base + "/")
    assert status == 404 and b"/metrics" in body
    assert (await http(base + "/metricsx"))[0] == 404
    assert (await http(base + "/metrics?x=1"))[0] == 200
    assert (await http(url, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"))[0] == 405
    assert (await http(url, b"nonsense\r\n\r\n"))[0] == 400
    huge = b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 20_000 + b"\r\n\r\n"
    assert (await http(url, huge))[0] == 431
    # a client that connects and says nothing holds nothing: others are served, it is dropped
    m = re.fullmatch(r"http://([^:/]+):(\d+)/metrics", url)
    assert m
    host, port = m.group(1), int(m.group(2))
    idle = [await asyncio.open_connection(host, port)]
    idle[0][1].write(b"GET /metr")  # an unfinished request head
    assert (await http(url, timeout_s=3.0))[0] == 200
    idle += [await asyncio.open_connection(host, port) for _ in range(MAX_CONNECTIONS - 1)]
    await wait_until_async(lambda: _refused(url), 5.0, message="connections past the bound were not refused")
    for reader, writer in idle:  # every idle one is closed at the read deadline
        assert await asyncio.wait_for(reader.read(), 10.0) == b""
        writer.close()
    assert (await http(url))[0] == 200


async def _refused(url: str) -> bool:
    status, body = await http(url)
    assert status in (200, 503), body
    return status == 503


def test_metrics_port_in_use_refuses_to_start(daemons: DaemonPool) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(DaemonStartError, match=f"cannot serve metrics on 127.0.0.1:{port}.*metricsPort"):
            daemons.namesrv(metricsPort=port)
        ns = daemons.namesrv()
        with pytest.raises(DaemonStartError, match=f"cannot serve metrics on 127.0.0.1:{port}.*metricsPort"):
            daemons.broker(ns.addr, metricsPort=port)


def test_metrics_off_by_default_listens_nowhere(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    for d in (ns, broker):
        assert "metrics" not in d.stdout_text()
    assert listening_ports(ns.pid) == {ns.port}
    off = listening_ports(broker.pid)
    assert len(off) == 3 and {broker.port, broker.grpc_port} <= off  # RPC, HA and the gRPC endpoint
    on = daemons.broker(ns.addr, metricsPort=free_port())
    port = int(metrics_url(on).rsplit(":", 1)[1].split("/")[0])
    ports = wait_until(lambda: listening_ports(on.pid), 5.0)
    assert len(ports) == 4 and {on.port, port, on.grpc_port} <= ports  # RPC, HA, gRPC and metrics


async def test_replication_lag(daemons: DaemonPool, namesrv: Daemon, client: RemotingClient) -> None:
    fast = {"haSendHeartbeatInterval": 200, "registerNameServerPeriod": 1000}
    master = daemons.broker(namesrv.addr, brokerName="broker-a", metricsPort=free_port(), **fast)
    slave = daemons.broker(namesrv.addr, brokerName="broker-a", brokerId=1, brokerRole="SLAVE",
                           metricsPort=free_port(), **fast)  # fmt: skip
    for i in range(20):
        assert (await send(client, master.addr, "TopicHa", b"%04d" % i * 64)).code == ResponseCode.SUCCESS

    async def caught_up() -> Samples | None:
        m, s = await scrape(metrics_url(master)), await scrape(metrics_url(slave))
        rows = {dict(labels).get("slave_id"): v for (name, labels), v in m.items()
                if name == "rocketpy_ha_slave_lag_bytes"}  # fmt: skip
        done = rows == {"1": 0} and value(s, "rocketpy_ha_master_lag_bytes") == 0
        return s if done and value(s, "rocketpy_ha_connected") == 1 else None

    s = await wait_until_async(caught_up, 20.0, message="the slave's lag did not reach 0")
    assert value(s, "rocketpy_commitlog_max_offset") == value(
        await scrape(metrics_url(master)), "rocketpy_commitlog_max_offset"
    )
    info = {"cluster": "DefaultCluster", "broker": "broker-a", "broker_id": "1", "role": "SLAVE",
            "version": "rocketpy-0.1.0"}  # fmt: skip
    assert value(s, "rocketpy_broker_info", **info) == 1
