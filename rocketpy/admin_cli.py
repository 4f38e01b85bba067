"""``mqadmin``: RocketMQ's admin command names and options on top of ``rocketpy.Admin``.

Topic, cluster, broker and group commands are here; message commands in ``rocketpy.admin_cli_msg``.

Owns the click group ``mqadmin`` (also exported as ``commands`` for ``rocketpy admin``) and the
output format: a plain aligned table (also when not on a terminal), or with ``--json`` after the
sub-command one JSON document. Errors are one ``error: ...`` line on stderr and exit code 1 (2 for
usage errors). ``-n`` defaults to env NAMESRV_ADDR, then 127.0.0.1:9876.
Run standalone with ``python -m rocketpy.admin_cli <command> ...``.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import difflib
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NoReturn

import click

from rocketpy.errors import RocketpyError
from rocketpy.message import MessageQueue

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def default_namesrv() -> str:
    """``-n`` default: env NAMESRV_ADDR, else 127.0.0.1:9876."""
    return os.environ.get("NAMESRV_ADDR") or "127.0.0.1:9876"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain table: headers prefixed with '#', columns left-aligned and padded."""
    cells = [[f"#{h}" for h in headers]] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def _emit(as_json: bool, doc: Any, headers: Sequence[str] = (), rows: Sequence[Sequence[Any]] = ()) -> None:
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True, default=_json_default))
    elif headers:
        click.echo(format_table(headers, rows))


def _json_default(o: Any) -> Any:
    if isinstance(o, MessageQueue):
        return {"topic": o.topic, "brokerName": o.broker_name, "queueId": o.queue_id}
    if isinstance(o, bytes):
        return o.decode("utf-8", "replace")
    if hasattr(o, "value"):
        return o.value
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _admin_command(name: str) -> Callable[[Callable[..., Coroutine[Any, Any, None]]], click.Command]:
    """Decorate ``async def f(admin, as_json, **opts)`` as a click command with ``-n`` and ``--json``."""

    def wrap(fn: Callable[..., Coroutine[Any, Any, None]]) -> click.Command:
        @functools.wraps(fn)
        def run(namesrv_addr: str, as_json: bool, **opts: Any) -> None:
            # the ACL account given before the command ('mqadmin -a KEY -s SECRET cmd', rocketpy.cli)
            credentials = click.get_current_context().find_root().obj or {}
            asyncio.run(_with_admin(fn, namesrv_addr, as_json, opts, credentials))

        run = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(run)
        run = click.option(
            "-n",
            "--namesrvAddr",
            "namesrv_addr",
            default=default_namesrv,
            show_default="NAMESRV_ADDR or 127.0.0.1:9876",
            help="NameServer address(es), 'host:port;host:port'.",
        )(run)
        return mqadmin.command(name, context_settings=_CONTEXT)(run)

    return wrap


async def _with_admin(
    fn: Callable[..., Coroutine[Any, Any, None]],
    addr: str,
    as_json: bool,
    opts: Any,
    credentials: dict[str, str | None],
) -> None:
    from rocketpy.client.admin import Admin

    admin = Admin(addr, access_key=credentials.get("access_key"), secret_key=credentials.get("secret_key"))
    await admin.start()
    try:
        await fn(admin, as_json, **opts)
    finally:
        await admin.shutdown()


