"""Message trace against a real NameServer + broker (``traceTopicEnable=true``): a traced message's
whole timeline, through ``Admin.query_msg_trace`` and ``mqadmin queryMsgTraceById`` (table and
``--json``): sent (group, host, cost), stored, delivered to each group, consumed with results and
retries, sent back to the retry topic and dead-lettered; a group that consumed it at once beside."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from rocketpy import Admin, Message, Producer
from rocketpy.client.consumer_types import ConsumeStatus
from rocketpy.errors import MQClientError
from rocketpy.topic import dlq_topic
from tests.integration.test_retry import ONE_SECOND_LEVELS, mqadmin, start_consumer
from tests.waiting import wait_until_async

TOPIC = "TracedTopic"


async def _mqadmin_table(ns: str, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rocketpy.admin_cli",
        args[0],
        "-n",
        ns,
        *args[1:],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_timeline_with_retries_and_a_dead_letter(daemons: Any) -> None:
    ns = daemons.namesrv().addr
    daemons.broker(ns, messageDelayLevel=ONE_SECOND_LEVELS, traceTopicEnable=True)
    failing: list[int] = []

    def always_fails(msgs: list[Any], ctx: Any) -> Any:
        failing.append(msgs[0].reconsume_times)
        return ConsumeStatus.RECONSUME_LATER

    ok_group: list[str] = []
    bad = await start_consumer(
        ns, "g_trace_bad", TOPIC, always_fails, enable_trace=True, max_reconsume_times=2
    )
    good = await start_consumer(
        ns,
        "g_trace_ok",
        TOPIC,
        lambda m, c: ok_group.append(m[0].msg_id) or ConsumeStatus.CONSUME_SUCCESS,
        enable_trace=True,
    )
    try:
        async with Producer("pg_trace", namesrv_addr=ns, enable_trace=True) as p:
            sent = await p.send(Message(TOPIC, b"traced body", tags="TagT", keys="order-7"))
            assert p.trace_stats is not None
        assert p.trace_stats.sent_records == 1 and p.trace_stats.dropped == 0
        async with Admin(ns) as admin:
            await wait_until_async(
                lambda: len(failing) == 3 and ok_group == [sent.msg_id], 30, message="3 failures + 1 success"
            )

            async def dead_lettered() -> bool:
                try:
                    found = await admin.query_msg_by_key(dlq_topic("g_trace_bad"), sent.msg_id)
                except MQClientError:  # the DLQ topic is made with the dead letter: not routed yet
                    return False
                return any(m.msg_id == sent.msg_id for m in found)

            await wait_until_async(dead_lettered, 30, interval=0.3, message="the dead letter")

            async def complete() -> Any:
                t = await admin.query_msg_trace(sent.msg_id)
                kinds = [e.event for e in t.events]
                bad_done = sum(
                    1
                    for e in t.events
                    if e.event == "consumed" and e.group == "g_trace_bad" and e.status != "NO_RESULT"
                )
                return (
                    t
                    if ("dead-letter" in kinds and bad_done == 3 and kinds.count("delivered") >= 4)
                    else None
                )

            await wait_until_async(complete, 30, interval=0.5, message="the whole timeline")
            trace = await complete()
    finally:
        await bad.shutdown()
        await good.shutdown()

    events = trace.events
    kinds = [e.event for e in events]
    assert kinds[0] == "sent" and kinds.index("stored") < kinds.index("delivered")
    sent_event = events[0]
    assert (sent_event.group, sent_event.status) == ("pg_trace", "SEND_OK")
    assert sent_event.host and sent_event.cost_ms is not None and "topic=TracedTopic" in sent_event.detail
    consumed = [e for e in events if e.event == "consumed"]
    bad_runs = [e for e in consumed if e.group == "g_trace_bad"]
    assert [(e.status, e.retries) for e in bad_runs] == [("FAILED", 0), ("FAILED", 1), ("FAILED", 2)]
    [ok_run] = [e for e in consumed if e.group == "g_trace_ok"]
    assert (ok_run.status, ok_run.retries) == ("SUCCESS", 0) and ok_run.cost_ms is not None
    delivered_groups = {e.group for e in events if e.event == "delivered"}
    assert delivered_groups == {"g_trace_bad", "g_trace_ok"}
    retries = [e for e in events if e.event == "retry"]
    assert {e.retries for e in retries if e.status is None} == {1, 2}  # the broker's SendBack records
    dead = [e for e in events if e.event == "dead-letter"]
    assert dead and all(e.group == "g_trace_bad" for e in dead)
    times = [e.time_ms for e in events]
    assert times == sorted(times)
    assert trace.groups["g_trace_ok"] == "CONSUMED"

    # mqadmin: the table, and the JSON document's schema
    table = await _mqadmin_table(ns, "queryMsgTraceById", "-i", sent.msg_id)
    header = table.splitlines()[0].split()
    assert header == [
        "#Time",
        "#Event",
        "#Group",
        "#ClientHost",
        "#CostTime(ms)",
        "#Status",
        "#Retries",
        "#Detail",
    ]
    assert "dead-letter" in table and "g_trace_ok" in table and "#ConsumerGroup" in table
    doc = await mqadmin(ns, "queryMsgTraceById", "-i", sent.msg_id)
    assert doc["msgId"] == sent.msg_id and doc["topic"] == TOPIC
    assert {"events", "groups", "records"} <= set(doc)
    for e in doc["events"]:
        assert {"time_ms", "event"} <= set(e) and e["event"] in (
            "sent",
            "stored",
            "transaction",
            "delivered",
            "consumed",
            "retry",
            "dead-letter",
        )
    assert {r["kind"] for r in doc["records"]} >= {"Pub", "SubBefore", "SubAfter", "Deliver", "SendBack"}
    # a window that ends before the send finds no trace record
    early = await mqadmin(ns, "queryMsgTraceById", "-i", sent.msg_id, "-e", "1000")
    assert early["records"] == []
