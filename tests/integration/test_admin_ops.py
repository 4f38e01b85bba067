"""mqadmin's group, client and permission commands against one set of real daemons: consumerConnection,
producerConnection, consumerStatus (-i, -s), queryMsgByUniqueKey (-g -d), getConsumerConfig,
cloneGroupOffset, skipAccumulatedMessage, allocateMQ, topicClusterList, updateTopicPerm,
addWritePerm, deleteSubGroup and the read, send-RT, export and NameServer-config commands, table
and --json (a failing command as a subprocess: its one-line error)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from rocketpy import Admin, ConsumeStatus, Message, Producer, PushConsumer
from rocketpy.admin_cli import mqadmin as commands
from rocketpy.message import MessageExt
from tests.conftest import DaemonPool
from tests.consumer_settings import FAST_CONSUMER
from tests.daemons import Daemon
from tests.waiting import wait_until_async

TOPIC = "OpsT"


async def mqadmin(ns: str, *args: str, ok: bool = True) -> str:
    """Run ``mqadmin``: in a thread (its own event loop; no interpreter start per command) and its
    stdout; with ``ok=False`` as a subprocess, expecting a failure, and its stderr."""
    if ok:
        argv = [args[0], "-n", ns, *args[1:]]
        result = await asyncio.to_thread(CliRunner().invoke, commands, argv, catch_exceptions=False)
        assert result.exit_code == 0, (args, result.output)
        return result.output
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocketpy.admin_cli", args[0], "-n", ns, *args[1:],
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode != 0, (args, out.decode(), err.decode())
    return err.decode()


async def mqadmin_json(ns: str, *args: str) -> Any:
    return json.loads(await mqadmin(ns, *args, "--json"))


async def test_group_client_and_permission_commands(daemons: DaemonPool, tmp_path: Path) -> None:
    ns = daemons.namesrv().addr
    broker = daemons.broker(ns)
    admin = Admin(ns, timeout=3.0)
    await admin.start()
    await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    for g in ("ops_g", "ops_clone", "ops_skip"):
        await admin.update_subscription_group(g, "DefaultCluster")
    got: list[bytes] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        got.extend(bytes(m.body) for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("ops_g", ns, **FAST_CONSUMER)
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    producer = Producer("ops_pg", ns, heartbeat_broker_interval=1.0)
    await consumer.start()
    await producer.start()
    try:
        sent = [await producer.send(Message(TOPIC, b"m%d" % i)) for i in range(4)]
        await wait_until_async(lambda: len(got) >= 4, 30, message="consumed")

        async def caught_up() -> bool:
            return (await mqadmin_json(ns, "consumerProgress", "-g", "ops_g", "-t", TOPIC))["diffTotal"] == 0

        await wait_until_async(caught_up, 30, interval=0.5, message="ops_g committed")
        cid = consumer.client_id

        table = await mqadmin(ns, "consumerConnection", "-g", "ops_g")
        lines = table.splitlines()
        assert lines[0].split() == ["#Index", "#ClientId", "#ClientAddr", "#Language", "#Version"]
        assert lines[1].split()[:2] == ["1", cid] and "Below is subscription:" in table
        assert f"{TOPIC}" in table and "MessageModel: CLUSTERING" in table
        conn = await mqadmin_json(ns, "consumerConnection", "-g", "ops_g")
        assert [c["clientId"] for c in conn["connectionSet"]] == [cid] and TOPIC in conn["subscriptionTable"]

        async def producer_listed() -> Any:  # once its heartbeat reached the broker
            doc = await mqadmin_json(ns, "producerConnection", "-g", "ops_pg", "-t", TOPIC)
            return [c["clientId"] for c in doc["connectionSet"]] == [producer.client_id]

        await wait_until_async(producer_listed, 35, interval=0.5, message="producer in producerConnection")
        assert producer.client_id in await mqadmin(ns, "producerConnection", "-g", "ops_pg", "-t", TOPIC)

        status = await mqadmin(ns, "consumerStatus", "-g", "ops_g")
        assert status.splitlines()[0].split() == ["#Index", "#ClientId", "#Version", "#Subscriptions"]
        assert cid in status
        running = await mqadmin(ns, "consumerStatus", "-g", "ops_g", "-i", cid, "-s")
        for part in ("#Consumer Properties#", "#Consumer Subscription#", "#Consumer Offset#",
                     "#Consumer RT&TPS#", "#Consumer jstack#", "PROP_CLIENT_VERSION"):  # fmt: skip
            assert part in running, part
        info = await mqadmin_json(ns, "consumerStatus", "-g", "ops_g", "-i", cid)
        assert {"properties", "subscriptionSet", "mqTable", "statusTable"} <= set(info)

        unique = sent[1].msg_id
        found = await mqadmin_json(ns, "queryMsgByUniqueKey", "-i", unique, "-t", TOPIC)
        assert [(m["msgId"], m["body"]) for m in found["messages"]] == [(unique, "m1")]
        direct = await mqadmin_json(
            ns, "queryMsgByUniqueKey", "-i", unique, "-t", TOPIC, "-g", "ops_g", "-d", cid
        )
        assert direct["consumeResult"] == "CR_SUCCESS"
        by_offset_id = await mqadmin(
            ns, "queryMsgById", "-i", sent[1].offset_msg_id, "-g", "ops_g", "-d", cid
        )
        assert "consumeResult: CR_SUCCESS" in by_offset_id.splitlines()
        await wait_until_async(lambda: got.count(b"m1") == 3, 10, message="m1 consumed twice more, directly")

        cfg = await mqadmin_json(ns, "getConsumerConfig", "-g", "ops_g")
        assert cfg[broker.addr]["groupName"] == "ops_g"
        assert f"============Master: {broker.addr}============" in await mqadmin(
            ns, "getConsumerConfig", "-g", "ops_g"
        )

        clone = await mqadmin(ns, "cloneGroupOffset", "-s", "ops_g", "-d", "ops_clone", "-t", TOPIC)
        assert (
            clone.strip()
            == f"clone group offset success. srcGroup[ops_g], destGroup[ops_clone], topic[{TOPIC}]"
        )
        progress = await mqadmin_json(ns, "consumerProgress", "-g", "ops_clone", "-t", TOPIC)
        assert sorted(q["consumer_offset"] for q in progress["queues"]) == [2, 2]

        skipped = await mqadmin(ns, "skipAccumulatedMessage", "-g", "ops_skip", "-t", TOPIC)
        assert skipped.splitlines()[0].split() == ["#brokerName", "#queueId", "#offset"]
        assert (await mqadmin_json(ns, "consumerProgress", "-g", "ops_skip", "-t", TOPIC))["diffTotal"] == 0

        allocated = json.loads(await mqadmin(ns, "allocateMQ", "-t", TOPIC, "-i", "c2,c1"))["result"]
        assert [q["queueId"] for q in allocated["c1"]] == [0] and [q["queueId"] for q in allocated["c2"]] == [
            1
        ]

        await _reads_sends_and_exports(ns, broker, [r.msg_id for r in sent], tmp_path)

        assert (await mqadmin(ns, "topicClusterList", "-t", TOPIC)).split() == ["DefaultCluster"]
        perm = await mqadmin(ns, "updateTopicPerm", "-t", TOPIC, "-p", "4", "-c", "DefaultCluster")
        assert perm.strip() == f"update topic perm from 6 to 4 in {broker.addr} success."
        assert (await mqadmin_json(ns, "topicRoute", "-t", TOPIC))["queueDatas"][0]["perm"] == 4

        name = broker.name or ""
        await mqadmin(ns, "wipeWritePerm", "-b", str(name))
        added = await mqadmin(ns, "addWritePerm", "-b", str(name))
        assert added.startswith(f"add write perm of broker[{name}] in namesrv[{ns}] OK,")

        deleted = await mqadmin(ns, "deleteSubGroup", "-g", "ops_clone", "-c", "DefaultCluster", "-r", "true")
        where = f"from broker [{broker.addr}] in cluster [DefaultCluster]"
        assert deleted.strip() == f"delete subscription group [ops_clone] {where} success."
        err = await mqadmin(ns, "getConsumerConfig", "-g", "ops_clone", ok=False)
        assert err.strip() == "error: no broker has a config for group 'ops_clone'"
        usage = await mqadmin(ns, "deleteSubGroup", "-g", "x", ok=False)
        assert "give -b BROKER_ADDR or -c CLUSTER" in usage

        # haStatus: a slave joins broker-a; the master lists it, the slave shows its link
        ha_fast = {"haSendHeartbeatInterval": 200, "slaveSyncInterval": 300, "registerNameServerPeriod": 1000}
        slave = daemons.broker(ns, brokerName=name, brokerId=1, brokerRole="SLAVE", **ha_fast)

        async def replicating() -> bool:
            docs = (await mqadmin_json(ns, "haStatus", "-c", "DefaultCluster"))["brokers"]
            return [len(d.get("slaves", [])) for d in docs] == [1, 0] and docs[1]["link"]["connected"]

        await wait_until_async(replicating, 30, interval=0.5, message="the slave replicates")
        ha = await mqadmin(ns, "haStatus", "-b", broker.addr)
        assert ha.splitlines()[:3] == [
            f"#MasterAddr               {broker.addr}",
            ha.splitlines()[1],
            "#SlaveNum                 1",
        ]
        assert ha.splitlines()[3].split() == [
            "#SlaveId",
            "#SlaveAddr",
            "#SlaveAckOffset",
            "#Diff",
            "#LastReport(s)",
        ]
        link = await mqadmin(ns, "haStatus", "-b", slave.addr)
        assert (
            link.splitlines()[0] == f"#SlaveAddr               {slave.addr}"
            and "#Connected               true" in link
        )
    finally:
        await producer.shutdown()
        await consumer.shutdown()
        await admin.shutdown()


async def _reads_sends_and_exports(ns: str, broker: Daemon, msg_ids: list[str], tmp_path: Path) -> None:
    """printMsg, printMsgByQueue, brokerConsumeStats, checkMsgSendRT, sendMsgStatus, getNamesrvConfig,
    updateNamesrvConfig, exportMetadata and exportConfigs, on the topic's 4 messages (2 per queue)."""
    printed = await mqadmin(ns, "printMsg", "-t", TOPIC)
    assert printed.count("minOffset=0, maxOffset=2, ") == 2
    assert sorted(line.split()[1] for line in printed.splitlines() if line.startswith("MSGID:")) == sorted(
        msg_ids
    )
    queues = (await mqadmin_json(ns, "printMsg", "-t", TOPIC, "-e", "now"))["queues"]
    assert sorted(m["body"] for q in queues for m in q["messages"]) == ["m0", "m1", "m2", "m3"]
    name = broker.name or ""
    one = await mqadmin(ns, "printMsgByQueue", "-t", TOPIC, "-a", name, "-i", "0", "-p", "true", "-d", "true")
    assert one.splitlines()[-1] == "minOffset=0, maxOffset=2, read=2" and " BODY: m" in one

    stats = await mqadmin(ns, "brokerConsumeStats", "-b", broker.addr)
    assert stats.splitlines()[0].split()[:4] == ["#Topic", "#Group", "#Broker", "Name"]
    doc = await mqadmin_json(ns, "brokerConsumeStats", "-b", broker.addr)
    assert {(r["group"], r["diff"]) for r in doc["offsets"] if r["mq"]["topic"] == TOPIC} >= {("ops_g", 0)}

    rt = await mqadmin(ns, "checkMsgSendRT", "-t", TOPIC, "-a", "3", "-s", "16")
    assert rt.count("SEND_OK") == 3 and rt.splitlines()[-1].startswith("Avg RT: ")
    status = await mqadmin(ns, "sendMsgStatus", "-b", name, "-c", "2")
    assert [line.split(", ")[1] for line in status.splitlines()] == ["SendResult=SEND_OK"] * 2
    crt = await mqadmin(ns, "clusterRT", "-a", "2", "-s", "16")
    assert crt.splitlines()[0].split() == [
        "#Cluster",
        "Name",
        "#Broker",
        "Name",
        "#RT(ms)",
        "#successCount",
        "#failCount",
    ]
    assert crt.splitlines()[1].split()[:2] == ["DefaultCluster", name] and crt.splitlines()[1].split()[
        3:
    ] == ["2", "0"]

    out = tmp_path / "export"
    assert (await mqadmin(ns, "exportMetadata", "-c", "DefaultCluster", "-f", str(out))).strip() == (
        f"export {out / 'metadata.json'} success"
    )
    meta = json.loads((out / "metadata.json").read_text())
    assert TOPIC in meta["topicConfigTable"] and "ops_g" in meta["subscriptionGroupTable"]
    ns_cfg = await mqadmin(ns, "getNamesrvConfig")
    assert ns_cfg.splitlines()[0] == f"============{ns}============" and "orderMessageEnable" in ns_cfg
    await mqadmin(ns, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert (await mqadmin_json(ns, "getNamesrvConfig"))[ns]["orderMessageEnable"] == "true"
    refused = await mqadmin(ns, "updateNamesrvConfig", "-k", "listenPort", "-v", "1", ok=False)
    assert "cannot change listenPort while the NameServer runs" in refused
    configs = await mqadmin_json(ns, "exportConfigs", "-c", "DefaultCluster", "-f", str(out))
    assert configs["brokerConfigs"][name]["brokerName"] == name and (out / "configs.json").exists()