#: ``mqadmin --help`` lists the commands in these sections (RocketMQ's areas, in its order); a command
#: not named here is listed under "Other".
HELP_SECTIONS: dict[str, tuple[str, ...]] = {
    "Topic": ("updateTopic", "deleteTopic", "updateTopicPerm", "topicRoute", "topicStatus",
              "topicClusterList", "topicList", "allocateMQ"),
    "Consumer group": ("updateSubGroup", "deleteSubGroup", "setConsumeMode", "getConsumerConfig",
                       "consumerProgress", "consumerConnection", "producerConnection", "consumerStatus",
                       "cloneGroupOffset", "resetOffsetByTime", "skipAccumulatedMessage",
                       "brokerConsumeStats"),
    "Message": ("queryMsgById", "queryMsgByKey", "queryMsgByUniqueKey", "queryMsgByOffset", "printMsg",
                "printMsgByQueue", "queryCq", "queryMsgTraceById", "sendMsgStatus", "checkMsgSendRT",
                "clusterRT", "sendMessage", "consumeMessage", "resendDlq"),
    "Broker and cluster": ("clusterList", "brokerStatus", "getBrokerConfig", "updateBrokerConfig",
                           "wipeWritePerm", "addWritePerm", "haStatus", "exportMetadata", "exportConfigs",
                           "exportMetrics", "statsAll", "cleanExpiredCQ", "deleteExpiredCommitLog",
                           "cleanUnusedTopic"),
    "NameServer": ("updateKvConfig", "getKvConfig", "deleteKvConfig", "getNamesrvConfig",
                   "updateNamesrvConfig"),
    "Controller mode": ("getSyncStateSet", "getBrokerEpoch", "getControllerMetaData", "electMaster"),
    "ACL 2.0": ("createUser", "updateUser", "deleteUser", "getUser", "listUser", "copyUser", "createAcl",
                "updateAcl", "deleteAcl", "getAcl", "listAcl", "copyAcl"),
}  # fmt: skip


def format_sections(group: click.Group, ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """Write ``group``'s commands in ``HELP_SECTIONS``' sections (``format_commands`` of a group)."""
    names = group.list_commands(ctx)
    listed = {n for section in HELP_SECTIONS.values() for n in section}
    sections = [*HELP_SECTIONS.items(), ("Other", tuple(n for n in names if n not in listed))]
    width = formatter.width - 6 - max((len(n) for n in names), default=0)
    for title, members in sections:
        rows = []
        for name in members:
            cmd = group.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(width)))
        if rows:
            with formatter.section(f"{title} commands"):
                formatter.write_dl(rows)


def find_command(group: click.Group, ctx: click.Context, name: str) -> click.Command | None:
    """``name`` in any letter case, as RocketMQ's mqadmin finds it (``clusterlist`` is clusterList);
    an unknown name is a usage error that suggests the nearest command."""
    names = group.list_commands(ctx)
    for known in names:
        if known.lower() == name.lower():
            return click.Group.get_command(group, ctx, known)
    if name.startswith("-"):
        return None
    near = difflib.get_close_matches(name.lower(), [n.lower() for n in names], n=1, cutoff=0.6)
    hint = next((f" Did you mean '{n}'?" for n in names if near and n.lower() == near[0]), "")
    raise click.UsageError(f"No such command '{name}'.{hint}", ctx)


