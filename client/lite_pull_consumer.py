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

from rocketpy.client.consumer_base import DEFAULT_NAMESRV, ConsumerBase
from rocketpy.client.consumer_types import check_positive
from rocketpy.client.instance import MQClientInstance
from rocketpy.client.queue_context import QueueContext
from rocketpy.client.rebalance import GroupMember, Rebalancer
from rocketpy.errors import MQClientError, RocketpyError
from rocketpy.message import MessageExt, MessageQueue

log = logging.getLogger("rocketpy.client.litepull")

#: Hard bound of buffered batches (flow control keeps the real number far below).
MAX_BUFFERED_BATCHES = 100_000


class _Buffer:
    """Where the pull loops hand pulled batches (instead of a consume service), until ``poll``."""

    def __init__(self) -> None:
        self.batches: collections.deque[tuple[QueueContext, list[MessageExt]]] = collections.deque()
        self.ready = asyncio.Event()

    def submit(self, ctx: QueueContext, msgs: list[MessageExt]) -> None:
        """Buffer a pulled batch for ``poll``."""
        assert len(self.batches) < MAX_BUFFERED_BATCHES, "flow control failed to bound the poll buffer"
        self.batches.append((ctx, msgs))
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
        self._buffer = _Buffer()
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
        await self._start_base()
        if self._assigned_manually:
            await self._apply_assignment()

    def _new_rebalancer(self, member: GroupMember, inst: MQClientInstance) -> Rebalancer:
        if not self._assigned_manually:
            return super()._new_rebalancer(member, inst)
        self._manual_assignment = _ManualAssignment(
            member,
            inst,
            self.subscription_table,
            self.settings.rebalance_interval,
            self._acquire_queue,
            self._release_queue,
        )
        return self._manual_assignment

    async def _apply_assignment(self) -> None:
        assert self._manual_assignment is not None
        await self._manual_assignment.apply_all(set(self._manual))

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (from the NameServer)."""
        inst = self._client()
        await inst.update_topic_route(topic)
        return list(inst.subscribe_queues(topic))

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:  # noqa: ASYNC109 (public API)
        """Wait up to ``timeout`` seconds (default ``poll_timeout``) for messages; [] if none came."""
        self._check_running()
        buf = self._buffer
        deadline = time.monotonic() + (self.poll_timeout if timeout is None else max(timeout, 0.0))
        while True:
            for _ in range(len(buf.batches)):
                ctx, msgs = buf.batches.popleft()
                if ctx.pq.dropped:
                    continue
                if ctx.mq in self._paused:
                    buf.batches.append((ctx, msgs))  # keep it for resume()
                    continue
                self._consumed(ctx, msgs)
                return msgs
            buf.ready.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            try:
                async with asyncio.timeout(remaining):
                    await buf.ready.wait()
            except TimeoutError:
                return []

    def _consumed(self, ctx: QueueContext, msgs: list[MessageExt]) -> None:
        offset = ctx.pq.remove(msgs)
        if offset >= 0:
            self._polled[ctx.mq] = offset
            if self.auto_commit:
                self.offset_store.update(ctx.mq, offset)

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
        ctx = self.queue_table.get(mq)
        if ctx is None:
            raise MQClientError(f"{mq} is not assigned to this consumer; assigned: {self.assigned_queues()}")
        if not isinstance(offset, int) or offset < 0:
            raise MQClientError(f"seek offset must be a non-negative int, got {offset!r}")
        await ctx.stop_pulling()
        self.offset_store.update(mq, offset, increase_only=False)
        self._polled.pop(mq, None)
        self.queue_table[mq] = self._start_queue(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """Seek to the queue's smallest offset."""
        await self.seek(
            mq, await self._client().api.get_min_offset(await self.broker_addr(mq), mq.topic, mq.queue_id)
        )

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """Seek to the queue's end (only new messages)."""
        await self.seek(
            mq, await self._client().api.get_max_offset(await self.broker_addr(mq), mq.topic, mq.queue_id)
        )

    def pause(self, queues: list[MessageQueue]) -> None:
        """Stop handing out messages of these queues (pulling stops by flow control)."""
        self._paused.update(queues)

    def resume(self, queues: list[MessageQueue]) -> None:
        """Hand out messages of these queues again."""
        self._paused.difference_update(queues)
        self._buffer.ready.set()

    async def shutdown(self) -> None:
        """Stop pulling, commit (when auto_commit) and leave the group."""
        if self._state != "RUNNING":
            return
        self._state = "STOPPING"
        await self._stop_routines()
        contexts = list(self.queue_table.values())
        for ctx in contexts:
            await ctx.stop_pulling()
        await self._shutdown_base([ctx.mq for ctx in contexts])

    async def queue_stopped(self, ctx: QueueContext) -> None:
        """A reset stopped ``ctx``: what was polled of it and not committed is forgotten."""
        self._polled.pop(ctx.mq, None)

    def submit_target(self) -> Any:
        """A reset queue's batches go to the poll buffer."""
        return self._buffer.submit

    def _check_running(self) -> None:
        if self._state != "RUNNING":
            raise MQClientError("the consumer is not running: call start() first (and not after shutdown())")

    def _start_queue(self, mq: MessageQueue, offset: int) -> QueueContext:
        ctx = QueueContext(mq, self.subscription_table[mq.topic], offset, self.offset_store)
        return self.start_pulling(ctx, self._buffer.submit)

    async def _acquire_queue(self, mq: MessageQueue) -> QueueContext | None:
        try:
            offset = await self.compute_start_offset(mq)
        except RocketpyError as exc:
            log.warning("cannot start %s for %s: %s (retrying)", mq, self.group, exc)
            return None
        return self._start_queue(mq, offset)

    async def _release_queue(self, ctx: QueueContext) -> None:
        await ctx.stop_pulling()
        if self.auto_commit:
            await self.offset_store.persist([ctx.mq], oneway=False)
        self.offset_store.remove(ctx.mq)
        self._polled.pop(ctx.mq, None)


class _ManualAssignment(Rebalancer):
    """The assign() mode: the assignment changes only when the application says so."""

    async def rebalance(self) -> None:
        """No group rebalance for assigned queues."""

    async def apply_all(self, mine: set[MessageQueue]) -> None:
        """Make the assigned set exactly ``mine``.

        Raises:
            MQClientError: a queue could not be started (its broker is unknown or down).
        """
        for mq in sorted(set(self.table) - mine):
            await self.release(mq)
        for mq in sorted(mine - set(self.table)):
            if not await self.acquire(mq):
                raise MQClientError(f"could not start {mq}: is its broker running?")
