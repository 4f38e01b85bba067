"""Message search (by key, by id, by queue offset), a message's trace timeline, and dead-letter
browsing and resend."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from rocketpy.client.route import subscribe_queues
from rocketpy.dashboard import forms
from rocketpy.dashboard.app import admin_of, path_quote, redirect, render, session_of
from rocketpy.dashboard.preview import preview
from rocketpy.errors import MQClientError
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.topic import DLQ_GROUP_TOPIC_PREFIX, dlq_topic

#: Search modes of the message page.
MODES = ("key", "id", "offset")
#: Messages shown at most per search / per dead-letter page.
MAX_RESULTS = 64
DLQ_PAGE = 50


def message_view(m: MessageExt, broker: str = "") -> dict[str, Any]:
    """What the templates show of one stored message (strings; the template escapes them)."""
    return {
        "msg_id": m.msg_id,
        "offset_msg_id": m.offset_msg_id,
        "topic": m.topic,
        "tags": m.tags or "",
        "msg_keys": " ".join(m.keys),
        "broker": broker,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "born_host": f"{m.born_host[0]}:{m.born_host[1]}",
        "store_host": f"{m.store_host[0]}:{m.store_host[1]}",
        "born": m.born_timestamp,
        "stored": m.store_timestamp,
        "reconsume_times": m.reconsume_times,
        "properties": sorted(m.properties.items()),
        "body": preview(bytes(m.body)),
    }


async def _search(admin: Any, q: dict[str, str]) -> list[MessageExt]:
    mode = q.get("mode", "key")
    if mode == "key":
        topic = forms.name(q, "topic", "Topic")
        key = forms.text(q, "key", "Message key")
        return list(await admin.query_msg_by_key(topic, key, max_num=MAX_RESULTS))
    if mode == "id":
        msg_id = forms.text(q, "msg_id", "Message id")
        topic = forms.text(q, "topic", "Topic", required=False)
        if topic:  # the producer's id (SendResult.msg_id) is indexed as a key of its topic
            forms.name(q, "topic", "Topic")
            return list(await admin.query_msg_by_key(topic, msg_id, max_num=MAX_RESULTS))
        try:
            decode_offset_msg_id(msg_id)
        except ValueError:
            raise forms.FormError(
                f"{msg_id!r} is not an offset message id (32 hex characters, SendResult.offset_msg_id):"
                " for the producer's message id also enter its topic"
            ) from None
        return [await admin.query_msg_by_id(msg_id)]
    if mode == "offset":
        topic = forms.name(q, "topic", "Topic")
        queue_id = forms.integer(q, "queue", "Queue id", 0, 65535)
        offset = forms.integer(q, "offset", "Offset", 0, 2**63 - 1)
        broker = forms.text(q, "broker", "Broker name", required=False)
        if not broker:
            route = await admin.topic_route(topic)
            names = sorted({qd.broker_name for qd in route.queue_datas})
            if len(names) != 1:
                raise forms.FormError(f"Topic {topic} is on several brokers ({', '.join(names)}): choose one")
            broker = names[0]
        return [await admin.query_msg_by_offset(topic, broker, queue_id, offset)]
    raise forms.FormError(f"search mode must be one of {', '.join(MODES)}, got {mode!r}")


async def messages_page(request: web.Request) -> web.StreamResponse:
    q = {k: v for k, v in request.query.items()}
    results: list[dict[str, Any]] | None = None
    if any(q.get(k) for k in ("topic", "key", "msg_id", "offset")):
        try:
            found = await _search(await admin_of(request), q)
        except MQClientError as e:
            session_of(request).flash("error", str(e))
            found = []
        results = [message_view(m) for m in found]
    return render(request, "messages.html", q=q, mode=q.get("mode", "key"), results=results)


# ---- message trace ---------------------------------------------------------------------------------------


async def _trace(request: web.Request, q: dict[str, str]) -> Any:
    """The ``MessageTrace`` the trace form asks for: its message id, trace topic (all when empty)
    and time window (from the epoch to now when the times are left empty)."""
    msg_id = forms.text(q, "msg_id", "Message id")
    trace_topic = forms.name(q, "trace_topic", "Trace topic") if q.get("trace_topic", "").strip() else None
    begin = forms.timestamp_ms(q, "begin", "From") if q.get("begin", "").strip() else 0
    end = forms.timestamp_ms(q, "end", "Until") if q.get("end", "").strip() else None
    if end is not None and end < begin:
        raise forms.FormError("Until must not be before From: widen the time window")
    admin = await admin_of(request)
    return await admin.query_msg_trace(msg_id, trace_topic=trace_topic, begin_ms=begin, end_ms=end)


async def trace_page(request: web.Request) -> web.StreamResponse:
    """A message's timeline from the trace records (``mqadmin queryMsgTraceById``): sent, stored,
    delivered, consumed (result, cost, retries), retried, dead-lettered; each group's progress."""
    q = {k: v for k, v in request.query.items()}
    trace = await _trace(request, q) if q.get("msg_id", "").strip() else None
    return render(request, "trace.html", q=q, trace=trace)


