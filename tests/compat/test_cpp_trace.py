"""Message trace with RocketMQ's C++ client (PyPI ``rocketmq`` 0.4.4) on real rocketpy daemons.

The wheel bundles rocketmq-client-cpp 1.2.x, which writes no trace records of its own (message
trace came with its 2.x line, which writes them to ``rmq_sys_TRACE_DATA_<region>``). So:

* the broker traces the C++ client's messages itself (``traceTopicEnable``): ``mqadmin
  queryMsgTraceById`` shows a message the C++ producer sent as stored and delivered to the C++
  consumer's group, and the group's progress on it;
* records in the 2.x client's layout (``src/trace/TraceUtil.cpp``: empty strings for absent
  fields, a SubAfter of five fields) stored in ``rmq_sys_TRACE_DATA_DefaultRegion`` are found and
  decoded into the same timeline, shown with what they have.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy import Admin, Message, Producer
from tests.compat.test_rocketmq_cpp_client import _SKIP, CONSUME_DEADLINE_S, Worker
from tests.conftest import DaemonPool
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.skipif(_SKIP is not None, reason=_SKIP or ""), pytest.mark.slow]

CPP_TRACE_TOPIC = "rmq_sys_TRACE_DATA_DefaultRegion"


def _cpp_records(msg_id: str) -> str:
    """A Pub, SubBefore and SubAfter of ``msg_id`` exactly as rocketmq-client-cpp 2.x writes them."""
    return (
        f"Pub\x011700000000123\x01DefaultRegion\x01cpp_pg\x01CppTraced\x01{msg_id}\x01TagA\x01\x01"
        f"127.0.0.1:10911\x0142\x015\x010\x017F00000100002A9F00000000000000AB\x01true\x02"
        f"SubBefore\x011700000000200\x01DefaultRegion\x01cpp_tr\x01REQ-9\x01{msg_id}\x010\x01\x02"
        f"SubAfter\x01REQ-9\x01{msg_id}\x017\x01true\x01\x02"
    )


async def test_cpp_client_messages_are_traced(daemons: DaemonPool, tmp_path: Path) -> None:
    namesrv = daemons.namesrv()
    daemons.broker(namesrv.addr, traceTopicEnable=True, mappedFileSizeCommitLog=16 * 1024 * 1024)
    ns = namesrv.addr
    sent = Worker(tmp_path / "p", "produce", ns, "CppTraced").result(120)["sent"]
    got = Worker(tmp_path / "c", "consume", ns, "CppTraced", "cpp_tr", "*", "100", str(CONSUME_DEADLINE_S))
    assert len(got.result(CONSUME_DEADLINE_S + 60)["got"]) >= 100
    msg_id = sent[7]["msg_id"]
    async with Admin(ns) as admin:

        async def delivered() -> bool:
            t = await admin.query_msg_trace(msg_id)
            return any(e.event == "delivered" and e.group == "cpp_tr" for e in t.events)

        await wait_until_async(delivered, 30, interval=0.5, message="the broker's Deliver record")
        # what a 2.x C++ client would have stored beside it
        async with Producer("cpp_records", namesrv_addr=ns) as p:
            await p.send(Message(CPP_TRACE_TOPIC, _cpp_records(msg_id).encode(), keys=msg_id))
        trace = await admin.query_msg_trace(msg_id)
    events = {e.event: e for e in trace.events}
    assert trace.topic == "CppTraced"
    assert events["stored"].detail.startswith("broker=broker-a CppTraced:")
    assert events["delivered"].group == "cpp_tr"
    assert (events["sent"].group, events["sent"].status, events["sent"].cost_ms) == ("cpp_pg", "SEND_OK", 5)
    consumed = events["consumed"]
    assert (consumed.group, consumed.status, consumed.cost_ms, consumed.retries) == (
        "cpp_tr",
        "SUCCESS",
        7,
        0,
    )
    assert {r.kind for r in trace.records} >= {"Pub", "SubBefore", "SubAfter", "Deliver"}
