"""Broker locks of an orderly CLUSTERING consumer's queues (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

Owns the lock calls, per broker, and their renewal: an orderly consumer takes a queue only once
the queue's broker locked it for this client, renews the locks of every held queue every
``LOCK_INTERVAL_S`` (a queue whose renewal fails stops being consumed until a renewal succeeds;
a lock older than ``process_queue.LOCK_MAX_LIVE_S`` counts as lost), and unlocks a queue after
its offset was committed on release, so the next owner resumes from it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Mapping

from rocketpy.client.instance import MQClientInstance
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.client.queue_context import QueueContext
from rocketpy.errors import RocketpyError
from rocketpy.message import MessageQueue

log = logging.getLogger("rocketpy.client.lock")

LOCK_INTERVAL_S = 20.0


def by_broker(mqs: list[MessageQueue]) -> dict[str, list[MessageQueue]]:
    """Group queues by broker name."""
    out: dict[str, list[MessageQueue]] = defaultdict(list)
    for mq in mqs:
        out[mq.broker_name].append(mq)
    return out


class QueueLocks:
    """The broker locks one consumer holds.

    Args:
        instance: the client instance (broker addresses and the client API).
        group: the consumer group.
        client_id: the consumer's client id (the lock owner).
    """

    def __init__(self, instance: MQClientInstance, group: str, client_id: str) -> None:
        self._instance = instance
        self._group = group
        self._client_id = client_id

    async def lock(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ on each broker; returns the queues now locked by this consumer."""
        locked: set[MessageQueue] = set()
        for broker_name, group_mqs in by_broker(mqs).items():
            addr = self._instance.find_broker_addr(broker_name)
            if addr is None:
                continue
            try:
                locked |= await self._instance.api.lock_batch_mq(
                    addr, self._group, self._client_id, group_mqs
                )
            except RocketpyError as exc:
                log.warning("locking %d queue(s) on %s failed: %s", len(group_mqs), broker_name, exc)
        return locked

    async def unlock(self, mqs: list[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ on each broker (errors logged: the broker lock expires anyway)."""
        for broker_name, group_mqs in by_broker(mqs).items():
            addr = self._instance.find_broker_addr(broker_name)
            if addr is None:
                continue
            try:
                await self._instance.api.unlock_batch_mq(addr, self._group, self._client_id, group_mqs)
            except RocketpyError as exc:
                log.warning("unlocking %d queue(s) on %s failed: %s", len(group_mqs), broker_name, exc)

    async def lock_one(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Lock ``mq`` before it is taken; marks ``pq`` locked on success."""
        if mq not in await self.lock([mq]):
            return False
        pq.locked, pq.last_lock_time = True, time.monotonic()
        return True

    async def renew(self, table: Mapping[MessageQueue, QueueContext]) -> None:
        """Lock every held queue again; a queue whose lock failed is marked unlocked."""
        mqs = list(table)
        locked = await self.lock(mqs)
        now = time.monotonic()
        for mq in mqs:
            ctx = table.get(mq)
            if ctx is None:  # released meanwhile
                continue
            ctx.pq.locked = mq in locked
            if mq in locked:
                ctx.pq.last_lock_time = now

    async def renew_routine(self, table: Mapping[MessageQueue, QueueContext]) -> None:
        """Renew the locks of ``table``'s queues every ``LOCK_INTERVAL_S``."""
        while True:
            await asyncio.sleep(LOCK_INTERVAL_S)
            await self.renew(table)
