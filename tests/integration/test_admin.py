"""Admin and mqadmin against real daemons: command output asserted as tables and as --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rocketpy import Admin, Message, MQClientError, Producer
from rocketpy.admin_cli import format_table, mqadmin, parse_timestamp
from tests.conftest import DaemonPool
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(daemons: DaemonPool) -> dict[str, str]:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    return {"ns": ns.addr, "broker": broker.addr}


def run(ns: str, *args: str) -> Any:
    result = CliRunner().invoke(mqadmin, [args[0], "-n", ns, *args[1:]], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def run_json(ns: str, *args: str) -> Any:
    return json.loads(run(ns, *args, "--json"))


def test_format_table_aligns() -> None:
    out = format_table(["A", "Long Header"], [[1, "x"], [12345, None]])
    lines = out.splitlines()
    assert lines[0].startswith("#A") and "#Long Header" in lines[0]
    assert lines[2].startswith("12345") and lines[2].endswith("-")
    assert lines[0].index("#Long") == lines[1].index("x")


def test_command_names_in_any_case_and_the_nearest_suggested() -> None:
    assert CliRunner().invoke(mqadmin, ["CLUSTERLIST", "--help"]).exit_code == 0  # as RocketMQ's
    typo = CliRunner().invoke(mqadmin, ["clusterLst"])
    assert typo.exit_code == 2 and "No such command 'clusterLst'. Did you mean 'clusterList'?" in typo.output
    option = CliRunner().invoke(mqadmin, ["consumerProgress", "-g", "g", "--topik", "T"])
    assert option.exit_code == 2 and "Did you mean '--topic'?" in option.output


def test_parse_timestamp() -> None:
    assert parse_timestamp("1700000000000") == 1700000000000
    assert parse_timestamp("2024-01-02#03:04:05:006") > 0


def test_topic_lifecycle_and_cluster(cluster: dict[str, str]) -> None:
    ns = cluster["ns"]
    out = run(ns, "updateTopic", "-t", "AdminT", "-c", "DefaultCluster", "-r", "4", "-w", "4")
    assert f"create topic to {cluster['broker']} success." in out
    assert "AdminT" in run(ns, "topicList").split()
    assert "AdminT" in run_json(ns, "topicList")["topicList"]

    route = run_json(ns, "topicRoute", "-t", "AdminT")
    assert route["queueDatas"][0]["writeQueueNums"] == 4
    assert route["brokerDatas"][0]["brokerAddrs"]["0"] == cluster["broker"]
    table = run(ns, "topicRoute", "-t", "AdminT")
    assert "#Broker Name" in table and cluster["broker"] in table

    clusters = run_json(ns, "clusterList")["brokers"]
    assert [(b["cluster"], b["brokerId"], b["addr"]) for b in clusters] == [
        ("DefaultCluster", 0, cluster["broker"])
    ]
    assert "DefaultCluster" in run(ns, "clusterList")

    status = run_json(ns, "brokerStatus", "-b", cluster["broker"])
    assert isinstance(status[cluster["broker"]], dict) and status[cluster["broker"]]

    run(ns, "deleteTopic", "-t", "AdminT", "-c", "DefaultCluster")
    assert "AdminT" not in run_json(ns, "topicList")["topicList"]


def test_send_query_consume_progress(cluster: dict[str, str]) -> None:
    ns = cluster["ns"]
    run(ns, "updateTopic", "-t", "QT", "-c", "DefaultCluster", "-r", "2", "-w", "2")
    sent = run_json(
        ns, "sendMessage", "-t", "QT", "-p", "hello admin", "-k", "key-1", "-c", "TagQ", "-i", "1"
    )
    assert sent["sendStatus"] == "SEND_OK" and sent["queueId"] == 1

    by_id = run_json(ns, "queryMsgById", "-i", sent["offsetMsgId"])["messages"][0]
    assert (by_id["body"], by_id["tags"], by_id["keys"]) == ("hello admin", "TagQ", ["key-1"])
    # the broker indexes keys after the append (like RocketMQ's reput): poll until it is searchable
    by_key = wait_until(lambda: run_json(ns, "queryMsgByKey", "-t", "QT", "-k", "key-1")["messages"], 10.0)
    assert [m["msgId"] for m in by_key] == [sent["msgId"]]
    by_offset = run_json(
        ns,
        "queryMsgByOffset",
        "-t",
        "QT",
        "-b",
        sent["brokerName"],
        "-i",
        "1",
        "-o",
        str(sent["queueOffset"]),
    )["messages"][0]
    assert by_offset["msgId"] == sent["msgId"]
    assert "hello admin" in run(ns, "queryMsgById", "-i", sent["offsetMsgId"])

    consumed = run_json(ns, "consumeMessage", "-t", "QT", "-c", "10")["messages"]
    assert [m["body"] for m in consumed] == ["hello admin"]

    status = run_json(ns, "topicStatus", "-t", "QT")["queues"]
    assert [(q["mq"]["queueId"], q["max_offset"]) for q in status] == [(0, 0), (1, 1)]

    run(ns, "updateSubGroup", "-g", "cg-admin", "-c", "DefaultCluster")
    reset = run_json(ns, "resetOffsetByTime", "-g", "cg-admin", "-t", "QT", "-s", "0")
    assert sorted(o["offset"] for o in reset["offsets"]) == [0, 0]
    progress = run_json(ns, "consumerProgress", "-g", "cg-admin", "-t", "QT")
    assert progress["diffTotal"] == 1
    # the one unconsumed message has waited since it was stored (lag in seconds)
    assert progress["maxLagSeconds"] > 0 and max(q["lag_seconds"] for q in progress["queues"]) > 0
    table = run(ns, "consumerProgress", "-g", "cg-admin", "-t", "QT")
    assert "#Broker Offset" in table and "#Lag(s)" in table and "Diff Total: 1" in table


def test_broker_config_and_wipe_perm(cluster: dict[str, str]) -> None:
    ns, broker = cluster["ns"], cluster["broker"]
    cfg = run_json(ns, "getBrokerConfig", "-b", broker)[broker]
    assert cfg["brokerClusterName"] == "DefaultCluster"
    name = cfg["brokerName"]
    run(ns, "updateBrokerConfig", "-b", broker, "-k", "defaultTopicQueueNums", "-v", "3")
    assert run_json(ns, "getBrokerConfig", "-b", broker)[broker]["defaultTopicQueueNums"] == "3"
    refused = CliRunner().invoke(
        mqadmin, ["updateBrokerConfig", "-n", ns, "-b", broker, "-k", "maxMessageSize", "-v", "1"]
    )
    assert refused.exit_code != 0 and "INVALID_PARAMETER" in str(refused.exception)
    run(ns, "updateTopic", "-t", "WT", "-c", "DefaultCluster")
    wiped = run_json(ns, "wipeWritePerm", "-b", name)
    assert wiped["wipeTopicCount"][ns] >= 1
    perm = run_json(ns, "topicRoute", "-t", "WT")["queueDatas"][0]["perm"]
    assert perm & 2 == 0


def test_kv_config_commands(cluster: dict[str, str]) -> None:
    ns = cluster["ns"]
    assert run_json(ns, "getKvConfig", "-s", "NS_T", "-k", "k1") == {ns: None}
    run(ns, "updateKvConfig", "-s", "NS_T", "-k", "k1", "-v", "v1")
    assert run_json(ns, "getKvConfig", "-s", "NS_T", "-k", "k1") == {ns: "v1"}
    assert "v1" in run(ns, "getKvConfig", "-s", "NS_T", "-k", "k1")
    run(ns, "deleteKvConfig", "-s", "NS_T", "-k", "k1")
    assert run_json(ns, "getKvConfig", "-s", "NS_T", "-k", "k1") == {ns: None}


async def test_admin_api_errors(cluster: dict[str, str]) -> None:
    async with Admin(cluster["ns"]) as admin:
        with pytest.raises(MQClientError, match="does not exist: create it"):
            await admin.topic_route("Missing")
        with pytest.raises(MQClientError, match="cluster 'Nope' not found; known clusters: DefaultCluster"):
            await admin.create_topic("X", "Nope")
        with pytest.raises(MQClientError, match="-c CLUSTER"):
            await admin.create_topic("X")
    async with Producer("pg", cluster["ns"]) as p:
        await p.send(Message("AutoT", b"x"))


def test_mqadmin_errors_are_one_line(tmp_path: Path) -> None:
    env = dict(os.environ, NAMESRV_ADDR="127.0.0.1:1")
    proc = subprocess.run(
        [sys.executable, "-m", "rocketpy.admin_cli", "topicList"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no NameServer reachable at 127.0.0.1:1")
    proc = subprocess.run(
        [sys.executable, "-m", "rocketpy.admin_cli", "updateTopic"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--topic" in proc.stderr


def test_rocketpy_admin_group_runs_mqadmin_commands(cluster: dict[str, str]) -> None:
    env = dict(os.environ, NAMESRV_ADDR=cluster["ns"])
    proc = subprocess.run(
        [sys.executable, "-m", "rocketpy.cli", "admin", "clusterList", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["brokers"][0]["addr"] == cluster["broker"]
