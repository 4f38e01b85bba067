"""``mqadmin queryMsgTraceById``: a message's trace timeline (RocketMQ's command name and options).

Registered on the ``mqadmin`` group of ``rocketpy.admin_cli`` (which imports this module); output
follows the same rules (a plain table, or one JSON document with ``--json``). The timeline itself
is gathered by ``rocketpy.client.admin_trace``.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import click

from rocketpy.admin_cli import _admin_command, _emit, parse_timestamp

TIMELINE_HEADERS = ["Time", "Event", "Group", "ClientHost", "CostTime(ms)", "Status", "Retries", "Detail"]


def format_ms(ms: int | None) -> str:
    """Local time with milliseconds (``-`` when the record carries none)."""
    if not ms:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def timeline_rows(trace: Any) -> list[list[Any]]:
    """The table rows of a ``MessageTrace`` (also used by tests as the golden form)."""
    return [
        [format_ms(e.time_ms), e.event, e.group, e.host, e.cost_ms, e.status, e.retries, e.detail or None]
        for e in trace.events
    ]


@click.option("-i", "--msgId", "msg_id", required=True, help="The message id (SendResult.msg_id, UNIQ_KEY).")
@click.option(
    "-t",
    "--traceTopic",
    "trace_topic",
    default=None,
    help="Trace topic (default: RMQ_SYS_TRACE_TOPIC and every rmq_sys_TRACE_DATA_* topic).",
)
@click.option(
    "-b",
    "--beginTimestamp",
    "begin",
    default="0",
    show_default=True,
    help="Trace records stored from: ms since epoch, 'now' or yyyy-MM-dd#HH:mm:ss:SSS.",
)
@click.option(
    "-e", "--endTimestamp", "end", default=None, help="...until (default: now); any window, not a fixed hour."
)
@_admin_command("queryMsgTraceById")
async def query_msg_trace_by_id(
    admin: Any, as_json: bool, msg_id: str, trace_topic: str | None, begin: str, end: str | None
) -> None:
    """Show a message's trace: sent, stored, delivered, consumed (result, time, retries), dead-lettered."""
    trace = await admin.query_msg_trace(
        msg_id,
        trace_topic=trace_topic,
        begin_ms=parse_timestamp(begin),
        end_ms=parse_timestamp(end) if end else None,
    )
    if as_json:
        _emit(True, trace.to_json())
        return
    if not trace.events:
        click.echo(
            f"no trace of message {msg_id}: was it sent by a traced client (enable_trace=True), "
            "within the time window, to this trace topic?"
        )
        return
    _emit(False, None, TIMELINE_HEADERS, timeline_rows(trace))
    if trace.groups:
        click.echo("")
        _emit(False, None, ["ConsumerGroup", "Progress"], sorted(trace.groups.items()))
