"""The long-polling pull task of one assigned queue (push and lite pull consumers).

Owns the loop ``pull -> put into the ProcessQueue -> hand to the consume service -> pull again``
for one queue (its ``QueueContext``), with RocketMQ's client timings: the broker may hold a pull
15 s (suspend) and the RPC waits 30 s; a full process queue (``pull_threshold_for_queue`` messages or
``pull_threshold_size_for_queue`` bytes) pauses pulling 50 ms at a time; an error waits 1 s;
an orderly queue is only pulled while its broker lock is held. The loop ends when the process queue
is dropped (rebalance, shutdown) or the task is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rocketpy.client.consumer_types import ExpressionType, SubscriptionData
from rocketpy.client.queue_context import QueueContext
from rocketpy.client.results import PullResult, PullStatus
from rocketpy.client.running_info import ConsumeStatsTable
from rocketpy.errors import MQBrokerError, MQClientError, RocketpyError
from rocketpy.filter.sql92 import compile_sql92
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.protocol.headers.pull import PullMessageRequestHeader
from rocketpy.sysflag import FLAG_SUBSCRIPTION, build_pull_sys_flag

log = logging.getLogger("rocketpy.client.pull")

BROKER_SUSPEND_MAX_TIME_MS = 15_000
CONSUMER_TIMEOUT_WHEN_SUSPEND_S = 30.0
PULL_DELAY_WHEN_FLOW_CONTROL_S = 0.05
PULL_DELAY_WHEN_EXCEPTION_S = 1.0
PULL_DELAY_WHEN_NOT_LOCKED_S = 0.2
_FLOW_LOG_EVERY_S = 10.0
SQL92_PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class PullOptions:
    """How a consumer pulls: the same for every queue it holds.

    Attributes:
        group: the consumer group.
        batch_size: ``pull_batch_size`` (messages per pull).
        threshold_count: ``pull_threshold_for_queue`` (held messages that pause pulling).
        threshold_bytes: ``pull_threshold_size_for_queue`` (held body bytes that pause pulling).
        orderly: pull only while the queue's broker lock is held.
        commit_in_pull: CLUSTERING: each pull carries the queue's offset for the broker to commit.
        stats: the consumer's per-topic counters (pulls, their time, messages found).
    """

    group: str
    batch_size: int
    threshold_count: int
    threshold_bytes: int
    orderly: bool = False
    commit_in_pull: bool = True
    stats: ConsumeStatsTable | None = None


class Puller(Protocol):
    """Sends one PULL_MESSAGE for a queue to its broker (``MQClientInstance.pull``)."""

    async def pull(self, mq: MessageQueue, ext: dict[str, Any], timeout_s: float) -> PullResult:
        """The broker's answer to one pull of ``mq``."""
        ...


#: Where a pull loop hands pulled messages (the consume service, or the lite consumer's poll buffer).
Submit = Callable[[QueueContext, list[MessageExt]], None]


def pull_ext(
    group: str,
    batch_size: int,
    mq: MessageQueue,
    sub: SubscriptionData,
    offset: int,
    commit_offset: int | None,
) -> dict[str, Any]:
    """The PULL_MESSAGE header fields (docs/wire.md) for one pull of ``mq`` at ``offset``."""
    commit = commit_offset if commit_offset is not None and commit_offset > 0 else 0
    sys_flag = build_pull_sys_flag(commit_offset=commit > 0, suspend=True, subscription=True)
    return PullMessageRequestHeader.pack(
        group, mq.topic, mq.queue_id, offset, batch_size, sys_flag, commit,
        BROKER_SUSPEND_MAX_TIME_MS, sub.sub_string, sub.sub_version, sub.expression_type.value, None,
    )  # fmt: skip


def filter_by_tags(sub: SubscriptionData, msgs: list[MessageExt]) -> list[MessageExt]:
    """Client-side re-check, as RocketMQ's PullAPIWrapper: tags (drops hash collisions) or SQL92.

    A SQL92 subscription is tested again over each message's properties (the compiled expression
    is cached per text), so a broker that did not filter cannot hand the listener a non-match.
    """
    if sub.expression_type is ExpressionType.SQL92:
        match = compile_sql92(sub.sub_string).match_properties
        return [m for m in msgs if match(m.all_properties())]  # TAGS, KEYS included
    if sub.is_all or not sub.tags_set:
        return msgs
    return [m for m in msgs if sub.matches_tag(m.tags)]


async def check_sql92_support(
    puller: Puller, group: str, sub: SubscriptionData, mqs: list[MessageQueue]
) -> None:
    """Probe one queue per broker of ``mqs`` with an SQL92 subscription (no suspend, nothing committed).

    Raises:
        MQClientError: a broker refuses SQL92 filtering (``enablePropertyFilter`` is off).
    """
    first_per_broker = {mq.broker_name: mq for mq in reversed(mqs)}
    for mq in first_per_broker.values():
        ext = pull_ext(group, 1, mq, sub, 0, None)
        ext.update(sysFlag=FLAG_SUBSCRIPTION, suspendTimeoutMillis=0)
        try:
            await puller.pull(mq, ext, SQL92_PROBE_TIMEOUT_S)
        except MQBrokerError as exc:
            raise MQClientError(
                f"broker {mq.broker_name} refused the SQL92 subscription of {sub.topic} ({exc.remark}): "
                "SQL92 filters need enablePropertyFilter=true in the broker's config"
            ) from exc


