"""A message's trace timeline (``Admin.query_msg_trace``, ``mqadmin queryMsgTraceById``, the dashboard).

Owns how a timeline is gathered and put in order. Everything comes from what the brokers store,
read over any time window (``begin_ms``..``end_ms``, default: all of it):

1. the trace records naming the message: QUERY_MESSAGE by its id on the trace topic (given, or
   ``RMQ_SYS_TRACE_TOPIC`` and every ``rmq_sys_TRACE_DATA_*`` topic), on every broker that holds it;
   the trace message's born host is the client that wrote the records (RocketMQ's ``TraceView``);
2. the stored message itself (its topic comes from a Pub, EndTransaction or Deliver record): store
   time, broker, queue and offset;
3. its copies in each consuming group's ``%RETRY%`` and ``%DLQ%`` topics (the index holds its id);
4. each group's committed offset on the message's queue (GET_ALL_CONSUMER_OFFSET of its broker):
   consumed, or not yet.

A record from an older client with missing fields is shown with what it has (``-``). Events are
sorted by time; records without a time keep their place after those with one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rocketpy.errors import MQBrokerError, MQClientError, RemotingConnectError, RemotingTimeoutError
from rocketpy.message import MessageExt
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.query import QueryMessageRequestHeader
from rocketpy.record import decode_records
from rocketpy.remoting.command import RemotingCommand
from rocketpy.topic import DLQ_GROUP_TOPIC_PREFIX, TRACE_TOPIC, dlq_topic, retry_topic
from rocketpy.trace import CONTEXT_NAMES, MSG_TYPE_NAMES, TRACE_TOPIC_PREFIX, TraceRecord, decode_body

if TYPE_CHECKING:
    from rocketpy.client.admin import Admin

#: Messages one QUERY_MESSAGE returns at most (the broker's own bound).
QUERY_MAX_NUM = 64
_QUERY_ERRORS = (MQBrokerError, MQClientError, RemotingConnectError, RemotingTimeoutError)


@dataclass
class TraceEvent:
    """One step of a message's timeline.

    Attributes:
        time_ms: when it happened (None: the record carries no time).
        event: ``sent``, ``stored``, ``transaction``, ``delivered``, ``consumed``, ``retry`` or
            ``dead-letter``.
        group: the producer or consumer group.
        host: the client (or broker) address.
        cost_ms: how long it took (send, or consume per message).
        status: the outcome (``SEND_OK``, ``SUCCESS``, ``FAILED``, a transaction state, ...).
        retries: the consume attempt's reconsume times.
        detail: what else the record says.
    """

    time_ms: int | None
    event: str
    group: str | None = None
    host: str | None = None
    cost_ms: int | None = None
    status: str | None = None
    retries: int | None = None
    detail: str = ""


@dataclass
class MessageTrace:
    """A message's timeline, its raw trace records and each group's progress on it."""

    msg_id: str
    events: list[TraceEvent] = field(default_factory=list)
    records: list[TraceRecord] = field(default_factory=list)
    #: consumer group -> ``CONSUMED`` or ``NOT_CONSUMED_YET`` (from committed offsets)
    groups: dict[str, str] = field(default_factory=dict)
    topic: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The document ``--json`` prints and the dashboard serves."""
        return {
            "msgId": self.msg_id,
            "topic": self.topic,
            "events": [{k: v for k, v in e.__dict__.items() if v not in (None, "")} for e in self.events],
            "groups": dict(self.groups),
            "records": [r.as_dict() for r in self.records],
        }


async def _query_key(
    admin: Admin, topic: str, key: str, begin_ms: int, end_ms: int
) -> list[tuple[str, str, MessageExt]]:
    """``(broker name, broker addr, message)`` of ``topic``'s messages with ``key``, on every broker."""
    try:
        route = await admin.topic_route(topic)
    except _QUERY_ERRORS:
        return []  # no such topic (yet): nothing to find there
    ext = QueryMessageRequestHeader(
        topic=topic, key=key, max_num=QUERY_MAX_NUM, begin_timestamp=begin_ms, end_timestamp=end_ms
    ).to_ext()
    found: list[tuple[str, str, MessageExt]] = []
    for bd in route.broker_datas:
        addr = bd.master_addr() or next(iter(bd.broker_addrs.values()), None)
        if not addr:
            continue
        try:
            resp = await admin.instance.remoting.invoke(
                addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext), admin.timeout
            )
        except (RemotingConnectError, RemotingTimeoutError):
            continue
        if resp.code != ResponseCode.SUCCESS:
            continue
        for m in decode_records(resp.body):  # the index is hashed: check topic and key
            if m.topic == topic and (key in m.keys or m.unique_key == key):
                found.append((bd.broker_name, addr, m))
    return found