class _SectionedGroup(click.Group):
    """A click group whose help lists its commands in sections, and that finds commands in any case."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        format_sections(self, ctx, formatter)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or find_command(self, ctx, cmd_name)


@click.group("mqadmin", cls=_SectionedGroup, context_settings=_CONTEXT)
def mqadmin() -> None:
    """RocketMQ-style administration of a rocketpy cluster (command names as in RocketMQ's mqadmin)."""


# ---- topics ------------------------------------------------------------------------------------------


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-c", "--clusterName", "cluster", help="Create on every master of this cluster.")
@click.option("-b", "--brokerAddr", "broker_addr", help="Create on this broker only (host:port).")
@click.option("-r", "--readQueueNums", "read_nums", type=int, default=8, show_default=True)
@click.option("-w", "--writeQueueNums", "write_nums", type=int, default=8, show_default=True)
@click.option("-p", "--perm", type=int, default=6, show_default=True, help="2 write, 4 read, 6 both.")
@click.option("-o", "--order", type=bool, default=False, show_default=True)
@click.option(
    "-a", "--attributes", default="",
    help="RocketMQ 5 attribute changes: +message.type=NORMAL|FIFO|DELAY|TRANSACTION|MIXED, -message.type.",
)  # fmt: skip
@_admin_command("updateTopic")
async def update_topic(
    admin: Any,
    as_json: bool,
    topic: str,
    cluster: str | None,
    broker_addr: str | None,
    read_nums: int,
    write_nums: int,
    perm: int,
    order: bool,
    attributes: str,
) -> None:
    """Create or update a topic."""
    addrs = await admin.create_topic(
        topic,
        cluster,
        broker_addr=broker_addr,
        read_queue_nums=read_nums,
        write_queue_nums=write_nums,
        perm=perm,
        order=order,
        attributes=attributes,
    )
    doc = {
        "topic": topic,
        "brokers": addrs,
        "readQueueNums": read_nums,
        "writeQueueNums": write_nums,
        "perm": perm,
    }
    if as_json:
        _emit(True, doc)
    else:
        for a in addrs:
            click.echo(f"create topic to {a} success.")
        click.echo(
            f"TopicConfig [topicName={topic}, readQueueNums={read_nums},"
            f" writeQueueNums={write_nums}, perm={perm}]"
        )


@click.option("-t", "--topic", required=True)
@click.option(
    "-c", "--clusterName", "cluster", help="Delete from this cluster's masters (default: where it lives)."
)
@_admin_command("deleteTopic")
async def delete_topic(admin: Any, as_json: bool, topic: str, cluster: str | None) -> None:
    """Delete a topic from its brokers and every NameServer."""
    await admin.delete_topic(topic, cluster)
    _emit(as_json, {"topic": topic, "deleted": True}) if as_json else click.echo(
        f"delete topic [{topic}] success."
    )


@_admin_command("topicList")
async def topic_list(admin: Any, as_json: bool) -> None:
    """List every topic the NameServer knows."""
    topics = await admin.topic_list()
    _emit(as_json, {"topicList": topics}) if as_json else click.echo("\n".join(topics))


@click.option("-t", "--topic", required=True)
@_admin_command("topicRoute")
async def topic_route(admin: Any, as_json: bool, topic: str) -> None:
    """Show a topic's route (queue data per broker and broker addresses)."""
    route = await admin.topic_route(topic)
    rows = []
    addrs = {bd.broker_name: bd for bd in route.broker_datas}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        bd = addrs.get(qd.broker_name)
        rows.append(
            [
                qd.broker_name,
                bd.cluster if bd else None,
                bd.master_addr() if bd else None,
                qd.read_queue_nums,
                qd.write_queue_nums,
                qd.perm,
            ]
        )
    _emit(
        as_json,
        route.to_wire(),
        ["Broker Name", "Cluster", "Master Addr", "ReadQueueNums", "WriteQueueNums", "Perm"],
        rows,
    )


@click.option("-t", "--topic", required=True)
@_admin_command("topicStatus")
async def topic_status(admin: Any, as_json: bool, topic: str) -> None:
    """Per queue: min offset, max offset and last update time."""
    stats = await admin.topic_status(topic)
    rows = [
        [
            s["mq"].broker_name,
            s["mq"].queue_id,
            s["min_offset"],
            s["max_offset"],
            _fmt_ms(s["last_update_timestamp"]),
        ]
        for s in stats
    ]
    _emit(
        as_json,
        {"topic": topic, "queues": stats},
        ["Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"],
        rows,
    )


# ---- cluster and brokers -------------------------------------------------------------------------------


@_admin_command("clusterList")
async def cluster_list(admin: Any, as_json: bool) -> None:
    """List clusters and their brokers: role, commitlog max offset, each slave's replication, TPS.

    A slave's row shows its replicated offset, bytes behind and seconds since its last report as its
    master sees them (``haStatus``); with the master down, as the slave itself last saw them.
    """
    info = await admin.cluster_info()
    rows, doc = [], []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            addrs = sorted((bd.broker_addrs if bd else {}).items())
            runtimes = {bid: await _runtime_or_empty(admin, addr) for bid, addr in addrs}
            for bid, addr in addrs:
                rt = runtimes[bid]
                ha = replication_of(bid, rt, runtimes.get(0, {}))
                rows.append(
                    [
                        cluster,
                        name,
                        bid,
                        addr,
                        rt.get("brokerRole"),
                        rt.get("commitLogMaxOffset"),
                        ha.get("haOffset"),
                        ha.get("bytesBehind"),
                        ha.get("secondsSinceReport"),
                        rt.get("putTps"),
                        rt.get("getTransferedTps"),
                        bd.grpc_addrs.get(bid) if bd else None,
                        rt.get("masterEpoch", ""),
                        rt.get("inSyncStateSet", ""),
                    ]
                )
                doc.append(
                    {
                        "cluster": cluster,
                        "brokerName": name,
                        "brokerId": bid,
                        "addr": addr,
                        "grpcAddr": bd.grpc_addrs.get(bid) if bd else None,
                        "ha": ha,
                        "runtime": rt,
                    }
                )
    headers = ["Cluster Name", "Broker Name", "BID", "Addr", "Role", "MaxOffset", "HAOffset", "Behind(B)"]
    # controller mode: the master epoch the broker is in, and whether it is in the SyncStateSet
    _emit(
        as_json,
        {"brokers": doc},
        [*headers, "LastReport(s)", "InTPS", "OutTPS", "gRPC Addr", "Epoch", "InSync"],
        rows,
    )


def replication_of(broker_id: int, runtime: dict[str, str], master_runtime: dict[str, str]) -> dict[str, Any]:
    """A slave's replication figures (``{}`` for a master): from its master's ``haStatus`` entry for it,
    else (master down or not connected) from the slave's own ``haStatus``."""
    if broker_id == 0:
        return {}
    try:
        seen_by_master = json.loads(master_runtime.get("haStatus", "[]"))
        own = json.loads(runtime.get("haStatus", "{}"))
    except ValueError:
        return {}
    for entry in seen_by_master if isinstance(seen_by_master, list) else []:
        if entry.get("brokerId") == broker_id:
            return {
                "source": "master",
                "haOffset": entry["ackOffset"],
                "bytesBehind": entry["bytesBehind"],
                "secondsSinceReport": entry["secondsSinceReport"],
            }
    if not isinstance(own, dict) or "slaveMaxOffset" not in own:
        return {}
    behind = own.get("masterOffset")
    return {
        "source": "slave",
        "haOffset": own["slaveMaxOffset"],
        "bytesBehind": max(0, behind - own["slaveMaxOffset"]) if isinstance(behind, int) else None,
        "secondsSinceReport": own.get("secondsSinceFrame"),
        "connected": own.get("connected"),
    }


async def _runtime_or_empty(admin: Any, addr: str) -> dict[str, str]:
    try:
        return dict(await admin.broker_runtime_info(addr))
    except RocketpyError:
        return {}


@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address host:port.")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
@_admin_command("brokerStatus")
async def broker_status(admin: Any, as_json: bool, broker_addr: str | None, cluster: str | None) -> None:
    """Show a broker's runtime figures (GET_BROKER_RUNTIME_INFO)."""
    addrs = await admin._targets(cluster, broker_addr)
    doc = {a: await admin.broker_runtime_info(a) for a in addrs}
    rows = [[a, k, v] for a, table in doc.items() for k, v in sorted(table.items())]
    _emit(as_json, doc, ["Broker", "Key", "Value"], rows)


@click.option("-b", "--brokerAddr", "broker_addr")
@click.option("-c", "--clusterName", "cluster")
@_admin_command("getBrokerConfig")
async def get_broker_config(admin: Any, as_json: bool, broker_addr: str | None, cluster: str | None) -> None:
    """Print a broker's effective configuration."""
    addrs = await admin._targets(cluster, broker_addr)
    doc = {a: await admin.get_broker_config(a) for a in addrs}
    rows = [[a, k, v] for a, cfg in doc.items() for k, v in sorted(cfg.items())]
    _emit(as_json, doc, ["Broker", "Key", "Value"], rows)


@click.option("-b", "--brokerAddr", "broker_addr")
@click.option("-c", "--clusterName", "cluster")
@click.option("-k", "--key", required=True, help="Config key (RocketMQ name).")
@click.option("-v", "--value", required=True)
@_admin_command("updateBrokerConfig")
async def update_broker_config(
    admin: Any, as_json: bool, broker_addr: str | None, cluster: str | None, key: str, value: str
) -> None:
    """Change one config key on a broker (or every master of a cluster)."""
    addrs = await admin.update_broker_config(key, value, cluster=cluster, broker_addr=broker_addr)
    if as_json:
        _emit(True, {"key": key, "value": value, "brokers": addrs})
    else:
        for a in addrs:
            click.echo(f"update broker config success, {a}")


@click.option("-b", "--brokerName", "broker_name", required=True)
@_admin_command("wipeWritePerm")
async def wipe_write_perm(admin: Any, as_json: bool, broker_name: str) -> None:
    """Remove a broker's write permission on every NameServer (drain it before maintenance)."""
    counts = await admin.wipe_write_perm(broker_name)
    if as_json:
        _emit(True, {"brokerName": broker_name, "wipeTopicCount": counts})
    else:
        for ns, n in counts.items():
            click.echo(f"wipe write perm of broker[{broker_name}] in name server[{ns}] OK, {n}")


# ---- NameServer KV table -----------------------------------------------------------------------------------


@click.option("-s", "--namespace", required=True, help="KV namespace (e.g. ROCKETPY_SPARK_SINK).")
@click.option("-k", "--key", required=True)
@click.option("-v", "--value", required=True)
@_admin_command("updateKvConfig")
async def update_kv_config(admin: Any, as_json: bool, namespace: str, key: str, value: str) -> None:
    """Set a key of the NameServers' KV table (on every NameServer)."""
    await admin.update_kv_config(namespace, key, value)
    if as_json:
        _emit(True, {"namespace": namespace, "key": key, "value": value})
    else:
        click.echo(f"update kv config success, {namespace} {key}")


@click.option("-s", "--namespace", required=True, help="KV namespace (e.g. ROCKETPY_SPARK_SINK).")
@click.option("-k", "--key", required=True)
@_admin_command("getKvConfig")
async def get_kv_config(admin: Any, as_json: bool, namespace: str, key: str) -> None:
    """Print a key of the NameServers' KV table, per NameServer (rocketpy; RocketMQ has no such command)."""
    doc = await admin.get_kv_config(namespace, key)
    _emit(as_json, doc, ["NameServer", "Value"], [[a, v] for a, v in sorted(doc.items())])


@click.option("-s", "--namespace", required=True, help="KV namespace (e.g. ROCKETPY_SPARK_SINK).")
@click.option("-k", "--key", required=True)
@_admin_command("deleteKvConfig")
async def delete_kv_config(admin: Any, as_json: bool, namespace: str, key: str) -> None:
    """Remove a key from the NameServers' KV table (on every NameServer)."""
    await admin.delete_kv_config(namespace, key)
    if as_json:
        _emit(True, {"namespace": namespace, "key": key, "deleted": True})
    else:
        click.echo(f"delete kv config success, {namespace} {key}")


# ---- groups and offsets ----------------------------------------------------------------------------------


@click.option("-g", "--consumerGroup", "group", required=True)
@click.option("-t", "--topic", help="Only this topic.")
@_admin_command("consumerProgress")
async def consumer_progress(admin: Any, as_json: bool, group: str, topic: str | None) -> None:
    """Per queue: broker offset, consumer offset, the difference and the lag in seconds (how long the
    oldest unconsumed message has waited; a POP group: also what is in flight, popped and not acked,
    and how long the oldest of it has been)."""
    rows = await admin.consumer_progress(group, topic)
    pop = any("inflight" in r for r in rows)
    now_ms = int(time.time() * 1000)
    table = []
    for r in rows:
        mq = r["mq"]
        row = [mq.topic, mq.broker_name, mq.queue_id, r["broker_offset"], r["consumer_offset"], r["diff"],
               f"{r['lag_seconds']:.1f}"]  # fmt: skip
        if pop:
            oldest = r.get("oldest_inflight_timestamp", 0)
            row += [r.get("inflight", 0), f"{(now_ms - oldest) / 1000:.1f}" if oldest else "-"]
        table.append([*row, _fmt_ms(r["last_timestamp"])])
    total = sum(r["diff"] for r in rows)
    inflight = sum(r.get("inflight", 0) for r in rows)
    max_lag = max((r["lag_seconds"] for r in rows), default=0.0)
    if as_json:
        doc = {"group": group, "queues": rows, "diffTotal": total, "inflightTotal": inflight}
        _emit(True, {**doc, "maxLagSeconds": max_lag})
        return
    head = ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "Lag(s)"]
    head += ["#InFlight", "Oldest Unacked (s)"] if pop else []
    click.echo(format_table([*head, "LastTime"], table))
    click.echo(f"\nDiff Total: {total}\nMax Lag(s): {max_lag:.1f}")
    if pop:
        click.echo(f"InFlight Total: {inflight}")


