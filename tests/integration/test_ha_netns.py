"""Replication across hosts: NameServer, master and slave on three addresses in network namespaces.

Two namespaces (master, slave) hang off a bridge in the test's namespace, where the NameServer and
the test's clients run: three addresses on one /24, real TCP between them, not loopback. The
slave's link is cut (``ip link set down``) and restored: it notices the silence, reconnects and
catches up. Then the master is killed and a consumer reads everything from the slave.

Needs root and ``ip netns`` (iproute2); skipped with the reason otherwise. The namespaces, veth
pairs and bridge are removed at the end whatever happens.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from typing import Any

import pytest

from rocketpy import Admin, Producer
from rocketpy.client.consumer_types import ConsumeStatus
from rocketpy.client.push_consumer import PushConsumer
from tests.conftest import DaemonPool
from tests.integration.test_ha import HA_FAST, has_topic, send_many, store_of, wait_identical, written_log
from tests.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.netns

#: The slave notices a dead link after this much silence (the test waits for it).
HOUSEKEEPING_MS = 2000


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


class NetLab:
    """A bridge in this namespace with a /24; ``host(name)`` adds a namespace on it with the next IP."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000:05d}"
        self.tag = tag
        self.bridge = f"rpb{tag}"
        self.net = f"10.{random.randint(200, 250)}.{random.randint(0, 255)}"
        self.namespaces: list[str] = []
        self.links: dict[str, str] = {}  # namespace -> its veth end on the bridge
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.net}.1/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    @property
    def gateway(self) -> str:
        """This namespace's address on the bridge (NameServer and clients)."""
        return f"{self.net}.1"

    def host(self, role: str) -> tuple[str, str]:
        """A new namespace wired to the bridge: (namespace name, its IP)."""
        n = len(self.namespaces) + 2
        name, outer, inner = f"rpy-{role}-{self.tag}", f"rp{role}{self.tag}h", f"rp{role}{self.tag}n"
        ip("netns", "add", name)
        self.namespaces.append(name)
        ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        self.links[name] = outer
        ip("link", "set", inner, "netns", name)
        ip("link", "set", outer, "master", self.bridge)
        ip("link", "set", outer, "up")
        ip("-n", name, "addr", "add", f"{self.net}.{n}/24", "dev", inner)
        ip("-n", name, "link", "set", inner, "up")
        ip("-n", name, "link", "set", "lo", "up")
        return name, f"{self.net}.{n}"

    def set_link(self, namespace: str, up: bool) -> None:
        ip("link", "set", self.links[namespace], "up" if up else "down")

    def close(self) -> None:
        for name in self.namespaces:  # deleting a namespace deletes the veth pair in it
            ip("netns", "del", name, check=False)
        for outer in self.links.values():
            ip("link", "del", outer, check=False)
        ip("link", "del", self.bridge, check=False)


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces (ip netns add)"
    if shutil.which("ip") is None:
        return "the ip command is missing (install iproute2: apt-get install -y iproute2)"
    probe = f"rpy-probe-{os.getpid()}"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add is not permitted here: {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


async def test_replication_across_namespaces_survives_a_cut_link(daemons: DaemonPool, netlab: NetLab) -> None:
    ns = daemons.namesrv(bindAddress=netlab.gateway)
    master_ns, master_ip = netlab.host("m")
    slave_ns, slave_ip = netlab.host("s")
    props: dict[str, Any] = {**HA_FAST, "haHousekeepingInterval": HOUSEKEEPING_MS, "brokerName": "broker-a"}
    master = daemons.broker(ns.addr, netns=master_ns, bindAddress=master_ip, **props)
    slave = daemons.broker(
        ns.addr, netns=slave_ns, bindAddress=slave_ip, brokerId=1, brokerRole="SLAVE", **props
    )
    assert master.addr.startswith(f"{master_ip}:") and slave.addr.startswith(f"{slave_ip}:")
    async with Admin(ns.addr) as admin, Producer("netns_pg", ns.addr) as producer:
        await admin.create_topic("NetT", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        await send_many(producer, "NetT", 300, size=256)
        wait_identical(master, slave)
        info = await admin.broker_runtime_info(slave.addr)
        assert info["masterAddr"].startswith(f"{master_ip}:")  # replication runs over the veth pair
        assert '"connected": true' in info["haStatus"]

        netlab.set_link(slave_ns, up=False)
        await send_many(producer, "NetT", 300, size=256)  # ASYNC_MASTER: acked while the slave is cut off
        wait_until(lambda: "connection ended" in slave.stderr_text(), HOUSEKEEPING_MS / 1000 * 5,
                   message="the slave notices the silent link")  # fmt: skip
        assert len(written_log(store_of(slave))) < len(written_log(store_of(master)))

        netlab.set_link(slave_ns, up=True)
        wait_identical(master, slave)  # reconnected and caught up: no gap, no duplicate bytes
        log = (slave.workdir / "logs" / "broker.log").read_text()
        assert log.count(f"HA: replicating from master {master_ip}:") >= 2  # a new session
        assert "replication stopped" not in slave.stderr_text()
        wait_until(lambda: has_topic(slave, "NetT"), 10.0)

    # failover across hosts: the master dies, a consumer reads every message from the slave
    master.kill()
    got: set[tuple[int, int]] = set()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.update((m.queue_id, m.queue_offset) for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("g_netns", ns.addr, rebalance_interval=1.0, poll_name_server_interval=0.5,
                            heartbeat_broker_interval=1.0,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe("NetT", "*")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        await wait_until_async(lambda: len(got) == 600, 30.0, message="all 600 messages read from the slave")
    finally:
        await consumer.shutdown()