async def _trace_topics(admin: Admin, trace_topic: str | None) -> list[str]:
    if trace_topic:
        return [trace_topic]
    try:
        names = await admin.topic_list()
    except _QUERY_ERRORS:
        names = []
    return [TRACE_TOPIC, *sorted(t for t in names if t.startswith(TRACE_TOPIC_PREFIX))]


async def query_msg_trace(
    admin: Admin,
    msg_id: str,
    *,
    trace_topic: str | None = None,
    begin_ms: int = 0,
    end_ms: int | None = None,
) -> MessageTrace:
    """The timeline of the message whose id (UNIQ_KEY, ``SendResult.msg_id``) is ``msg_id``."""
    if not msg_id or not msg_id.strip():
        raise MQClientError("give the message id (-i MSGID: SendResult.msg_id, the UNIQ_KEY)")
    msg_id = msg_id.strip()
    end = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
    trace = MessageTrace(msg_id)
    for topic in await _trace_topics(admin, trace_topic):
        for _, _, tm in await _query_key(admin, topic, msg_id, begin_ms, end):
            host = f"{tm.born_host[0]}:{tm.born_host[1]}" if tm.born_host else None
            for r in decode_body(tm.body):
                if r.msg_id == msg_id:
                    if r.client_host is None and r.kind not in ("Deliver", "SendBack"):
                        r.client_host = host
                    trace.records.append(r)
    trace.topic = _topic_of(trace.records)
    events = [e for r in _pair_subs(trace.records) if (e := _event(r)) is not None]
    groups = sorted({r.group for r in trace.records if r.group and r.kind in _CONSUME_KINDS})
    if trace.topic is not None:
        stored = await _query_key(admin, trace.topic, msg_id, begin_ms, end)
        for name, addr, m in stored[:1]:
            events.append(_stored_event(name, m))
            trace.groups = await _group_progress(admin, addr, trace.topic, m, groups)
    for group in groups:
        for _, _, m in await _query_key(admin, retry_topic(group), msg_id, begin_ms, end):
            events.append(_copy_event("retry", group, m))
        for _, _, m in await _query_key(admin, dlq_topic(group), msg_id, begin_ms, end):
            events.append(_copy_event("dead-letter", group, m))
    trace.events = sorted(events, key=lambda e: (e.time_ms is None, e.time_ms or 0))
    return trace


_CONSUME_KINDS = ("SubBefore", "SubAfter", "Deliver", "SendBack")


def _topic_of(records: list[TraceRecord]) -> str | None:
    """The message's own topic: a Pub's or EndTransaction's, else a delivery's outside retry topics."""
    for kinds in (("Pub", "EndTransaction"), ("Deliver",)):
        for r in records:
            if r.kind in kinds and r.topic and not r.topic.startswith(("%RETRY%", DLQ_GROUP_TOPIC_PREFIX)):
                return r.topic
    return None


def _pair_subs(records: list[TraceRecord]) -> list[TraceRecord]:
    """Records with each SubAfter folded into its SubBefore (same request id), RocketMQ's pairing.

    A SubAfter without its SubBefore (an older client, or a lost record) stays on its own.
    """
    afters = {r.request_id: r for r in records if r.kind == "SubAfter" and r.request_id}
    paired = {r.request_id for r in records if r.kind == "SubBefore" and r.request_id in afters}
    out: list[TraceRecord] = []
    for r in records:
        if r.kind == "SubAfter" and r.request_id in paired:
            continue
        if r.kind == "SubBefore" and r.request_id in paired:
            a = afters[r.request_id]
            r = replace(
                r,
                kind="SubBefore+After",
                cost_ms=a.cost_ms,
                success=a.success,
                context_code=a.context_code,
                group=r.group or a.group,
            )
        out.append(r)
    return out


