"""LitePullConsumer: the application polls; queues come from a subscription (rebalanced) or ``assign``.

Owns the buffer between the background pull loops (one per queue, the push consumer's ``PullLoop``)
and ``poll()``: pulled batches wait in a deque bounded by per-queue flow control; ``poll`` hands one
batch out. Polled messages are "consumed": with ``auto_commit`` their offsets are committed every
``auto_commit_interval`` seconds; otherwise ``commit()`` commits what was polled so far. ``seek``
restarts a queue's pull at an offset, dropping what was buffered for it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any

from rocketpy.client.consumer_types import check_positive
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.client.pull_loop import PullLoop
from rocketpy.client.push_consumer import DEFAULT_NAMESRV, ConsumerBase
from rocketpy.client.rebalance import Rebalancer
from rocketpy.errors import MQClientError, RocketpyError
from rocketpy.message import MessageExt, MessageQueue

log = logging.getLogger("rocketpy.client.litepull")

#: Hard bound of buffered batches (flow control keeps the real number far below).
MAX_BUFFERED_BATCHES = 100_000


class _Buffer:
    """Plays the consume service for the pull loops: pulled batches go to the poll buffer."""

    def __init__(self) -> None:
        self.batches: collections.deque[tuple[ProcessQueue, MessageQueue, list[MessageExt]]] = (
            collections.deque()
        )
        self.ready = asyncio.Event()

    def submit(self, pq: ProcessQueue, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        """Buffer a pulled batch for ``poll``."""
        assert len(self.batches) < MAX_BUFFERED_BATCHES, "flow control failed to bound the poll buffer"
        self.batches.append((pq, mq, msgs))
        self.ready.set()


class LitePullConsumer(ConsumerBase):
    """A consumer whose application calls ``poll()`` (DESIGN §8).

    Args:
        group: the consumer group.
        namesrv_addr: ``"host:port"`` or ``"h1:p1;h2:p2"``.
        pull_batch_size: messages per pull request (10).
        auto_commit: commit polled offsets every ``auto_commit_interval`` seconds (True).
        pull_threshold_for_queue: buffered messages per queue before pulling pauses (1000).
        poll_timeout: default ``poll`` wait in seconds (5.0).
        **options: ConsumerBase options (message_model, consume_from_where, timers, ...).
    """

    consume_type = "CONSUME_ACTIVELY"
    orderly = False

    def __init__(
        self,
        group: str,
        namesrv_addr: str = DEFAULT_NAMESRV,
        *,
        pull_batch_size: int = 10,
        auto_commit: bool = True,
        auto_commit_interval: float = 5.0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100 * 1024 * 1024,
        poll_timeout: float = 5.0,
        **options: Any,
    ) -> None:
        options.setdefault("persist_consumer_offset_interval", auto_commit_interval)
        super().__init__(group, namesrv_addr, **options)
        self.pull_batch_size = check_positive("pull_batch_size", pull_batch_size, integer=True)
        self.auto_commit = bool(auto_commit)
        self.pull_threshold_for_queue = check_positive(
            "pull_threshold_for_queue", pull_threshold_for_queue, integer=True
        )
        self.pull_threshold_size_for_queue = check_positive(
            "pull_threshold_size_for_queue", pull_threshold_size_for_queue, integer=True
        )
        self.poll_timeout = check_positive("poll_timeout", poll_timeout)
        self.consume_service = _Buffer()
        self._queues: dict[MessageQueue, tuple[ProcessQueue, asyncio.Task[None]]] = {}
        self._polled: dict[MessageQueue, int] = {}
        self._paused: set[MessageQueue] = set()
        self._assigned_manually = False
        self._manual: list[MessageQueue] = []
        self._manual_assignment: _ManualAssignment | None = None

    def subscribe(self, topic: str, expression: Any = "*") -> None:
        """Subscribe (queues are rebalanced within the group).

        Raises:
            MQClientError: after ``assign``.
        """
        if self._assigned_manually:
            raise MQClientError("this consumer uses assign(); subscribe and assign cannot be mixed")
        super().subscribe(topic, expression)

    def assign(self, queues: list[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalance).

        Raises:
            MQClientError: after ``subscribe``, or an empty list.
        """
        if self.subscription_table and not self._assigned_manually:
            raise MQClientError("this consumer uses subscribe(); subscribe and assign cannot be mixed")
        if not queues:
            raise MQClientError("assign() needs at least one MessageQueue (see fetch_message_queues(topic))")
        self._assigned_manually = True
        self._manual = sorted(queues)
        for mq in self._manual:
            if mq.topic not in self.subscription_table:
                super().subscribe(mq.topic, "*")
        if self._state == "RUNNING":  # tracked like the other routines; errors surface at shutdown
            self._routines.append(asyncio.get_running_loop().create_task(self._apply_assignment()))

    async def start(self) -> None:
        """Connect, join the group and start pulling.

        Raises:
            MQClientError: neither subscribe nor assign was called; no NameServer reachable.
        """
        if not self.subscription_table:
            raise MQClientError(
                "call consumer.subscribe(topic, '*') or consumer.assign(queues) before start()"
            )
        if self._assigned_manually:
            self.rebalancer = self._manual_assignment = _ManualAssignment(
                self, self._acquire_queue, self._release_queue
            )
        await self._start_base()
        if self._assigned_manually:
            await self._apply_assignment()

    async def _apply_assignment(self) -> None:
        assert self._manual_assignment is not None
        await self._manual_assignment.apply_all(set(self._manual))

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (from the NameServer)."""
        inst = self.instance
        if inst is None:
            raise MQClientError("start() the consumer before fetch_message_queues()")
        await inst.update_topic_route(topic)
        return list(inst.subscribe_queues(topic))

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:  # noqa: ASYNC109 (public API)
        """Wait up to ``timeout`` seconds (default ``poll_timeout``) for messages; [] if none came."""
        self._check_running()
        buf = self.consume_service
        deadline = time.monotonic() + (self.poll_timeout if timeout is None else max(timeout, 0.0))
        while True:
            for _ in range(len(buf.batches)):
                pq, mq, msgs = buf.batches.popleft()
                if pq.dropped:
                    continue
                if mq in self._paused:
                    buf.batches.append((pq, mq, msgs))  # keep it for resume()
                    continue
                self._consumed(pq, mq, msgs)
                return msgs
            buf.ready.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            try:
                await asyncio.wait_for(buf.ready.wait(), remaining)
            except TimeoutError:
                return []

    def _consumed(self, pq: ProcessQueue, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        offset = pq.remove(msgs)
        if offset >= 0:
            self._polled[mq] = offset
            if self.auto_commit:
                self.offset_store.update(mq, offset)

    async def commit(self) -> None:
        """Commit the offsets of everything polled so far (acknowledged by the brokers)."""
        self._check_running()
        for mq, offset in self._polled.items():
            self.offset_store.update(mq, offset)
        await self.offset_store.persist(sorted(self._polled), oneway=False)

    commit_sync = commit

    async def committed(self, mq: MessageQueue) -> int | None:
        """The group's stored offset of ``mq`` (None if it has none)."""
        self._check_running()
        return await self.offset_store.fetch(mq)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from ``offset`` (buffered messages of it are dropped).

        Raises:
            MQClientError: the queue is not assigned to this consumer, or the offset is negative.
        """
        self._check_running()
        if mq not in self._queues:
            raise MQClientError(f"{mq} is not assigned to this consumer; assigned: {self.assigned_queues()}")
        if not isinstance(offset, int) or offset < 0:
            raise MQClientError(f"seek offset must be a non-negative int, got {offset!r}")
        await self._stop_queue(mq)
        self.offset_store.update(mq, offset, increase_only=False)
        self._polled.pop(mq, None)
        self._start_queue(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """Seek to the queue's smallest offset."""
        await self.seek(
            mq, await self.instance.api.get_min_offset(await self.broker_addr(mq), mq.topic, mq.queue_id)
        )

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """Seek to the queue's end (only new messages)."""
        await self.seek(
            mq, await self.instance.api.get_max_offset(await self.broker_addr(mq), mq.topic, mq.queue_id)
        )

    def pause(self, queues: list[MessageQueue]) -> None:
        """Stop handing out messages of these queues (pulling stops by flow control)."""
        self._paused.update(queues)

    def resume(self, queues: list[MessageQueue]) -> None:
        """Hand out messages of these queues again."""
        self._paused.difference_update(queues)
        self.consume_service.ready.set()

    async def shutdown(self) -> None:
        """Stop pulling, commit (when auto_commit) and leave the group."""
        if self._state != "RUNNING":
            return
        self._state = "STOPPING"
        await self._stop_routines()
        mqs = list(self._queues)
        for mq in mqs:
            await self._stop_queue(mq)
        await self._shutdown_base(mqs)

    def _check_running(self) -> None:
        if self._state != "RUNNING":
            raise MQClientError("the consumer is not running: call start() first (and not after shutdown())")

    def _start_queue(self, mq: MessageQueue, offset: int) -> None:
        pq = ProcessQueue()
        loop = PullLoop(self, mq, pq, self.subscription_table[mq.topic], offset)
        self._queues[mq] = (pq, asyncio.create_task(loop.run(), name=f"rocketpy-litepull-{mq.queue_id}"))

    async def _stop_queue(self, mq: MessageQueue) -> None:
        entry = self._queues.pop(mq, None)
        if entry is not None:
            entry[0].dropped = True
            entry[1].cancel()
            await asyncio.gather(entry[1], return_exceptions=True)

    async def _acquire_queue(self, mq: MessageQueue) -> bool:
        try:
            offset = await self.compute_start_offset(mq)
        except RocketpyError as exc:
            log.warning("cannot start %s for %s: %s (retrying)", mq, self.group, exc)
            return False
        self._start_queue(mq, offset)
        return True

    async def _release_queue(self, mq: MessageQueue) -> None:
        await self._stop_queue(mq)
        if self.auto_commit:
            await self.offset_store.persist([mq], oneway=False)
        self.offset_store.remove(mq)
        self._polled.pop(mq, None)


class _ManualAssignment(Rebalancer):
    """The assign() mode: the assignment changes only when the application says so."""

    async def rebalance(self) -> None:
        """No group rebalance for assigned queues."""

    async def apply_all(self, mine: set[Any]) -> None:
        """Make the assigned set exactly ``mine``.

        Raises:
            MQClientError: a queue could not be started (its broker is unknown or down).
        """
        for mq in sorted(self.assigned - mine):
            self.assigned.discard(mq)
            await self._on_release(mq)
        for mq in sorted(mine - self.assigned):
            if await self._on_acquire(mq):
                self.assigned.add(mq)
            else:
                raise MQClientError(f"could not start {mq}: is its broker running?")
