"""``Admin``'s broker-wide statistics behind mqadmin's statsAll: VIEW_BROKER_STATS_DATA (a named
stats item's minute, hour and day figures) and GET_BROKER_CONSUME_STATS (every group's progress on
one broker), and statsAll's per topic and group rows assembled from them as RocketMQ's
``StatsAllSubCommand`` does; exportMetrics' per-broker report; and the store housekeeping calls
CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC and DELETE_EXPIRED_COMMITLOG.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketpy.client.answers import unpack_body
from rocketpy.errors import MQBrokerError, MQClientError, RocketpyError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.admin import GetConsumeStatsInBrokerHeader, ViewBrokerStatsDataRequestHeader
from rocketpy.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC, TRANS_HALF_TOPIC

if TYPE_CHECKING:
    from rocketpy.client.admin import Admin

MASTER_ID = 0


async def view_broker_stats_data(
    admin: Admin, addr: str, stats_name: str, stats_key: str
) -> dict[str, Any] | None:
    """The item's ``{"statsMinute", "statsHour", "statsDay"}`` (each ``{"sum", "tps", "avgpt"}``) on
    the broker at ``addr``; None when the broker has no such item (nothing counted yet)."""
    ext = ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key).to_ext()
    try:
        return await admin.call_map(addr, RequestCode.VIEW_BROKER_STATS_DATA, ext)
    except MQBrokerError as e:
        if e.code == ResponseCode.SYSTEM_ERROR and "not exist" in (e.remark or ""):
            return None
        raise


async def broker_consume_stats(admin: Admin, addr: str, is_order: bool = False) -> dict[str, Any]:
    """GET_BROKER_CONSUME_STATS of the broker at ``addr``: ``consumeStatsList`` (``[{group:
    [ConsumeStats]}]``), ``brokerAddr``, ``totalDiff``."""
    ext = GetConsumeStatsInBrokerHeader(is_order=is_order).to_ext()
    return await admin.call_map(addr, RequestCode.GET_BROKER_CONSUME_STATS, ext)


def day_sum(data: dict[str, Any] | None) -> int:
    """The day's count of an item: its day sum, else its hour's, else its minute's (RocketMQ's
    ``compute24HourSum``)."""
    if not data:
        return 0
    for ring in ("statsDay", "statsHour", "statsMinute"):
        total = int((data.get(ring) or {}).get("sum", 0))
        if total:
            return total
    return 0


def minute_tps(data: dict[str, Any] | None) -> float:
    """The item's TPS over the last minute (0 when it has none)."""
    return float(((data or {}).get("statsMinute") or {}).get("tps", 0.0))


