"""PushConsumer: the listener-driven consumer, and the group-member base it shares with lite pull.

``ConsumerBase`` owns what every consumer object has: its options, client id, subscriptions, the
shared MQClientInstance, the offset store (broker for CLUSTERING, local file for BROADCASTING), the
rebalancer and the offset-commit routine, and where a queue with no stored offset starts
(ConsumeFromWhere).

``PushConsumer`` adds one long-polling ``PullLoop`` per assigned queue feeding a consume service
(concurrent or orderly). Offsets move forward only as the listener acknowledges messages, to the
smallest offset still in flight; they are committed every ``persist_consumer_offset_interval``,
when a queue is released (acknowledged, before the next owner can take it) and at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from rocketpy.client.allocate import strategy_fn
from rocketpy.client.consume_service import ConcurrentConsumeService, ListenerRunner, OrderlyConsumeService
from rocketpy.client.consumer_types import (
    AllocateStrategy,
    ConsumeFromWhere,
    ExpressionType,
    MessageModel,
    MessageSelector,
    SubscriptionData,
    build_subscription,
    check_positive,
    coerce_enum,
    consume_timestamp_ms,
)
from rocketpy.client.instance import ClientSettings, MQClientInstance, new_client_id
from rocketpy.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.client.pull_loop import PullLoop, check_sql92_support
from rocketpy.client.rebalance import LOCK_INTERVAL_S, Rebalancer, lock_queues, unlock_queues
from rocketpy.errors import MQClientError, RocketpyError
from rocketpy.message import MessageQueue

log = logging.getLogger("rocketpy.client.consumer")

DEFAULT_NAMESRV = "127.0.0.1:9876"
LOCK_MAX_LIVE_S = 30.0
#: Bound on waiting for running listener calls of a released queue (concurrent consumption).
RELEASE_DRAIN_S = 2.0


class ConsumerBase:
    """Options, membership, offsets and rebalance shared by PushConsumer and LitePullConsumer."""

    consume_type = "CONSUME_PASSIVELY"

    def __init__(
        self,
        group: str,
        namesrv_addr: str = DEFAULT_NAMESRV,
        *,
        message_model: MessageModel | str = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere | str = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: Any = None,
        instance_name: str = "DEFAULT",
        allocate_strategy: AllocateStrategy | str = AllocateStrategy.AVERAGELY,
        allocate_queues: list[MessageQueue] | None = None,
        poll_name_server_interval: float = 30.0,
        heartbeat_broker_interval: float = 30.0,
        persist_consumer_offset_interval: float = 5.0,
        rebalance_interval: float = 20.0,
    ) -> None:
        if not isinstance(group, str) or not group.strip():
            raise MQClientError(f"consumer group must be a non-empty string, got {group!r}")
        self.group = group
        self.namesrv_addr = namesrv_addr
        self.message_model = coerce_enum(MessageModel, message_model, "message_model")
        self.consume_from_where = coerce_enum(ConsumeFromWhere, consume_from_where, "consume_from_where")
        self.consume_timestamp_ms = consume_timestamp_ms(consume_timestamp)
        self.allocate_strategy = coerce_enum(AllocateStrategy, allocate_strategy, "allocate_strategy")
        self.allocate = strategy_fn(self.allocate_strategy, allocate_queues)
        self.settings = ClientSettings(
            instance_name=instance_name,
            poll_name_server_interval=poll_name_server_interval,
            heartbeat_broker_interval=heartbeat_broker_interval,
            persist_consumer_offset_interval=persist_consumer_offset_interval,
            rebalance_interval=rebalance_interval,
        )
        self.settings.check()
        self.client_id = new_client_id(instance_name)
        self.subscription_table: dict[str, SubscriptionData] = {}
        self.instance: Any = None
        self.offset_store: OffsetStore = OffsetStore(group)
        self.rebalancer = Rebalancer(self, self._acquire_queue, self._release_queue)
        self._routines: list[asyncio.Task[None]] = []
        self._state = "CREATED"

    @property
    def rebalance_interval(self) -> float:
        """Seconds between periodic rebalances."""
        return self.settings.rebalance_interval

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Subscribe to ``topic`` with a tag expression (``"A || B"``, ``"*"``) or a MessageSelector.

        Raises:
            MQClientError: empty topic or bad expression.
        """
        self.subscription_table[topic] = build_subscription(topic, expression)
        if self._state == "RUNNING":
            self.rebalancer.wakeup()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are released at the next rebalance)."""
        self.subscription_table.pop(topic, None)
        if self._state == "RUNNING":
            self.rebalancer.wakeup()

    def subscriptions(self) -> list[dict[str, Any]]:
        """SubscriptionData maps for heartbeats."""
        return [sd.to_wire() for sd in self.subscription_table.values()]

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer currently owns, sorted."""
        return sorted(self.rebalancer.assigned)

    async def on_consumer_ids_changed(self) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED: rebalance at once."""
        self.rebalancer.wakeup()

    async def broker_addr(self, mq: MessageQueue) -> str:
        """The master address of the queue's broker (refreshing the route once if unknown)."""
        return await self.instance.queue_broker_addr(mq)

    async def compute_start_offset(self, mq: MessageQueue) -> int:
        """The stored offset, else the ConsumeFromWhere position (the group has none yet).

        As in RocketMQ, a new group starting from LAST reads a young queue (one that still starts
        at offset 0) from the beginning: the broker answers 0 for it.
        """
        cfw = self.consume_from_where
        from_last = cfw is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        stored = await self.offset_store.read(mq, zero_if_young=from_last)
        if stored is not None and stored >= 0:
            return stored
        addr = await self.broker_addr(mq)
        api = self.instance.api
        if cfw is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
            offset = await api.get_max_offset(addr, mq.topic, mq.queue_id)
        elif cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            offset = await api.get_min_offset(addr, mq.topic, mq.queue_id)
        else:
            offset = await api.search_offset(addr, mq.topic, mq.queue_id, self.consume_timestamp_ms)
        self.offset_store.update(mq, int(offset))
        return int(offset)

    async def _start_base(self) -> None:
        if self._state != "CREATED":
            raise MQClientError(f"consumer {self.group} was already started; create a new one")
        self.instance = await MQClientInstance.acquire(self.namesrv_addr, config=self.settings)
        try:
            await self._prepare_topics()
            if self.message_model is MessageModel.BROADCASTING:
                key = self.client_id.rsplit("@", 1)[0]
                self.offset_store = LocalFileOffsetStore(self.group, key, MessageQueue)
                await self.offset_store.load()
            else:
                self.offset_store = RemoteOffsetStore(self.group, self.instance)
        except BaseException:
            await self.instance.release()
            raise
        self.instance.register_consumer(self.group, self.client_id, self)
        self._state = "RUNNING"
        await self.instance.send_heartbeat_to_all_brokers()
        self._routines = [
            asyncio.create_task(self.rebalancer.routine(), name=f"rocketpy-rebalance-{self.group}"),
            asyncio.create_task(self._persist_routine(), name=f"rocketpy-offsets-{self.group}"),
        ]

    async def _prepare_topics(self) -> None:
        """Fetch each subscribed topic's route; fails fast when no NameServer answers."""
        for topic in self.subscription_table:
            route = await self.instance.update_topic_route(topic)
            if route is None:
                log.warning(
                    "topic %s does not exist yet; %s will consume it when it is created", topic, self.group
                )
            elif self.subscription_table[topic].expression_type is ExpressionType.SQL92:
                await check_sql92_support(self, topic)

    async def _persist_routine(self) -> None:
        while True:
            await asyncio.sleep(self.settings.persist_consumer_offset_interval)
            await self.offset_store.persist(self.assigned_queues())

    async def _stop_routines(self) -> None:
        for task in self._routines:
            task.cancel()
        await asyncio.gather(*self._routines, return_exceptions=True)
        self._routines = []

    async def _shutdown_base(self, mqs: list[MessageQueue]) -> None:
        """Commit the offsets of ``mqs`` (acknowledged), leave the group, release the instance."""
        await self.offset_store.persist(sorted(set(mqs) | self.rebalancer.assigned), oneway=False)
        self.rebalancer.assigned.clear()
        try:
            await self.instance.unregister_consumer(self.group, self.client_id)
        finally:
            await self.offset_store.close()
            await self.instance.release()
            self._state = "SHUTDOWN"

    async def start(self) -> None:
        """Join the group and start consuming (defined by each consumer kind)."""
        raise NotImplementedError

    async def shutdown(self) -> None:
        """Commit offsets and leave the group (defined by each consumer kind)."""
        raise NotImplementedError

    async def __aenter__(self) -> ConsumerBase:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def _acquire_queue(self, mq: MessageQueue) -> bool:
        raise NotImplementedError

    async def _release_queue(self, mq: MessageQueue) -> None:
        raise NotImplementedError


