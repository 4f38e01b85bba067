"""Broker calls of the Spark data source, made with the SDK's own pieces (no wire code here).

Owns ``BrokerSession``: one ``RemotingClient`` + ``MQClientAPI`` on a private event loop, driven
synchronously (Spark calls the data source from plain threads and worker processes), signing every
request with the read's or write's ACL account when there is one. It answers the planning questions
(the topics a pattern matches, a topic's readable queues and the members of each queue's broker, a
queue's min/max offsets, the offset of a timestamp, the store time at an offset, a consumer group's
committed offsets). A queue's calls go to its broker's master, and to the slaves the route lists
(in broker-id order) when the master does not answer: a read goes on while a master is down.
Every call runs under the session's budget; the whole session is closed by ``close()`` (or ``with``).
A broker's ACL refusal becomes a ``SparkAccessError`` naming the options to fix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

import uvloop

from rocketpy.addresses import parse_namesrv_addrs
from rocketpy.client.api import MQClientAPI, PullStatus
from rocketpy.client.route import subscribe_queues
from rocketpy.errors import AccessDeniedError, MQClientError, RemotingConnectError, RemotingTimeoutError
from rocketpy.protocol.headers.pull import PullMessageRequestHeader
from rocketpy.record import POS_STORE_TIMESTAMP, Q64
from rocketpy.remoting.client import RemotingClient
from rocketpy.route import TopicRouteData
from rocketpy.spark.auth import Credentials, refused
from rocketpy.spark.offsets import Queue
from rocketpy.spark.topics import match_topics, reserved_names
from rocketpy.subscription_group import TOOLS_CONSUMER
from rocketpy.sysflag import FLAG_SUBSCRIPTION

T = TypeVar("T")
MASTER_ID = 0
#: Queue offsets asked for at once while planning (bounded fan-out).
MAX_CONCURRENT_CALLS = 64
#: Errors after which a queue's call goes to the next member of its broker (the master is gone).
MEMBER_DOWN = (RemotingConnectError, RemotingTimeoutError)


class TopicNotFoundError(MQClientError):
    """A topic the NameServer has no route for (never created, or deleted)."""


class BrokerUnavailableError(MQClientError):
    """No member of a broker a read needs answers or is in the route (a task retry may succeed)."""

    retriable = True


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
        credentials: the ACL account to sign with (resolved here: options, then the environment).

    Raises:
        SparkOptionError: only half of an ACL account is given.
    """

    def __init__(self, namesrv_addr: str, timeout_s: float, credentials: Credentials | None = None) -> None:
        self.timeout_s = timeout_s
        self.credentials = credentials or Credentials()
        self._signer = self.credentials.signer()
        self._runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
        self._addrs = parse_namesrv_addrs(namesrv_addr)
        self._remoting: RemotingClient | None = None
        self._api: MQClientAPI | None = None
        self._routes: dict[str, TopicRouteData] = {}
        self._refreshes: dict[str, asyncio.Future[TopicRouteData]] = {}

    def __enter__(self) -> BrokerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def api(self) -> MQClientAPI:
        """The SDK's request layer (made on first use, on the session's loop)."""
        if self._api is None:
            self._remoting = RemotingClient(
                connect_timeout=self.timeout_s, name="rocketpy-spark", signer=self._signer
            )
            self._api = MQClientAPI(self._remoting, self._addrs)
        return self._api

    def run(self, make: Callable[[], Coroutine[Any, Any, T]], budget_s: float | None = None) -> T:
        """Run ``make()`` on the session's loop, bounded by ``budget_s`` (default 3 call timeouts).

        Raises:
            SparkAccessError: a broker refused the ACL account (or its absence).
            MQClientError: nothing answered within the budget, or the call's own error.
        """
        budget = budget_s if budget_s is not None else self.timeout_s * 3

        async def bounded() -> T:
            try:
                async with asyncio.timeout(budget):
                    return await make()
            except AccessDeniedError as e:
                raise refused(e, self.credentials) from None
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

    async def route(self, topic: str, fresh: bool = False) -> TopicRouteData:
        """The topic's route (cached per session unless ``fresh``); MQClientError when it does not exist."""
        route = None if fresh else self._routes.get(topic)
        if route is None:
            route = await self.api.get_topic_route(topic, self.timeout_s)
            if route is None:
                raise TopicNotFoundError(
                    f"topic {topic!r} does not exist: create it first "
                    f"(mqadmin updateTopic -n {';'.join(self._addrs)} -c DefaultCluster -t {topic})"
                )
            self._routes[topic] = route
        return route

    async def members(self, topic: str, broker_name: str, fresh: bool = False) -> list[str]:
        """The addresses of ``broker_name`` in ``topic``'s route: its master first, then its slaves."""
        route = await self.route(topic, fresh)
        for bd in route.broker_datas:
            if bd.broker_name == broker_name and bd.broker_addrs:
                return [addr for _, addr in sorted(bd.broker_addrs.items())]
        raise BrokerUnavailableError(
            f"broker {broker_name!r} of topic {topic!r} has no address in the route: is it running?"
        )

    async def broker_addr(self, topic: str, broker_name: str) -> str:
        """The address to read ``broker_name``'s queues of ``topic`` from (its master, else a slave)."""
        return (await self.members(topic, broker_name))[0]

    async def on_member(self, q: Queue, call: Callable[[str], Awaitable[T]]) -> T:
        """``call(addr)`` on the master of ``q``'s broker, else on each slave the route lists.

        When every member fails to answer, the route is asked again (once per topic and session:
        the NameServer drops a broker whose connection closed) and its new members are tried.
        """
        tried: list[str] = []
        error: BaseException | None = None
        for fresh in (False, True):
            addrs = await (self._fresh_members(q) if fresh else self.members(q[0], q[1]))
            for addr in addrs:
                if addr in tried:
                    continue
                tried.append(addr)
                try:
                    return await call(addr)
                except MEMBER_DOWN as e:
                    error = e
        assert error is not None
        raise error

    async def _fresh_members(self, q: Queue) -> list[str]:
        task = self._refreshes.get(q[0])
        if task is None:
            task = self._refreshes[q[0]] = asyncio.ensure_future(self.route(q[0], fresh=True))
        await task
        return await self.members(q[0], q[1])

    async def topic_names(self, pattern: str) -> tuple[list[str], frozenset[str]]:
        """The user topics whose names match ``pattern`` (system, retry and DLQ topics excluded),
        and the names of the brokers alive now (a topic missing while its brokers live was deleted)."""
        names = await self.api.get_topic_list(self.timeout_s)
        info = await self.api.get_broker_cluster_info(self.timeout_s)
        live = frozenset(str(b) for b in (info.get("brokerAddrTable") or {}))
        return match_topics(pattern, names, reserved_names(info)), live

    async def queues(self, topics: Iterable[str], missing_ok: bool = False) -> list[Queue]:
        """The readable queues of every topic, sorted (``missing_ok``: skip topics that are gone)."""
        out: list[Queue] = []
        for topic in topics:
            try:
                route = await self.route(topic)
            except TopicNotFoundError:
                if missing_ok:  # a pattern's topic deleted since the topic list was read
                    continue
                raise
            out += [(mq.topic, mq.broker_name, mq.queue_id) for mq in subscribe_queues(topic, route)]
        return sorted(out)

    async def _per_queue(
        self, queues: Iterable[Queue], call: Callable[[str, Queue], Awaitable[T]]
    ) -> dict[Queue, T]:
        limit = asyncio.Semaphore(MAX_CONCURRENT_CALLS)

        async def one(q: Queue) -> tuple[Queue, T]:
            async with limit:
                return q, await self.on_member(q, lambda addr: call(addr, q))

        return dict(await asyncio.gather(*(one(q) for q in queues)))

    async def bounds(self, queues: Iterable[Queue]) -> dict[Queue, tuple[int, int]]:
        """``(min offset, max offset)`` of every queue (max = the next offset to be written)."""
        api, t = self.api, self.timeout_s

        async def both(addr: str, q: Queue) -> tuple[int, int]:
            low = await api.get_min_offset(addr, q[0], q[2], t)
            return low, await api.get_max_offset(addr, q[0], q[2], t)

        return await self._per_queue(queues, both)

    async def search(self, queues: Iterable[Queue], timestamp_ms: int | dict[Queue, int]) -> dict[Queue, int]:
        """The first offset stored at or after the time (one for all, or per queue) in every queue;
        the queue's max offset when no message is that recent."""
        api, t = self.api, self.timeout_s

        def when(q: Queue) -> int:
            return timestamp_ms[q] if isinstance(timestamp_ms, dict) else timestamp_ms

        return await self._per_queue(queues, lambda a, q: api.search_offset(a, q[0], q[2], when(q), t))

    async def store_times(self, offsets: dict[Queue, int]) -> dict[Queue, int]:
        """The store time (ms) of the message at each queue's offset (queues without one are left out)."""
        api, t = self.api, self.timeout_s

        async def one(addr: str, q: Queue) -> int | None:
            header = PullMessageRequestHeader(
                TOOLS_CONSUMER, q[0], q[2], offsets[q], 1, sys_flag=FLAG_SUBSCRIPTION
            )
            ext = header.to_ext()
            result = await api.pull_message(addr, ext, t, raw=True)
            if result.status is not PullStatus.FOUND or len(result.body) < POS_STORE_TIMESTAMP + 8:
                return None
            return int(Q64.unpack_from(result.body, POS_STORE_TIMESTAMP)[0])

        found = await self._per_queue(offsets, one)
        return {q: ms for q, ms in found.items() if ms is not None}

    async def check_account(self, topic: str | None) -> None:
        """One empty HEART_BEAT (it names no group or topic: only the account is checked) to every
        broker a write may reach, ``topic``'s or else the cluster's, so a refused account fails
        the plan before any task runs. A member that does not answer is left to the sends."""
        if topic is not None:
            try:
                route = await self.route(topic)
            except TopicNotFoundError:
                return  # the sends say so (or the broker creates the topic)
            addrs = {a for bd in route.broker_datas for a in bd.broker_addrs.values()}
        else:
            table = (await self.api.get_broker_cluster_info(self.timeout_s)).get("brokerAddrTable") or {}
            addrs = {a for bd in table.values() for a in (bd.get("brokerAddrs") or {}).values()}
        body = {"clientID": "rocketpy-spark-account-check", "producerDataSet": [], "consumerDataSet": []}
        answers = await asyncio.gather(
            *(self.api.heartbeat(a, body, self.timeout_s) for a in sorted(addrs)), return_exceptions=True
        )
        for answer in answers:
            if isinstance(answer, BaseException) and not isinstance(answer, MEMBER_DOWN):
                raise answer

    async def commit_group(self, group: str, offsets: dict[Queue, int]) -> None:
        """Store ``offsets`` as ``group``'s consumer offsets (so ``consumerProgress`` shows lag)."""
        api, t = self.api, self.timeout_s

        async def one(addr: str, q: Queue) -> None:
            await api.update_consumer_offset(addr, group, q[0], q[2], offsets[q], oneway=False, timeout=t)

        await self._per_queue(offsets, one)
