"""Queue assignment of a consumer: periodic and notified rebalance, queue take-over and release.

Owns the table ``MessageQueue -> QueueContext`` of the queues a consumer holds (RocketMQ's
processQueueTable); the consumer says how a queue starts and stops through the ``on_acquire`` /
``on_release`` hooks it gives (push: lock, pull loop, consume service; lite pull: pull loop, buffer).

Every ``rebalance_interval`` seconds, and at once when woken (start, NOTIFY_CONSUMER_IDS_CHANGED),
each subscribed topic is rebalanced: CLUSTERING allocates the sorted read queues over the sorted
consumer ids of the group with the configured strategy; BROADCASTING takes every queue.
A released queue is dropped, its consumption drained (bounded) and its offset committed with an
acknowledged request *before* the lock is given up, so the next owner resumes from it (orderly
consumers take a queue only once its broker lock is acquired: ``queue_lock``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from rocketpy.client.allocate import AllocateFn
from rocketpy.client.consumer_types import MessageModel, SubscriptionData
from rocketpy.client.queue_context import QueueContext
from rocketpy.errors import RocketpyError
from rocketpy.message import MessageQueue
from rocketpy.route import TopicRouteData

log = logging.getLogger("rocketpy.client.rebalance")

MIN_INTERVAL_S = 1.0
UNBALANCED_RETRY_S = 1.0
HANDOVER_GRACE_S = 0.3


@dataclass(frozen=True, slots=True)
class GroupMember:
    """Who this consumer is in its group, and how the group shares queues.

    Attributes:
        group: the consumer group.
        client_id: this consumer's client id.
        message_model: CLUSTERING shares the queues; BROADCASTING takes them all.
        allocate: the allocation strategy (CLUSTERING).
    """

    group: str
    client_id: str
    message_model: MessageModel
    allocate: AllocateFn[MessageQueue]


class GroupView(Protocol):
    """What the rebalancer asks of the client instance: routes and the group's members."""

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues of ``topic`` from the cached route."""
        ...

    async def update_topic_route(self, topic: str) -> TopicRouteData | None:
        """Fetch the topic's route from a NameServer."""
        ...

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        """Client ids of the group's consumers (from a broker of the topic)."""
        ...

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every broker."""
        ...


#: ``async (mq) -> QueueContext | None``: start consuming a queue (None: could not, retry later).
AcquireFn = Callable[[MessageQueue], Awaitable[QueueContext | None]]
#: ``async (ctx) -> None``: stop consuming a queue and commit its offset.
ReleaseFn = Callable[[QueueContext], Awaitable[None]]


class Rebalancer:
    """Keeps a consumer's assigned queues (and their contexts) in line with the group.

    Args:
        member: the consumer's identity and allocation strategy.
        view: routes and group members (the MQClientInstance).
        subscriptions: the consumer's live subscription table (topic -> SubscriptionData).
        interval_s: seconds between periodic rebalances.
        on_acquire: starts consuming a queue.
        on_release: stops consuming a queue and commits its offset.
    """

    def __init__(
        self,
        member: GroupMember,
        view: GroupView,
        subscriptions: Mapping[str, SubscriptionData],
        interval_s: float,
        on_acquire: AcquireFn,
        on_release: ReleaseFn,
    ) -> None:
        self.member = member
        self._view = view
        self._subscriptions = subscriptions
        self._interval_s = interval_s
        self._on_acquire = on_acquire
        self._on_release = on_release
        #: The assigned queues and their contexts (RocketMQ's processQueueTable).
        self.table: dict[MessageQueue, QueueContext] = {}
        self._wakeup = asyncio.Event()
        #: held while the assignment changes (rebalances, and a reset's restart of queues)
        self.lock = asyncio.Lock()
        self.balanced = True

    def wakeup(self) -> None:
        """Ask for a rebalance now (thread of the loop only)."""
        self._wakeup.set()

    async def routine(self) -> None:
        """Rebalance every ``interval_s`` s or when woken, at most once per second."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.rebalance()
            except Exception:  # keep rebalancing: the next pass may succeed
                self.balanced = False
                log.exception("rebalance of %s failed", self.member.group)
            interval = self._interval_s if self.balanced else UNBALANCED_RETRY_S
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancel that lands as
            # its timeout fires, and the routine would then outlive the consumer's shutdown
            try:
                async with asyncio.timeout(interval):
                    await self._wakeup.wait()
            except TimeoutError:
                pass
            self._wakeup.clear()
            rest_s = started + min(MIN_INTERVAL_S, interval) - loop.time()
            if rest_s > 0:
                await asyncio.sleep(rest_s)

    async def rebalance(self) -> None:
        """One pass over every subscribed topic (errors are logged; the next pass retries)."""
        async with self.lock:
            balanced = True
            for topic in list(self._subscriptions):
                try:
                    balanced &= await self._rebalance_topic(topic)
                except RocketpyError as exc:
                    balanced = False
                    log.warning("rebalance of %s for %s failed: %s", topic, self.member.group, exc)
            self.balanced = balanced

    async def _topic_queues(self, topic: str) -> list[MessageQueue]:
        mqs = self._view.subscribe_queues(topic)
        if not mqs:
            await self._view.update_topic_route(topic)
            mqs = self._view.subscribe_queues(topic)
        return sorted(mqs)

    async def _rebalance_topic(self, topic: str) -> bool:
        me, view = self.member, self._view
        mq_all = await self._topic_queues(topic)
        if not mq_all:
            log.warning("no route for topic %s (group %s): create the topic", topic, me.group)
            return False
        if me.message_model is MessageModel.BROADCASTING:
            return await self._apply(topic, set(mq_all))
        cid_all = sorted(await view.find_consumer_id_list(topic, me.group))
        if me.client_id not in cid_all:  # the broker has not seen our heartbeat yet: send one now
            await view.send_heartbeat_to_all_brokers()
            cid_all = sorted(await view.find_consumer_id_list(topic, me.group))
        if me.client_id not in cid_all:
            return False
        mine = me.allocate(me.client_id, mq_all, cid_all)
        return await self._apply(topic, set(mine), handover=len(cid_all) > 1)

    async def _apply(self, topic: str, mine: set[MessageQueue], *, handover: bool = False) -> bool:
        current = {mq for mq in self.table if mq.topic == topic}
        for mq in sorted(current - mine):
            await self.release(mq)
        if handover and mine - current:
            # Queues may be moving from another member, which commits their offsets as it releases
            # them (it was notified at the same time as we were): give it that moment, so we start
            # from its final offset instead of re-consuming what it consumed since its last commit.
            await asyncio.sleep(HANDOVER_GRACE_S)
        ok = True
        for mq in sorted(mine - current):
            ok &= await self.acquire(mq)
        if mine != current:
            log.info(
                "%s %s now holds %d queue(s) of %s",
                self.member.group,
                self.member.client_id,
                len([q for q in self.table if q.topic == topic]),
                topic,
            )
        return ok

    async def acquire(self, mq: MessageQueue) -> bool:
        """Start consuming ``mq``; False when it could not start (a later pass retries)."""
        ctx = await self._on_acquire(mq)
        if ctx is None:
            return False
        self.table[mq] = ctx
        return True

    async def release(self, mq: MessageQueue) -> None:
        """Stop consuming ``mq`` and commit its offset (no-op if it is not assigned)."""
        ctx = self.table.pop(mq, None)
        if ctx is not None:
            await self._on_release(ctx)
