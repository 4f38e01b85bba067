"""``mqadmin`` commands about groups, their live clients and topic permissions: consumerConnection,
producerConnection, consumerStatus (``-s``: the running info's thread dump), deleteSubGroup,
getConsumerConfig, cloneGroupOffset, skipAccumulatedMessage, allocateMQ, topicClusterList,
updateTopicPerm, addWritePerm, queryMsgByUniqueKey.

Registered on the ``mqadmin`` group of ``rocketpy.admin_cli`` (which imports this module); names,
options and output follow RocketMQ's tools (plain table, or one JSON document with ``--json``).
"""

from __future__ import annotations

import json
from typing import Any

import click

from rocketpy.admin_cli import _admin_command, _emit, _json_default
from rocketpy.admin_cli_msg import _print_messages
from rocketpy.allocate import allocate_averagely
from rocketpy.client import admin_groups
from rocketpy.errors import RocketpyError
from rocketpy.message import MessageQueue

# ---- a group's live clients ------------------------------------------------------------------------


@click.option("-g", "--consumerGroup", "group", required=True)
@_admin_command("consumerConnection")
async def consumer_connection(admin: Any, as_json: bool, group: str) -> None:
    """The group's online consumers, its subscriptions and settings."""
    doc = await admin_groups.consumer_connection(admin, group)
    if as_json:
        _emit(True, doc)
        return
    rows = [
        [i + 1, c["clientId"], c.get("clientAddr"), c.get("language"), c.get("versionDesc")]
        for i, c in enumerate(doc["connectionSet"])
    ]
    _emit(False, None, ["Index", "ClientId", "ClientAddr", "Language", "Version"], rows)
    click.echo("\nBelow is subscription:")
    subs = [
        [i + 1, t, s.get("subString")] for i, (t, s) in enumerate(sorted(doc["subscriptionTable"].items()))
    ]
    _emit(False, None, ["Index", "Topic", "SubExpression"], subs)
    click.echo(f"\nConsumeType: {doc.get('consumeType')}")
    click.echo(f"MessageModel: {doc.get('messageModel')}")
    click.echo(f"ConsumeFromWhere: {doc.get('consumeFromWhere')}")


@click.option("-g", "--producerGroup", "group", required=True)
@click.option("-t", "--topic", required=True, help="A topic the group sends to (RocketMQ's option).")
@_admin_command("producerConnection")
async def producer_connection(admin: Any, as_json: bool, group: str, topic: str) -> None:
    """The producer group's online clients."""
    conns = await admin.producer_connections(group)
    if as_json:
        _emit(True, {"group": group, "topic": topic, "connectionSet": conns})
        return
    if not conns:
        raise RocketpyError(f"no producer of group {group!r} is online")
    rows = [[f"{i + 1:04d}", c["clientId"], c.get("clientAddr"), c.get("language"), c.get("versionDesc")]
            for i, c in enumerate(conns)]  # fmt: skip
    _emit(False, None, ["Index", "ClientId", "ClientAddr", "Language", "Version"], rows)


@click.option("-g", "--consumerGroup", "group", required=True)
@click.option("-i", "--clientId", "client_id", help="Show this client's running info.")
@click.option("-s", "--jstack", is_flag=True, help="With the running info: the client's thread dump.")
@_admin_command("consumerStatus")
async def consumer_status(admin: Any, as_json: bool, group: str, client_id: str | None, jstack: bool) -> None:
    """The group's clients (versions, subscriptions); with -i one client's running info
    (RocketMQ's consumerRunningInfo: settings, subscriptions, queues, rates, thread pool)."""
    if client_id is None:
        doc = await admin_groups.consumer_connection(admin, group)
        infos = {c["clientId"]: await admin.consumer_running_info(group, c["clientId"], jstack)
                 for c in doc["connectionSet"]}  # fmt: skip
        if as_json:
            _emit(True, {"group": group, "clients": infos})
            return
        rows = [[f"{i + 1:03d}", cid, info.get("properties", {}).get("PROP_CLIENT_VERSION"),
                 ",".join(sorted(s["topic"] for s in info.get("subscriptionSet") or []))]
                for i, (cid, info) in enumerate(sorted(infos.items()))]  # fmt: skip
        _emit(False, None, ["Index", "ClientId", "Version", "Subscriptions"], rows)
        return
    info = await admin.consumer_running_info(group, client_id, jstack)
    if as_json:
        _emit(True, info)
        return
    _print_running_info(info)


