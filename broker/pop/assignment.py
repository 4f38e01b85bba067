"""Server-side assignment of RocketMQ 5: QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE.

Owns ``MessageRequestModeTable`` (``config/messageRequestMode.json``, RocketMQ's
``MessageRequestModeSerializeWrapper``: topic -> group -> {mode, popShareQueueNum}, set by
``mqadmin setConsumeMode``) and ``AssignmentService.assign``, RocketMQ's
``QueryAssignmentProcessor.doLoadBalance``: BROADCASTING takes every readable queue of the topic
(all brokers, from the NameServers' route); CLUSTERING allocates them over the group's live
consumers with the strategy named (``AVG`` / ``AVG_BY_CIRCLE``), except in POP mode, where
``popShareQueueNum`` <= 0 (or at least the consumers minus one) gives every consumer every broker's
queues as queue id -1 ("pop any queue"), else each consumer its own queues plus those of the next
``popShareQueueNum`` consumers.

The mode of a (topic, group) nobody set: PULL for retry topics; POP with ``defaultPopShareQueueNum``
when the group's consumers announced ``CONSUME_POP`` in their heartbeats (rocketpy's rule, so a
group of POP consumers needs no admin step); else ``defaultMessageRequestMode``. Routes are cached
``ROUTE_TTL_S`` per topic (at most ``MAX_ROUTES`` topics).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from rocketpy.allocate import allocate_averagely, allocate_averagely_by_circle
from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.persistence import JsonTable
from rocketpy.broker.topic_route import ask_topic_route
from rocketpy.config import BrokerConfig
from rocketpy.errors import HeaderError, RocketpyError
from rocketpy.message import MessageQueue
from rocketpy.protocol.headers.pop import MessageRequestMode
from rocketpy.remoting.client import RemotingClient
from rocketpy.route import subscribe_queues
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger("rocketpy.broker.pop")

ROUTE_TTL_S = 10.0
MAX_ROUTES = 10_000
ROUTE_TIMEOUT_S = 3.0
MAX_MODES = 100_000
#: RocketMQ's strategy names (``AllocateMessageQueueStrategy.getName()``).
STRATEGIES = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_averagely_by_circle}
CONSUME_POP = "CONSUME_POP"

Mode = tuple[MessageRequestMode, int]


class MessageRequestModeTable:
    """The modes set by SET_MESSAGE_REQUEST_MODE (``messageRequestMode.json``)."""

    def __init__(self, path: str) -> None:
        self.table: dict[str, dict[str, Mode]] = {}
        self.file = JsonTable(path, self.snapshot)

    def load(self) -> None:
        """Read the file (call from a thread, before serving)."""
        doc = self.file.load() or {}
        for topic, groups in (doc.get("messageRequestModeMap") or {}).items():
            for group, body in groups.items():
                self.table.setdefault(topic, {})[group] = (
                    MessageRequestMode(body.get("mode", "PULL")),
                    int(body.get("popShareQueueNum", 0)),
                )

    def snapshot(self) -> dict[str, Any]:
        """RocketMQ's MessageRequestModeSerializeWrapper."""
        return {
            "messageRequestModeMap": {
                topic: {
                    group: {"topic": topic, "consumerGroup": group, "mode": mode.value, "popShareQueueNum": n}
                    for group, (mode, n) in groups.items()
                }
                for topic, groups in self.table.items()
            }
        }

    def get(self, topic: str, group: str) -> Mode | None:
        """The mode set for (topic, group), or None."""
        return self.table.get(topic, {}).get(group)

    def set(self, topic: str, group: str, mode: MessageRequestMode, share: int) -> None:
        """Set a mode (persisted by the caller).

        Raises:
            RocketpyError: the table holds ``MAX_MODES`` entries already.
        """
        if self.get(topic, group) is None and sum(map(len, self.table.values())) >= MAX_MODES:
            raise RocketpyError(f"the broker holds {MAX_MODES} request modes; remove unused groups first")
        self.table.setdefault(topic, {})[group] = (mode, share)
        self.file.mark_dirty()