def _status(ok: bool | None, yes: str, no: str) -> str | None:
    return None if ok is None else yes if ok else no


def _event(r: TraceRecord) -> TraceEvent | None:
    kind = r.kind
    if kind == "Pub":
        mtype = MSG_TYPE_NAMES[r.msg_type] if r.msg_type is not None and r.msg_type < 5 else r.msg_type
        return TraceEvent(
            r.timestamp,
            "sent",
            r.group,
            r.client_host,
            r.cost_ms,
            _status(r.success, "SEND_OK", "FAILED"),
            detail=f"topic={r.topic} tags={r.tags or '-'} keys={r.keys or '-'}"
            f" storeHost={r.store_host or '-'} bodyLength={r.body_length} msgType={mtype}",
        )
    if kind == "EndTransaction":
        origin = "broker check" if r.from_transaction_check else "local transaction"
        return TraceEvent(
            r.timestamp,
            "transaction",
            r.group,
            r.client_host,
            status=r.transaction_state,
            detail=f"from {origin}; transactionId={r.transaction_id or '-'}",
        )
    if kind in ("SubBefore", "SubBefore+After", "SubAfter"):
        status = _status(r.success, "SUCCESS", "FAILED")
        if r.success is False and r.context_code is not None and r.context_code < len(CONTEXT_NAMES):
            status = CONTEXT_NAMES[r.context_code]
        if kind == "SubBefore":
            status = "NO_RESULT"  # consumption began; its end was not recorded (yet)
        return TraceEvent(
            r.timestamp,
            "consumed",
            r.group,
            r.client_host,
            r.cost_ms,
            status,
            r.retry_times,
            detail=f"requestId={r.request_id or '-'}",
        )
    if kind == "Deliver":
        return TraceEvent(
            r.timestamp,
            "delivered",
            r.group,
            r.client_host,
            retries=r.retry_times,
            detail=f"broker={r.broker_name} {r.topic}:{r.queue_id}@{r.queue_offset}",
        )
    if kind == "SendBack":
        target = r.target_topic or ""
        event = "dead-letter" if target.startswith(DLQ_GROUP_TOPIC_PREFIX) else "retry"
        return TraceEvent(
            r.timestamp,
            event,
            r.group,
            r.broker_name,
            retries=r.retry_times,
            detail=f"sent back to {target or '-'} by broker {r.broker_name}",
        )
    return None


def _stored_event(broker_name: str, m: MessageExt) -> TraceEvent:
    host = f"{m.store_host[0]}:{m.store_host[1]}"
    return TraceEvent(
        m.store_timestamp,
        "stored",
        None,
        host,
        None,
        "STORED",
        detail=f"broker={broker_name} {m.topic}:{m.queue_id}@{m.queue_offset} offsetMsgId={m.offset_msg_id}",
    )


def _copy_event(event: str, group: str, m: MessageExt) -> TraceEvent:
    return TraceEvent(
        m.store_timestamp,
        event,
        group,
        f"{m.store_host[0]}:{m.store_host[1]}",
        retries=m.reconsume_times,
        status="STORED",
        detail=f"stored in {m.topic}:{m.queue_id}@{m.queue_offset}",
    )


async def _group_progress(
    admin: Admin, addr: str, topic: str, m: MessageExt, groups: list[str]
) -> dict[str, str]:
    """Group -> CONSUMED / NOT_CONSUMED_YET for every group with an offset on the message's queue."""
    try:
        doc = await admin.call_map(addr, RequestCode.GET_ALL_CONSUMER_OFFSET, None)
    except _QUERY_ERRORS:
        return {}
    out: dict[str, str] = {}
    for key, queues in (doc.get("offsetTable") or {}).items():
        t, _, group = str(key).partition("@")
        if t != topic:
            continue
        committed = {int(q): int(o) for q, o in dict(queues).items()}.get(m.queue_id)
        if committed is not None:
            out[group] = "CONSUMED" if committed > m.queue_offset else "NOT_CONSUMED_YET"
    for group in groups:
        out.setdefault(group, "NO_OFFSET")
    return dict(sorted(out.items()))