async def trace_api(request: web.Request) -> web.StreamResponse:
    """The trace page's data as JSON (``mqadmin queryMsgTraceById --json``'s document)."""
    trace = await _trace(request, {k: v for k, v in request.query.items()})
    return web.json_response(trace.to_json())


# ---- dead letters ---------------------------------------------------------------------------------------


async def _dead_letters(admin: Any, group: str) -> tuple[list[dict[str, Any]], int]:
    """Up to ``DLQ_PAGE`` newest dead letters of ``group`` (over its DLQ queues), and how many it has."""
    topic = dlq_topic(group)
    route = await admin.topic_route(topic)
    status = {(r["mq"].broker_name, r["mq"].queue_id): r for r in await admin.topic_status(topic)}
    out: list[tuple[str, MessageExt]] = []
    total = 0
    for mq in subscribe_queues(topic, route):
        st = status.get((mq.broker_name, mq.queue_id))
        if st is None:
            continue
        total += st["max_offset"] - st["min_offset"]
        start = max(st["min_offset"], st["max_offset"] - DLQ_PAGE)
        while start < st["max_offset"]:
            msgs, nxt, _ = await admin.pull(MessageQueue(topic, mq.broker_name, mq.queue_id), start, 32)
            out += [(mq.broker_name, m) for m in msgs]
            if not msgs or nxt <= start:
                break
            start = nxt
    out.sort(key=lambda bm: bm[1].store_timestamp, reverse=True)
    return [message_view(m, broker) for broker, m in out[:DLQ_PAGE]], total


async def dlq_page(request: web.Request) -> web.StreamResponse:
    admin = await admin_of(request)
    groups = sorted(
        t[len(DLQ_GROUP_TOPIC_PREFIX) :]
        for t in await admin.topic_list()
        if t.startswith(DLQ_GROUP_TOPIC_PREFIX)
    )
    group = request.query.get("group", "").strip()
    letters: list[dict[str, Any]] = []
    total = 0
    if group:
        forms.name({"g": group}, "g", "Group")
        if group not in groups:
            raise forms.FormError(f"group {group!r} has no dead letters ({dlq_topic(group)} does not exist)")
        letters, total = await _dead_letters(admin, group)
    return render(request, "dlq.html", groups=groups, group=group, letters=letters, total=total)


async def dlq_resend(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    f = {k: v for k, v in form.items() if isinstance(v, str)}
    group = forms.name(f, "group", "Group")
    msg_id = forms.text(f, "msg_id", "Message id", required=False) or None
    resent = await (await admin_of(request)).resend_dlq(group, msg_id)
    what = f"message {msg_id}" if msg_id else f"{len(resent)} dead letter(s) not resent before"
    session_of(request).flash("ok", f"Resent {what} of {group} to its retry topic ({len(resent)} sent).")
    raise redirect(f"/dlq?group={path_quote(group)}")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/messages", messages_page)
    app.router.add_get("/messages/trace", trace_page)
    app.router.add_get("/api/messages/trace", trace_api)
    app.router.add_get("/dlq", dlq_page)
    app.router.add_post("/dlq/resend", dlq_resend)