@click.option("-g", "--groupName", "group", required=True)
@click.option("-t", "--topicName", "topic", required=True)
@click.option("-m", "--mode", required=True, type=click.Choice(["PULL", "POP"], case_sensitive=False))
@click.option(
    "-q",
    "--popShareQueueNum",
    "share",
    type=int,
    default=0,
    show_default=True,
    help="POP: how many other consumers' queues each consumer also pops (0: all share all).",
)
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
@click.option("-b", "--brokerAddr", "broker_addr", help="This broker only.")
@_admin_command("setConsumeMode")
async def set_consume_mode(
    admin: Any,
    as_json: bool,
    group: str,
    topic: str,
    mode: str,
    share: int,
    cluster: str | None,
    broker_addr: str | None,
) -> None:
    """How a group's consumers read a topic (SET_MESSAGE_REQUEST_MODE; default: every master of the
    topic): PULL gives each consumer its own queues, POP shares them."""
    addrs = await admin.set_message_request_mode(
        topic, group, mode, share, cluster=cluster, broker_addr=broker_addr
    )
    if as_json:
        _emit(
            True,
            {
                "group": group,
                "topic": topic,
                "mode": mode.upper(),
                "popShareQueueNum": share,
                "brokers": addrs,
            },
        )
        return
    for addr in addrs:
        click.echo(
            f"set consume mode to {mode.upper()} (popShareQueueNum {share}) for {group} on {topic} "
            f"at {addr} success."
        )


