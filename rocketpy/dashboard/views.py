"""Cluster, topic and consumer-group pages, and the JSON the live charts poll.

Every figure comes from ``rocketpy.Admin`` (``admin_of``); the pages only arrange it.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from typing import Any

from aiohttp import web

from rocketpy.dashboard import forms
from rocketpy.dashboard.app import admin_of, is_no_permission, path_quote, redirect, render, session_of
from rocketpy.errors import RocketpyError
from rocketpy.route import MASTER_ID
from rocketpy.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, is_system_topic

#: Topic kinds of the topic list filter.
TOPIC_KINDS = ("normal", "retry", "dlq", "system", "all")
#: Rows shown at most in the topic and group lists.
MAX_ROWS = 2000


def fmt_ms(ms: Any) -> str:
    """A millisecond timestamp as local ``YYYY-MM-DD HH:MM:SS.mmm`` ('-' for 0 / none)."""
    if not ms:
        return "-"
    return _dt.datetime.fromtimestamp(int(ms) / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _first_float(text: str | None) -> float:
    """The first number of a runtime figure such as ``putTps`` (``"12.50 11.20"``: 10 s and 60 s)."""
    try:
        return float((text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


# ---- cluster -----------------------------------------------------------------------------------------


async def _brokers(admin: Any) -> list[dict[str, Any]]:
    """Every broker member with its role and runtime figures (``error`` when it did not answer)."""
    info = await admin.cluster_info()
    rows = []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                rows.append({"cluster": cluster, "name": name, "id": bid, "addr": addr})

    async def runtime(row: dict[str, Any]) -> None:
        try:
            rt = await admin.broker_runtime_info(row["addr"])
        except RocketpyError as e:
            if is_no_permission(e):
                raise  # the account's problem, not the broker's: the page says so
            row.update(error=str(e), put_tps=0.0, get_tps=0.0)
            return
        row.update(
            error=None,
            role="MASTER" if row["id"] == MASTER_ID else "SLAVE",
            put_tps=_first_float(rt.get("putTps")),
            get_tps=_first_float(rt.get("getTransferedTps")),
            disk_ratio=float(rt.get("commitLogDiskRatio") or 0.0),
            disk_full=rt.get("diskFullRemark") or "",
            put_total=rt.get("msgPutTotalTodayNow", "-"),
            get_total=rt.get("msgGetTotalTodayNow", "-"),
            version=rt.get("brokerVersionDesc", "-"),
            uptime=rt.get("runtime", "-"),
            topics=rt.get("topicCount", "-"),
        )

    await asyncio.gather(*(runtime(r) for r in rows))
    for r in rows:
        r.setdefault("role", "MASTER" if r["id"] == MASTER_ID else "SLAVE")
    return rows


async def cluster_page(request: web.Request) -> web.StreamResponse:
    brokers = await _brokers(await admin_of(request))
    return render(request, "cluster.html", brokers=brokers)


async def cluster_api(request: web.Request) -> web.StreamResponse:
    """Put/get TPS of every broker member now (the cluster page's chart polls this)."""
    brokers = await _brokers(await admin_of(request))
    series: dict[str, float] = {}
    for b in brokers:
        series[f"{b['name']}/{b['id']} put"] = b["put_tps"]
        series[f"{b['name']}/{b['id']} get"] = b["get_tps"]
    return web.json_response({"time": int(time.time() * 1000), "series": series})


# ---- topics ------------------------------------------------------------------------------------------


def topic_kind(topic: str, system_names: set[str]) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "dlq"
    if topic in system_names or is_system_topic(topic):
        return "system"
    return "normal"


async def topics_page(request: web.Request) -> web.StreamResponse:
    admin = await admin_of(request)
    kind = request.query.get("kind", "normal")
    if kind not in TOPIC_KINDS:
        raise forms.FormError(f"kind must be one of {', '.join(TOPIC_KINDS)}, got {kind!r}")
    needle = request.query.get("q", "").strip()
    info = await admin.cluster_info()
    # a broker also makes topics named after its cluster and itself
    system = set(info.cluster_addr_table) | set(info.broker_addr_table)
    all_topics = await admin.topic_list()
    rows = [
        t
        for t in all_topics
        if (kind == "all" or topic_kind(t, system) == kind) and needle.lower() in t.lower()
    ]
    return render(
        request,
        "topics.html",
        topics=rows[:MAX_ROWS],
        more=max(0, len(rows) - MAX_ROWS),
        kind=kind,
        kinds=TOPIC_KINDS,
        q=needle,
        clusters=sorted(info.cluster_addr_table),
        perms=forms.PERMS,
    )


async def topic_create(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    f = {k: v for k, v in form.items() if isinstance(v, str)}
    topic = forms.name(f, "topic", "Topic name")
    cluster = forms.name(f, "cluster", "Cluster")
    read = forms.integer(f, "read_queues", "Read queues", 1, 1024)
    write = forms.integer(f, "write_queues", "Write queues", 1, 1024)
    perm = forms.perm(f)
    admin = await admin_of(request)
    addrs = await admin.create_topic(
        topic, cluster, read_queue_nums=read, write_queue_nums=write, perm=perm, order=f.get("order") == "on"
    )
    session_of(request).flash("ok", f"Topic {topic} created on {', '.join(addrs)}.")
    raise redirect(f"/topics/{path_quote(topic)}")


def _topic_from_path(request: web.Request) -> str:
    return forms.name({"t": request.match_info["topic"]}, "t", "Topic name")


async def topic_page(request: web.Request) -> web.StreamResponse:
    topic = _topic_from_path(request)
    admin = await admin_of(request)
    route = await admin.topic_route(topic)
    status = await admin.topic_status(topic)
    addrs = {bd.broker_name: bd for bd in route.broker_datas}
    brokers = [
        {
            "name": qd.broker_name,
            "cluster": addrs[qd.broker_name].cluster if qd.broker_name in addrs else "-",
            "addr": addrs[qd.broker_name].master_addr() if qd.broker_name in addrs else None,
            "read": qd.read_queue_nums,
            "write": qd.write_queue_nums,
            "perm": qd.perm,
        }
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
    ]
    return render(
        request,
        "topic.html",
        topic=topic,
        brokers=brokers,
        queues=status,
        total=sum(r["max_offset"] - r["min_offset"] for r in status),
        perms=forms.PERMS,
    )


async def topic_update(request: web.Request) -> web.StreamResponse:
    topic = _topic_from_path(request)
    form = await request.post()
    f = {k: v for k, v in form.items() if isinstance(v, str)}
    read = forms.integer(f, "read_queues", "Read queues", 1, 1024)
    write = forms.integer(f, "write_queues", "Write queues", 1, 1024)
    perm = forms.perm(f)
    admin = await admin_of(request)
    route = await admin.topic_route(topic)
    done = []
    for bd in route.broker_datas:
        addr = bd.master_addr()
        if addr:
            done += await admin.create_topic(
                topic, broker_addr=addr, read_queue_nums=read, write_queue_nums=write, perm=perm
            )
    session_of(request).flash(
        "ok", f"Topic {topic} updated on {', '.join(done)}: {read} read / {write} write queues, perm {perm}."
    )
    raise redirect(f"/topics/{path_quote(topic)}")


async def topic_delete_confirm(request: web.Request) -> web.StreamResponse:
    topic = _topic_from_path(request)
    return render(request, "topic_delete.html", topic=topic)


async def topic_delete(request: web.Request) -> web.StreamResponse:
    topic = _topic_from_path(request)
    form = await request.post()
    forms.confirm({k: v for k, v in form.items() if isinstance(v, str)}, "confirm", topic, "delete the topic")
    await (await admin_of(request)).delete_topic(topic)
    session_of(request).flash("ok", f"Topic {topic} deleted.")
    raise redirect("/topics")


# ---- consumer groups -------------------------------------------------------------------------------


async def groups_page(request: web.Request) -> web.StreamResponse:
    groups = await (await admin_of(request)).consumer_groups()
    needle = request.query.get("q", "").strip()
    rows = [(g, cfg) for g, cfg in groups.items() if needle.lower() in g.lower()]
    return render(request, "groups.html", groups=rows[:MAX_ROWS], more=max(0, len(rows) - MAX_ROWS), q=needle)


def _group_from_path(request: web.Request) -> str:
    return forms.name({"g": request.match_info["group"]}, "g", "Group name")


async def _progress(admin: Any, group: str) -> tuple[list[dict[str, Any]], str | None]:
    """The group's per-queue progress, or an explanation when the brokers have none."""
    try:
        return await admin.consumer_progress(group), None
    except RocketpyError as e:
        if is_no_permission(e):
            raise
        return [], str(e)


async def group_page(request: web.Request) -> web.StreamResponse:
    group = _group_from_path(request)
    admin = await admin_of(request)
    members = await admin.consumer_connections(group)
    progress, progress_error = await _progress(admin, group)
    topics = sorted(
        {r["mq"].topic for r in progress if not r["mq"].topic.startswith(RETRY_GROUP_TOPIC_PREFIX)}
    )
    now_local = _dt.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    return render(
        request,
        "group.html",
        group=group,
        members=members,
        progress=progress,
        progress_error=progress_error,
        total=sum(r["diff"] for r in progress),
        max_lag_seconds=max((r["lag_seconds"] for r in progress), default=0.0),
        inflight=_inflight_rows(progress),
        topics=topics,
        now_local=now_local,
    )


def _inflight_rows(progress: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The queues a POP group pops: in flight (popped, not acked) and the oldest's age in seconds."""
    now_ms = int(time.time() * 1000)
    rows = []
    for r in progress:
        if "inflight" not in r:
            continue
        oldest = r.get("oldest_inflight_timestamp", 0)
        age = f"{(now_ms - oldest) / 1000:.1f}" if oldest else "-"
        rows.append({**r, "oldest_age": age})
    return rows


async def group_lag_api(request: web.Request) -> web.StreamResponse:
    """The group's total lag and its lag per topic now (the group page's charts poll this); with
    ``?unit=seconds`` the age of the oldest unconsumed message, overall and per topic."""
    group = _group_from_path(request)
    progress, _ = await _progress(await admin_of(request), group)
    if request.query.get("unit") == "seconds":
        ages: dict[str, float] = {"oldest": max((r["lag_seconds"] for r in progress), default=0.0)}
        for r in progress:
            ages[r["mq"].topic] = max(ages.get(r["mq"].topic, 0.0), r["lag_seconds"])
        return web.json_response({"time": int(time.time() * 1000), "series": ages})
    series: dict[str, float] = {"total": float(sum(r["diff"] for r in progress))}
    for r in progress:
        series[r["mq"].topic] = series.get(r["mq"].topic, 0.0) + r["diff"]
    if any("inflight" in r for r in progress):  # a POP group: what is popped and not acked
        series["in flight"] = float(sum(r.get("inflight", 0) for r in progress))
    return web.json_response({"time": int(time.time() * 1000), "series": series})


async def group_reset(request: web.Request) -> web.StreamResponse:
    group = _group_from_path(request)
    form = await request.post()
    f = {k: v for k, v in form.items() if isinstance(v, str)}
    topic = forms.name(f, "topic", "Topic")
    ts = forms.timestamp_ms(f, "time", "Time")
    result = await (await admin_of(request)).reset_offset(group, topic, ts)
    moved = ", ".join(f"{mq.broker_name}/{mq.queue_id} → {off}" for mq, off in result["offsets"])
    told = "; ".join(f"{c['clientId']}: {c['result']}" for c in result["clients"]) or "no consumer online"
    session_of(request).flash(
        "ok",
        f"Offsets of {group} on {topic} reset to {fmt_ms(ts)}: {moved or 'no queue'}. Consumers: {told}.",
    )
    raise redirect(f"/groups/{path_quote(group)}")


async def home(request: web.Request) -> web.StreamResponse:
    raise redirect("/cluster")


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/", home)
    r.add_get("/cluster", cluster_page)
    r.add_get("/api/cluster", cluster_api)
    r.add_get("/topics", topics_page)
    r.add_post("/topics", topic_create)
    r.add_get("/topics/{topic}", topic_page)
    r.add_post("/topics/{topic}/update", topic_update)
    r.add_get("/topics/{topic}/delete", topic_delete_confirm)
    r.add_post("/topics/{topic}/delete", topic_delete)
    r.add_get("/groups", groups_page)
    r.add_get("/groups/{group}", group_page)
    r.add_get("/api/groups/{group}/lag", group_lag_api)
    r.add_post("/groups/{group}/reset", group_reset)
