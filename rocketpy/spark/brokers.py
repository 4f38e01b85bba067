"""Broker calls of the Spark data source, made with the SDK's own pieces (no wire code here).

Owns ``BrokerSession``: one ``RemotingClient`` + ``MQClientAPI`` on a private event loop, driven
synchronously (Spark calls the data source from plain threads and worker processes). It answers
the planning questions (a topic's readable queues and the broker address of each, a queue's
min/max offsets, the offset of a timestamp, a consumer group's committed offsets) and reads one
queue range with pipelined pulls (``rocketpy.spark.pull``). Every call runs under the session's
timeout; the whole session is closed by ``close()`` (or ``with``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

import uvloop

from rocketpy.addresses import parse_namesrv_addrs
from rocketpy.client.api import MQClientAPI
from rocketpy.client.route import subscribe_queues
from rocketpy.errors import MQClientError
from rocketpy.remoting.client import RemotingClient
from rocketpy.route import TopicRouteData
from rocketpy.spark.offsets import Queue

T = TypeVar("T")
MASTER_ID = 0
#: Queue offsets asked for at once while planning (bounded fan-out).
MAX_CONCURRENT_CALLS = 64


def run_on(runner: asyncio.Runner, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on ``runner``'s loop.

    Not ``Runner.run``: on Python 3.11, in the main thread, it checks its SIGINT handler with
    ``signal.getsignal``, whose failed enum lookup formats the handler's repr, i.e. the finished
    task with its result. For a read chunk (megabytes of records) that took 14 ms a call, more than
    decoding the chunk. Spark's workers do not need Ctrl-C handling here.
    """
    return runner.get_loop().run_until_complete(coro)


class BrokerSession:
    """A synchronous face over the SDK's async client, for one planning step or one task.

    Args:
        namesrv_addr: NameServer address list (``host:port;...``).
        timeout_s: budget of each call (and of connecting).
    """

    def __init__(self, namesrv_addr: str, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
        self._addrs = parse_namesrv_addrs(namesrv_addr)
        self._remoting: RemotingClient | None = None
        self._api: MQClientAPI | None = None
        self._routes: dict[str, TopicRouteData] = {}

    def __enter__(self) -> BrokerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def api(self) -> MQClientAPI:
        """The SDK's request layer (made on first use, on the session's loop)."""
        if self._api is None:
            self._remoting = RemotingClient(connect_timeout=self.timeout_s, name="rocketpy-spark")
            self._api = MQClientAPI(self._remoting, self._addrs)
        return self._api

    def run(self, make: Callable[[], Coroutine[Any, Any, T]], budget_s: float | None = None) -> T:
        """Run ``make()`` on the session's loop, bounded by ``budget_s`` (default 3 call timeouts)."""
        budget = budget_s if budget_s is not None else self.timeout_s * 3

        async def bounded() -> T:
            try:
                async with asyncio.timeout(budget):
                    return await make()
            except TimeoutError:
                raise MQClientError(
                    f"no answer from the brokers within {budget:.1f} s: are the NameServer"
                    f" ({';'.join(self._addrs)}) and brokers running? (option requestTimeoutMs)"
                ) from None

        return run_on(self._runner, bounded())

    def close(self) -> None:
        """Close the connections and the loop (idempotent)."""
        if self._remoting is not None:
            remoting, self._remoting, self._api = self._remoting, None, None
            run_on(self._runner, remoting.close())
        self._runner.close()

    # ---- planning ------------------------------------------------------------------------------

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route (cached per session); MQClientError when the topic does not exist."""
        route = self._routes.get(topic)
        if route is None:
            route = await self.api.get_topic_route(topic, self.timeout_s)
            if route is None:
                raise MQClientError(
                    f"topic {topic!r} does not exist: create it first "
                    f"(mqadmin updateTopic -n {';'.join(self._addrs)} -c DefaultCluster -t {topic})"
                )
            self._routes[topic] = route
        return route

    async def broker_addr(self, topic: str, broker_name: str) -> str:
        """The address to read ``broker_name``'s queues of ``topic`` from (its master)."""
        route = await self.route(topic)
        for bd in route.broker_datas:
            if bd.broker_name == broker_name and bd.broker_addrs:
                return bd.broker_addrs.get(MASTER_ID) or bd.broker_addrs[min(bd.broker_addrs)]
        raise MQClientError(
            f"broker {broker_name!r} of topic {topic!r} has no address in the route: is it running?"
        )

    async def queues(self, topics: Iterable[str]) -> list[Queue]:
        """The readable queues of every topic, sorted."""
        out: list[Queue] = []
        for topic in topics:
            route = await self.route(topic)
            out += [(mq.topic, mq.broker_name, mq.queue_id) for mq in subscribe_queues(topic, route)]
        return sorted(out)

    async def _per_queue(
        self, queues: Iterable[Queue], call: Callable[[str, Queue], Awaitable[T]]
    ) -> dict[Queue, T]:
        limit = asyncio.Semaphore(MAX_CONCURRENT_CALLS)

        async def one(q: Queue) -> tuple[Queue, T]:
            async with limit:
                return q, await call(await self.broker_addr(q[0], q[1]), q)

        return dict(await asyncio.gather(*(one(q) for q in queues)))

    async def bounds(self, queues: Iterable[Queue]) -> dict[Queue, tuple[int, int]]:
        """``(min offset, max offset)`` of every queue (max = the next offset to be written)."""
        api, t = self.api, self.timeout_s

        async def both(addr: str, q: Queue) -> tuple[int, int]:
            low = await api.get_min_offset(addr, q[0], q[2], t)
            return low, await api.get_max_offset(addr, q[0], q[2], t)

        return await self._per_queue(queues, both)

    async def search(self, queues: Iterable[Queue], timestamp_ms: int) -> dict[Queue, int]:
        """The first offset stored at or after ``timestamp_ms`` in every queue."""
        api, t = self.api, self.timeout_s
        return await self._per_queue(queues, lambda a, q: api.search_offset(a, q[0], q[2], timestamp_ms, t))

    async def commit_group(self, group: str, offsets: dict[Queue, int]) -> None:
        """Store ``offsets`` as ``group``'s consumer offsets (so ``consumerProgress`` shows lag)."""
        api, t = self.api, self.timeout_s

        async def one(addr: str, q: Queue) -> None:
            await api.update_consumer_offset(addr, group, q[0], q[2], offsets[q], oneway=False, timeout=t)

        await self._per_queue(offsets, one)
