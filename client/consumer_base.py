"""ConsumerBase: what every consumer object (push or lite pull) is as a member of its group.

Owns a consumer's options, client id, subscriptions, the shared MQClientInstance, the offset store
(broker for CLUSTERING, local file for BROADCASTING), the rebalancer and its table of assigned
queues (``QueueContext``), the offset-commit routine, where a queue with no stored offset starts
(ConsumeFromWhere), and the start of a queue's pull loop. Each consumer kind says what consuming a
queue means through ``_acquire_queue`` / ``_release_queue`` and where pulled messages go.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rocketpy.client import consumer_admin
from rocketpy.client.allocate import strategy_fn
from rocketpy.client.consumer_admin import now_ms
from rocketpy.client.consumer_types import (
    AllocateStrategy,
    ConsumeFromWhere,
    ExpressionType,
    MessageModel,
    MessageSelector,
    SubscriptionData,
    build_subscription,
    coerce_enum,
    consume_timestamp_ms,
)
from rocketpy.client.instance import ClientSettings, MQClientInstance, new_client_id
from rocketpy.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.client.pull_loop import PullLoop, PullOptions, Submit, check_sql92_support
from rocketpy.client.queue_context import QueueContext
from rocketpy.client.rebalance import GroupMember, Rebalancer
from rocketpy.client.running_info import ConsumeStatsTable
from rocketpy.errors import MQClientError
from rocketpy.message import MessageQueue
from rocketpy.topic import retry_topic

log = logging.getLogger("rocketpy.client.consumer")

DEFAULT_NAMESRV = "127.0.0.1:9876"


class ConsumerBase:
    """Options, membership, offsets and rebalance shared by PushConsumer and LitePullConsumer."""

    consume_type = "CONSUME_PASSIVELY"
    #: consume queues in order, under their broker lock (a PushConsumer with an orderly listener)
    orderly = False
    # the pull settings each consumer kind takes as arguments
    pull_batch_size: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int

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
        access_key: str | None = None,
        secret_key: str | None = None,
        serialize_type: str | None = None,
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
            access_key=access_key,
            secret_key=secret_key,
            serialize_type=serialize_type,
        )
        self.settings.check()
        self.client_id = new_client_id(instance_name)
        self.subscription_table: dict[str, SubscriptionData] = {}
        self.instance: MQClientInstance | None = None
        self.offset_store: OffsetStore = OffsetStore(group)
        self.rebalancer: Rebalancer | None = None  # made at start, with the instance
        self._routines: list[asyncio.Task[None]] = []
        self._state = "CREATED"
        #: per-topic pull and consume counters (GET_CONSUMER_RUNNING_INFO's rates)
        self.stats = ConsumeStatsTable()
        self.start_timestamp_ms = 0

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
        self._wakeup_rebalance()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are released at the next rebalance)."""
        self.subscription_table.pop(topic, None)
        self._wakeup_rebalance()

    def _wakeup_rebalance(self) -> None:
        if self._state == "RUNNING" and self.rebalancer is not None:
            self.rebalancer.wakeup()

    def subscriptions(self) -> list[dict[str, Any]]:
        """SubscriptionData maps for heartbeats."""
        return [sd.to_wire() for sd in self.subscription_table.values()]

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues of subscribed topics this consumer currently owns, sorted (the group's own
        ``%RETRY%`` queues, which a push consumer subscribes to itself, are not listed)."""
        retry = retry_topic(self.group)
        return sorted(mq for mq in self.queue_table if mq.topic != retry)

    @property
    def queue_table(self) -> dict[MessageQueue, QueueContext]:
        """The assigned queues and their contexts (empty before start)."""
        return self.rebalancer.table if self.rebalancer is not None else {}

    async def on_consumer_ids_changed(self) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED: rebalance at once."""
        self._wakeup_rebalance()

    # ---- the admin's calls through a broker (client/consumer_admin.py) ---------------------------

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> list[MessageQueue]:
        """RESET_CONSUMER_CLIENT_OFFSET: held queues of ``topic`` restart from the new offsets."""
        return await consumer_admin.reset_offset(self, topic, offsets)

    def held_offsets(self, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the offsets this consumer holds for ``topic``."""
        return consumer_admin.held_offsets(self, topic)

    def running_info(self, jstack: bool = False) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO: RocketMQ's ConsumerRunningInfo of this consumer."""
        return consumer_admin.running_info(self, jstack)

    async def queue_stopped(self, ctx: QueueContext) -> None:
        """A reset stopped ``ctx``'s queue: finish with what it held (each kind says how)."""

    def fresh_process_queue(self, old: ProcessQueue) -> ProcessQueue:
        """The process queue a reset queue restarts with (an orderly queue keeps its lock)."""
        pq = ProcessQueue()
        pq.locked, pq.last_lock_time = old.locked, old.last_lock_time
        return pq

    def submit_target(self) -> Submit:
        """Where a reset queue's new pull loop hands its batches (each kind says where)."""
        raise NotImplementedError

    def _client(self) -> MQClientInstance:
        if self.instance is None:
            raise MQClientError(f"consumer {self.group} is not started: call start() first")
        return self.instance

    async def broker_addr(self, mq: MessageQueue) -> str:
        """The master address of the queue's broker (refreshing the route once if unknown)."""
        return await self._client().queue_broker_addr(mq)

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
        api = self._client().api
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
        self.instance = inst = await MQClientInstance.acquire(self.namesrv_addr, config=self.settings)
        try:
            await self._prepare_topics(inst)
            if self.message_model is MessageModel.BROADCASTING:
                key = self.client_id.rsplit("@", 1)[0]
                self.offset_store = LocalFileOffsetStore(self.group, key)
                await self.offset_store.load()
            else:
                self.offset_store = RemoteOffsetStore(self.group, inst)
        except BaseException:
            await inst.release()
            raise
        self._joining(inst)
        member = GroupMember(self.group, self.client_id, self.message_model, self.allocate)
        self.rebalancer = rebalancer = self._new_rebalancer(member, inst)
        inst.register_consumer(self.group, self.client_id, self)
        self._state = "RUNNING"
        self.start_timestamp_ms = now_ms()
        await inst.send_heartbeat_to_all_brokers()
        self._routines = [
            asyncio.create_task(rebalancer.routine(), name=f"rocketpy-rebalance-{self.group}"),
            asyncio.create_task(self._persist_routine(), name=f"rocketpy-offsets-{self.group}"),
        ]

    def _joining(self, inst: MQClientInstance) -> None:
        """Hook: the instance is known and no queue is taken yet."""

    def _new_rebalancer(self, member: GroupMember, inst: MQClientInstance) -> Rebalancer:
        """The group rebalancer (a lite consumer with assigned queues uses its own)."""
        interval_s = self.settings.rebalance_interval
        return Rebalancer(
            member, inst, self.subscription_table, interval_s, self._acquire_queue, self._release_queue
        )

    async def _prepare_topics(self, inst: MQClientInstance) -> None:
        """Fetch each subscribed topic's route; fails fast when no NameServer answers."""
        for topic, sub in self.subscription_table.items():
            route = await inst.update_topic_route(topic)
            if route is None and topic == retry_topic(self.group):
                continue  # the broker creates it at the first heartbeat
            if route is None:
                log.warning(
                    "topic %s does not exist yet; %s will consume it when it is created", topic, self.group
                )
            elif sub.expression_type is ExpressionType.SQL92:
                await check_sql92_support(inst, self.group, sub, inst.subscribe_queues(topic))

    async def _persist_routine(self) -> None:
        while True:
            await asyncio.sleep(self.settings.persist_consumer_offset_interval)
            self.stats.sample()
            await self.offset_store.persist(sorted(self.queue_table))

    async def _stop_routines(self) -> None:
        for task in self._routines:
            task.cancel()
        await asyncio.gather(*self._routines, return_exceptions=True)
        self._routines = []

    async def _shutdown_base(self, mqs: list[MessageQueue]) -> None:
        """Commit the offsets of ``mqs`` (acknowledged), leave the group, release the instance."""
        inst = self._client()
        await self.offset_store.persist(sorted(set(mqs) | set(self.queue_table)), oneway=False)
        self.queue_table.clear()
        try:
            await inst.unregister_consumer(self.group, self.client_id)
        finally:
            await self.offset_store.close()
            await inst.release()
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

    def start_pulling(self, ctx: QueueContext, submit: Submit) -> QueueContext:
        """Start ``ctx``'s pull loop, handing pulled batches to ``submit``."""
        loop = PullLoop(ctx, self._pull_options(), self._client(), submit)
        ctx.pull_task = asyncio.create_task(loop.run(), name=f"rocketpy-pull-{ctx.mq.queue_id}")
        return ctx

    def _pull_options(self) -> PullOptions:
        """How this consumer pulls: the same for every queue it holds."""
        return PullOptions(
            self.group,
            self.pull_batch_size,
            self.pull_threshold_for_queue,
            self.pull_threshold_size_for_queue,
            orderly=self.orderly,
            commit_in_pull=self.message_model is MessageModel.CLUSTERING,
            stats=self.stats,
        )

    async def _acquire_queue(self, mq: MessageQueue) -> QueueContext | None:
        """Start consuming ``mq`` (None: not now; the rebalancer retries)."""
        raise NotImplementedError

    async def _release_queue(self, ctx: QueueContext) -> None:
        """Stop consuming ``ctx.mq`` and commit its offset."""
        raise NotImplementedError
