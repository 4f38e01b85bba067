"""``scripts/cluster start|status|stop`` on the 2m-2s layouts, and ``mqadmin clusterList``'s HA columns.

The run directory, pid files and HOME are under ``tmp_path`` and ``--port-base 0`` lets every daemon
pick a free port, so the test never collides with other tests or a running cluster. Whatever the
script started is killed by its recorded pid when the test ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketpy import Admin, Message, Producer, SendStatus
from tests.daemons import REPO_ROOT
from tests.waiting import wait_until

CLUSTER = REPO_ROOT / "scripts" / "cluster"
FAST = [
    "mappedFileSizeCommitLog=1048576",
    "haSendHeartbeatInterval=200",
    "registerNameServerPeriod=1000",
    "slaveSyncInterval=300",
]


class Cluster:
    def __init__(self, tmp_path: Path, layout: str) -> None:
        self.layout = str(REPO_ROOT / "conf" / layout)
        self.run_dir = tmp_path / "run"
        self.env = dict(os.environ, HOME=str(tmp_path / "home"), ROCKETPY_RUN_DIR=str(tmp_path / "pids"))
        self.env.pop("NAMESRV_ADDR", None)
        self.pids: set[int] = set()

    def script(self, command: str, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(CLUSTER), command, self.layout, "--run-dir", str(self.run_dir), *args]
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=120)
        if (self.run_dir / "cluster.json").exists():
            self.pids |= {p["pid"] for p in self.state()}
        return proc

    def start(self) -> None:
        sets = [a for kv in FAST for a in ("--set", kv)]
        proc = self.script("start", "--port-base", "0", "--bind", "127.0.0.1", *sets)
        assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"

    def state(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = json.loads((self.run_dir / "cluster.json").read_text())["processes"]
        return rows

    def proc(self, name: str) -> dict[str, Any]:
        return next(p for p in self.state() if p["name"] == name)

    def cluster_list(self) -> list[dict[str, Any]]:
        ns = self.proc("namesrv")["addr"]
        mqadmin = Path(sys.executable).parent / "mqadmin"
        out = subprocess.run(
            [str(mqadmin), "clusterList", "-n", ns, "--json"], capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, out.stderr
        brokers: list[dict[str, Any]] = json.loads(out.stdout)["brokers"]
        return brokers

    def table(self) -> str:
        ns = self.proc("namesrv")["addr"]
        mqadmin = Path(sys.executable).parent / "mqadmin"
        return subprocess.run(
            [str(mqadmin), "clusterList", "-n", ns], capture_output=True, text=True, timeout=30
        ).stdout

    def kill_left(self) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, "2m-2s-sync")
    try:
        yield c
    finally:
        c.kill_left()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"


async def test_cluster_script_runs_a_layout_and_cluster_list_shows_replication(cluster: Cluster) -> None:
    cluster.start()
    names = [p["name"] for p in cluster.state()]
    assert names == ["namesrv", "broker-a", "broker-b", "broker-a-s", "broker-b-s"]
    status = cluster.script("status")
    assert status.returncode == 0, status.stdout
    for p in cluster.state():
        assert f"{p['addr']}" in status.stdout and alive(p["pid"])
    assert "SYNC_MASTER" in status.stdout and "SLAVE" in status.stdout
    run = cluster.run_dir
    assert (run / "store" / "broker-a-s" / "commitlog").is_dir()
    assert (run / "logs" / "broker-a" / "broker.log").is_file()
    # the daemons' own pid files: mqshutdown finds them too
    pid_files = os.listdir(cluster.env["ROCKETPY_RUN_DIR"])
    assert len([f for f in pid_files if f.startswith("broker-") and f.endswith(".pid")]) == 4
    again = cluster.script("start", "--port-base", "0")
    assert again.returncode == 1 and "already running" in again.stderr

    def slaves_connected() -> bool:
        return all(b["ha"].get("source") == "master" for b in cluster.cluster_list() if b["brokerId"] == 1)

    wait_until(slaves_connected, 20.0, message="both slaves connected to their masters")
    ns = cluster.proc("namesrv")["addr"]
    async with Admin(ns) as admin, Producer("cluster_pg", ns) as producer:
        await admin.create_topic("ClusterT", "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        for i in range(200):
            r = await producer.send(Message("ClusterT", b"x" * 512, keys=[f"k{i}"]))
            assert r.status is SendStatus.SEND_OK, r  # SYNC_MASTER: the slave has it

    def caught_up() -> bool:
        rows = {(b["brokerName"], b["brokerId"]): b for b in cluster.cluster_list()}
        return all(
            rows[(n, 1)]["ha"].get("bytesBehind") == 0
            and rows[(n, 1)]["ha"]["haOffset"] == int(rows[(n, 0)]["runtime"]["commitLogMaxOffset"]) > 0
            for n in ("broker-a", "broker-b")
        )

    wait_until(caught_up, 15.0, message="both slaves caught up per clusterList")
    rows = {(b["brokerName"], b["brokerId"]): b for b in cluster.cluster_list()}
    assert rows[("broker-a", 0)]["runtime"]["brokerRole"] == "SYNC_MASTER"
    assert rows[("broker-a", 1)]["ha"]["source"] == "master"
    table = cluster.table()
    assert "#Role" in table and "#Behind(B)" in table and "#LastReport(s)" in table
    assert table.count("SYNC_MASTER") == 2 and table.count("SLAVE") == 2

    # a dead master: status says so; clusterList shows the slave's own view of its replication
    master_a = cluster.proc("broker-a")
    os.kill(master_a["pid"], signal.SIGKILL)
    wait_until(lambda: not alive(master_a["pid"]), 10.0)
    status = cluster.script("status")
    assert status.returncode == 1
    [line] = [ln for ln in status.stdout.splitlines() if ln.startswith("broker-a ")]
    assert line.endswith("dead")

    def slave_view() -> dict[str, Any] | None:
        rows = {(b["brokerName"], b["brokerId"]): b for b in cluster.cluster_list()}
        ha = rows.get(("broker-a", 1), {}).get("ha", {})
        return ha if ha.get("source") == "slave" else None

    ha = wait_until(slave_view, 15.0, message="clusterList falls back to the slave's haStatus")
    assert ha["haOffset"] == int(rows[("broker-a", 0)]["runtime"]["commitLogMaxOffset"])

    pids = [p["pid"] for p in cluster.state()]
    stop = cluster.script("stop", "--timeout", "15")
    assert stop.returncode == 0, stop.stderr
    assert f"broker-a pid {master_a['pid']}" in stop.stdout and "was not running" in stop.stdout
    assert stop.stdout.count("stopped ") == 4
    assert not any(alive(pid) for pid in pids)
    assert not (run / "cluster.json").exists()
    assert cluster.script("status").returncode == 3


def test_cluster_script_refuses_bad_input(cluster: Cluster, tmp_path: Path) -> None:
    empty = tmp_path / "empty-layout"
    empty.mkdir()
    cluster.layout = str(empty)
    proc = cluster.script("start")
    assert proc.returncode == 1 and "has no broker .properties files" in proc.stderr
    cluster.layout = str(tmp_path / "missing")
    proc = cluster.script("start")
    assert proc.returncode == 1 and "is not a directory" in proc.stderr
    proc = cluster.script("stop")
    assert proc.returncode == 1 and "nothing to stop" in proc.stderr


def test_controller_layout_starts_a_local_etcd_and_each_group_elects_a_master(tmp_path: Path) -> None:
    from tests.etcd import etcd_unavailable

    reason = etcd_unavailable()
    if reason:
        pytest.skip(reason)
    c = Cluster(tmp_path, "controller-2m-2s")
    try:
        c.start()
        etcd = c.proc("etcd")
        assert etcd["kind"] == "etcd" and alive(etcd["pid"])
        assert {p["role"] for p in c.state() if p["kind"] == "broker"} == {"CONTROLLER"}

        def masters() -> list[dict[str, Any]]:
            rows = [b for b in c.cluster_list() if b["runtime"].get("controllerRole") == "MASTER"]
            return rows if sorted(b["brokerName"] for b in rows) == ["broker-a", "broker-b"] else []

        rows = wait_until(masters, 30.0, message="one master per group")
        assert all(b["brokerId"] == 0 and b["runtime"]["masterEpoch"] == "1" for b in rows)
        assert "Epoch" in c.table()
        stopped = c.script("stop")
        assert stopped.returncode == 0 and "stopped etcd" in stopped.stdout.splitlines()[-1]
        assert not alive(etcd["pid"])
    finally:
        c.kill_left()
