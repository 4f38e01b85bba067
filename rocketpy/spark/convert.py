"""Decoded messages -> ``pyarrow.RecordBatch`` in the data source's schema (the read hot path).

Owns the column building of a read: one pass over the ``MessageExt`` list per column, plain
Python lists handed to ``pa.array`` with the exact type of ``schema.ARROW_SCHEMA`` (Spark refuses a
batch whose schema differs by so much as a field name). Timestamps are the stored milliseconds
times 1000 (UTC microseconds); ``properties`` are the user properties (``TAGS`` and ``KEYS`` have
their own columns).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from rocketpy.message import MessageExt
from rocketpy.spark.schema import ARROW_SCHEMA, PROPERTIES, TIMESTAMP

_STRING = pa.string()
_KEYS = ARROW_SCHEMA.field("keys").type


def to_record_batch(msgs: Sequence[MessageExt], broker_name: str) -> pa.RecordBatch:
    """The rows of ``msgs`` (all read from broker ``broker_name``) as one RecordBatch."""
    n = len(msgs)
    topics = [m.topic for m in msgs]
    columns = [
        pa.array(topics, _STRING),
        pa.array([broker_name] * n, _STRING),
        pa.array([m.queue_id for m in msgs], pa.int32()),
        pa.array([m.queue_offset for m in msgs], pa.int64()),
        pa.array([m.msg_id for m in msgs], _STRING),
        pa.array([m.keys for m in msgs], _KEYS),
        pa.array([m.tags for m in msgs], _STRING),
        pa.array([m.body for m in msgs], pa.binary()),
        pa.array([m.properties for m in msgs], PROPERTIES),  # dicts: no per-row list of pairs
        pa.array([m.born_timestamp * 1000 for m in msgs], TIMESTAMP),
        pa.array([m.store_timestamp * 1000 for m in msgs], TIMESTAMP),
        pa.array([m.reconsume_times for m in msgs], pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