async def stats_all(
    admin: Admin, topic: str | None = None, active_only: bool = False
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """statsAll's rows: per topic (retry and DLQ topics left out) and consumer group, its
    accumulation, in and out TPS (last minute) and in and out messages of the day, summed over the
    topic's masters. A topic nobody consumes has one row with ``group`` None. ``active_only``:
    only rows that moved messages today. Also the topics left out because a call failed (topic ->
    why; RocketMQ's tool leaves them out silently)."""
    topics = [
        t
        for t in await admin.topic_list()
        if not t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
    ]
    if topic:
        topics = [t for t in topics if t == topic]
    diffs: dict[str, dict[tuple[str, str], int]] = {}  # master addr -> (topic, group) -> diff
    rows: list[dict[str, Any]] = []
    failed: dict[str, str] = {}
    for name in topics:
        try:
            rows += await _topic_rows(admin, name, diffs, active_only)
        except RocketpyError as e:
            failed[name] = str(e)
    return rows, failed


async def _topic_rows(
    admin: Admin, name: str, diffs: dict[str, dict[tuple[str, str], int]], active_only: bool
) -> list[dict[str, Any]]:
    route = await admin.topic_route(name)
    masters = sorted({a for bd in route.broker_datas if (a := bd.broker_addrs.get(MASTER_ID))})
    in_tps, in_day = 0.0, 0
    accumulation: dict[str, int] = {}
    for addr in masters:
        data = await view_broker_stats_data(admin, addr, "TOPIC_PUT_NUMS", name)
        in_tps += minute_tps(data)
        in_day += day_sum(data)
        if addr not in diffs:
            diffs[addr] = _diffs(await broker_consume_stats(admin, addr))
        for (t, group), diff in diffs[addr].items():
            if t == name:
                accumulation[group] = accumulation.get(group, 0) + diff
    if not accumulation:
        return [_row(name, None, 0, in_tps, None, in_day, None)] if not active_only or in_day > 0 else []
    rows = []
    for group in sorted(accumulation):
        out_tps, out_day = 0.0, 0
        for addr in masters:
            data = await view_broker_stats_data(admin, addr, "GROUP_GET_NUMS", f"{name}@{group}")
            out_tps += minute_tps(data)
            out_day += day_sum(data)
        if not active_only or in_day > 0 or out_day > 0:
            rows.append(_row(name, group, max(accumulation[group], 0), in_tps, out_tps, in_day, out_day))
    return rows


def _row(
    topic: str,
    group: str | None,
    accumulation: int,
    in_tps: float,
    out_tps: float | None,
    in_day: int,
    out_day: int | None,
) -> dict[str, Any]:
    return {
        "topic": topic,
        "group": group,
        "accumulation": accumulation,
        "inTps": in_tps,
        "outTps": out_tps,
        "inMsg24Hour": in_day,
        "outMsg24Hour": out_day,
    }


def _diffs(body: dict[str, Any]) -> dict[tuple[str, str], int]:
    """(topic, group) -> broker offset minus consumer offset, summed over the queues."""
    out: dict[tuple[str, str], int] = {}
    for entry in body.get("consumeStatsList") or ():
        for group, stats in entry.items():
            for cs in stats:
                for row in cs.get("offsetTable") or ():
                    key = (str(row["mq"]["topic"]), str(group))
                    diff = int(row.get("brokerOffset", 0)) - max(int(row.get("consumerOffset", 0)), 0)
                    out[key] = out.get(key, 0) + diff
    return out


async def clean_targets(admin: Admin, cluster: str | None, broker_addr: str | None) -> list[str]:
    """Where cleanExpiredCQ and cleanUnusedTopic go: ``broker_addr``, else every broker (masters and
    slaves) of ``cluster``, else of every cluster (RocketMQ's admin does the same)."""
    if broker_addr:
        return [broker_addr]
    info = await admin.cluster_info()
    names = info.cluster_addr_table.get(cluster, []) if cluster else list(info.broker_addr_table)
    if cluster and not names:
        raise MQClientError(f"cluster {cluster!r} has no broker (mqadmin clusterList lists them)")
    return sorted(
        {a for n in names if (bd := info.broker_addr_table.get(n)) for a in bd.broker_addrs.values()}
    )


async def clean_expired_cq(admin: Admin, addr: str) -> int:
    """CLEAN_EXPIRED_CONSUMEQUEUE on the broker at ``addr``: the consume-queue files it deleted."""
    return int(
        (await admin.call_map(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, None)).get("filesDeleted", 0)
    )


async def clean_unused_topic(admin: Admin, addr: str) -> list[str]:
    """CLEAN_UNUSED_TOPIC on the broker at ``addr``: the topics whose queues it deleted."""
    return [
        str(t) for t in (await admin.call_map(addr, RequestCode.CLEAN_UNUSED_TOPIC, None)).get("topics", [])
    ]


async def delete_expired_commitlog(admin: Admin, addr: str) -> int:
    """DELETE_EXPIRED_COMMITLOG on the broker at ``addr``: the store files it deleted now (commitlog
    files past ``fileReservedTime``, and queue and index files only they needed)."""
    return int(
        (await admin.call_map(addr, RequestCode.DELETE_EXPIRED_COMMITLOG, None)).get("filesDeleted", 0)
    )


async def export_metrics(admin: Admin, cluster: str) -> dict[str, Any]:
    """mqadmin exportMetrics' document (RocketMQ's ``ExportMetricsCommand``): per master of
    ``cluster`` its runtime environment, quotas (disk ratios; normal, transaction and schedule
    TPS over the last minute and counts over the day; average message size; topics and groups)
    and the versions of its clients; and the cluster's totals.

    Raises:
        MQClientError: the cluster is unknown (the message lists the known ones).
    """
    report: dict[str, Any] = {}
    total_tps = dict.fromkeys(
        ("totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps"), 0.0
    )
    total_day = dict.fromkeys(
        ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum"), 0
    )
    versions: dict[str, set[str]] = {}  # group -> its clients' versions (asked once for all brokers)
    for name, addr in sorted(await admin.cluster_masters(cluster)):
        kv = await admin.broker_runtime_info(addr)
        config = await admin.get_broker_config(addr)
        groups = unpack_body(await admin._invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)) or {}
        group_names = sorted((groups.get("subscriptionGroupTable") or {}).keys())
        topics = unpack_body(await admin._invoke(addr, RequestCode.GET_ALL_TOPIC_CONFIG)) or {}
        trans = await view_broker_stats_data(admin, addr, "TOPIC_PUT_NUMS", TRANS_HALF_TOPIC)
        schedule = await view_broker_stats_data(admin, addr, "TOPIC_PUT_NUMS", SCHEDULE_TOPIC)
        puts = await view_broker_stats_data(admin, addr, "BROKER_PUT_NUMS", cluster)
        gets = await view_broker_stats_data(admin, addr, "BROKER_GET_NUMS", cluster)
        tps = {
            "normalInTps": _first_float(kv.get("putTps")),
            "normalOutTps": _first_float(kv.get("getTransferedTps")),
            "transInTps": minute_tps(trans),
            "scheduleInTps": minute_tps(schedule),
        }
        day = {
            "normalOneDayInNum": day_sum(puts),
            "normalOneDayOutNum": day_sum(gets),
            "transOneDayInNum": day_sum(trans),
            "scheduleOneDayInNum": day_sum(schedule),
        }
        for key, value in tps.items():
            total_tps["total" + key[0].upper() + key[1:]] += value
        for key, count in day.items():
            total_day[key] += count
        report[name] = {
            "runtimeEnv": {
                "cpuNum": config.get("clientCallbackExecutorThreads") or kv.get("availableProcessors"),
                "totalMemKBytes": kv.get("totalMemKBytes"),
            },
            "runtimeQuota": {
                "diskRatio": {
                    "commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                    "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio"),
                },
                "tps": tps,
                "oneDayNum": day,
                "messageAverageSize": kv.get("putMessageAverageSize"),
                "topicSize": len(topics.get("topicConfigTable") or {}),
                "groupSize": len(group_names),
            },
            "runtimeVersion": {
                "rocketmqVersion": kv.get("brokerVersionDesc"),
                "clientInfo": sorted(await _client_versions(admin, group_names, versions)),
            },
        }
    return {"evaluateReport": report, "totalData": {"totalTps": total_tps, "totalOneDayNum": total_day}}


def _first_float(text: str | None) -> float:
    """The first figure of a runtime TPS entry (``"12.50 11.20"``: the last 10 s, then the minute)."""
    try:
        return float((text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


async def _client_versions(admin: Admin, groups: list[str], known: dict[str, set[str]]) -> set[str]:
    """``LANGUAGE%version`` of every live consumer of ``groups`` (RocketMQ's clientInfo).
    ``consumer_connections`` asks every broker, so each group's answer is kept in ``known`` for
    the next broker's groups."""
    out: set[str] = set()
    for group in groups:
        if group not in known:
            try:
                conns = await admin.consumer_connections(group)
            except RocketpyError:  # a group no broker can answer for: left out, as RocketMQ does
                conns = []
            known[group] = {f"{c.get('language')}%{c.get('versionDesc') or c.get('version')}" for c in conns}
        out |= known[group]
    return out
