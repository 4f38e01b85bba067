"""``mqadmin`` commands that read queues, measure sends and export a cluster's metadata: printMsg,
printMsgByQueue, queryCq, brokerConsumeStats, checkMsgSendRT, sendMsgStatus, clusterRT, exportMetadata,
exportConfigs, exportMetrics (the NameServer and replication commands are in ``rocketpy.admin_cli_cluster``).

Registered on the ``mqadmin`` group of ``rocketpy.admin_cli`` (which imports this module); names,
options and output follow RocketMQ's tools (plain text, or one JSON document with ``--json``).
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path
from typing import Any

import click

from rocketpy.admin_cli import _admin_command, _emit, _fmt_ms, _json_default, parse_timestamp
from rocketpy.admin_cli_msg import message_doc
from rocketpy.client.answers import unpack_body
from rocketpy.errors import RocketpyError
from rocketpy.message import Message, MessageExt, MessageQueue
from rocketpy.protocol.codes import RequestCode
from rocketpy.protocol.headers.admin import MAX_QUERY_CQ_COUNT

#: messages one printMsg / printMsgByQueue prints at most per queue (a bound on a huge queue)
PRINT_MAX_PER_QUEUE = 10_000


async def _read_window(
    admin: Any, mq: MessageQueue, begin_ms: int, end_ms: int | None
) -> tuple[int, int, list[MessageExt]]:
    """The queue's messages stored in [begin_ms, end_ms): (min offset, max offset, messages)."""
    addr = await admin.instance.queue_broker_addr(mq)
    api = admin.instance.api
    lo = await api.get_min_offset(addr, mq.topic, mq.queue_id, admin.timeout)
    hi = await api.get_max_offset(addr, mq.topic, mq.queue_id, admin.timeout)
    start = await api.search_offset(addr, mq.topic, mq.queue_id, begin_ms, admin.timeout) if begin_ms else lo
    stop = await api.search_offset(addr, mq.topic, mq.queue_id, end_ms, admin.timeout) if end_ms else hi
    out: list[MessageExt] = []
    offset = max(start, lo)
    while offset < stop and len(out) < PRINT_MAX_PER_QUEUE:
        msgs, nxt, _ = await admin.pull(mq, offset, min(32, stop - offset))
        out += msgs
        if not msgs or nxt <= offset:
            break
        offset = nxt
    return lo, hi, [m for m in out if m.queue_offset < stop]


def _window(begin: str | None, end: str | None) -> tuple[int, int | None]:
    return (parse_timestamp(begin) if begin else 0), (parse_timestamp(end) if end else None)


def _body(m: MessageExt, charset: str) -> str:
    return bytes(m.body).decode(charset, "replace")


@click.option("-t", "--topic", required=True)
@click.option("-c", "--charsetName", "charset", default="UTF-8", show_default=True)
@click.option("-b", "--beginTimestamp", "begin", help="ms since epoch or yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-e", "--endTimestamp", "end", help="ms since epoch or yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-d", "--printBody", "print_body", type=bool, default=True, show_default=True)
@_admin_command("printMsg")
async def print_msg(
    admin: Any, as_json: bool, topic: str, charset: str, begin: str | None, end: str | None, print_body: bool
) -> None:
    """Print the topic's messages (every queue, optionally within a time window)."""
    from rocketpy.client.route import subscribe_queues

    begin_ms, end_ms = _window(begin, end)
    queues = []
    for mq in subscribe_queues(topic, await admin.topic_route(topic)):
        lo, hi, msgs = await _read_window(admin, mq, begin_ms, end_ms)
        queues.append((mq, lo, hi, msgs))
    if as_json:
        docs = [{"mq": mq, "minOffset": lo, "maxOffset": hi, "messages": [message_doc(m) for m in msgs]}
                for mq, lo, hi, msgs in queues]  # fmt: skip
        _emit(True, {"queues": docs})
        return
    for mq, lo, hi, msgs in queues:
        click.echo(f"minOffset={lo}, maxOffset={hi}, {mq.topic}:{mq.broker_name}:{mq.queue_id}")
        for m in msgs:
            body = _body(m, charset) if print_body else "NOT PRINT BODY"
            click.echo(f"MSGID: {m.msg_id} {m.queue_offset} BODY: {body}")