@click.option("-g", "--group", "group", required=True)
@click.option("-t", "--topic", required=True)
@click.option("-s", "--timestamp", required=True, help="ms since epoch, 'now', or yyyy-MM-dd#HH:mm:ss:SSS.")
@_admin_command("resetOffsetByTime")
async def reset_offset_by_time(admin: Any, as_json: bool, group: str, topic: str, timestamp: str) -> None:
    """Move a group's offsets of a topic to the first message stored at/after a time.

    Stop the group's consumers first, or their next commit overwrites the reset.
    """
    ts = parse_timestamp(timestamp)
    result = await admin.reset_offset_by_time(group, topic, ts)
    rows = [[mq.broker_name, mq.queue_id, off] for mq, off in result]
    _emit(
        as_json,
        {
            "group": group,
            "topic": topic,
            "timestamp": ts,
            "offsets": [{"mq": mq, "offset": o} for mq, o in result],
        },
        ["Broker Name", "QID", "Offset"],
        rows,
    )


@click.option("-g", "--groupName", "group", required=True)
@click.option("-c", "--clusterName", "cluster")
@click.option("-b", "--brokerAddr", "broker_addr")
@click.option("-r", "--retryMaxTimes", "retry_max_times", type=int, default=16, show_default=True)
@click.option("-q", "--retryQueueNums", "retry_queue_nums", type=int, default=1, show_default=True)
@click.option("-d", "--consumeBroadcastEnable", "broadcast", type=bool, default=True, show_default=True)
@click.option("-s", "--consumeEnable", "consume_enable", type=bool, default=True, show_default=True)
@click.option(
    "-o", "--consumeMessageOrderly", "orderly", type=bool, default=False, show_default=True,
    help="A FIFO group: RocketMQ 5 clients consume each message group in order.",
)  # fmt: skip
@_admin_command("updateSubGroup")
async def update_sub_group(
    admin: Any,
    as_json: bool,
    group: str,
    cluster: str | None,
    broker_addr: str | None,
    retry_max_times: int,
    retry_queue_nums: int,
    broadcast: bool,
    consume_enable: bool,
    orderly: bool,
) -> None:
    """Create or update a subscription group."""
    addrs = await admin.update_subscription_group(
        group,
        cluster,
        broker_addr=broker_addr,
        retry_max_times=retry_max_times,
        retry_queue_nums=retry_queue_nums,
        consume_broadcast_enable=broadcast,
        consume_enable=consume_enable,
        consume_message_orderly=orderly,
    )
    if as_json:
        _emit(True, {"groupName": group, "brokers": addrs})
    else:
        for a in addrs:
            click.echo(f"create subscription group to {a} success.")


