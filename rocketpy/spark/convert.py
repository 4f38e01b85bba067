"""Pull bodies -> ``pyarrow.RecordBatch`` in the data source's schema (the read hot path).

Owns the column building of a read. ``record_columns.decode_columns`` (compiled, with its pure
twin) lays the records of a body out as Arrow buffers; this module wraps them without copying
(``pa.Array.from_buffers``) into arrays of exactly ``schema.ARROW_SCHEMA``'s types (Spark refuses
a batch whose schema differs by so much as a field name). Timestamps are stored milliseconds cast
to UTC microseconds (a checked cast: an out-of-range stored time fails the read, it does not wrap);
``properties`` are the user properties (``TAGS`` and ``KEYS`` have their own columns).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from rocketpy.record_columns import Buffer, decode_columns
from rocketpy.spark.schema import ARROW_SCHEMA, PROPERTIES, TIMESTAMP

_STRING = pa.string()
_KEYS = ARROW_SCHEMA.field("keys").type
_MS = pa.timestamp("ms", tz="UTC")


def _buf(data: bytes) -> pa.Buffer:
    return pa.py_buffer(data)


def _strings(n: int, offsets: bytes, data: bytes, validity: bytes | None = None) -> pa.Array:
    valid = None if validity is None else _buf(validity)
    return pa.Array.from_buffers(_STRING, n, [valid, _buf(offsets), _buf(data)])


def _fixed(kind: pa.DataType, n: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(kind, n, [None, _buf(data)])


def to_record_batch(body: Buffer | list[Buffer], broker_name: str) -> pa.RecordBatch:
    """The records of ``body`` (back to back, or the bodies of several pulls in a list, all read from
    broker ``broker_name``) as one batch."""
    c = decode_columns(body)
    n = c.rows
    key_count = (len(c.key_offsets) // 4) - 1
    entries = (len(c.name_offsets) // 4) - 1
    keys = pa.Array.from_buffers(
        _KEYS, n, [None, _buf(c.keys_offsets)], children=[_strings(key_count, c.key_offsets, c.key_data)]
    )
    properties = pa.MapArray.from_arrays(
        _fixed(pa.int32(), n + 1, c.properties_offsets),
        _strings(entries, c.name_offsets, c.name_data),
        _strings(entries, c.value_offsets, c.value_data),
        type=PROPERTIES,
    )
    columns = [
        _strings(n, c.topic_offsets, c.topic_data),
        pa.array([broker_name] * n, _STRING),
        _fixed(pa.int32(), n, c.queue_id),
        _fixed(pa.int64(), n, c.queue_offset),
        _strings(n, c.msg_id_offsets, c.msg_id_data),
        keys,
        _strings(n, c.tags_offsets, c.tags_data, c.tags_validity),
        pa.Array.from_buffers(pa.binary(), n, [None, _buf(c.body_offsets), _buf(c.body_data)]),
        properties,
        _fixed(_MS, n, c.born_ms).cast(TIMESTAMP),
        _fixed(_MS, n, c.store_ms).cast(TIMESTAMP),
        _fixed(pa.int32(), n, c.reconsume_times),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def keep_tags(batch: pa.RecordBatch, tags: Iterable[str]) -> pa.RecordBatch:
    """The rows of ``batch`` whose tag is one of ``tags`` (rows without a tag are dropped)."""
    wanted = pa.array(sorted(tags), _STRING)
    return batch.filter(pc.is_in(batch.column("tags"), value_set=wanted))