@click.option("-t", "--topic", required=True)
@click.option("-a", "--brokerName", "broker_name", required=True)
@click.option("-i", "--queueId", "queue_id", type=int, required=True)
@click.option("-c", "--charsetName", "charset", default="UTF-8", show_default=True)
@click.option("-b", "--beginTimestamp", "begin")
@click.option("-e", "--endTimestamp", "end")
@click.option(
    "-p", "--print", "print_msgs", type=bool, default=False, show_default=True, help="Print each message."
)
@click.option("-d", "--printBody", "print_body", type=bool, default=False, show_default=True)
@click.option(
    "-f", "--calculate", "by_tag", type=bool, default=False, show_default=True, help="Count by tag."
)
@_admin_command("printMsgByQueue")
async def print_msg_by_queue(
    admin: Any, as_json: bool, topic: str, broker_name: str, queue_id: int, charset: str,
    begin: str | None, end: str | None, print_msgs: bool, print_body: bool, by_tag: bool,
) -> None:  # fmt: skip
    """Print one queue's messages (in a time window), or count them by tag (-f true)."""
    await admin.topic_route(topic)
    begin_ms, end_ms = _window(begin, end)
    lo, hi, msgs = await _read_window(admin, MessageQueue(topic, broker_name, queue_id), begin_ms, end_ms)
    tags = collections.Counter(m.tags or "" for m in msgs)
    if as_json:
        doc = {"minOffset": lo, "maxOffset": hi, "messages": [message_doc(m) for m in msgs], "tags": tags}
        _emit(True, doc)
        return
    if print_msgs:
        for m in msgs:
            body = f" BODY: {_body(m, charset)}" if print_body else ""
            click.echo(f"MSGID: {m.msg_id} {m.queue_offset} TAGS: {m.tags}{body}")
    if by_tag:
        for tag, n in sorted(tags.items(), key=lambda kv: -kv[1]):
            click.echo(f"{tag:<32} {n}")
    click.echo(f"minOffset={lo}, maxOffset={hi}, read={len(msgs)}")


_RULE = "======================================"


def consume_queue_lines(body: dict[str, Any], index: int) -> list[str]:
    """queryCq's text, RocketMQ's layout: the subscription and filter (with a group), the queue's
    max and min, then each unit as ``idx: N`` and its ConsumeQueueData."""
    out: list[str] = []
    if body.get("subscriptionData") is not None:
        out += ["Subscription data: ", json.dumps(body["subscriptionData"], indent=2), _RULE]
    if body.get("filterData") is not None:
        out += ["Filter data: ", str(body["filterData"]), _RULE]
    out += ["Queue data: ", f"max: {body['maxQueueIndex']}, min: {body['minQueueIndex']}", _RULE]
    for i, u in enumerate(body.get("queueData") or (), start=index):
        out += [
            f"idx: {i}",
            f"ConsumeQueueData{{physicOffset={u['physicOffset']}, physicSize={u['physicSize']}, "
            f"tagsCode={u['tagsCode']}, extendDataJson='{_java(u.get('extendDataJson'))}', "
            f"bitMap='{_java(u.get('bitMap'))}', eval={_java(bool(u.get('eval')))}, "
            f"msg='{_java(u.get('msg'))}'}}",
            _RULE,
        ]
    return out


def _java(value: Any) -> str:
    """A value as Java's string concatenation prints it (null, true, false)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-q", "--queue", "queue_id", type=click.IntRange(min=0), required=True, help="Queue id.")
@click.option("-i", "--index", type=click.IntRange(min=0), required=True, help="Start queue offset.")
@click.option("-c", "--count", type=click.IntRange(1, MAX_QUERY_CQ_COUNT), default=10, show_default=True)
@click.option("-b", "--broker", "broker_addr", default=None, help="Broker address (default: topic's first).")
@click.option("-g", "--consumer", "group", default=None, help="Also say which units this group takes.")
@_admin_command("queryCq")
async def query_cq(
    admin: Any, as_json: bool, topic: str, queue_id: int, index: int, count: int,
    broker_addr: str | None, group: str | None,
) -> None:  # fmt: skip
    """Query a consume queue's units (commitlog offset, size, tag code; with -g, whether each matches)."""
    from rocketpy.client.admin_queue import first_master, query_consume_queue

    addr = broker_addr or await first_master(admin, topic)
    body = await query_consume_queue(admin, addr, topic, queue_id, index, count, group)
    if as_json:
        _emit(True, {"broker": addr, **body})
        return
    for line in consume_queue_lines(body, index):
        click.echo(line)
    if not body.get("queueData"):
        lo, hi = body["minQueueIndex"], body["maxQueueIndex"]
        held = f"offsets {lo} to {hi - 1}" if hi > lo else "no unit"
        click.echo(f"index {index} of {queue_id}@{topic} is not stored: the queue holds {held}", err=True)


