"""The topics a promoted replica takes over from a NameServer's routes (broker/failover/routed_topics.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack
import pytest

from rocketpy.broker.failover.routed_topics import RouteLookupError, routed_topics
from rocketpy.errors import RemotingConnectError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import RemotingCommand


def _route(*queues: tuple[str, int, int]) -> dict[str, Any]:
    return {
        "queueDatas": [
            {"brokerName": b, "readQueueNums": r, "writeQueueNums": w, "perm": 6, "topicSysFlag": 0}
            for b, r, w in queues
        ],
        "brokerDatas": [],
    }


class FakeNameServers:
    """``down`` addresses refuse connections; ``routes`` answers GET_ROUTEINFO_BY_TOPIC (a missing
    topic: TOPIC_NOT_EXIST); topics in ``slow`` never answer."""

    def __init__(self, routes: dict[str, dict[str, Any]], down: set[str] | None = None,
                 slow: set[str] | None = None) -> None:  # fmt: skip
        self.routes, self.down, self.slow = routes, down or set(), slow or set()
        self.asked: list[tuple[str, str]] = []

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        if addr in self.down:
            raise RemotingConnectError(f"cannot connect to {addr}")
        if cmd.code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
            body = msgpack.packb({"topicList": [*self.routes, "Gone", *self.slow]})
            return RemotingCommand(ResponseCode.SUCCESS, cmd.opaque, 1, None, {}, body)
        topic = (cmd.ext or {})["topic"]
        self.asked.append((addr, topic))
        if topic in self.slow:
            await asyncio.sleep(3600)
        if topic not in self.routes:
            return RemotingCommand(ResponseCode.TOPIC_NOT_EXIST, cmd.opaque, 1, "no route", {}, b"")
        body = msgpack.packb(self.routes[topic])
        return RemotingCommand(ResponseCode.SUCCESS, cmd.opaque, 1, None, {}, body)


async def test_only_missing_topics_routed_to_this_broker_name_come_back() -> None:
    ns = FakeNameServers({
        "Known": _route(("broker-a", 4, 4)),
        "New": _route(("broker-a", 3, 2), ("broker-b", 8, 8)),
        "Elsewhere": _route(("broker-b", 8, 8)),
    })  # fmt: skip
    found = await routed_topics(ns, ["n1:9876", "n2:9876"], "broker-a", {"Known"}, 2.0)  # type: ignore[arg-type]
    got = [(t.topic_name, t.read_queue_nums, t.write_queue_nums, t.perm) for t in found]
    assert got == [("New", 3, 2, 6)]
    assert {topic for _, topic in ns.asked} == {"New", "Elsewhere", "Gone"}  # never a known one
    assert {addr for addr, _ in ns.asked} == {"n1:9876"}


async def test_the_next_name_server_is_asked_and_none_answering_is_an_error() -> None:
    ns = FakeNameServers({"New": _route(("broker-a", 1, 1))}, down={"n1:9876"})
    found = await routed_topics(ns, ["n1:9876", "n2:9876"], "broker-a", set(), 2.0)  # type: ignore[arg-type]
    assert [t.topic_name for t in found] == ["New"]
    ns.down.add("n2:9876")
    with pytest.raises(RouteLookupError, match=r"n1:9876: cannot connect.*n2:9876: cannot connect"):
        await routed_topics(ns, ["n1:9876", "n2:9876"], "broker-a", set(), 2.0)  # type: ignore[arg-type]
    with pytest.raises(RouteLookupError, match="namesrvAddr"):
        await routed_topics(ns, [], "broker-a", set(), 2.0)  # type: ignore[arg-type]


async def test_a_lookup_that_never_answers_costs_only_its_topic_and_the_budget() -> None:
    ns = FakeNameServers({"New": _route(("broker-a", 2, 2))}, slow={"Stuck"})
    loop = asyncio.get_running_loop()
    started = loop.time()
    found = await routed_topics(ns, ["n1:9876"], "broker-a", set(), 0.3)  # type: ignore[arg-type]
    assert [t.topic_name for t in found] == ["New"]
    assert loop.time() - started < 2.0