class PushConsumer(ConsumerBase):
    """A consumer that pulls in the background and calls a listener (DESIGN §8, §9 options).

    Args:
        group: the consumer group.
        namesrv_addr: ``"host:port"`` or ``"h1:p1;h2:p2"``.
        **options: see DESIGN §9 (message_model, consume_from_where, consume_thread_min/max,
            consume_message_batch_max_size, pull_batch_size, pull_threshold_for_queue, timers, ...).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str = DEFAULT_NAMESRV,
        *,
        consume_thread_min: int = 20,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        max_reconsume_times: int = 16,
        suspend_current_queue_time: float = 1.0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100 * 1024 * 1024,
        reconsume_delay: float = 1.0,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.consume_thread_min = check_positive("consume_thread_min", consume_thread_min, integer=True)
        self.consume_thread_max = check_positive("consume_thread_max", consume_thread_max, integer=True)
        if consume_thread_min > consume_thread_max:
            raise MQClientError(
                f"consume_thread_min={consume_thread_min} exceeds consume_thread_max={consume_thread_max}"
            )
        self.consume_message_batch_max_size = check_positive(
            "consume_message_batch_max_size", consume_message_batch_max_size, integer=True
        )
        self.pull_batch_size = check_positive("pull_batch_size", pull_batch_size, integer=True)
        self.max_reconsume_times = max_reconsume_times
        self.suspend_current_queue_time = check_positive(
            "suspend_current_queue_time", suspend_current_queue_time
        )
        self.pull_threshold_for_queue = check_positive(
            "pull_threshold_for_queue", pull_threshold_for_queue, integer=True
        )
        self.pull_threshold_size_for_queue = check_positive(
            "pull_threshold_size_for_queue", pull_threshold_size_for_queue, integer=True
        )
        self.reconsume_delay = check_positive("reconsume_delay", reconsume_delay)
        self.orderly = False
        self._listener: Callable[..., Any] | None = None
        self.consume_service: Any = None
        self._queues: dict[MessageQueue, tuple[ProcessQueue, asyncio.Task[None]]] = {}
        self.consumed_count = 0

    def register_listener(self, listener: Callable[..., Any], *, orderly: bool = False) -> None:
        """Set the listener ``(msgs, context) -> ConsumeStatus`` (``ConsumeOrderlyStatus`` if orderly).

        Raises:
            MQClientError: not callable, or called after start.
        """
        if not callable(listener):
            raise MQClientError(
                f"register_listener needs a function (msgs, context) -> status, got {listener!r}"
            )
        if self._state != "CREATED":
            raise MQClientError("register_listener must be called before start()")
        self._listener = listener
        self.orderly = bool(orderly)

    register_message_listener = register_listener

    async def start(self) -> None:
        """Connect, join the group and start consuming.

        Raises:
            MQClientError: no listener or subscription, no NameServer reachable, bad options.
        """
        if self._listener is None:
            raise MQClientError("no listener: call consumer.register_listener(fn) before start()")
        if not self.subscription_table:
            raise MQClientError("no subscription: call consumer.subscribe(topic, '*') before start()")
        runner = ListenerRunner(self._listener, self.consume_thread_min, self.consume_thread_max)
        service_cls = OrderlyConsumeService if self.orderly else ConcurrentConsumeService
        self.consume_service = service_cls(runner, self)
        await self._start_base()
        if self.orderly and self.message_model is MessageModel.CLUSTERING:
            self._routines.append(
                asyncio.create_task(self._lock_routine(), name=f"rocketpy-lock-{self.group}")
            )

    async def shutdown(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 (public API name)
        """Stop pulling, let running listeners finish (up to ``timeout`` s), commit offsets, leave."""
        if self._state != "RUNNING":
            return
        self._state = "STOPPING"
        await self._stop_routines()
        pulls = [task for _pq, task in self._queues.values()]
        for task in pulls:
            task.cancel()
        await asyncio.gather(*pulls, return_exceptions=True)
        await self.consume_service.shutdown(timeout)
        for pq, _task in self._queues.values():
            pq.dropped = True
        await self._shutdown_base(list(self._queues))
        if self.orderly and self.message_model is MessageModel.CLUSTERING:
            await unlock_queues(self, list(self._queues))
        self._queues.clear()

    # --- queue take-over / release (called by the Rebalancer) ---

    async def _acquire_queue(self, mq: MessageQueue) -> bool:
        pq = ProcessQueue()
        if self.orderly and self.message_model is MessageModel.CLUSTERING:
            if mq not in await lock_queues(self, [mq]):
                return False
            pq.locked, pq.last_lock_time = True, time.monotonic()
        elif self.orderly:
            pq.locked, pq.last_lock_time = True, float("inf")
        try:
            offset = await self.compute_start_offset(mq)
        except RocketpyError as exc:
            log.warning("cannot start %s for %s: %s (retrying)", mq, self.group, exc)
            return False
        sub = self.subscription_table[mq.topic]
        loop = PullLoop(self, mq, pq, sub, offset)
        self._queues[mq] = (pq, asyncio.create_task(loop.run(), name=f"rocketpy-pull-{mq.queue_id}"))
        return True

    async def _release_queue(self, mq: MessageQueue) -> None:
        entry = self._queues.get(mq)
        if entry is None:
            return
        pq, task = entry
        pq.dropped = True  # stops pulling and handing its messages to the listener
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        # listener calls already running finish and still count, so the commit below includes them
        await self.consume_service.wait_queue_idle(mq, LOCK_MAX_LIVE_S if self.orderly else RELEASE_DRAIN_S)
        self._queues.pop(mq, None)
        await self.offset_store.persist([mq], oneway=False)
        self.offset_store.remove(mq)
        if self.orderly and self.message_model is MessageModel.CLUSTERING:
            await unlock_queues(self, [mq])

    # --- callbacks from the consume services (on the loop) ---

    def on_consumed(self, pq: ProcessQueue, mq: MessageQueue, done: list[Any], failed_count: int) -> None:
        """Concurrent: acknowledged messages leave the process queue; the offset moves to the oldest held."""
        entry = self._queues.get(mq)
        if entry is None or entry[0] is not pq or not done:
            return  # the queue was released (and committed) meanwhile
        self.consumed_count += len(done)
        offset = pq.remove(done)
        if offset >= 0:
            self.offset_store.update(mq, offset)

    def on_orderly_committed(self, pq: ProcessQueue, mq: MessageQueue, offset: int, count: int) -> None:
        """Orderly: the taken batch was consumed."""
        entry = self._queues.get(mq)
        self.consumed_count += count
        if offset >= 0 and entry is not None and entry[0] is pq:
            self.offset_store.update(mq, offset)

    def may_consume_orderly(self, pq: ProcessQueue) -> bool:
        """Orderly: only while the broker lock is held and fresh."""
        return pq.locked and time.monotonic() - pq.last_lock_time < LOCK_MAX_LIVE_S

    async def _lock_routine(self) -> None:
        while True:
            await asyncio.sleep(LOCK_INTERVAL_S)
            mqs = list(self._queues)
            locked = await lock_queues(self, mqs)
            now = time.monotonic()
            for mq in mqs:
                entry = self._queues.get(mq)
                if entry is None:
                    continue
                entry[0].locked = mq in locked
                if mq in locked:
                    entry[0].last_lock_time = now
