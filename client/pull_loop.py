"""The long-polling pull task of one assigned queue (push consumer).

Owns the loop ``pull -> put into the ProcessQueue -> hand to the consume service -> pull again``
for one queue, with RocketMQ's client timings: the broker may hold a pull 15 s (suspend) and the
RPC waits 30 s; a full process queue (``pull_threshold_for_queue`` messages or
``pull_threshold_size_for_queue`` bytes) pauses pulling 50 ms at a time; an error waits 1 s;
an orderly queue is only pulled while its broker lock is held. The loop ends when the process queue
is dropped (rebalance, shutdown) or the task is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from rocketpy.client.consumer_types import MessageModel, SubscriptionData
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.errors import MQBrokerError, MQClientError, RocketpyError
from rocketpy.header.pull import pull_request_ext
from rocketpy.sysflag import FLAG_SUBSCRIPTION, build_pull_sys_flag

log = logging.getLogger("rocketpy.client.pull")

BROKER_SUSPEND_MAX_TIME_MS = 15_000
CONSUMER_TIMEOUT_WHEN_SUSPEND_S = 30.0
PULL_DELAY_WHEN_FLOW_CONTROL_S = 0.05
PULL_DELAY_WHEN_EXCEPTION_S = 1.0
PULL_DELAY_WHEN_NOT_LOCKED_S = 0.2
_FLOW_LOG_EVERY_S = 10.0
SQL92_PROBE_TIMEOUT_S = 5.0


def pull_ext(
    consumer: Any, mq: Any, sub: SubscriptionData, offset: int, commit_offset: int | None
) -> dict[str, Any]:
    """The PULL_MESSAGE header fields (docs/wire.md) for one pull of ``mq`` at ``offset``."""
    commit = commit_offset if commit_offset is not None and commit_offset > 0 else 0
    sys_flag = build_pull_sys_flag(commit_offset=commit > 0, suspend=True, subscription=True)
    return pull_request_ext(
        consumer.group, mq.topic, mq.queue_id, offset, consumer.pull_batch_size, sys_flag, commit,
        BROKER_SUSPEND_MAX_TIME_MS, sub.sub_string, sub.sub_version, sub.expression_type.value,
    )  # fmt: skip


def filter_by_tags(sub: SubscriptionData, msgs: list[Any]) -> list[Any]:
    """Client-side tag re-check (drops hash collisions), as RocketMQ's PullAPIWrapper."""
    if sub.is_all or not sub.tags_set:
        return msgs
    return [m for m in msgs if sub.matches_tag(m.tags)]


async def check_sql92_support(consumer: Any, topic: str) -> None:
    """Probe one queue per broker with the topic's SQL92 subscription (no suspend, nothing committed).

    Raises:
        MQClientError: a broker refuses SQL92 filtering (``enablePropertyFilter`` is off).
    """
    sub = consumer.subscription_table[topic]
    first_per_broker = {mq.broker_name: mq for mq in reversed(consumer.instance.subscribe_queues(topic))}
    for mq in first_per_broker.values():
        ext = pull_ext(consumer, mq, sub, 0, None)
        ext.update(sysFlag=FLAG_SUBSCRIPTION, maxMsgNums=1, suspendTimeoutMillis=0)
        try:
            addr = await consumer.broker_addr(mq)
            await consumer.instance.api.pull_message(addr, ext, SQL92_PROBE_TIMEOUT_S)
        except MQBrokerError as exc:
            raise MQClientError(
                f"broker {mq.broker_name} refused the SQL92 subscription of {topic} ({exc.remark}): "
                "SQL92 filters need enablePropertyFilter=true in the broker's config"
            ) from exc


