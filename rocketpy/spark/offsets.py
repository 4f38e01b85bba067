"""Offsets of the Spark data source: specs, canonical JSON, queue ranges and per-trigger caps.

Pure functions over plain values; no broker, no Spark. A queue is ``(topic, broker_name,
queue_id)``; offsets are ``{queue: offset}`` dicts. The JSON form is Spark's Kafka style,
``{"TopicA": {"broker-a:0": 42}}``, with ``-2`` for earliest and ``-1`` for latest in specs.
``offsets_to_json`` is canonical (sorted keys, no blanks): Spark compares stream offsets as
strings, so equal offsets must give equal text. Invariants: ranges never overlap and cover
``[start, end)`` exactly; ``cap_offsets`` admits exactly ``min(limit, backlog)`` rows.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rocketpy.spark.errors import SparkOptionError

Queue = tuple[str, str, int]
Offsets = dict[Queue, int]
Spec = str | dict[Queue, int]

_EXAMPLE = '{"TopicA": {"broker-a:0": 42}}'
_TIME_EXAMPLE = '{"TopicA": {"broker-a:0": 1700000000000}}'
EARLIEST = -2
LATEST = -1


class OffsetRangeError(SparkOptionError):
    """Planned offsets that cannot be read (ending before starting, past the end, removed)."""


@dataclass(frozen=True, order=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue: the unit of one Spark input partition."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def queue(self) -> Queue:
        """The queue this range belongs to."""
        return (self.topic, self.broker_name, self.queue_id)

    def __len__(self) -> int:
        return self.end - self.start


def queue_name(q: Queue) -> str:
    """``topic/broker:queue`` for messages."""
    return f"{q[0]}/{q[1]}:{q[2]}"


def _queue_from_key(topic: str, key: str, option: str) -> Queue:
    broker, _, qid = str(key).rpartition(":")
    if not broker or not qid.isdigit():
        raise SparkOptionError(f"option {option}: queue {key!r} of {topic!r} must be 'brokerName:queueId'")
    return (topic, broker, int(qid))


def parse_offsets_json(text: str, option: str, minimum: int = EARLIEST) -> Offsets:
    """``{"Topic": {"broker-a:0": 42}}`` -> per-queue values (no range checks beyond ``>= minimum``).

    Offsets take ``minimum=-2`` (``-2`` earliest, ``-1`` latest); store times (ms) take 0.
    """
    example = _EXAMPLE if minimum < 0 else _TIME_EXAMPLE
    try:
        doc = json.loads(text)
    except ValueError as e:
        what = "earliest, latest or JSON" if minimum < 0 else "JSON"
        raise SparkOptionError(f"option {option}: {text!r} is not {what} like {example} ({e})") from None
    if not isinstance(doc, dict):
        raise SparkOptionError(f"option {option}: expected a JSON object like {example}")
    out: Offsets = {}
    for topic, queues in doc.items():
        if not isinstance(queues, dict):
            raise SparkOptionError(f"option {option}: the value of topic {topic!r} must be an object")
        for key, value in queues.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                meaning = " (-2 earliest, -1 latest)" if minimum < 0 else " (ms since the epoch)"
                what = "offset" if minimum < 0 else "timestamp"
                raise SparkOptionError(
                    f"option {option}: {what} {value!r} of {topic}/{key} must be an integer"
                    f" >= {minimum}{meaning}"
                )
            out[_queue_from_key(topic, key, option)] = value
    return out


def parse_spec(
    text: str | None, option: str, topics: Iterable[str] | Callable[[str], bool], default: str
) -> Spec:
    """An offsets option: "earliest", "latest" or per-queue offsets of the subscribed topics.

    ``topics``: the subscribed topic names, or a test of a name (a topic pattern).
    """
    if text is None or not text.strip():
        return default
    low = text.strip().lower()
    if low in ("earliest", "latest"):
        return low
    offsets = parse_offsets_json(text, option)
    reads = topics if callable(topics) else set(topics).__contains__
    unknown = sorted({q[0] for q in offsets if not reads(q[0])})
    if unknown:
        raise SparkOptionError(f"option {option} names topics that are not read: {', '.join(unknown)}")
    return offsets


def check_queues(named: Iterable[Queue], option: str, queues: Iterable[Queue]) -> None:
    """Raise SparkOptionError when ``named`` holds queues the topics do not have (lists both)."""
    queues = sorted(queues)
    present = {q[0] for q in queues}
    unknown = sorted(set(named) - set(queues))
    if unknown:
        topics = ", ".join(sorted({q[0] for q in unknown} - present))
        gone = f" (topics without queues here: {topics})" if topics else ""
        raise SparkOptionError(
            f"option {option} names queues the topic does not have: "
            f"{', '.join(queue_name(q) for q in unknown)}{gone} (queues: "
            f"{', '.join(queue_name(q) for q in queues)})"
        )


def resolve_spec(
    spec: Spec, option: str, queues: Iterable[Queue], bounds: Mapping[Queue, tuple[int, int]], default: int
) -> Offsets:
    """Concrete offsets of every queue: named ones from ``spec``, the rest ``default`` (-2 or -1)."""
    queues = list(queues)
    if isinstance(spec, dict):
        check_queues(spec, option, queues)
        wanted = {q: spec.get(q, default) for q in queues}
    else:
        wanted = dict.fromkeys(queues, EARLIEST if spec == "earliest" else LATEST)
    out: Offsets = {}
    for q, v in wanted.items():
        low, high = bounds[q]
        out[q] = low if v == EARLIEST else high if v == LATEST else v
    return out


def check_range(start: Offsets, end: Offsets, bounds: Mapping[Queue, tuple[int, int]]) -> None:
    """Raise OffsetRangeError when a queue's end is before its start or past its max offset."""
    for q in sorted(start):
        if end[q] < start[q]:
            raise OffsetRangeError(
                f"endingOffsets {end[q]} of {queue_name(q)} is before its startingOffsets {start[q]}"
            )
        if end[q] > bounds[q][1]:
            raise OffsetRangeError(
                f"endingOffsets {end[q]} of {queue_name(q)} is past the queue's max offset {bounds[q][1]}"
                " (use latest or -1)"
            )