@click.option("-b", "--brokerAddr", "broker_addr", required=True)
@click.option(
    "-l", "--level", type=int, default=0, show_default=True, help="Only queues with at least this diff."
)
@_admin_command("brokerConsumeStats")
async def broker_consume_stats(admin: Any, as_json: bool, broker_addr: str, level: int) -> None:
    """Every group's progress on one broker's queues: offsets, diff, lag in seconds, last time."""
    from rocketpy.client.admin_groups import broker_name_of

    name = await broker_name_of(admin, broker_addr)
    rows: list[dict[str, Any]] = []
    for group in await admin.consumer_groups():
        try:
            progress = await admin.consumer_progress(group)
        except RocketpyError:
            continue  # a group that consumes nothing yet
        mine = (r for r in progress if r["mq"].broker_name == name and r["diff"] >= level)
        rows += [{"group": group, **r} for r in mine]
    total = sum(r["diff"] for r in rows)
    if as_json:
        _emit(True, {"brokerAddr": broker_addr, "brokerName": name, "offsets": rows, "diffTotal": total})
        return
    table = [[r["mq"].topic, r["group"], name, r["mq"].queue_id, r["broker_offset"], r["consumer_offset"],
              r["diff"], f"{r['lag_seconds']:.1f}", _fmt_ms(r["last_timestamp"])] for r in rows]  # fmt: skip
    head = [
        "Topic",
        "Group",
        "Broker Name",
        "QID",
        "Broker Offset",
        "Consumer Offset",
        "Diff",
        "Lag(s)",
        "LastTime",
    ]
    _emit(False, None, head, table)
    click.echo(f"\nDiff Total: {total}")


async def _timed_sends(
    admin: Any, topic: str, amount: int, size: int, broker: str | None
) -> list[dict[str, Any]]:
    """``amount`` sends of ``size`` bytes (to ``broker`` only, when given); per send its queue,
    outcome and round trip (ms)."""
    from rocketpy.client.producer import Producer

    keys = {"access_key": admin.settings.access_key, "secret_key": admin.settings.secret_key}
    producer = Producer(f"PID_CHECK_RT_{int(time.time() * 1000)}", admin.namesrv_addr, **keys)
    await producer.start()
    out = []
    try:
        for _ in range(amount):
            t0 = time.perf_counter()
            mq: MessageQueue | None = None
            try:
                if broker:
                    r = await producer.send(Message(topic, b"x" * size), selector=_only(broker), arg=None)
                else:
                    r = await producer.send(Message(topic, b"x" * size))
                mq, result = r.message_queue, r.status.name
            except RocketpyError as e:
                result = f"failed: {e}"
            out.append({"mq": mq, "result": result, "rtMs": round((time.perf_counter() - t0) * 1000, 3)})
    finally:
        await producer.shutdown()
    return out


