"""Long polling of POP and NOTIFICATION: requests that found nothing wait here for a message.

Owns the waiting requests as futures, keyed by the topic names they watch (the topic itself and
the group's POP retry topic) and counted per (group, topic, queue id) for POLLING_INFO. A wait
ends exactly once: the store's dispatch (or a revive, or an orderly queue becoming poppable)
reports a matching message (``notify``: the future gets True on this loop turn), its time is up
(``wait_done`` cancels it: False), or the waiting coroutine is cancelled (its connection closed).
Either way ``wait`` removes it from the tables.

Bounds (RocketMQ's names): ``popPollingSize`` waiters per (group, topic, queue id) and
``maxPopPollingSize`` in all; past either, ``wait`` raises ``PollingFull`` at once (answered
POLLING_FULL). Everything runs on the event loop; ``notify`` is called by every dispatch and costs
one dict lookup when nobody waits on that topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rocketpy.broker.store.dispatch import Listener
from rocketpy.broker.subscription import MessageFilter
from rocketpy.errors import RocketpyError
from rocketpy.waits import wait_done

WaitKey = tuple[str, str, int]


class PollingFull(RocketpyError):
    """The waiting tables are full: answer POLLING_FULL."""


class Waiter:
    """One waiting POP or NOTIFICATION."""

    __slots__ = ("fut", "key", "message_filter", "queue_id", "topics")

    def __init__(
        self,
        fut: asyncio.Future[bool],
        key: WaitKey,
        topics: tuple[str, ...],
        queue_id: int,
        message_filter: MessageFilter | None,
    ) -> None:
        self.fut = fut
        self.key = key
        self.topics = topics
        self.queue_id = queue_id
        self.message_filter = message_filter

    def wants(self, topic: str, queue_id: int, tags_code: int | None) -> bool:
        """True when a message of ``topic`` in ``queue_id`` with ``tags_code`` may be for it."""
        if topic != self.topics[0]:  # its retry topic: any message
            return True
        if self.queue_id >= 0 and queue_id != self.queue_id:
            return False
        f = self.message_filter
        return f is None or f.is_matched_by_consume_queue(tags_code)


class PopWaiters:
    """The waiting POPs and NOTIFICATIONs of one broker.

    Args:
        per_key_max: most waiters per (group, topic, queue id) (``popPollingSize``).
        total_max: most waiters in all (``maxPopPollingSize``).
    """

    def __init__(self, per_key_max: int, total_max: int) -> None:
        self.per_key_max = per_key_max
        self.total_max = total_max
        self._by_topic: dict[str, dict[Waiter, None]] = {}
        self._per_key: dict[WaitKey, int] = {}
        self.count = 0
        self.waited_total = 0
        self.woken_count = 0
        self.expired_count = 0
        self._closed = False
        self._listen: Callable[[Listener, bool], None] | None = None  # see listen_with

    def listen_with(self, listen: Callable[[Listener, bool], None]) -> None:
        """Have ``listen`` (the store's ``listen_to_dispatches``) call ``notify`` while a POP or a
        NOTIFICATION waits, and only then: a dispatch listener costs a call per stored message."""
        self._listen = listen
        listen(self.notify, self.count > 0)

    def waiting(self, group: str, topic: str, queue_id: int) -> int:
        """How many waiters of ``group`` wait on ``topic``'s queue ``queue_id`` (-1: on any queue)."""
        return self._per_key.get((group, topic, queue_id), 0)

    async def wait(
        self,
        key: WaitKey,
        topics: tuple[str, ...],
        message_filter: MessageFilter | None,
        timeout_s: float,
    ) -> bool:
        """Wait until a message of ``topics`` may have come (True) or ``timeout_s`` passed (False).

        ``key`` is (group, topic, queue id); ``topics[0]`` is the topic, the others are watched
        for any message.

        Raises:
            PollingFull: a bound is reached (or the broker is shutting down).
        """
        if self._closed or self.count >= self.total_max or self._per_key.get(key, 0) >= self.per_key_max:
            raise PollingFull
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        waiter = Waiter(fut, key, topics, key[2], message_filter)
        self._add(waiter)
        try:
            woken = await wait_done(fut, timeout_s)
        finally:
            self._remove(waiter)
        if woken:
            self.woken_count += 1
        else:
            self.expired_count += 1
        return woken

    def _add(self, waiter: Waiter) -> None:
        for topic in waiter.topics:
            self._by_topic.setdefault(topic, {})[waiter] = None
        self._per_key[waiter.key] = self._per_key.get(waiter.key, 0) + 1
        self.count += 1
        if self.count == 1 and self._listen is not None:
            self._listen(self.notify, True)
        self.waited_total += 1

    def _remove(self, waiter: Waiter) -> None:
        for topic in waiter.topics:
            table = self._by_topic.get(topic)
            if table is not None:
                table.pop(waiter, None)
                if not table:
                    del self._by_topic[topic]
        left = self._per_key[waiter.key] - 1
        if left:
            self._per_key[waiter.key] = left
        else:
            del self._per_key[waiter.key]
        self.count -= 1
        if not self.count and self._listen is not None:
            self._listen(self.notify, False)

    def notify(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int = 0,
        tags_code: int | None = None,
        store_ts: int = 0,
    ) -> None:
        """Dispatch listener (and the revive's): wake the waiters a message of ``topic`` may satisfy."""
        table = self._by_topic.get(topic)
        if not table:
            return
        for waiter in list(table):
            if not waiter.fut.done() and waiter.wants(topic, queue_id, tags_code):
                waiter.fut.set_result(True)

    def shutdown(self) -> int:
        """Refuse new waits and wake every waiter (they answer what they find); returns how many."""
        self._closed = True
        woken = 0
        for table in list(self._by_topic.values()):
            for waiter in list(table):
                if not waiter.fut.done():
                    waiter.fut.set_result(True)
                    woken += 1
        return woken