def _print_running_info(info: dict[str, Any]) -> None:
    click.echo("#Consumer Properties#")
    for k, v in sorted((info.get("properties") or {}).items()):
        click.echo(f"{k:<40}: {v}")
    click.echo("\n#Consumer Subscription#")
    for i, s in enumerate(info.get("subscriptionSet") or []):
        click.echo(f"{i + 1:03d} Topic: {s.get('topic'):<40} SubExpression: {s.get('subString')}")
    click.echo("\n#Consumer Offset#")
    rows = []
    for row in info.get("mqTable") or []:
        mq, pq = row["mq"], row["info"]
        rows.append([mq["topic"], mq["brokerName"], mq["queueId"], pq.get("commitOffset"),
                     pq.get("cachedMsgCount"), pq.get("locked")])  # fmt: skip
    _emit(False, None, ["Topic", "Broker Name", "QID", "Consumer Offset", "Cached Msgs", "Locked"], rows)
    click.echo("\n#Consumer RT&TPS#")
    rates = ("pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS")
    tps = [[t, *(f"{s.get(k, 0):.2f}" for k in rates), s.get("consumeFailedMsgs")]
           for t, s in sorted((info.get("statusTable") or {}).items())]  # fmt: skip
    head = ["Topic", "Pull RT", "Pull TPS", "Consume RT", "ConsumeOK TPS", "ConsumeFailed TPS", "Failed/Hour"]
    _emit(False, None, head, tps)
    if info.get("jstack"):
        click.echo(f"\n#Consumer jstack#\n{info['jstack']}")


# ---- group configs and offsets ---------------------------------------------------------------------


@click.option("-g", "--groupName", "group", required=True)
@click.option("-b", "--brokerAddr", "broker_addr", help="Delete on this broker only.")
@click.option("-c", "--clusterName", "cluster", help="Delete on every master of this cluster.")
@click.option("-r", "--removeOffset", "remove_offset", type=bool, default=False, show_default=True,
              help="Also remove the group's committed offsets.")  # fmt: skip
@_admin_command("deleteSubGroup")
async def delete_sub_group(
    admin: Any, as_json: bool, group: str, broker_addr: str | None, cluster: str | None, remove_offset: bool
) -> None:
    """Delete a subscription group's config (and its offsets with -r true)."""
    if not broker_addr and not cluster:
        raise click.UsageError("give -b BROKER_ADDR or -c CLUSTER")
    addrs = await admin_groups.delete_subscription_group(admin, group, cluster, broker_addr, remove_offset)
    if as_json:
        _emit(True, {"groupName": group, "brokers": addrs, "removeOffset": remove_offset})
        return
    for a in addrs:
        where = f" in cluster [{cluster}]" if cluster else ""
        click.echo(f"delete subscription group [{group}] from broker [{a}]{where} success.")


@click.option("-g", "--groupName", "group", required=True)
@_admin_command("getConsumerConfig")
async def get_consumer_config(admin: Any, as_json: bool, group: str) -> None:
    """The group's subscription-group config on every master that has it."""
    configs = await admin_groups.consumer_configs(admin, group)
    if not configs:
        raise RocketpyError(f"no broker has a config for group {group!r}")
    if as_json:
        _emit(True, configs)
        return
    for addr, cfg in configs.items():
        click.echo(f"============Master: {addr}============")
        for k, v in sorted(cfg.items()):
            click.echo(f"{k:<40}= {v}")


@click.option("-s", "--srcGroup", "src", required=True)
@click.option("-d", "--destGroup", "dest", required=True)
@click.option("-t", "--topic", required=True)
@click.option("-o", "--offline", is_flag=True, help="Accepted for RocketMQ's syntax (the copy is the same).")
@_admin_command("cloneGroupOffset")
async def clone_group_offset(
    admin: Any, as_json: bool, src: str, dest: str, topic: str, offline: bool
) -> None:
    """Give destGroup the committed offsets srcGroup has on the topic."""
    copied = await admin_groups.clone_group_offset(admin, src, dest, topic)
    if as_json:
        _emit(True, {"srcGroup": src, "destGroup": dest, "topic": topic, "offsets": copied})
        return
    click.echo(f"clone group offset success. srcGroup[{src}], destGroup[{dest}], topic[{topic}]")


@click.option("-g", "--groupName", "group", required=True)
@click.option("-t", "--topic", required=True)
@click.option("-c", "--cluster", help="Accepted for RocketMQ's syntax (every master of the topic is reset).")
@click.option("-f", "--force", type=bool, default=True, show_default=True)
@_admin_command("skipAccumulatedMessage")
async def skip_accumulated(
    admin: Any, as_json: bool, group: str, topic: str, cluster: str | None, force: bool
) -> None:
    """Move the group's offsets of the topic to the end of each queue (running consumers follow)."""
    result = await admin.reset_offset(group, topic, -1, force=force)
    if as_json:
        offsets = [{"mq": mq, "offset": off} for mq, off in result["offsets"]]
        _emit(True, {"offsets": offsets, "clients": result["clients"]})
        return
    rows = [[mq.broker_name, mq.queue_id, off] for mq, off in result["offsets"]]
    _emit(False, None, ["brokerName", "queueId", "offset"], rows)