class PullLoop:
    """Pulls one queue until its process queue is dropped.

    Args:
        consumer: the PushConsumer (group, options, instance, offset store, consume service).
        mq: the queue.
        pq: its process queue.
        sub: the topic's subscription.
        next_offset: where to start.
    """

    def __init__(
        self, consumer: Any, mq: Any, pq: ProcessQueue, sub: SubscriptionData, next_offset: int
    ) -> None:
        self.consumer = consumer
        self.mq = mq
        self.pq = pq
        self.sub = sub
        self.next_offset = next_offset
        self._last_flow_log = 0.0

    async def run(self) -> None:
        """The pull routine; returns when the process queue is dropped."""
        while not self.pq.dropped:
            try:
                delay_s = await self._pull_once()
            except Exception:  # a bug or a corrupt response must not stall the queue forever
                log.exception(
                    "pull loop of %s failed; retrying in %.1f s", self.mq, PULL_DELAY_WHEN_EXCEPTION_S
                )
                delay_s = PULL_DELAY_WHEN_EXCEPTION_S
            if delay_s > 0 and not self.pq.dropped:
                await asyncio.sleep(delay_s)

    def _flow_controlled(self) -> bool:
        c = self.consumer
        if not self.pq.is_full(c.pull_threshold_for_queue, c.pull_threshold_size_for_queue):
            return False
        now = time.monotonic()
        if now - self._last_flow_log > _FLOW_LOG_EVERY_S:
            self._last_flow_log = now
            log.info(
                "flow control on %s: %d msgs / %d bytes cached; pulling pauses until the listener catches up",
                self.mq,
                self.pq.msg_count,
                self.pq.msg_bytes,
            )
        return True

    async def _pull_once(self) -> float:
        """One pull; returns how long to wait before the next one."""
        c = self.consumer
        if self._flow_controlled():
            return PULL_DELAY_WHEN_FLOW_CONTROL_S
        if c.orderly and not self.pq.locked:
            return PULL_DELAY_WHEN_NOT_LOCKED_S
        commit = c.offset_store.cached(self.mq) if c.message_model is MessageModel.CLUSTERING else None
        ext = pull_ext(c, self.mq, self.sub, self.next_offset, commit)
        self.pq.last_pull_time = time.monotonic()
        try:
            addr = await c.broker_addr(self.mq)
            result = await c.instance.api.pull_message(addr, ext, CONSUMER_TIMEOUT_WHEN_SUSPEND_S)
        except RocketpyError as exc:
            if not self.pq.dropped:
                log.warning(
                    "pull from %s failed (%s); retrying in %.1f s", self.mq, exc, PULL_DELAY_WHEN_EXCEPTION_S
                )
            return PULL_DELAY_WHEN_EXCEPTION_S
        if self.pq.dropped:
            return 0.0
        return self._on_result(result)

    def _on_result(self, result: Any) -> float:
        status = result.status.name
        if status == "FOUND":
            self.next_offset = result.next_begin_offset
            msgs = filter_by_tags(self.sub, result.messages)
            if msgs:
                self.pq.put(msgs)
                self.consumer.consume_service.submit(self.pq, self.mq, msgs)
            else:
                self._maybe_advance_idle_offset()
            return 0.0
        if status in ("NO_NEW_MSG", "NO_MATCHED_MSG"):
            self.next_offset = result.next_begin_offset
            self._maybe_advance_idle_offset()
            return 0.0
        # OFFSET_ILLEGAL: the offset is outside the queue; restart at the broker's suggestion.
        log.warning(
            "offset %d of %s is illegal; moving to %d", self.next_offset, self.mq, result.next_begin_offset
        )
        self.pq.clear()
        self.pq.max_offset_seen = result.next_begin_offset - 1
        self.next_offset = result.next_begin_offset
        self.consumer.offset_store.update(self.mq, self.next_offset, increase_only=False)
        return 0.0

    def _maybe_advance_idle_offset(self) -> None:
        """Nothing held: the committable offset is where the next pull starts (skips filtered messages)."""
        if self.pq.msg_count == 0:
            self.pq.max_offset_seen = max(self.pq.max_offset_seen, self.next_offset - 1)
            self.consumer.offset_store.update(self.mq, self.next_offset)
