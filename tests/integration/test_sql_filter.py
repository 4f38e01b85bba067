"""SQL92 filtering against real daemons: the broker filters (proven by what a pull carries), refuses
SQL92 without enablePropertyFilter, refuses bad expressions with the column, and a consumer
subscribed with ``MessageSelector.by_sql`` receives exactly the matching messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from rocketpy import Admin, Message, Producer
from rocketpy.client.consumer_types import MessageSelector
from rocketpy.client.lite_pull_consumer import LitePullConsumer
from rocketpy.errors import MQClientError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.record import decode_records
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from tests.integration.test_broker_util import pull, pull_ext, send

BODY = b"b" * 1000
FAST = {"rebalance_interval": 1.0, "heartbeat_broker_interval": 1.0, "poll_name_server_interval": 1.0}


@pytest.fixture
async def rpc() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


async def _sql_pull(rpc: RemotingClient, addr: str, topic: str, sql: str, offset: int = 0) -> Any:
    ext = pull_ext("g_sql", topic, 0, offset, max_msgs=32)
    ext["subscription"], ext["expressionType"] = sql, "SQL92"
    return await rpc.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext=ext), 10.0)


async def test_broker_filters_before_shipping(daemons: Any, rpc: RemotingClient) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr, enablePropertyFilter="true")
    topic = "SqlFiltered"
    for i in range(100):
        r = await send(rpc, broker.addr, topic, BODY, 0, {"a": str(i), "color": "red" if i % 2 else "blue"})
        assert r.code == ResponseCode.SUCCESS, r.remark
    everything = await pull(rpc, broker.addr, group="g_sql", topic=topic, queue_id=0, offset=0)
    assert everything.code == ResponseCode.SUCCESS and len(decode_records(everything.body)) == 32
    r = await _sql_pull(rpc, broker.addr, topic, "a >= 90 AND color = 'red'")
    assert r.code == ResponseCode.SUCCESS, r.remark
    got = decode_records(r.body)
    assert [m.properties["a"] for m in got] == ["91", "93", "95", "97", "99"]
    one_record = len(everything.body) // 32
    assert len(r.body) == 5 * one_record  # only matching bodies crossed the wire
    assert r.ext["nextBeginOffset"] == 100
    none = await _sql_pull(rpc, broker.addr, topic, "a > 1000")
    assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY and not none.body
    missing = await _sql_pull(rpc, broker.addr, topic, "nosuch = 'x' OR NOT (nosuch IS NULL)")
    assert missing.code == ResponseCode.PULL_RETRY_IMMEDIATELY  # NULL semantics at the broker too
    bad = await _sql_pull(rpc, broker.addr, topic, "a > 'x'")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "column 5" in (bad.remark or "")
    unterminated = await _sql_pull(rpc, broker.addr, topic, "color = 'red")
    assert unterminated.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "unterminated" in (unterminated.remark or "")
    deep = await _sql_pull(rpc, broker.addr, topic, "(" * 2000 + "a = 1" + ")" * 2000)
    assert deep.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "nests deeper" in (deep.remark or "")
    again = await _sql_pull(rpc, broker.addr, topic, "a < 3")  # the broker still serves
    assert [m.properties["a"] for m in decode_records(again.body)] == ["0", "1", "2"]
    assert not broker.has_traceback()


async def test_broker_without_property_filter_refuses(daemons: Any, rpc: RemotingClient) -> None:
    ns = daemons.namesrv()
    broker = daemons.broker(ns.addr)
    r = await send(rpc, broker.addr, "SqlOff", BODY, 0, {"a": "1"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    refused = await _sql_pull(rpc, broker.addr, "SqlOff", "a = 1")
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert "enablePropertyFilter=true" in (refused.remark or "")


async def test_consumer_receives_only_matches(daemons: Any) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr, enablePropertyFilter="true")
    topic = "SqlConsumer"
    async with Admin(ns.addr) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    producer = Producer("pg_sql", namesrv_addr=ns.addr)
    await producer.start()
    try:
        for i in range(60):
            props = {"price": str(i), "region": "eu" if i % 3 == 0 else "us"}
            await producer.send(Message(topic, str(i).encode(), tags=f"T{i % 2}", properties=props))
    finally:
        await producer.shutdown()
    with pytest.raises(MQClientError, match="column 9"):
        MessageSelector.by_sql("price > 'cheap'")
    consumer = LitePullConsumer("g_sql_c", ns.addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    consumer.subscribe(
        topic, MessageSelector.by_sql("region = 'eu' AND price BETWEEN 10 AND 40 AND TAGS = 'T0'")
    )
    await consumer.start()
    want = sorted(i for i in range(10, 41) if i % 3 == 0 and i % 2 == 0)
    got: list[int] = []
    try:
        for _ in range(300):
            if len(got) >= len(want):
                break
            got += [int(m.body) for m in await consumer.poll(timeout=0.1)]
        got += [int(m.body) for m in await consumer.poll(timeout=0.5)]  # nothing more arrives
    finally:
        await consumer.shutdown()
    assert sorted(got) == want


def test_sql_filter_example(daemons: Any, tmp_path: Any) -> None:
    from tests.integration.test_examples import run

    ns = daemons.namesrv()
    daemons.broker(ns.addr, enablePropertyFilter="true")
    out = run("sql_filter_consumer", ns.addr, tmp_path, "-t", "ExSql", "-c", "20", "--expect", "8")
    matched = [line for line in out.splitlines() if line.startswith("matched:")]
    assert sorted(matched) == sorted(f"matched: n={n} color=red" for n in range(5, 20, 2)), out
    assert "done: 8 of 20 messages matched" in out
