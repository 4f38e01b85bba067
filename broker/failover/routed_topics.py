"""The topics a new master takes over from the NameServers' routes: those routed to its broker name
that its own table lacks.

A replica copies its master's topic table every ``slaveSyncInterval`` (``SlaveSynchronize``), so a
topic created on the master in the last interval before it died is on no replica. Registering as
the new master without it would make every NameServer drop it from the routes (a master's
registration replaces its topics there): producers holding the old route would go on sending to
the dead address, and the old master, back as a follower, would copy the new master's table and
forget the topic too. The NameServers know it, though: a master registers at once when its topics
change, before it answers the change. So before a replica first registers as master, it asks a
NameServer for the topic list and, for each topic it lacks, the topic's route; a route with queues
of this broker name gives the topic back (queue counts, permission and system flag; a topic's
attributes are not in routes and stay empty).

Bounded: at most ``MAX_TOPIC_NAMES`` names looked at, ``LOOKUPS_IN_FLIGHT`` route lookups at once
(as many workers, never a task per topic), and the whole step within the caller's time budget; a
NameServer that does not answer only costs the topics it would have given back (logged by the
caller).
"""

from __future__ import annotations

import asyncio
from collections.abc import Container

from rocketpy.broker.topic_route import ask_topic_route
from rocketpy.errors import HeaderError, RemotingConnectError, RemotingTimeoutError, RocketpyError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.body import decode_body
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicConfig

#: Most topic names of a NameServer's list looked at (a larger list is cut, the rest not restored).
MAX_TOPIC_NAMES = 100_000
#: Route lookups in flight at once.
LOOKUPS_IN_FLIGHT = 16


class RouteLookupError(RocketpyError):
    """No NameServer gave the topic list."""


async def routed_topics(
    client: RemotingClient,
    namesrv_addrs: list[str],
    broker_name: str,
    known: Container[str],
    timeout_s: float,
) -> list[TopicConfig]:
    """The topics the NameServers route to ``broker_name`` that are not in ``known``, as topic
    configs, in the NameServer's list order; what was found before ``timeout_s`` ran out.

    Raises:
        RouteLookupError: no NameServer answered the topic list.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    addr, names = await _topic_list(client, namesrv_addrs, deadline)
    missing = [n for n in names[:MAX_TOPIC_NAMES] if isinstance(n, str) and n not in known]
    found: dict[str, TopicConfig] = {}
    queue = iter(missing)  # shared by the workers: each takes the next topic when it is free

    async def worker() -> None:
        for topic in queue:
            left = deadline - loop.time()
            if left <= 0:
                return
            tc = await _routed_config(client, addr, topic, broker_name, left)
            if tc is not None:
                found[topic] = tc

    workers = [asyncio.ensure_future(worker()) for _ in range(min(LOOKUPS_IN_FLIGHT, len(missing)))]
    if workers:
        await asyncio.wait(workers, timeout=max(deadline - loop.time(), 0.0))
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return [found[n] for n in missing if n in found]


async def _topic_list(client: RemotingClient, addrs: list[str], deadline: float) -> tuple[str, list[object]]:
    """The first NameServer to answer before ``deadline`` (loop time) and its topic list."""
    loop = asyncio.get_running_loop()
    errors = []
    for addr in addrs:
        left = deadline - loop.time()
        if left <= 0:
            errors.append(f"{addr}: not asked, no time left")
            continue
        cmd = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        try:
            resp = await client.invoke(addr, cmd, left)
            if resp.code != ResponseCode.SUCCESS:
                raise HeaderError(f"answered {resp.code}: {resp.remark}")
            # a cluster's whole list can be megabytes: decoded off the loop
            doc = await asyncio.to_thread(decode_body, resp.body, resp.serialize_type, "TopicList")
        except (RemotingConnectError, RemotingTimeoutError, HeaderError) as e:
            errors.append(f"{addr}: {e}")
            continue
        names = doc.get("topicList") if isinstance(doc, dict) else None
        if isinstance(names, list):
            return addr, names
        errors.append(f"{addr}: no topicList in its answer")
    raise RouteLookupError("; ".join(errors) or "no NameServer address (namesrvAddr) is set")


async def _routed_config(
    client: RemotingClient, addr: str, topic: str, broker_name: str, timeout_s: float
) -> TopicConfig | None:
    """``topic``'s config as ``addr``'s route gives it for ``broker_name`` (None: not routed there,
    gone meanwhile, or no usable answer)."""
    try:
        _, route = await ask_topic_route(client, addr, topic, timeout_s)
    except (RemotingConnectError, RemotingTimeoutError, HeaderError, ValueError):
        return None
    if route is None:  # TOPIC_NOT_EXIST (deleted meanwhile) or another refusal
        return None
    for qd in route.queue_datas:
        if qd.broker_name == broker_name:
            return TopicConfig.model_validate({
                "topicName": topic,
                "readQueueNums": qd.read_queue_nums,
                "writeQueueNums": qd.write_queue_nums,
                "perm": qd.perm,
                "topicSysFlag": qd.topic_sys_flag,
            })  # fmt: skip
    return None
