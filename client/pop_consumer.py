"""The push consumer's POP mode: the broker assigns, pop loops fetch, the listener's answer acks.

Owns ``PopEngine``, what a ``PushConsumer(message_request_mode="POP")`` runs instead of rebalance,
pull loops and offset commits:

- **Assignment** (no client-side rebalance): every ``rebalance_interval`` and at once on
  NOTIFY_CONSUMER_IDS_CHANGED, QUERY_ASSIGNMENT to a broker of each subscribed topic; the answer's
  queues (queue id -1: every queue of that broker) each get a pop loop, and loops of queues no
  longer assigned stop. A nil answer keeps the current loops.
- **Pop loops**: POP_MESSAGE of ``min(pull_batch_size, 32)`` messages, invisible
  ``pop_invisible_time`` seconds, long-polled ``POP_POLL_S``; at most
  ``pull_threshold_for_queue`` messages of a loop are with the listener at once; an error waits
  ``ERROR_DELAY_S``.
- **Consumption**: the listener runs as for pulled messages (``ListenerRunner``: a thread pool for
  a plain function, the loop for ``async def``). Consumed messages are acked (BATCH_ACK_MESSAGE,
  the acks of one loop tick per broker in one request: ``client/ack_coalesce.py``); a failed one
  (RECONSUME_LATER, an exception) has its invisible time changed to the retry delay of its
  reconsume times (10 s, 30 s, 1 m, 2 m, ... as RocketMQ's ``popDelayLevel``), or to the
  context's ``delay_level_when_next_consume``, so the broker redelivers it through the POP retry
  topic; past ``max_reconsume_times`` (>= 0) it is sent
  to ``%DLQ%{group}`` (CONSUMER_SEND_MSG_BACK, level -1) and acked. An orderly listener gets a
  popped queue's messages in order, chunk by chunk; SUSPEND_CURRENT_QUEUE_A_MOMENT sets the rest
  of that queue's batch invisible ``suspend_current_queue_time`` (the broker redelivers them in
  order, with ``reconsume_times`` + 1).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from rocketpy.client.ack_coalesce import AckCoalescer
from rocketpy.client.consumer_types import ConsumeOrderlyStatus, ConsumeStatus, SubscriptionData
from rocketpy.client.instance import MQClientInstance
from rocketpy.client.listener import SKIPPED, ConsumeContext, ListenerRunner, report_failure
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.client.receipts import AckGroup, ack_groups, batch_acks, parse_handle
from rocketpy.errors import RocketpyError
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.protocol.headers.pop import BatchAck, PopMessageRequestHeader

log = logging.getLogger("rocketpy.client.consumer")

POP_POLL_S = 15.0
ERROR_DELAY_S = 1.0
FLOW_CONTROL_DELAY_S = 0.05
CALL_TIMEOUT_S = 3.0
#: RocketMQ's ``popDelayLevel``: seconds a failed message stays invisible, by reconsume times.
POP_DELAY_S = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
#: RocketMQ's default ``messageDelayLevel`` (a context's delay level picks from it).
DELAY_LEVEL_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)


@dataclass(frozen=True, slots=True)
class PopOptions:
    """How a POP-mode push consumer pops and consumes (from the PushConsumer's options)."""

    group: str
    batch: int
    invisible_s: float
    threshold: int
    max_reconsume_times: int
    orderly: bool
    suspend_s: float
    batch_max_size: int
    init_mode: int


def retry_delay_s(msg: MessageExt, delay_level: int) -> float:
    """Seconds a failed message stays invisible before the broker redelivers it."""
    if delay_level > 0:
        return DELAY_LEVEL_S[min(delay_level, len(DELAY_LEVEL_S)) - 1]
    return POP_DELAY_S[min(msg.reconsume_times, len(POP_DELAY_S) - 1)]


class PopEngine:
    """Assignment, pop loops and consumption of one POP-mode push consumer (module docstring).

    Args:
        instance: the consumer's client instance.
        client_id: the consumer's client id.
        subscriptions: the consumer's live subscription table.
        options: how to pop and consume.
        runner: calls the listener.
    """

    def __init__(
        self,
        instance: MQClientInstance,
        client_id: str,
        subscriptions: dict[str, SubscriptionData],
        options: PopOptions,
        runner: ListenerRunner,
    ) -> None:
        self.instance = instance
        self.client_id = client_id
        self.subscriptions = subscriptions
        self.options = options
        self.runner = runner
        self.loops: dict[MessageQueue, asyncio.Task[None]] = {}
        self._held: dict[MessageQueue, int] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        self._wakeup = asyncio.Event()
        self._closing = False
        self._acks = AckCoalescer(self._send_acks)
        self.consumed_count = 0
        self.retried_count = 0

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer pops (queue id -1: every queue of that broker)."""
        return sorted(self.loops)

    def wakeup(self) -> None:
        """Ask for the assignment now."""
        self._wakeup.set()

    async def routine(self, interval_s: float) -> None:
        """Keep the pop loops in line with the broker's assignment until cancelled."""
        while True:
            for topic in list(self.subscriptions):
                try:
                    await self._assign(topic)
                except RocketpyError as e:
                    log.warning("assignment of %s for %s failed: %s", topic, self.options.group, e)
            try:
                async with asyncio.timeout(interval_s):
                    await self._wakeup.wait()
            except TimeoutError:
                pass
            self._wakeup.clear()

    async def _assign(self, topic: str) -> None:
        inst = self.instance
        mqs = inst.subscribe_queues(topic)
        if not mqs and await inst.update_topic_route(topic) is not None:
            mqs = inst.subscribe_queues(topic)
        if not mqs:
            return
        addr = await inst.queue_broker_addr(mqs[0])
        answer = await inst.api.query_assignment(
            addr, topic, self.options.group, self.client_id, "AVG", "CLUSTERING", CALL_TIMEOUT_S
        )
        if answer is None:
            return
        mine = {mq for mq, _ in answer}
        for mq in [q for q in self.loops if q.topic == topic and q not in mine]:
            self.loops.pop(mq).cancel()
        for mq in sorted(mine - set(self.loops)):
            self.loops[mq] = asyncio.create_task(self._pop_loop(mq), name=f"rocketpy-pop-{mq.queue_id}")
            log.info("%s %s pops %s", self.options.group, self.client_id, mq)

    async def shutdown(self, timeout_s: float) -> None:
        """Stop popping and let running listener calls finish (bounded); unacked messages come back."""
        self._closing = True
        for task in self.loops.values():
            task.cancel()
        await asyncio.gather(*self.loops.values(), return_exceptions=True)
        self.loops.clear()
        if self._jobs:
            await asyncio.wait(list(self._jobs), timeout=timeout_s)
        for job in list(self._jobs):
            job.cancel()
        await self._acks.close()
        self.runner.shutdown()

    # -- popping -------------------------------------------------------------------------------------
    async def _pop_loop(self, mq: MessageQueue) -> None:
        o = self.options
        while True:
            if self._held.get(mq, 0) >= o.threshold:
                await asyncio.sleep(FLOW_CONTROL_DELAY_S)
                continue
            try:
                msgs = await self._pop(mq)
            except RocketpyError as e:
                log.warning("pop of %s for %s failed: %s", mq, o.group, e)
                await asyncio.sleep(ERROR_DELAY_S)
                continue
            if msgs:
                self._held[mq] = self._held.get(mq, 0) + len(msgs)
                job = asyncio.create_task(self._consume(mq, msgs))
                self._jobs.add(job)
                job.add_done_callback(self._job_done)

    async def _pop(self, mq: MessageQueue) -> list[MessageExt]:
        o, inst = self.options, self.instance
        sub = self.subscriptions.get(mq.topic)
        if sub is None:
            await asyncio.sleep(ERROR_DELAY_S)
            return []
        addr = await inst.queue_broker_addr(mq)
        header = PopMessageRequestHeader(
            o.group, mq.topic, mq.queue_id, o.batch, round(o.invisible_s * 1000), round(POP_POLL_S * 1000),
            int(time.time() * 1000), o.init_mode, sub.expression_type.value, sub.sub_string, o.orderly,
        )  # fmt: skip
        result = await inst.api.pop_message(addr, mq.broker_name, header, POP_POLL_S + CALL_TIMEOUT_S)
        return result.messages

    def _job_done(self, job: asyncio.Task[None]) -> None:
        self._jobs.discard(job)
        if not job.cancelled() and job.exception() is not None:
            log.error("POP consume job failed", exc_info=job.exception())

    # -- consuming -------------------------------------------------------------------------------------
    async def _consume(self, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        try:
            if self.options.orderly:
                for queue_msgs in _by_queue(msgs):
                    await self._consume_orderly(mq, queue_msgs)
            else:
                await self._consume_concurrently(mq, msgs)
        finally:
            self._held[mq] -= len(msgs)

    async def _consume_concurrently(self, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        size = self.options.batch_max_size
        chunks = [msgs[i : i + size] for i in range(0, len(msgs), size)]
        contexts = [ConsumeContext(mq) for _ in chunks]
        results = await self.runner.run(chunks, contexts, ProcessQueue())
        done: list[MessageExt] = []
        for chunk, result, ctx in zip(chunks, results, contexts, strict=True):
            if result is ConsumeStatus.CONSUME_SUCCESS:
                done += chunk
                continue
            if result is not ConsumeStatus.RECONSUME_LATER and result is not SKIPPED:
                report_failure(result, ConsumeStatus, mq, len(chunk))
            done += await self._fail(mq, chunk, ctx.delay_level_when_next_consume)
        self.consumed_count += len(done)
        await self._ack(done)

    async def _consume_orderly(self, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        size = self.options.batch_max_size
        for i in range(0, len(msgs), size):
            chunk = msgs[i : i + size]
            ctx = ConsumeContext(mq, self.options.suspend_s)
            [result] = await self.runner.run([chunk], [ctx], ProcessQueue())
            if result is ConsumeOrderlyStatus.SUCCESS:
                self.consumed_count += len(chunk)
                await self._ack(chunk)
                continue
            if result is not ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                report_failure(result, ConsumeOrderlyStatus, mq, len(chunk))
            rest = msgs[i:]
            await asyncio.gather(*(self._change(m, ctx.suspend_current_queue_time) for m in rest))
            self.retried_count += len(rest)
            return

    async def _fail(self, mq: MessageQueue, chunk: list[MessageExt], delay_level: int) -> list[MessageExt]:
        """Hand failed messages back; those dead-lettered are returned (to be acked)."""
        limit = self.options.max_reconsume_times
        dead = [m for m in chunk if delay_level < 0 or 0 <= limit <= m.reconsume_times]
        later = [m for m in chunk if m not in dead]
        await asyncio.gather(*(self._change(m, retry_delay_s(m, delay_level)) for m in later))
        self.retried_count += len(later)
        sent = await asyncio.gather(*(self._dead_letter(mq, m) for m in dead))
        return [m for m, ok in zip(dead, sent, strict=True) if ok]

    async def _change(self, msg: MessageExt, seconds: float) -> None:
        inst = self.instance
        try:
            h = parse_handle(msg)
            addr = inst.find_broker_addr(h.broker_name) or ""
            await inst.api.change_invisible_time(
                addr, self.options.group, h.stored_topic(msg.topic, self.options.group), h.queue_id,
                h.queue_offset, h.encode(), max(1, round(seconds * 1000)), CALL_TIMEOUT_S,
            )  # fmt: skip
        except RocketpyError as e:  # it comes back after its first invisible time anyway
            log.info(
                "cannot delay message %s (%s); it comes back when its invisible time ends", msg.msg_id, e
            )

    async def _dead_letter(self, mq: MessageQueue, msg: MessageExt) -> bool:
        inst = self.instance
        try:
            h = parse_handle(msg)
            addr = inst.find_broker_addr(h.broker_name) or await inst.queue_broker_addr(mq)
            await inst.api.consumer_send_msg_back(
                addr, msg, self.options.group, -1, self.options.max_reconsume_times
            )
        except RocketpyError as e:
            log.warning(
                "cannot dead-letter message %s (%s); it comes back when its invisible time ends",
                msg.msg_id,
                e,
            )
            return False
        return True

    async def _ack(self, msgs: list[MessageExt]) -> None:
        if not msgs:
            return
        inst = self.instance
        by_broker: dict[str, list[AckGroup]] = {}
        for g in ack_groups(msgs):
            by_broker.setdefault(g.handle.broker_name, []).append(g)
        sent: list[tuple[str, list[AckGroup], asyncio.Future[None]]] = []
        for broker_name, items in by_broker.items():
            addr = inst.find_broker_addr(broker_name)
            try:
                if addr is None:
                    raise RocketpyError(f"broker {broker_name} has no master in the route")
                acks = batch_acks(self.options.group, items)
            except RocketpyError as e:
                _ack_failed(items, broker_name, e)
                continue
            sent.append((broker_name, items, self._acks.add(addr, broker_name, acks)))
        outcomes = await asyncio.gather(*(f for _, _, f in sent), return_exceptions=True)
        for (broker_name, items, _), outcome in zip(sent, outcomes, strict=True):
            if isinstance(outcome, RocketpyError):
                _ack_failed(items, broker_name, outcome)

    async def _send_acks(self, addr: str, broker_name: str, acks: list[BatchAck]) -> None:
        await self.instance.api.batch_ack_message(addr, broker_name, acks, CALL_TIMEOUT_S)


def _ack_failed(items: list[AckGroup], broker_name: str, e: Exception) -> None:
    log.warning(
        "ack of %d message(s) at %s failed (%s); they will be delivered again",
        sum(len(g.offsets) for g in items),
        broker_name,
        e,
    )


def _by_queue(msgs: list[MessageExt]) -> list[list[MessageExt]]:
    """A popped batch split by (topic kind, queue), each in offset order (one orderly unit each)."""
    groups: dict[tuple[bool, int], list[MessageExt]] = {}
    for m in msgs:
        h = parse_handle(m)
        groups.setdefault((h.retry, h.queue_id), []).append(m)
    return [sorted(g, key=lambda m: parse_handle(m).queue_offset) for g in groups.values()]