class RouteCache:
    """Topic routes from the NameServers, for assignments (RocketMQ's ``TopicRouteInfoManager``)."""

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: Callable[[], list[str]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._namesrv_addrs = namesrv_addrs
        self._clock = clock
        self._routes: dict[str, tuple[float, list[MessageQueue] | None]] = {}

    async def read_queues(self, topic: str) -> list[MessageQueue] | None:
        """Readable queues of ``topic`` in the whole cluster (None: no NameServer knows it)."""
        cached = self._routes.get(topic)
        if cached is not None and self._clock() - cached[0] < ROUTE_TTL_S:
            return cached[1]
        queues = await self._fetch(topic)
        if len(self._routes) >= MAX_ROUTES:
            self._routes.clear()
        self._routes[topic] = (self._clock(), queues)
        return queues

    async def _fetch(self, topic: str) -> list[MessageQueue] | None:
        for addr in self._namesrv_addrs():
            try:
                _, route = await ask_topic_route(self._client, addr, topic, ROUTE_TIMEOUT_S)
            except (HeaderError, ValueError) as e:  # answered, with a body that is not a route
                log.warning("route of %s from %s unreadable: %s", topic, addr, e)
                return None
            except RocketpyError as e:
                log.info("route of %s from %s failed: %s", topic, addr, e)
                continue
            return None if route is None else subscribe_queues(topic, route)
        return None


class AssignmentService:
    """Answers QUERY_ASSIGNMENT (see the module docstring)."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        consumers: ConsumerManager,
        modes: MessageRequestModeTable,
        routes: RouteCache,
    ) -> None:
        self.broker_config = broker_config
        self.consumers = consumers
        self.modes = modes
        self.routes = routes

    def mode_of(self, topic: str, group: str) -> Mode:
        """The mode of (topic, group): set, or the default (see the module docstring)."""
        bc = self.broker_config
        found = self.modes.get(topic, group)
        if found is not None:
            return found
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return MessageRequestMode.PULL, 0
        info = self.consumers.groups.get(group)
        if info is not None and info.consume_type == CONSUME_POP:
            return MessageRequestMode.POP, bc.default_pop_share_queue_num
        return bc.default_message_request_mode, bc.default_pop_share_queue_num

    async def assign(
        self, topic: str, group: str, client_id: str, strategy: str, message_model: str
    ) -> tuple[MessageRequestMode, list[MessageQueue]] | None:
        """The mode and the queues ``client_id`` should take (None: no answer now; keep yours)."""
        mode, share = self.mode_of(topic, group)
        mqs = await self.routes.read_queues(topic)
        if mqs is None:
            return None
        if message_model == "BROADCASTING":
            return mode, mqs
        info = self.consumers.groups.get(group)
        cids = info.client_ids() if info is not None else []
        allocate = STRATEGIES.get(strategy)
        if not cids or allocate is None or not mqs:
            if allocate is None:
                log.warning(
                    "QUERY_ASSIGNMENT of %s: unsupported strategy %r (use AVG or AVG_BY_CIRCLE)",
                    group,
                    strategy,
                )
            return None
        if mode is MessageRequestMode.POP:
            return mode, allocate_for_pop(allocate, client_id, mqs, cids, share)
        return mode, allocate(client_id, mqs, cids)


def allocate_for_pop(
    allocate: Callable[[str, list[MessageQueue], list[str]], list[MessageQueue]],
    client_id: str,
    mqs: list[MessageQueue],
    cids: list[str],
    share: int,
) -> list[MessageQueue]:
    """RocketMQ's ``allocate4Pop``: everyone pops every broker's queues (queue id -1) when
    ``share`` <= 0 or covers all others; else a consumer's own queues plus its ``share`` successors'."""
    if share <= 0 or share >= len(cids) - 1:
        return sorted({MessageQueue(mq.topic, mq.broker_name, -1) for mq in mqs})
    if client_id not in cids:
        return []
    if len(cids) > len(mqs):
        return [mqs[cids.index(client_id) % len(mqs)]]
    index = cids.index(client_id)
    mine = list(allocate(client_id, mqs, cids))
    for i in range(1, share + 1):
        mine += allocate(cids[(index + i) % len(cids)], mqs, cids)
    return sorted(set(mine))
