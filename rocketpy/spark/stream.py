"""The micro-batch stream reader of the ``rocketpy`` data source.

Owns the streaming offsets: per-queue offsets as canonical JSON in Spark's checkpoint
(``offsets_to_json``), ``maxOffsetsPerTrigger`` spread over the queues by backlog
(``cap_offsets``), ``minOffsetsPerTrigger`` / ``maxTriggerDelay`` (``lag.Pacer``: a trigger with too
few new rows plans no micro-batch), ``Trigger.AvailableNow`` (the target is frozen in
``prepareForTriggerAvailableNow`` and the limit still applies), queues added to a topic and topics
created that match ``topicPattern`` (they join the offsets at their earliest offset and are read
from the next micro-batch on), topics of a pattern that were deleted (they leave the offsets,
logged), lag in Spark's progress and, with ``consumerGroup``, committing each finished
micro-batch's end to the broker so ``mqadmin consumerProgress`` shows the lag. The checkpoint is
the authority; the group's offsets trail it by one batch (Spark commits lazily).

Lag: Spark 4's Python streaming API has no source-metrics hook (the JVM side of a Python source
does not implement ``ReportsSourceMetrics``, so ``sources[].metrics`` stays empty). The one
source-defined value Spark puts in ``StreamingQueryProgress`` is ``reportLatestOffset``, shown as
``sources[].latestOffset``: it holds the newest offsets per queue, plus Kafka's metric names
(``lag.METRIC_NAMES``) as strings. Spark only displays it; it never compares or stores it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from rocketpy.errors import RocketpyError
from rocketpy.spark.filters import probe_reads
from rocketpy.spark.lag import Pacer, behind, offsets_behind, seconds_behind, time_samples
from rocketpy.spark.offsets import Offsets, cap_offsets, offsets_from_json, offsets_to_json, split_ranges
from rocketpy.spark.options import ReadOptions, SparkOptionError
from rocketpy.spark.plan import TopicState, session_for, skip_removed, starting_offsets, topic_state
from rocketpy.spark.source import RangePartition, read_range

log = logging.getLogger("rocketpy.spark")


def _doc(offsets: Offsets) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(offsets_to_json(offsets))
    return doc


def _no_wait_trigger(trigger: str) -> SparkOptionError:
    return SparkOptionError(
        f"option minOffsetsPerTrigger makes a micro-batch wait for new rows, which {trigger} cannot do"
        " (it reads what is there and stops): use a processingTime trigger, or drop minOffsetsPerTrigger"
    )


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("rocketpy")``.

    Raises:
        SparkOptionError: a batch-only option (``endingOffsets``, ``endingTimestamp``,
            ``endingOffsetsByTimestamp``) was given.
    """

    def __init__(self, opts: ReadOptions) -> None:
        if opts.ending_given:
            raise SparkOptionError(
                "options endingOffsets, endingTimestamp and endingOffsetsByTimestamp are for batch reads"
                " (spark.read); a stream reads on"
            )
        self.opts = opts
        self._target: Offsets | None = None
        self._latest: Offsets | None = None
        self._metrics: dict[str, str] = {}
        self._probed = False
        low = opts.min_offsets_per_trigger
        self._pacer = Pacer(low, opts.max_trigger_delay_ms) if low is not None else None

    def _state(self) -> TopicState:
        with session_for(self.opts) as session:
            state = topic_state(session, self.opts)
            if not self._probed:
                probe_reads(session, self.opts, state.queues)
                self._probed = True
            return state

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts (``startingOffsets``, default latest, or by time)."""
        with session_for(self.opts) as session:
            state = topic_state(session, self.opts)
            probe_reads(session, self.opts, state.queues)
            self._probed = True
            start = starting_offsets(session, self.opts, state, "latest")
        return _doc(skip_removed(start, state, self.opts.fail_on_data_loss))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` as a row limit (else ``minOffsetsPerTrigger``, else all available).

        Spark's Python API has no composite limit: both options are applied from the reader's own
        options whenever the limit is not ``ReadAllAvailable``.
        """
        high, low = self.opts.max_offsets_per_trigger, self.opts.min_offsets_per_trigger
        if high:
            return ReadMaxRows(high)
        return ReadMinRows(low) if low else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze what ``availableNow`` reads: everything written before the query started."""
        if self._pacer is not None:
            raise _no_wait_trigger("Trigger.AvailableNow")
        self._target = self._state().latest

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: latest offsets, capped by ``limit`` and the frozen target.

        Returns ``start`` itself (no micro-batch) while ``minOffsetsPerTrigger`` waits.
        """
        begin = offsets_from_json(start)
        state = self._state()
        self._latest = latest = state.latest
        if self._target is not None:
            latest = {q: min(off, self._target[q]) for q, off in latest.items() if q in self._target}
        begin = self._drop_gone(begin, state)
        known = {q: off for q, off in latest.items() if q in begin}
        if self._paced(limit, sum(max(0, off - begin[q]) for q, off in known.items())):
            self._report(dict(begin))
            return start
        new = {q: state.bounds[q][0] for q in latest if q not in begin}
        if new:
            log.info("rocketpy stream: new queues %s join at their earliest offsets", sorted(new))
        if isinstance(limit, ReadMaxRows):
            max_rows: int | None = limit.max_rows
        else:
            max_rows = None if isinstance(limit, ReadAllAvailable) else self.opts.max_offsets_per_trigger
        end = {**begin, **cap_offsets(begin, known, max_rows), **new}
        self._report(end)
        return _doc(end)

    def _drop_gone(self, begin: Offsets, state: TopicState) -> Offsets:
        """``begin`` without the topics of a pattern read that were deleted (logged).

        A topic is deleted when the NameServer lists it no more while every broker it was read from
        is registered. A topic whose broker is down keeps its offsets (it is not read meanwhile), so
        a broker restart does not bring its topics back at their earliest offsets.
        """
        if self.opts.topic_pattern is None:
            return begin
        missing = {q[0] for q in begin} - set(state.topics)
        gone = sorted(t for t in missing if {q[1] for q in begin if q[0] == t} <= state.live_brokers)
        if gone:
            log.warning("rocketpy stream: topics %s were deleted: they leave the query", gone)
        if kept := sorted(missing - set(gone)):
            log.info("rocketpy stream: topics %s are unavailable (broker down): offsets kept", kept)
        return {q: off for q, off in begin.items() if q[0] not in gone}

    def _paced(self, limit: ReadLimit, new_rows: int) -> bool:
        """True when this trigger waits for more rows (``minOffsetsPerTrigger``)."""
        if self._pacer is None:
            return False
        if isinstance(limit, ReadAllAvailable):  # Trigger.Once: Spark asks for everything
            raise _no_wait_trigger("Trigger.Once")
        return self._pacer.should_wait(new_rows)

    def _report(self, end: Offsets) -> None:
        """Lag of ``end`` (the micro-batch's end) behind the newest offsets, for the progress."""
        assert self._latest is not None
        lag = behind(end, self._latest)
        metrics = offsets_behind(lag)
        samples = time_samples(lag, end)
        try:
            if samples:
                with session_for(self.opts) as session:
                    stored = session.run(lambda: session.store_times(samples))
            else:
                stored = {}
            metrics.update(seconds_behind(stored, int(time.time() * 1000)))
        except RocketpyError as e:  # a display figure: the stream goes on without it
            log.info("rocketpy stream: no store time for the lag figure (%s)", e)
        self._metrics = metrics

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The newest offsets seen by the last ``latestOffset``, with the lag metrics beside them.

        Spark shows this as ``sources[].latestOffset`` of the query's progress (display only).
        """
        if self._latest is None:
            return None
        doc = _doc(self._latest)
        doc.update({k: v for k, v in self._metrics.items() if k not in doc})  # a topic's name wins
        return doc

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One partition per non-empty queue range of the micro-batch."""
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        begin = {q: begin.get(q, off) for q, off in stop.items()}
        return [RangePartition(r) for r in split_ranges(begin, stop, self.opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one queue range (in a Spark worker)."""
        assert isinstance(partition, RangePartition)
        return read_range(self.opts, partition.range)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark finished everything up to ``end``: mirror it to ``consumerGroup`` if set."""
        group = self.opts.consumer_group
        if not group:
            return
        offsets = offsets_from_json(end)
        try:
            with session_for(self.opts) as session:
                session.run(lambda: session.commit_group(group, offsets))
        except RocketpyError as e:  # the checkpoint stays the authority; lag display only
            log.warning("rocketpy stream: could not commit offsets of group %s: %s", group, e)