def _only(broker: str) -> Any:
    def select(mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        mine = [mq for mq in mqs if mq.broker_name == broker]
        if not mine:
            raise RocketpyError(f"broker {broker!r} has no writable queue of the topic")
        return mine[0]

    return select


@click.option("-t", "--topic", required=True)
@click.option("-a", "--amount", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option("-s", "--size", type=click.IntRange(1, 4 * 1024 * 1024), default=128, show_default=True)
@_admin_command("checkMsgSendRT")
async def check_msg_send_rt(admin: Any, as_json: bool, topic: str, amount: int, size: int) -> None:
    """Send messages to the topic and print each send's round trip and the average."""
    sends = await _timed_sends(admin, topic, amount, size, None)
    avg = sum(s["rtMs"] for s in sends) / len(sends)
    if as_json:
        _emit(True, {"sends": sends, "avgRtMs": avg})
        return
    rows = [[s["mq"].broker_name if s["mq"] else "-", s["mq"].queue_id if s["mq"] else "-", s["result"],
             f"{s['rtMs']:.2f}"] for s in sends]  # fmt: skip
    _emit(False, None, ["Broker Name", "QID", "Send Result", "RT(ms)"], rows)
    click.echo(f"Avg RT: {avg:.2f}")


@click.option("-b", "--brokerName", "broker_name", required=True)
@click.option(
    "-s", "--messageSize", "size", type=click.IntRange(1, 4 * 1024 * 1024), default=128, show_default=True
)
@click.option("-c", "--count", "amount", type=click.IntRange(1, 10_000), default=50, show_default=True)
@_admin_command("sendMsgStatus")
async def send_msg_status(admin: Any, as_json: bool, broker_name: str, size: int, amount: int) -> None:
    """Send messages to one broker (its own topic, named after it, as RocketMQ's) and print each result."""
    sends = await _timed_sends(admin, broker_name, amount, size, broker_name)
    if as_json:
        _emit(True, {"sends": sends})
        return
    for s in sends:
        click.echo(f"rt={s['rtMs']:.2f}ms, SendResult={s['result']}")


@click.option("-c", "--cluster", help="Only this cluster (default: every cluster).")
@click.option("-a", "--amount", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option("-s", "--size", type=click.IntRange(1, 4 * 1024 * 1024), default=128, show_default=True)
@_admin_command("clusterRT")
async def cluster_rt(admin: Any, as_json: bool, cluster: str | None, amount: int, size: int) -> None:
    """Send messages to every broker (its own topic) and print each broker's mean round trip."""
    info = await admin.cluster_info()
    clusters = {cluster: info.cluster_addr_table.get(cluster, [])} if cluster else info.cluster_addr_table
    rows = []
    for name_of_cluster, names in sorted(clusters.items()):
        for name in sorted(names):
            sends = await _timed_sends(admin, name, amount, size, name)
            ok = [s for s in sends if s["result"] == "SEND_OK"]
            rt = sum(s["rtMs"] for s in ok) / len(ok) if ok else None
            rows.append({"cluster": name_of_cluster, "brokerName": name, "rtMs": rt,
                         "successCount": len(ok), "failCount": len(sends) - len(ok)})  # fmt: skip
    if as_json:
        _emit(True, {"brokers": rows})
        return
    table = [[r["cluster"], r["brokerName"], f"{r['rtMs']:.2f}" if r["rtMs"] is not None else "-",
              r["successCount"], r["failCount"]] for r in rows]  # fmt: skip
    _emit(False, None, ["Cluster Name", "Broker Name", "RT(ms)", "successCount", "failCount"], table)


# ---- exports -------------------------------------------------------------------------------------


async def _masters(admin: Any, cluster: str) -> list[tuple[str, str]]:
    return sorted(await admin.cluster_masters(cluster))


@click.option("-c", "--clusterName", "cluster", required=True)
@click.option("-f", "--filePath", "file_path", default="/tmp/rocketmq/export", show_default=True)
@click.option("-t", "--topic", "only_topics", is_flag=True, help="Only the topics.")
@click.option("-g", "--subscriptionGroup", "only_groups", is_flag=True, help="Only the subscription groups.")
@_admin_command("exportMetadata")
async def export_metadata(
    admin: Any, as_json: bool, cluster: str, file_path: str, only_topics: bool, only_groups: bool
) -> None:
    """Write the cluster's topic and subscription-group configs (merged over its masters) to
    FILEPATH/metadata.json (RocketMQ's file and layout)."""
    topics: dict[str, Any] = {}
    groups: dict[str, Any] = {}
    for _name, addr in await _masters(admin, cluster):
        if not only_groups:
            body = unpack_body(await admin._invoke(addr, RequestCode.GET_ALL_TOPIC_CONFIG)) or {}
            topics.update(body.get("topicConfigTable") or {})
        if not only_topics:
            body = unpack_body(await admin._invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)) or {}
            groups.update(body.get("subscriptionGroupTable") or {})
    doc: dict[str, Any] = {"exportTime": int(time.time() * 1000)}
    if not only_groups:
        doc["topicConfigTable"] = dict(sorted(topics.items()))
    if not only_topics:
        doc["subscriptionGroupTable"] = dict(sorted(groups.items()))
    _write(as_json, Path(file_path) / "metadata.json", doc)


@click.option("-c", "--clusterName", "cluster", required=True)
@click.option("-f", "--filePath", "file_path", default="/tmp/rocketmq/export", show_default=True)
@_admin_command("exportConfigs")
async def export_configs(admin: Any, as_json: bool, cluster: str, file_path: str) -> None:
    """Write each master's effective configuration and the NameServer addresses to
    FILEPATH/configs.json (RocketMQ's file and layout)."""
    brokers = {name: await admin.get_broker_config(addr) for name, addr in await _masters(admin, cluster)}
    doc = {"namesrvConfig": {"namesrvAddr": admin.namesrv_addr}, "brokerConfigs": brokers,
           "clusterScale": {"masterBrokerSize": len(brokers)}}  # fmt: skip
    _write(as_json, Path(file_path) / "configs.json", doc)


@click.option("-c", "--clusterName", "cluster", required=True)
@click.option("-f", "--filePath", "file_path", default="/tmp/rocketmq/export", show_default=True)
@_admin_command("exportMetrics")
async def export_metrics(admin: Any, as_json: bool, cluster: str, file_path: str) -> None:
    """Write each master's runtime figures (disk, TPS, day counts, sizes, client versions) and the
    cluster's totals to FILEPATH/metrics.json (RocketMQ's file and layout)."""
    from rocketpy.client.admin_stats import export_metrics as collect

    _write(as_json, Path(file_path) / "metrics.json", await collect(admin, cluster))


def _write(as_json: bool, path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True, default=_json_default))
    if as_json:
        _emit(True, {"file": str(path), **doc})
    else:
        click.echo(f"export {path} success")
