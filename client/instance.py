"""MQClientInstance: what the producers and consumers of a process share per NameServer set.

Owns: the one ``RemotingClient`` (connections reused by every producer/consumer of the instance),
the ``MQClientAPI``, the topic route cache and broker address table, the registered producers and
consumers, and two background routines: route refresh every ``poll_name_server_interval`` and
heartbeats to every known broker every ``heartbeat_broker_interval``. NOTIFY_CONSUMER_IDS_CHANGED
from a broker is dispatched to that group's consumers, CHECK_TRANSACTION_STATE to a transaction
producer of the message's group (``client.transaction_check``); the admin's calls through a broker
(RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO,
CONSUME_MESSAGE_DIRECTLY) to the consumers they name (``client.client_calls``). Instances are ref-counted per
(event loop, NameServer set, settings): ``acquire`` starts one on first use, ``release`` shuts it
down after the last user, sending UNREGISTER_CLIENT for everything still registered.

Each producer/consumer object has its own client id ``{ip}@{instance_name}@{pid}-{n}`` (DESIGN §9),
so several members of one group can live in one process.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from rocketpy.acl.signing import RequestSigner
from rocketpy.addresses import parse_namesrv_addrs
from rocketpy.client.api import MQClientAPI
from rocketpy.client.client_calls import ClientCalls
from rocketpy.client.heartbeat import ConsumerLike, heartbeat_datas, send_heartbeats
from rocketpy.client.pull_node import PullNodeTable
from rocketpy.client.results import PullResult
from rocketpy.client.route import TopicPublishInfo, broker_addrs, subscribe_queues
from rocketpy.client.transaction_check import dispatch_check
from rocketpy.errors import MQBrokerError, MQClientError, RemotingConnectError, RocketpyError
from rocketpy.message import MessageQueue
from rocketpy.msgid import local_ipv4
from rocketpy.protocol.codes import RequestCode
from rocketpy.protocol.headers.client import ConsumerGroupRequestHeader
from rocketpy.protocol.specs import check_served
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import SERIALIZE_TYPES, RemotingCommand
from rocketpy.route import MASTER_ID, TopicRouteData

log = logging.getLogger("rocketpy.client.instance")

_CLIENT_SEQ = itertools.count(1)
_LOCAL_IP: str | None = None
#: Bound on concurrently tracked background jobs (notifications, unregisters) per instance.
MAX_BACKGROUND_TASKS = 1024
#: A failed send or pull refreshes its topic's route at most this often (and one at a time).
ROUTE_REFRESH_MIN_INTERVAL_S = 0.1
MAX_REFRESHING_TOPICS = 256


def new_client_id(instance_name: str = "DEFAULT") -> str:
    """A process-unique client id ``{ip}@{instance_name}@{pid}-{n}`` (DESIGN §9)."""
    global _LOCAL_IP
    if _LOCAL_IP is None:
        _LOCAL_IP = local_ipv4()
    return f"{_LOCAL_IP}@{instance_name}@{os.getpid()}-{next(_CLIENT_SEQ)}"


@dataclass(frozen=True)
class ClientSettings:
    """Client-wide timers and limits (seconds). Instances are shared per (NameServer set, settings).

    Attributes:
        instance_name: part of every client id (and of broadcasting offset paths).
        poll_name_server_interval: route refresh period.
        heartbeat_broker_interval: HEART_BEAT period to every broker.
        persist_consumer_offset_interval: consumer offset commit period (used by consumers).
        rebalance_interval: consumer rebalance period (used by consumers).
        mq_client_api_timeout: timeout of control calls (routes, heartbeats, offsets).
        connect_timeout: TCP connect timeout.
        serialize_type: the wire encoding, ``"msgpack"`` (rocketpy's) or ``"json"`` (RocketMQ's own
            clients' JSON remoting); None: ``$ROCKETPY_SERIALIZE_TYPE``, else msgpack.
        access_key: the ACL account every request is signed with (``rocketpy.acl``); None: unsigned.
        secret_key: that account's secret (never in ``repr`` or logs); set with ``access_key``.
    """

    instance_name: str = "DEFAULT"
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    persist_consumer_offset_interval: float = 5.0
    rebalance_interval: float = 20.0
    mq_client_api_timeout: float = 3.0
    connect_timeout: float = 3.0
    serialize_type: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.serialize_type is None:  # resolved once, so equal settings share one instance
            object.__setattr__(self, "serialize_type", os.environ.get("ROCKETPY_SERIALIZE_TYPE", "msgpack"))

    @property
    def serialize_code(self) -> int:
        """The serialize type's code on the wire (the frame's high byte)."""
        return SERIALIZE_TYPES[str(self.serialize_type)]

    def check(self) -> None:
        """Raise MQClientError on a non-positive timer or an unknown encoding (says which option to fix)."""
        if self.serialize_type not in SERIALIZE_TYPES:
            raise MQClientError(
                f"serialize_type={self.serialize_type!r} is not valid: use 'msgpack' or 'json'"
            )
        for name in (
            "poll_name_server_interval",
            "heartbeat_broker_interval",
            "persist_consumer_offset_interval",
            "rebalance_interval",
            "mq_client_api_timeout",
            "connect_timeout",
        ):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                raise MQClientError(
                    f"{name}={value!r} is not a positive number of seconds; pass e.g. {name}=30.0"
                )
        if (self.access_key is None) != (self.secret_key is None):
            raise MQClientError(
                "access_key and secret_key go together: pass both (an ACL account) or neither"
            )
        for name in ("access_key", "secret_key"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise MQClientError(f"{name} must be a non-empty string, got {type(value).__name__}")
        if not self.instance_name or "@" in self.instance_name:
            raise MQClientError(f"instance_name={self.instance_name!r} must be non-empty and contain no '@'")


_InstanceKey = tuple[int, tuple[str, ...], ClientSettings]
_instances: dict[_InstanceKey, MQClientInstance] = {}


class MQClientInstance:
    """Shared client state for one NameServer set in one event loop (use ``acquire``/``release``)."""

    def __init__(self, namesrv_addrs: list[str], settings: ClientSettings) -> None:
        self.settings = settings
        self.namesrv_addrs = namesrv_addrs
        signer = None
        if settings.access_key is not None and settings.secret_key is not None:
            signer = RequestSigner(settings.access_key, settings.secret_key)
        self.remoting = RemotingClient(
            connect_timeout=settings.connect_timeout,
            serialize_type=settings.serialize_code,
            signer=signer,
        )
        self.api = MQClientAPI(self.remoting, namesrv_addrs)
        self.remoting.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_notify_ids_changed)
        self.remoting.register_processor(
            RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state
        )
        ClientCalls(lambda: self._consumers).register(self.remoting)  # the admin's calls via a broker
        check_served("client", self.remoting.served_codes())
        self._routes: dict[str, TopicRouteData] = {}
        self._publish: dict[str, TopicPublishInfo] = {}
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._pull_nodes = PullNodeTable()  # master or slave per queue (suggestWhichBrokerId)
        self._producers: dict[tuple[str, str], Any] = {}
        self._consumers: dict[tuple[str, str], ConsumerLike] = {}
        self._refs = 0
        self._key: _InstanceKey | None = None
        self._routines: list[asyncio.Task[None]] = []
        self._jobs: set[asyncio.Task[Any]] = set()
        self._route_locks: dict[str, asyncio.Lock] = {}
        # refreshes asked for by failed sends and pulls: one in flight per topic, started at most
        # every ROUTE_REFRESH_MIN_INTERVAL_S (a burst of failures asks the NameServer once)
        self._refreshing: dict[str, asyncio.Task[Any]] = {}
        self._refreshed_at: dict[str, float] = {}
        self._closed = False

    # ---- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    async def acquire(
        cls, namesrv_addr: str | None, *, config: ClientSettings | None = None
    ) -> MQClientInstance:
        """Return the running instance for this loop and NameServer set, starting one if needed.

        Raises:
            MQClientError: no or malformed NameServer address, or bad settings.
        """
        settings = config or ClientSettings()
        settings.check()
        addrs = parse_namesrv_addrs(namesrv_addr or os.environ.get("NAMESRV_ADDR"))
        loop = asyncio.get_running_loop()
        key: _InstanceKey = (id(loop), tuple(sorted(addrs)), settings)
        inst = _instances.get(key)
        if inst is None or inst._closed:
            inst = cls(addrs, settings)
            inst._key = key
            inst._start()
            _instances[key] = inst
        inst._refs += 1
        return inst

    def _start(self) -> None:
        self._routines = [
            asyncio.create_task(self._route_routine(), name="rocketpy-route-refresh"),
            asyncio.create_task(self._heartbeat_routine(), name="rocketpy-heartbeat"),
        ]

    async def release(self) -> None:
        """Drop one reference; the last one stops the routines and closes every connection."""
        assert self._refs > 0, "release() without acquire()"
        self._refs -= 1
        if self._refs > 0:
            return
        self._closed = True
        if self._key is not None and _instances.get(self._key) is self:
            del _instances[self._key]
        for t in self._routines:
            t.cancel()
        await asyncio.gather(*self._routines, return_exceptions=True)
        # members that did not shut down themselves still leave their groups cleanly
        for group, cid in list(self._producers):
            self.unregister_producer(group, cid)
        for group, cid in list(self._consumers):
            self.unregister_consumer(group, cid)
        if self._jobs:
            await asyncio.wait(list(self._jobs), timeout=self.settings.mq_client_api_timeout + 1.0)
        for t in list(self._jobs):
            t.cancel()
        await self.remoting.close()

    @property
    def closed(self) -> bool:
        """True once the last user released the instance."""
        return self._closed

    # ---- registration ------------------------------------------------------------------------------

    def register_producer(self, group: str, client_id: str, producer: Any) -> None:
        """Add a producer to heartbeats (its group shows in the brokers' producer table)."""
        self._producers[(group, client_id)] = producer

    def register_consumer(self, group: str, client_id: str, consumer: ConsumerLike) -> None:
        """Add a consumer to heartbeats and NOTIFY_CONSUMER_IDS_CHANGED dispatch."""
        self._consumers[(group, client_id)] = consumer

    def unregister_producer(self, group: str, client_id: str) -> asyncio.Task[None]:
        """Remove a producer and tell every broker (UNREGISTER_CLIENT); await the task to wait for it."""
        self._producers.pop((group, client_id), None)
        return self._spawn(self._unregister_everywhere(client_id, group, None))

    def unregister_consumer(self, group: str, client_id: str) -> asyncio.Task[None]:
        """Remove a consumer and tell every broker (UNREGISTER_CLIENT); await the task to wait for it."""
        self._consumers.pop((group, client_id), None)
        return self._spawn(self._unregister_everywhere(client_id, None, group))

    def consumers(self) -> list[ConsumerLike]:
        """The registered consumers."""
        return list(self._consumers.values())

    async def _unregister_everywhere(
        self, client_id: str, producer_group: str | None, consumer_group: str | None
    ) -> None:
        timeout = self.settings.mq_client_api_timeout
        addrs = sorted({a for table in self._broker_addrs.values() for a in table.values()})
        results = await asyncio.gather(
            *(
                self.api.unregister_client(a, client_id, producer_group, consumer_group, timeout)
                for a in addrs
            ),
            return_exceptions=True,
        )
        for addr, r in zip(addrs, results, strict=True):
            if isinstance(r, BaseException):
                log.info("unregister %s from %s failed: %s", client_id, addr, r)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        if len(self._jobs) >= MAX_BACKGROUND_TASKS:
            coro.close()
            raise MQClientError(
                f"too many background client jobs ({MAX_BACKGROUND_TASKS}); the broker is not answering"
            )
        task = asyncio.get_running_loop().create_task(coro)
        self._jobs.add(task)
        task.add_done_callback(self._job_done)
        return task

    def _job_done(self, task: asyncio.Task[Any]) -> None:
        self._jobs.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("client background job failed: %r", task.exception())

    # ---- routes ------------------------------------------------------------------------------------

    async def update_topic_route(self, topic: str) -> TopicRouteData | None:
        """Fetch the topic's route from a NameServer and update the caches.

        Returns:
            The route, or None when the NameServer does not know the topic.

        Raises:
            MQClientError: no NameServer reachable.
        """
        lock = self._route_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            route = await self.api.get_topic_route(topic, self.settings.mq_client_api_timeout)
            if route is None:
                return None
            self._set_route(topic, route)
            return route

    def refresh_route_soon(self, topic: str) -> asyncio.Task[Any] | None:
        """Refresh ``topic``'s route now, after a send or pull failed: its broker may have changed
        roles (controller mode moves the master) or gone. Returns the refresh to await, if any.

        One refresh per topic is in flight at a time, and one starts at most every
        ``ROUTE_REFRESH_MIN_INTERVAL_S`` (a later failure waits for the remainder); at most
        ``MAX_BACKGROUND_TASKS`` client jobs run at once.
        """
        running = self._refreshing.get(topic)
        if running is not None and not running.done():
            return running
        if self._closed or len(self._refreshing) >= MAX_REFRESHING_TOPICS:
            return None
        loop = asyncio.get_running_loop()
        wait_s = self._refreshed_at.get(topic, -1e9) + ROUTE_REFRESH_MIN_INTERVAL_S - loop.time()
        try:
            task = self._spawn(self._refresh_after(topic, max(0.0, wait_s)))
        except MQClientError:
            return None
        self._refreshing[topic] = task
        task.add_done_callback(lambda t: self._refreshing.pop(topic, None))
        return task

    async def _refresh_after(self, topic: str, wait_s: float) -> None:
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        self._refreshed_at[topic] = asyncio.get_running_loop().time()
        try:
            await self.update_topic_route(topic)
        except (MQClientError, MQBrokerError) as e:
            log.info("route refresh of %s after a failure did not succeed: %s", topic, e)

    def _set_route(self, topic: str, route: TopicRouteData) -> None:
        old = self._routes.get(topic)
        self._routes[topic] = route
        for name, addrs in broker_addrs(route).items():
            self._broker_addrs[name] = addrs
        if old is None or old != route or topic not in self._publish:
            prev = self._publish.get(topic)
            self._publish[topic] = TopicPublishInfo(topic, route, prev.index if prev else None)

    def set_publish_route(self, topic: str, route: TopicRouteData) -> TopicPublishInfo:
        """Install ``route`` (e.g. TBW102's) as ``topic``'s publish route until the real one appears."""
        self._set_route(topic, route)
        return self._publish[topic]

    def topic_route(self, topic: str) -> TopicRouteData | None:
        """The cached route of ``topic`` (None if never fetched)."""
        return self._routes.get(topic)

    def publish_info(self, topic: str) -> TopicPublishInfo | None:
        """The cached publish info (writable queues) of ``topic``."""
        return self._publish.get(topic)

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues of ``topic`` from the cached route, sorted (empty if unknown)."""
        route = self._routes.get(topic)
        return subscribe_queues(topic, route) if route else []

    def find_broker_addr(self, broker_name: str, *, master_only: bool = True) -> str | None:
        """The master's address (or, if allowed and no master, any member's)."""
        table = self._broker_addrs.get(broker_name)
        if not table:
            return None
        addr = table.get(MASTER_ID)
        if addr or master_only:
            return addr
        return table[min(table)]

    async def queue_broker_addr(self, mq: MessageQueue) -> str:
        """The master address of ``mq``'s broker, refreshing the topic's route once if unknown.

        Raises:
            MQClientError: when the route has no master for that broker (is it running?).
        """
        addr = self.find_broker_addr(mq.broker_name)
        if addr is None:
            await self.update_topic_route(mq.topic)
            # no master: a slave serves offsets and reads while its master is down
            addr = self.find_broker_addr(mq.broker_name, master_only=False)
        if not addr:
            raise MQClientError(
                f"broker {mq.broker_name!r} of topic {mq.topic!r} has no master address in the route: "
                "is it running?"
            )
        return addr

    def broker_names(self) -> list[str]:
        """Every broker name seen in a route."""
        return sorted(self._broker_addrs)

    async def _route_routine(self) -> None:
        await asyncio.sleep(0.01)
        while True:
            await self.refresh_routes()
            await asyncio.sleep(self.settings.poll_name_server_interval)

    async def refresh_routes(self) -> None:
        """Refresh the route of every topic in use (producers' cached topics and consumers' subscriptions)."""
        topics = set(self._routes)
        for c in list(self._consumers.values()):
            topics.update(s["topic"] for s in c.subscriptions())
        for topic in sorted(topics):
            try:
                await self.update_topic_route(topic)
            except (MQClientError, MQBrokerError) as e:
                log.warning("route refresh of %s failed: %s", topic, e)
        self._clean_offline_brokers()

    def _clean_offline_brokers(self) -> None:
        """Forget brokers no cached route mentions any more (no heartbeats to departed brokers)."""
        routes = list(self._routes.values()) + [tp.route for tp in self._publish.values()]
        live: dict[str, dict[int, str]] = {}
        for route in routes:
            live.update(broker_addrs(route))
        for name in set(self._broker_addrs) - set(live):
            log.info("broker %s left every route; forgetting it", name)
        self._broker_addrs = live

    # ---- heartbeats --------------------------------------------------------------------------------

    async def _heartbeat_routine(self) -> None:
        await asyncio.sleep(min(1.0, self.settings.heartbeat_broker_interval))
        while True:
            await self.send_heartbeat_to_all_brokers()
            await asyncio.sleep(self.settings.heartbeat_broker_interval)

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT for every registered producer (masters) and consumer (all members) to every broker."""
        datas = heartbeat_datas(list(self._producers), list(self._consumers.items()))
        if datas:
            await send_heartbeats(self.api, self._broker_addrs, datas, self.settings.mq_client_api_timeout)

    async def pull(self, mq: MessageQueue, ext: dict[str, Any], timeout_s: float) -> PullResult:
        """PULL_MESSAGE of ``mq`` (header fields ``ext``) from the member its last answer suggested
        (the master by default), or from another member when that one cannot be reached."""
        members = self._broker_addrs.get(mq.broker_name) or {}
        addr = self._pull_nodes.choose(mq, members) or await self.queue_broker_addr(mq)
        try:
            try:
                result = await self.api.pull_message(addr, ext, timeout_s)
            except RemotingConnectError:
                other = self._pull_nodes.fallback(members, addr)
                if other is None:
                    raise
                result = await self.api.pull_message(other, ext, timeout_s)
        except RocketpyError:
            self.refresh_route_soon(mq.topic)  # the broker may have moved (a new master) or gone
            raise
        self._pull_nodes.suggest(mq, result.suggest_which_broker_id)
        return result

    # ---- consumers ---------------------------------------------------------------------------------

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        """Client ids of ``group``'s consumers, asked from a broker holding ``topic`` (sorted).

        Raises:
            MQClientError: no broker of the topic is known or reachable.
        """
        route = self._routes.get(topic) or await self.update_topic_route(topic)
        if route is None:
            raise MQClientError(
                f"topic {topic!r} has no route: create it with `mqadmin updateTopic -t {topic} -c CLUSTER`"
            )
        last: Exception | None = None
        for bd in route.broker_datas:
            addr = bd.master_addr() or next(iter(bd.broker_addrs.values()), None)
            if addr is None:
                continue
            try:
                ids = await self.api.get_consumer_id_list(addr, group, self.settings.mq_client_api_timeout)
                return sorted(ids)
            except (MQClientError, MQBrokerError) as e:
                last = e
        raise MQClientError(
            f"no broker of topic {topic!r} answered the consumer list of group {group!r}: {last}"
        )

    def _on_notify_ids_changed(self, channel: Any, cmd: RemotingCommand) -> None:
        group = ConsumerGroupRequestHeader.from_ext(cmd.ext).group
        for (g, _cid), consumer in list(self._consumers.items()):
            if g == group:
                try:
                    self._spawn(consumer.on_consumer_ids_changed())
                except MQClientError as e:
                    log.warning("consumer ids changed for %s not dispatched: %s", group, e)
        return None

    def _on_check_transaction_state(self, channel: Any, cmd: RemotingCommand) -> None:
        dispatch_check(channel.remote_addr, cmd, self._producers)
