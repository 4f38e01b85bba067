"""Planning a read: from options to concrete per-queue offsets, asking the brokers once.

Owns the driver-side questions of batch and stream reads: which queues the topics have, their
min/max offsets, where a read starts (``startingOffsets``, ``startingTimestamp``) and ends
(``endingOffsets``), and the plan-time checks (unknown topic or queue, ending before starting,
offsets already removed). Offset specs are parsed before any connection is made, so malformed
JSON fails at once even when no NameServer runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rocketpy.spark.brokers import BrokerSession
from rocketpy.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRangeError,
    Offsets,
    Queue,
    QueueRange,
    check_range,
    parse_spec,
    queue_name,
    resolve_spec,
    split_ranges,
)
from rocketpy.spark.options import ReadOptions, SparkOptionError

log = logging.getLogger("rocketpy.spark")


@dataclass
class TopicState:
    """The topics' queues and their ``(min, max)`` offsets at one moment."""

    queues: list[Queue]
    bounds: dict[Queue, tuple[int, int]]

    @property
    def latest(self) -> Offsets:
        """Each queue's max offset (the next one to be written)."""
        return {q: b[1] for q, b in self.bounds.items()}


def topic_state(session: BrokerSession, opts: ReadOptions) -> TopicState:
    """Ask the NameServer for the queues and their brokers for the offsets."""

    async def go() -> TopicState:
        queues = await session.queues(opts.topics)
        return TopicState(queues, await session.bounds(queues))

    return session.run(go)


def starting_offsets(session: BrokerSession, opts: ReadOptions, state: TopicState, default: str) -> Offsets:
    """Where a read starts in every queue (``startingTimestamp`` or ``startingOffsets``)."""
    if opts.starting_timestamp_ms is not None:
        ts = opts.starting_timestamp_ms
        return session.run(lambda: session.search(state.queues, ts))
    spec = parse_spec(opts.starting_offsets, "startingOffsets", opts.topics, default)
    return resolve_spec(spec, "startingOffsets", state.queues, state.bounds, EARLIEST)


def skip_removed(start: Offsets, state: TopicState, fail_on_data_loss: bool) -> Offsets:
    """``start`` with offsets below a queue's min offset moved up to it (or OffsetRangeError)."""
    out = dict(start)
    for q, off in sorted(start.items()):
        low = state.bounds[q][0] if q in state.bounds else off
        if off < low:
            if fail_on_data_loss:
                raise OffsetRangeError(
                    f"{queue_name(q)}: offsets [{off}, {low}) were removed by the broker's cleanup;"
                    " set failOnDataLoss=false to skip them"
                )
            log.warning("%s: skipping offsets [%d, %d) removed by cleanup", queue_name(q), off, low)
            out[q] = low
    return out


def plan_batch(opts: ReadOptions) -> list[QueueRange]:
    """The queue ranges of a batch read (split to ``minPartitions``).

    Raises:
        SparkOptionError: a bad offsets spec, unknown topic or queue, ending before starting,
            offsets removed (with failOnDataLoss), no NameServer or broker answering.
    """
    parse_spec(opts.starting_offsets, "startingOffsets", opts.topics, "earliest")
    end_spec = parse_spec(opts.ending_offsets, "endingOffsets", opts.topics, "latest")
    if end_spec == "earliest":
        raise SparkOptionError("option endingOffsets cannot be earliest: use latest or per-queue JSON")
    with BrokerSession(opts.namesrv_addr, opts.timeout_s) as session:
        state = topic_state(session, opts)
        start = starting_offsets(session, opts, state, "earliest")
    end = resolve_spec(end_spec, "endingOffsets", state.queues, state.bounds, LATEST)
    check_range(start, end, state.bounds)
    start = skip_removed(start, state, opts.fail_on_data_loss)
    return split_ranges(start, {q: max(end[q], start[q]) for q in start}, opts.min_partitions)
