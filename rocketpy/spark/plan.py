"""Planning a read: from options to concrete per-queue offsets, asking the brokers once.

Owns the driver-side questions of batch and stream reads: which topics (named, or matching
``topicPattern``) and queues are read, their min/max offsets, where a read starts
(``startingOffsets``, ``startingTimestamp``, ``startingOffsetsByTimestamp`` with
``startingOffsetsByTimestampStrategy``) and where a batch ends (``endingOffsets``,
``endingTimestamp``, ``endingOffsetsByTimestamp``), and the plan-time checks (unknown topic or
queue, ending before starting, offsets already removed, a refused ACL account, an SQL92 filter the
brokers do not run). Offset specs are parsed before any connection is made, so malformed JSON fails
at once even when no NameServer runs.

A time resolves to the first offset stored at or after it (the broker's offset search), so an
ending time is exclusive, as Kafka's. A starting time with no message at or after it in a queue is
an error (strategy ``error``, Kafka's default) or that queue's latest offset (``latest``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rocketpy.spark.brokers import BrokerSession
from rocketpy.spark.filters import probe_reads
from rocketpy.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRangeError,
    Offsets,
    Queue,
    QueueRange,
    check_queues,
    check_range,
    parse_offsets_json,
    parse_spec,
    queue_name,
    resolve_spec,
    split_ranges,
)
from rocketpy.spark.options import ReadOptions, SparkOptionError

log = logging.getLogger("rocketpy.spark")


@dataclass
class TopicState:
    """The read topics' queues and their ``(min, max)`` offsets at one moment."""

    queues: list[Queue]
    bounds: dict[Queue, tuple[int, int]]
    topics: tuple[str, ...] = ()
    live_brokers: frozenset[str] = frozenset()  # with topicPattern: the brokers registered now

    @property
    def latest(self) -> Offsets:
        """Each queue's max offset (the next one to be written)."""
        return {q: b[1] for q, b in self.bounds.items()}


def session_for(opts: ReadOptions) -> BrokerSession:
    """A session with the read's address, timeout and ACL account."""
    return BrokerSession(opts.namesrv_addr, opts.timeout_s, opts.credentials)


def topic_state(session: BrokerSession, opts: ReadOptions) -> TopicState:
    """Ask the NameServer for the topics and queues and their brokers for the offsets.

    With ``topicPattern`` the topic list is read anew; a matching topic deleted meanwhile is left
    out (its route is gone), and no match is an empty state, not an error.
    """

    async def go() -> TopicState:
        pattern, topics, live = opts.topic_pattern, opts.topics, frozenset[str]()
        if pattern is not None:
            names, live = await session.topic_names(pattern)
            topics = tuple(names)
        queues = await session.queues(topics, missing_ok=pattern is not None)
        return TopicState(queues, await session.bounds(queues), topics, live)

    return session.run(go)


def _by_time(
    session: BrokerSession, state: TopicState, when: int | dict[Queue, int], option: str, strict: bool
) -> Offsets:
    """Offsets of the first messages stored at or after ``when`` (one time, or per queue).

    ``strict``: a queue with no such message fails the plan (strategy ``error``); otherwise it
    stays at its max offset (its latest).
    """
    queues = list(when) if isinstance(when, dict) else state.queues
    found = session.run(lambda: session.search(queues, when))
    if strict:
        missing = sorted(q for q, off in found.items() if off >= state.bounds[q][1])
        if missing:
            ms = (lambda q: when[q]) if isinstance(when, dict) else (lambda q: when)
            names = ", ".join(f"{queue_name(q)} (time {ms(q)})" for q in missing[:8])
            raise SparkOptionError(
                f"option {option}: no message stored at or after the given time in {names}"
                f"{' ...' if len(missing) > 8 else ''}; set startingOffsetsByTimestampStrategy=latest"
                " to start such queues at their latest offset"
            )
    return found


def starting_offsets(session: BrokerSession, opts: ReadOptions, state: TopicState, default: str) -> Offsets:
    """Where a read starts in every queue (by offsets, one start time, or start times per queue)."""
    strict = opts.timestamp_strategy == "error"
    if opts.starting_timestamp_ms is not None:
        return _by_time(session, state, opts.starting_timestamp_ms, "startingTimestamp", strict)
    if opts.starting_offsets_by_timestamp is not None:
        option = "startingOffsetsByTimestamp"
        times = parse_offsets_json(opts.starting_offsets_by_timestamp, option, 0)
        check_queues(times, option, state.queues)
        named = _by_time(session, state, times, option, strict)
        return {q: named.get(q, state.bounds[q][0]) for q in state.queues}  # unnamed: earliest
    spec = parse_spec(opts.starting_offsets, "startingOffsets", opts.reads_topic, default)
    return resolve_spec(spec, "startingOffsets", state.queues, state.bounds, EARLIEST)


def ending_offsets(session: BrokerSession, opts: ReadOptions, state: TopicState) -> Offsets:
    """Where a batch read ends in every queue (exclusive): by offsets, one end time, or per queue."""
    if opts.ending_timestamp_ms is not None:
        return _by_time(session, state, opts.ending_timestamp_ms, "endingTimestamp", strict=False)
    if opts.ending_offsets_by_timestamp is not None:
        option = "endingOffsetsByTimestamp"
        times = parse_offsets_json(opts.ending_offsets_by_timestamp, option, 0)
        check_queues(times, option, state.queues)
        named = _by_time(session, state, times, option, strict=False)
        return {q: named.get(q, state.bounds[q][1]) for q in state.queues}  # unnamed: latest
    spec = parse_spec(opts.ending_offsets, "endingOffsets", opts.reads_topic, "latest")
    return resolve_spec(spec, "endingOffsets", state.queues, state.bounds, LATEST)


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
            offsets removed (with failOnDataLoss), a refused account, no NameServer or broker answering.
    """
    parse_spec(opts.starting_offsets, "startingOffsets", opts.reads_topic, "earliest")
    end_spec = parse_spec(opts.ending_offsets, "endingOffsets", opts.reads_topic, "latest")
    if end_spec == "earliest":
        raise SparkOptionError("option endingOffsets cannot be earliest: use latest or per-queue JSON")
    with session_for(opts) as session:
        state = topic_state(session, opts)
        if opts.topic_pattern is not None and not state.topics:
            log.warning("rocketpy read: no topic matches topicPattern %r", opts.topic_pattern)
        probe_reads(session, opts, state.queues)
        start = starting_offsets(session, opts, state, "earliest")
        end = ending_offsets(session, opts, state)
    check_range(start, end, state.bounds)
    start = skip_removed(start, state, opts.fail_on_data_loss)
    return split_ranges(start, {q: max(end[q], start[q]) for q in start}, opts.min_partitions)