class PullLoop:
    """Pulls one queue until its process queue is dropped.

    Args:
        ctx: the queue's context (process queue, next offset, subscription, offset store).
        options: the consumer's pull options.
        puller: sends the pulls.
        submit: receives every non-empty pulled batch (already in ``ctx.pq``).
    """

    def __init__(self, ctx: QueueContext, options: PullOptions, puller: Puller, submit: Submit) -> None:
        self.ctx = ctx
        self.options = options
        self.puller = puller
        self.submit = submit
        self._last_flow_log = 0.0

    async def run(self) -> None:
        """The pull routine; returns when the process queue is dropped."""
        pq = self.ctx.pq
        while not pq.dropped:
            try:
                delay_s = await self._pull_once()
            except Exception:  # a bug or a corrupt response must not stall the queue forever
                log.exception(
                    "pull loop of %s failed; retrying in %.1f s", self.ctx.mq, PULL_DELAY_WHEN_EXCEPTION_S
                )
                delay_s = PULL_DELAY_WHEN_EXCEPTION_S
            if delay_s > 0 and not pq.dropped:
                await asyncio.sleep(delay_s)

    def _flow_controlled(self) -> bool:
        pq, opts = self.ctx.pq, self.options
        if not pq.is_full(opts.threshold_count, opts.threshold_bytes):
            return False
        now = time.monotonic()
        if now - self._last_flow_log > _FLOW_LOG_EVERY_S:
            self._last_flow_log = now
            log.info(
                "flow control on %s: %d msgs / %d bytes cached; pulling pauses until the listener catches up",
                self.ctx.mq,
                pq.msg_count,
                pq.msg_bytes,
            )
        return True

    async def _pull_once(self) -> float:
        """One pull; returns how long to wait before the next one."""
        ctx, opts = self.ctx, self.options
        if self._flow_controlled():
            return PULL_DELAY_WHEN_FLOW_CONTROL_S
        if opts.orderly and not ctx.pq.locked:
            return PULL_DELAY_WHEN_NOT_LOCKED_S
        commit = ctx.offsets.cached(ctx.mq) if opts.commit_in_pull else None
        ext = pull_ext(opts.group, opts.batch_size, ctx.mq, ctx.sub, ctx.next_offset, commit)
        ctx.pq.last_pull_time = started = time.monotonic()
        try:
            result = await self.puller.pull(ctx.mq, ext, CONSUMER_TIMEOUT_WHEN_SUSPEND_S)
        except RocketpyError as exc:
            if not ctx.pq.dropped:
                log.warning(
                    "pull from %s failed (%s); retrying in %.1f s", ctx.mq, exc, PULL_DELAY_WHEN_EXCEPTION_S
                )
            return PULL_DELAY_WHEN_EXCEPTION_S
        if ctx.pq.dropped:
            return 0.0
        if opts.stats is not None:
            opts.stats.on_pull(ctx.mq.topic, len(result.messages), (time.monotonic() - started) * 1000)
        return self._on_result(result)

    def _on_result(self, result: PullResult) -> float:
        ctx = self.ctx
        status = result.status
        if status is PullStatus.FOUND:
            ctx.next_offset = result.next_begin_offset
            msgs = filter_by_tags(ctx.sub, result.messages)
            if msgs:
                ctx.pq.put(msgs)
                self.submit(ctx, msgs)
            else:
                self._maybe_advance_idle_offset()
            return 0.0
        if status is PullStatus.NO_NEW_MSG or status is PullStatus.NO_MATCHED_MSG:
            ctx.next_offset = result.next_begin_offset
            self._maybe_advance_idle_offset()
            return 0.0
        # OFFSET_ILLEGAL: the offset is outside the queue; restart at the broker's suggestion.
        log.warning(
            "offset %d of %s is illegal; moving to %d", ctx.next_offset, ctx.mq, result.next_begin_offset
        )
        ctx.pq.clear()
        ctx.pq.max_offset_seen = result.next_begin_offset - 1
        ctx.next_offset = result.next_begin_offset
        ctx.offsets.update(ctx.mq, ctx.next_offset, increase_only=False)
        return 0.0

    def _maybe_advance_idle_offset(self) -> None:
        """Nothing held: the committable offset is where the next pull starts (skips filtered messages)."""
        ctx = self.ctx
        if ctx.pq.msg_count == 0:
            ctx.pq.max_offset_seen = max(ctx.pq.max_offset_seen, ctx.next_offset - 1)
            ctx.offsets.update(ctx.mq, ctx.next_offset)
