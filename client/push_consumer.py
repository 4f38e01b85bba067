"""PushConsumer: the listener-driven consumer.

Adds to ``ConsumerBase`` one long-polling ``PullLoop`` per assigned queue feeding a consume service
(concurrent or orderly; orderly CLUSTERING queues are consumed only under their broker lock,
``queue_lock``). A concurrent CLUSTERING consumer also subscribes to its group's ``%RETRY%`` topic
and sends failed messages back to their broker (``send_back``); an orderly one dead-letters a batch
after ``max_reconsume_times`` local retries; a BROADCASTING concurrent one does not retry.
Offsets move forward only as the listener acknowledges messages, to the smallest
offset still in flight; they are committed every ``persist_consumer_offset_interval``, when a queue
is released (acknowledged, before the next owner can take it) and at shutdown.

With ``message_request_mode="POP"`` it consumes by POP instead (``client/pop_consumer.py``): the
broker assigns queues (QUERY_ASSIGNMENT), pop loops replace pull loops, consumed messages are
acked and failed ones made invisible for their retry delay; there are no offsets to commit.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rocketpy.client import consumer_admin
from rocketpy.client.consume_service import (
    ConcurrentConsumeService,
    ConsumeService,
    Listener,
    ListenerRunner,
    OrderlyConsumeService,
)
from rocketpy.client.consumer_base import DEFAULT_NAMESRV, ConsumerBase
from rocketpy.client.consumer_types import (
    CONSUME_OK,
    ConsumeFromWhere,
    MessageModel,
    build_subscription,
    check_positive,
    coerce_enum,
)
from rocketpy.client.instance import MQClientInstance
from rocketpy.client.pop_consumer import PopEngine, PopOptions
from rocketpy.client.process_queue import LOCK_MAX_LIVE_S, ProcessQueue
from rocketpy.client.queue_context import QueueContext
from rocketpy.client.queue_lock import QueueLocks
from rocketpy.client.send_back import BrokerSendBack
from rocketpy.client.trace import (
    CONSUME_BATCH_RECORDS,
    ConsumeTracer,
    TraceDispatcher,
    TraceStats,
    new_dispatcher,
)
from rocketpy.client.trace_otel import otel_spans
from rocketpy.errors import MQClientError, RocketpyError
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.protocol.headers.pop import MAX_POP_MSGS, ConsumeInitMode, MessageRequestMode
from rocketpy.protocol.headers.send_back import USE_GROUP_MAX
from rocketpy.topic import retry_topic

log = logging.getLogger("rocketpy.client.consumer")

#: Bound on waiting for running listener calls of a released queue (concurrent consumption).
RELEASE_DRAIN_S = 2.0


class PushConsumer(ConsumerBase):
    """A consumer that pulls in the background and calls a listener (DESIGN §8, §9 options).

    Args:
        group: the consumer group.
        namesrv_addr: ``"host:port"`` or ``"h1:p1;h2:p2"``.
        message_request_mode: ``PULL`` (pull loops, client-side rebalance, offsets) or ``POP``
            (the broker's assignment, pops, acks; CLUSTERING only).
        pop_invisible_time: POP mode: seconds a popped message stays invisible while consumed.
        enable_trace: write RocketMQ's trace records (SubBefore, SubAfter) of every listener call
            to the trace topic, in the background (``client/trace.py``; off by default, as RocketMQ's).
        trace_topic: where trace records go (None: ``RMQ_SYS_TRACE_TOPIC``).
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
        message_request_mode: MessageRequestMode | str = MessageRequestMode.PULL,
        pop_invisible_time: float = 60.0,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        #: message trace (``enable_trace``): the dispatcher of this consumer's records
        self.trace: TraceDispatcher | None = (
            new_dispatcher(group, namesrv_addr, trace_topic, self.settings, CONSUME_BATCH_RECORDS)
            if enable_trace
            else None
        )
        self.message_request_mode = coerce_enum(
            MessageRequestMode, message_request_mode, "message_request_mode"
        )
        self.pop_invisible_time = check_positive("pop_invisible_time", pop_invisible_time)
        self.pop_engine: PopEngine | None = None
        if self.message_request_mode is MessageRequestMode.POP:
            if self.message_model is not MessageModel.CLUSTERING:
                raise MQClientError(
                    "message_request_mode='POP' consumes as a group: use MessageModel.CLUSTERING"
                )
            self.consume_type = "CONSUME_POP"
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
        if type(max_reconsume_times) is not int or max_reconsume_times < -1:
            raise MQClientError(
                f"max_reconsume_times must be an integer >= -1 (-1: the group's retryMaxTimes, "
                f"no limit when orderly), got {max_reconsume_times!r}"
            )
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
        self._listener: Listener | None = None
        self.consume_service: ConsumeService | None = None
        self._locks: QueueLocks | None = None  # orderly CLUSTERING only
        self.listener_runner: ListenerRunner | None = None  # made at start

    def register_listener(self, listener: Listener, *, orderly: bool = False) -> None:
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

    @property
    def consumed_count(self) -> int:
        """Messages the listener acknowledged so far (of queues still held when it did)."""
        if self.pop_engine is not None:
            return self.pop_engine.consumed_count
        return self.consume_service.consumed_count if self.consume_service is not None else 0

    @property
    def pop_mode(self) -> bool:
        """True when consuming by POP (``message_request_mode="POP"``)."""
        return self.message_request_mode is MessageRequestMode.POP

    async def start(self) -> None:
        """Connect, join the group and start consuming.

        Raises:
            MQClientError: no listener or subscription, no NameServer reachable, bad options.
        """
        if self._listener is None:
            raise MQClientError("no listener: call consumer.register_listener(fn) before start()")
        if not self.subscription_table:
            raise MQClientError("no subscription: call consumer.subscribe(topic, '*') before start()")
        if self.trace is not None:
            await self.trace.start()
        try:
            await self._start_consuming()
        except BaseException:
            if self.trace is not None:
                await self.trace.shutdown(0.0)
            raise

    async def _start_consuming(self) -> None:
        if self.pop_mode:
            await self._start_pop()
            return
        if self._retries_through_broker():
            retry = retry_topic(self.group)
            self.subscription_table.setdefault(retry, build_subscription(retry, "*"))
        await self._start_base()
        if self._locks is not None:
            renew = self._locks.renew_routine(self.queue_table)
            self._routines.append(asyncio.create_task(renew, name=f"rocketpy-lock-{self.group}"))

    def _retries_through_broker(self) -> bool:
        """Concurrent CLUSTERING: failed messages come back through the group's retry topic."""
        return not self.orderly and self.message_model is MessageModel.CLUSTERING

    def _joining(self, inst: MQClientInstance) -> None:
        clustering = self.message_model is MessageModel.CLUSTERING
        if self.orderly and clustering:
            self._locks = QueueLocks(inst, self.group, self.client_id)
        self.consume_service = self._new_consume_service(inst)

    def _runner(self) -> ListenerRunner:
        """The listener runner of this consumer (kept as ``listener_runner`` for running-info calls)."""
        assert self._listener is not None
        runner = ListenerRunner(self._listener, self.consume_thread_min, self.consume_thread_max)
        if self.trace is not None:
            runner.tracer = ConsumeTracer(self.trace, self.group, CONSUME_OK, otel_spans())
        self.listener_runner = runner
        return runner

    @property
    def trace_stats(self) -> TraceStats | None:
        """What message trace wrote and dropped so far; None when ``enable_trace`` is off."""
        return None if self.trace is None else self.trace.stats

    def _new_consume_service(self, inst: MQClientInstance) -> ConsumeService:
        service = self._make_consume_service(inst)
        service.stats = self.stats
        return service

    def _make_consume_service(self, inst: MQClientInstance) -> ConsumeService:
        runner = self._runner()
        batch = self.consume_message_batch_max_size
        limit = self.max_reconsume_times
        send_back = BrokerSendBack(inst, self.group, USE_GROUP_MAX if limit < 0 else limit)
        if self.orderly:
            return OrderlyConsumeService(
                runner, batch, self.suspend_current_queue_time, max_reconsume_times=limit, send_back=send_back
            )
        if self._retries_through_broker():
            return ConcurrentConsumeService(
                runner, batch, self.reconsume_delay, send_back=send_back, retry_topic=retry_topic(self.group)
            )
        return ConcurrentConsumeService(runner, batch, self.reconsume_delay, drop_failures=True)

    async def shutdown(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 (public API name)
        """Stop pulling, let running listeners finish (up to ``timeout`` s), commit offsets, leave."""
        if self._state != "RUNNING":
            return
        self._state = "STOPPING"
        await self._stop_routines()
        try:
            await self._shutdown_consuming(timeout)
        finally:
            if self.trace is not None:
                await self.trace.shutdown()

    async def _shutdown_consuming(self, timeout: float) -> None:  # noqa: ASYNC109
        if self.pop_engine is not None:
            await self._shutdown_pop(self.pop_engine, timeout)
            return
        contexts = list(self.queue_table.values())
        pulls = [ctx.pull_task for ctx in contexts if ctx.pull_task is not None]
        for task in pulls:
            task.cancel()
        await asyncio.gather(*pulls, return_exceptions=True)
        await self._service().shutdown(timeout)
        for ctx in contexts:
            ctx.pq.dropped = True
        mqs = [ctx.mq for ctx in contexts]
        await self._shutdown_base(mqs)
        if self._locks is not None:
            await self._locks.unlock(mqs)

    def _service(self) -> ConsumeService:
        assert self.consume_service is not None, "the consume service is made at start"
        return self.consume_service

    # --- queue take-over / release (called by the Rebalancer) ---

    async def _acquire_queue(self, mq: MessageQueue) -> QueueContext | None:
        pq = ProcessQueue()
        if self._locks is not None:
            if not await self._locks.lock_one(mq, pq):
                return None
        elif self.orderly:  # BROADCASTING: no broker lock to hold
            pq.locked, pq.last_lock_time = True, float("inf")
        try:
            offset = await self.compute_start_offset(mq)
        except RocketpyError as exc:
            log.warning("cannot start %s for %s: %s (retrying)", mq, self.group, exc)
            return None
        ctx = QueueContext(mq, self.subscription_table[mq.topic], offset, self.offset_store, pq)
        return self.start_pulling(ctx, self._service().submit)

    async def _release_queue(self, ctx: QueueContext) -> None:
        await ctx.stop_pulling()  # nothing more is pulled or handed to the listener
        # listener calls already running finish and still count, so the commit below includes them
        drain_s = LOCK_MAX_LIVE_S if self.orderly else RELEASE_DRAIN_S
        await self._service().wait_queue_idle(ctx.mq, drain_s)
        ctx.released = True
        await self.offset_store.persist([ctx.mq], oneway=False)
        self.offset_store.remove(ctx.mq)
        if self._locks is not None:
            await self._locks.unlock([ctx.mq])

    # --- the admin's calls (client/consumer_admin.py) ---

    async def queue_stopped(self, ctx: QueueContext) -> None:
        """A reset stopped ``ctx``: let listener calls running for it finish (bounded)."""
        await self._service().wait_queue_idle(ctx.mq, LOCK_MAX_LIVE_S if self.orderly else RELEASE_DRAIN_S)

    def submit_target(self) -> Any:
        """A reset queue's batches go to the consume service."""
        return self._service().submit

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: run the listener on ``msg`` once (no offset moves, nothing is
        sent back); RocketMQ's ConsumeMessageDirectlyResult."""
        return await consumer_admin.consume_directly(self, msg, broker_name)

    # --- POP mode ---

    async def _start_pop(self) -> None:
        """Join the group and follow the broker's assignment with pop loops (``client/pop_consumer.py``)."""
        if self._state != "CREATED":
            raise MQClientError(f"consumer {self.group} was already started; create a new one")
        assert self._listener is not None
        self.instance = inst = await MQClientInstance.acquire(self.namesrv_addr, config=self.settings)
        try:
            await self._prepare_topics(inst)
        except BaseException:
            await inst.release()
            raise
        first = self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        options = PopOptions(
            group=self.group,
            batch=min(self.pull_batch_size, MAX_POP_MSGS),
            invisible_s=self.pop_invisible_time,
            threshold=self.pull_threshold_for_queue,
            max_reconsume_times=self.max_reconsume_times,
            orderly=self.orderly,
            suspend_s=self.suspend_current_queue_time,
            batch_max_size=self.consume_message_batch_max_size,
            init_mode=ConsumeInitMode.MIN if first else ConsumeInitMode.MAX,
        )
        runner = self._runner()
        self.pop_engine = engine = PopEngine(inst, self.client_id, self.subscription_table, options, runner)
        inst.register_consumer(self.group, self.client_id, self)
        self._state = "RUNNING"
        await inst.send_heartbeat_to_all_brokers()
        routine = engine.routine(self.rebalance_interval)
        self._routines = [asyncio.create_task(routine, name=f"rocketpy-assign-{self.group}")]

    async def _shutdown_pop(self, engine: PopEngine, timeout_s: float) -> None:
        await engine.shutdown(timeout_s)
        inst = self._client()
        try:
            await inst.unregister_consumer(self.group, self.client_id)
        finally:
            await inst.release()
            self._state = "SHUTDOWN"

    def _wakeup_rebalance(self) -> None:
        if self.pop_engine is not None:
            self.pop_engine.wakeup()
        else:
            super()._wakeup_rebalance()

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer owns (POP mode: pops; queue id -1 stands for every queue of a broker)."""
        if self.pop_engine is not None:
            return self.pop_engine.assigned_queues()
        return super().assigned_queues()