def parse_timestamp(text: str) -> int:
    """``now``, ms since epoch, or RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time) -> ms."""
    if text == "now":
        return int(time.time() * 1000)
    if text.isdigit():
        return int(text)
    try:
        return int(_dt.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(f"{text!r}: use ms since epoch, 'now' or yyyy-MM-dd#HH:mm:ss:SSS") from None


def _fmt_ms(ms: int) -> str:
    if not ms:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


# The other commands live in rocketpy.admin_cli_msg (messages), admin_cli_ctl (controller mode),
# admin_cli_groups (groups, live clients, topic permissions), admin_cli_ops (reading queues, send RT,
# exports), admin_cli_stats (statsAll, store cleaning), admin_cli_cluster (NameServer settings,
# replication), admin_cli_auth (ACL 2.0's users
# and ACLs) and admin_cli_trace (message trace), and register themselves on ``mqadmin`` when
# imported here.
import rocketpy.admin_cli_auth  # noqa: E402
import rocketpy.admin_cli_cluster  # noqa: E402
import rocketpy.admin_cli_ctl  # noqa: E402
import rocketpy.admin_cli_groups  # noqa: E402
import rocketpy.admin_cli_msg  # noqa: E402
import rocketpy.admin_cli_ops  # noqa: E402
import rocketpy.admin_cli_stats  # noqa: E402
import rocketpy.admin_cli_trace  # noqa: E402, F401

commands: list[click.Command] = list(mqadmin.commands.values())


def main(argv: list[str] | None = None) -> NoReturn:
    """Run ``mqadmin`` with one-line errors (``python -m rocketpy.admin_cli``)."""
    try:
        mqadmin.main(args=argv, prog_name="mqadmin", standalone_mode=False)
    except click.UsageError as e:
        click.echo(f"error: {e.format_message()}", err=True)
        sys.exit(2)
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    except RocketpyError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except (click.Abort, KeyboardInterrupt):
        click.echo("error: interrupted", err=True)
        sys.exit(130)
    sys.exit(0)


if __name__ == "__main__":
    from rocketpy.admin_cli import main as _main  # the imported module owns the full command group

    _main()
