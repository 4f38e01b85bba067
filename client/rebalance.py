"""Queue assignment of a consumer: periodic and notified rebalance, queue take-over and release.

Owns the table ``MessageQueue -> (ProcessQueue, pull task)`` of a push consumer (or the assigned
set of a lite pull consumer, through the ``on_acquire`` / ``on_release`` hooks it is given).

Every ``rebalance_interval`` seconds, and at once when woken (start, NOTIFY_CONSUMER_IDS_CHANGED),
each subscribed topic is rebalanced: CLUSTERING allocates the sorted read queues over the sorted
consumer ids of the group with the configured strategy; BROADCASTING takes every queue.
A released queue is dropped, its consumption drained (bounded) and its offset committed with an
acknowledged request *before* the lock is given up, so the next owner resumes from it. For orderly
consumers a queue is only taken once its broker lock is acquired, and locks are renewed every
``LOCK_INTERVAL_S``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from rocketpy.client.consumer_types import MessageModel
from rocketpy.errors import RocketpyError

log = logging.getLogger("rocketpy.client.rebalance")

LOCK_INTERVAL_S = 20.0
MIN_INTERVAL_S = 1.0
UNBALANCED_RETRY_S = 1.0
HANDOVER_GRACE_S = 0.3


class Rebalancer:
    """Keeps a consumer's assigned queues in line with the group.

    Args:
        consumer: exposes ``group``, ``client_id``, ``message_model``, ``instance``, ``allocate``,
            ``subscription_table`` (topic -> SubscriptionData), ``orderly``, ``rebalance_interval``.
        on_acquire: ``async (mq) -> bool`` starts consuming a queue (False: could not, retry later).
        on_release: ``async (mq) -> None`` stops consuming a queue and commits its offset.
    """

    def __init__(
        self,
        consumer: Any,
        on_acquire: Callable[[Any], Awaitable[bool]],
        on_release: Callable[[Any], Awaitable[None]],
    ) -> None:
        self.consumer = consumer
        self._on_acquire = on_acquire
        self._on_release = on_release
        self.assigned: set[Any] = set()
        self._wakeup = asyncio.Event()
        self._lock = asyncio.Lock()
        self.balanced = True

    def wakeup(self) -> None:
        """Ask for a rebalance now (thread of the loop only)."""
        self._wakeup.set()

    async def routine(self) -> None:
        """Rebalance every ``rebalance_interval`` s or when woken, at most once per second."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.rebalance()
            except Exception:  # keep rebalancing: the next pass may succeed
                self.balanced = False
                log.exception("rebalance of %s failed", self.consumer.group)
            interval = self.consumer.rebalance_interval if self.balanced else UNBALANCED_RETRY_S
            try:
                await asyncio.wait_for(self._wakeup.wait(), interval)
            except TimeoutError:
                pass
            self._wakeup.clear()
            rest_s = started + min(MIN_INTERVAL_S, interval) - loop.time()
            if rest_s > 0:
                await asyncio.sleep(rest_s)

    async def rebalance(self) -> None:
        """One pass over every subscribed topic (errors are logged; the next pass retries)."""
        async with self._lock:
            balanced = True
            for topic in list(self.consumer.subscription_table):
                try:
                    balanced &= await self._rebalance_topic(topic)
                except RocketpyError as exc:
                    balanced = False
                    log.warning("rebalance of %s for %s failed: %s", topic, self.consumer.group, exc)
            self.balanced = balanced

    async def _topic_queues(self, topic: str) -> list[Any]:
        inst = self.consumer.instance
        mqs = inst.subscribe_queues(topic)
        if not mqs:
            await inst.update_topic_route(topic)
            mqs = inst.subscribe_queues(topic)
        return sorted(mqs)

    async def _rebalance_topic(self, topic: str) -> bool:
        c = self.consumer
        mq_all = await self._topic_queues(topic)
        if not mq_all:
            log.warning("no route for topic %s (group %s): create the topic", topic, c.group)
            return False
        if c.message_model is MessageModel.BROADCASTING:
            mine = mq_all
        else:
            cid_all = sorted(await c.instance.find_consumer_id_list(topic, c.group))
            if c.client_id not in cid_all:  # the broker has not seen our heartbeat yet: send one now
                await c.instance.send_heartbeat_to_all_brokers()
                cid_all = sorted(await c.instance.find_consumer_id_list(topic, c.group))
            if c.client_id not in cid_all:
                return False
            mine = c.allocate(c.client_id, mq_all, cid_all)
            return await self._apply(topic, set(mine), handover=len(cid_all) > 1)
        return await self._apply(topic, set(mine))

    async def _apply(self, topic: str, mine: set[Any], *, handover: bool = False) -> bool:
        current = {mq for mq in self.assigned if mq.topic == topic}
        for mq in sorted(current - mine):
            self.assigned.discard(mq)
            await self._on_release(mq)
        if handover and mine - current:
            # Queues may be moving from another member, which commits their offsets as it releases
            # them (it was notified at the same time as we were): give it that moment, so we start
            # from its final offset instead of re-consuming what it consumed since its last commit.
            await asyncio.sleep(HANDOVER_GRACE_S)
        ok = True
        for mq in sorted(mine - current):
            if await self._on_acquire(mq):
                self.assigned.add(mq)
            else:
                ok = False
        if mine != current:
            log.info(
                "%s %s now holds %d queue(s) of %s",
                self.consumer.group,
                self.consumer.client_id,
                len([q for q in self.assigned if q.topic == topic]),
                topic,
            )
        return ok


def by_broker(mqs: list[Any]) -> dict[str, list[Any]]:
    """Group queues by broker name."""
    out: dict[str, list[Any]] = defaultdict(list)
    for mq in mqs:
        out[mq.broker_name].append(mq)
    return out


async def lock_queues(consumer: Any, mqs: list[Any]) -> set[Any]:
    """LOCK_BATCH_MQ on each broker; returns the queues now locked by this consumer."""
    locked: set[Any] = set()
    for broker_name, group_mqs in by_broker(mqs).items():
        addr = consumer.instance.find_broker_addr(broker_name)
        if addr is None:
            continue
        try:
            locked |= await consumer.instance.api.lock_batch_mq(
                addr, consumer.group, consumer.client_id, group_mqs
            )
        except RocketpyError as exc:
            log.warning("locking %d queue(s) on %s failed: %s", len(group_mqs), broker_name, exc)
    return locked


async def unlock_queues(consumer: Any, mqs: list[Any]) -> None:
    """UNLOCK_BATCH_MQ on each broker (errors logged: the broker lock expires anyway)."""
    for broker_name, group_mqs in by_broker(mqs).items():
        addr = consumer.instance.find_broker_addr(broker_name)
        if addr is None:
            continue
        try:
            await consumer.instance.api.unlock_batch_mq(addr, consumer.group, consumer.client_id, group_mqs)
        except RocketpyError as exc:
            log.warning("unlocking %d queue(s) on %s failed: %s", len(group_mqs), broker_name, exc)