@click.option("-t", "--topic", required=True)
@click.option("-i", "--ipList", "ip_list", required=True, help="Consumer ids, comma-separated.")
@_admin_command("allocateMQ")
async def allocate_mq(admin: Any, as_json: bool, topic: str, ip_list: str) -> None:
    """How AllocateMessageQueueAveragely shares the topic's queues among these consumers (JSON)."""
    route = await admin.topic_route(topic)
    mqs = sorted((MessageQueue(topic, qd.broker_name, q) for qd in route.queue_datas
                  for q in range(qd.read_queue_nums)), key=lambda m: (m.broker_name, m.queue_id))  # fmt: skip
    ids = sorted(i.strip() for i in ip_list.split(",") if i.strip())
    result = {i: allocate_averagely(i, mqs, ids) for i in ids}
    click.echo(json.dumps({"result": result}, indent=2, sort_keys=True, default=_json_default))


# ---- topics and brokers ----------------------------------------------------------------------------


@click.option("-t", "--topic", required=True)
@_admin_command("topicClusterList")
async def topic_cluster_list(admin: Any, as_json: bool, topic: str) -> None:
    """The clusters the topic's brokers belong to."""
    route = await admin.topic_route(topic)
    clusters = sorted({bd.cluster for bd in route.broker_datas})
    if as_json:
        _emit(True, {"topic": topic, "clusters": clusters})
    else:
        click.echo("\n".join(clusters))


@click.option("-t", "--topic", required=True)
@click.option("-p", "--perm", type=click.IntRange(0, 7), required=True, help="2 write, 4 read, 6 both.")
@click.option("-b", "--brokerAddr", "broker_addr", help="On this broker only (host:port).")
@click.option("-c", "--clusterName", "cluster", help="On every master of this cluster.")
@_admin_command("updateTopicPerm")
async def update_topic_perm(
    admin: Any, as_json: bool, topic: str, perm: int, broker_addr: str | None, cluster: str | None
) -> None:
    """Change the topic's permission, keeping its queue numbers."""
    if not broker_addr and not cluster:
        raise click.UsageError("give -b BROKER_ADDR or -c CLUSTER")
    route = await admin.topic_route(topic)
    by_addr = {bd.master_addr(): bd.broker_name for bd in route.broker_datas if bd.master_addr()}
    queues = {qd.broker_name: qd for qd in route.queue_datas}
    targets = [broker_addr] if broker_addr else await admin._targets(cluster, None)
    changed = []
    for addr in targets:
        qd = queues.get(by_addr.get(addr, ""))
        if qd is None:
            raise RocketpyError(f"topic {topic!r} is not on broker {addr}")
        await admin.create_topic(topic, broker_addr=addr, read_queue_nums=qd.read_queue_nums,
                                 write_queue_nums=qd.write_queue_nums, perm=perm)  # fmt: skip
        changed.append({"broker": addr, "oldPerm": qd.perm, "newPerm": perm})
    if as_json:
        _emit(True, {"topic": topic, "changed": changed})
        return
    for c in changed:
        click.echo(f"update topic perm from {c['oldPerm']} to {perm} in {c['broker']} success.")


@click.option("-b", "--brokerName", "broker_name", required=True)
@_admin_command("addWritePerm")
async def add_write_perm(admin: Any, as_json: bool, broker_name: str) -> None:
    """Give the broker's topics write permission back on every NameServer (undoes wipeWritePerm)."""
    counts = await admin.add_write_perm(broker_name)
    if as_json:
        _emit(True, {"addTopicCount": counts})
        return
    for ns, n in counts.items():
        click.echo(f"add write perm of broker[{broker_name}] in namesrv[{ns}] OK, {n}")


@click.option("-i", "--msgId", "msg_id", required=True, help="The producer's message id (SendResult.msg_id).")
@click.option("-t", "--topic", required=True)
@click.option("-g", "--consumerGroup", "group", help="With -d: consume the message directly on that client.")
@click.option("-d", "--clientId", "client_id")
@_admin_command("queryMsgByUniqueKey")
async def query_msg_by_unique_key(
    admin: Any, as_json: bool, msg_id: str, topic: str, group: str | None, client_id: str | None
) -> None:
    """Show the message with this unique key; with -g and -d, run it on that client's listener
    (CONSUME_MESSAGE_DIRECTLY) and print its result."""
    if group and client_id:
        result = await admin.consume_message_directly(group, client_id, msg_id, topic)
        if as_json:
            _emit(True, result)
        else:
            click.echo("\n".join(f"{k}: {v}" for k, v in sorted(result.items())))
        return
    msgs = [m for m in await admin.query_msg_by_key(topic, msg_id) if m.unique_key == msg_id]
    if not msgs:
        raise RocketpyError(f"no message with unique key {msg_id!r} in topic {topic!r}")
    _print_messages(as_json, msgs[:1])
