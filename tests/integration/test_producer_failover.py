"""Failover: a broker SIGKILLed mid-run and a NameServer killed; sends keep succeeding, none is lost."""

from __future__ import annotations

from typing import Any

from rocketpy import Admin, Message, Producer, SendStatus
from tests.conftest import DaemonPool
from tests.integration.test_producer import all_messages
from tests.waiting import wait_until_async


async def test_broker_killed_mid_run_sends_keep_succeeding(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    broker_a = daemons.broker(ns.addr)
    broker_b = daemons.broker(ns.addr)
    async with Admin(ns.addr) as admin:
        await admin.create_topic("FailT", "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        await wait_until_async(lambda: _any(_brokers_in_route(admin, "FailT", 2)), 10.0)
    store_a = broker_a.workdir / "store"
    acked: dict[str, str] = {}
    async with Producer("pg", ns.addr, poll_name_server_interval=1.0) as p:
        for i in range(600):
            if i == 200:
                broker_a.kill()
            r = await p.send(Message("FailT", b"f%d" % i))
            assert r.status is SendStatus.SEND_OK
            acked[r.msg_id] = r.message_queue.broker_name
        brokers_after_kill = set(list(acked.values())[250:])
        assert brokers_after_kill == {_name(broker_b)}
        # bring broker-a back on its store: every acked message must be readable
        restarted = daemons.broker(ns.addr, brokerName=_name(broker_a), storePathRootDir=store_a)
        assert restarted.addr
        await wait_until_async(lambda: _any(_brokers_in_route_p(p, "FailT", 2)), 15.0)
        msgs = await all_messages(p, "FailT")
    found = {m.msg_id for m in msgs}
    missing = set(acked) - found
    assert not missing, f"{len(missing)} acknowledged messages lost"
    print(f"failover: {len(acked)} acked, {len(msgs) - len(acked)} duplicates stored by retries")


async def test_one_of_two_namesrvs_killed(daemons: DaemonPool) -> None:
    ns1 = daemons.namesrv()
    ns2 = daemons.namesrv()
    both = f"{ns1.addr};{ns2.addr}"
    daemons.broker(both)
    async with Producer("pg", both, poll_name_server_interval=0.5) as p, Admin(both) as admin:
        await admin.create_topic("NsT", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        assert (await p.send(Message("NsT", b"before"))).status is SendStatus.SEND_OK
        ns1.kill()
        for i in range(5):
            # new topics need a route lookup, which must fail over to the live NameServer
            await admin.create_topic(f"NsT{i}", "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
            r = await p.send(Message(f"NsT{i}", b"after"))
            assert r.status is SendStatus.SEND_OK
        assert "NsT4" in await admin.topic_list()
        assert (await p.send(Message("NsT", b"still"))).status is SendStatus.SEND_OK


def _name(daemon: object) -> str:
    text = daemon.config_file.read_text()  # type: ignore[attr-defined]
    for line in text.splitlines():
        if line.startswith("brokerName="):
            return line.split("=", 1)[1].strip()
    raise AssertionError("no brokerName in " + text)


async def _brokers_in_route(admin: Admin, topic: str, n: int) -> bool:
    route = await admin.instance.update_topic_route(topic)
    return route is not None and len(route.queue_datas) >= n


async def _brokers_in_route_p(p: Producer, topic: str, n: int) -> bool:
    route = await p._inst().update_topic_route(topic)
    return route is not None and len(route.queue_datas) >= n


def _any(value: object) -> Any:
    """Type an awaitable predicate result as Any for wait_until_async (its TypeVar cannot be solved)."""
    return value