def offsets_to_json(offsets: Mapping[Queue, int]) -> str:
    """Canonical JSON ``{"Topic": {"broker:queue": offset}}`` (sorted, compact)."""
    doc: dict[str, dict[str, int]] = {}
    for (topic, broker, qid), off in offsets.items():
        doc.setdefault(topic, {})[f"{broker}:{qid}"] = int(off)
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def offsets_from_json(text: str | Mapping[str, object]) -> Offsets:
    """Offsets back from ``offsets_to_json`` (or the dict Spark deserialised from it)."""
    doc = json.loads(text) if isinstance(text, str) else text
    return parse_offsets_json(json.dumps(doc), "offset")


def split_ranges(
    start: Mapping[Queue, int], end: Mapping[Queue, int], min_partitions: int
) -> list[QueueRange]:
    """One range per non-empty queue range, big ones split until there are ``min_partitions``."""
    ranges = [QueueRange(*q, start[q], end[q]) for q in sorted(start) if end[q] > start[q]]
    if not ranges or len(ranges) >= min_partitions:
        return ranges
    total = sum(len(r) for r in ranges)
    out: list[QueueRange] = []
    for r in ranges:
        parts = min(len(r), math.ceil(len(r) * min_partitions / total))
        cuts = [r.start + i * len(r) // parts for i in range(parts)] + [r.end]
        out += [QueueRange(*r.queue, a, b) for a, b in itertools.pairwise(cuts)]
    return out


def cap_offsets(start: Mapping[Queue, int], latest: Mapping[Queue, int], limit: int | None) -> Offsets:
    """End offsets admitting at most ``limit`` rows, spread over queues by their backlog.

    Each queue gets ``floor(limit * backlog / total)``; the remainder goes one row each to the
    queues with the largest fractions (ties: queue order), so exactly ``limit`` rows are admitted.
    Queues only in ``latest`` (new ones) start at their start offset as given by the caller.
    """
    backlog = {q: max(0, latest[q] - start[q]) for q in sorted(latest)}
    total = sum(backlog.values())
    if limit is None or total <= limit:
        return {q: max(latest[q], start[q]) for q in backlog}
    shares = {q: limit * b / total for q, b in backlog.items()}
    grant = {q: math.floor(s) for q, s in shares.items()}
    rest = limit - sum(grant.values())
    for q in sorted(backlog, key=lambda q: (grant[q] - shares[q], q))[:rest]:
        grant[q] += 1
    return {q: start[q] + grant[q] for q in backlog}
