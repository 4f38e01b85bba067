"""The micro-batch stream reader of the ``rocketpy`` data source.

Owns the streaming offsets: per-queue offsets as canonical JSON in Spark's checkpoint
(``offsets_to_json``), ``maxOffsetsPerTrigger`` spread over the queues by backlog
(``cap_offsets``), ``Trigger.AvailableNow`` (the target is frozen in
``prepareForTriggerAvailableNow`` and the limit still applies), queues added to a topic (they
join the offsets at their earliest offset and are read from the next micro-batch on),
``reportLatestOffset`` for Spark's lag figures and, with ``consumerGroup``, committing each
finished micro-batch's end to the broker so ``mqadmin consumerProgress`` shows the lag. The
checkpoint is the authority; the group's offsets trail it by one batch (Spark commits lazily).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from rocketpy.errors import RocketpyError
from rocketpy.spark.brokers import BrokerSession
from rocketpy.spark.offsets import Offsets, cap_offsets, offsets_from_json, offsets_to_json, split_ranges
from rocketpy.spark.options import ReadOptions
from rocketpy.spark.plan import TopicState, skip_removed, starting_offsets, topic_state
from rocketpy.spark.source import RangePartition, read_range

log = logging.getLogger("rocketpy.spark")


def _doc(offsets: Offsets) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(offsets_to_json(offsets))
    return doc


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("rocketpy")``."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._target: Offsets | None = None
        self._latest: Offsets | None = None

    def _session(self) -> BrokerSession:
        return BrokerSession(self.opts.namesrv_addr, self.opts.timeout_s)

    def _state(self) -> TopicState:
        with self._session() as session:
            return topic_state(session, self.opts)

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts (``startingOffsets``, default latest, or ``startingTimestamp``)."""
        with self._session() as session:
            state = topic_state(session, self.opts)
            start = starting_offsets(session, self.opts, state, "latest")
        return _doc(skip_removed(start, state, self.opts.fail_on_data_loss))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` as a row limit (else all available)."""
        cap = self.opts.max_offsets_per_trigger
        return ReadMaxRows(cap) if cap else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze what ``availableNow`` reads: everything written before the query started."""
        self._target = self._state().latest

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: latest offsets, capped by ``limit`` and the frozen target."""
        begin = offsets_from_json(start)
        state = self._state()
        self._latest = latest = state.latest
        if self._target is not None:
            latest = {q: min(off, self._target[q]) for q, off in latest.items() if q in self._target}
        new = {q: state.bounds[q][0] for q in state.queues if q not in begin}
        if new:
            log.info("rocketpy stream: new queues %s join at their earliest offsets", sorted(new))
        known = {q: off for q, off in latest.items() if q in begin}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = {**begin, **cap_offsets(begin, known, max_rows), **new}
        return _doc(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The newest offsets seen by the last ``latestOffset`` (Spark shows the lag from it)."""
        return _doc(self._latest) if self._latest is not None else None

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
            with self._session() as session:
                session.run(lambda: session.commit_group(group, offsets))
        except RocketpyError as e:  # the checkpoint stays the authority; lag display only
            log.warning("rocketpy stream: could not commit offsets of group %s: %s", group, e)
