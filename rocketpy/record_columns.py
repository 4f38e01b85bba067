"""Records back to back (a pull body) -> column buffers in Arrow's memory layout.

Owns the columnar decode of the Spark read path: what ``decode_records`` gives as ``MessageExt``
objects, laid out as Arrow buffers instead (native-endian fixed-width values, int32 offsets +
UTF-8/bytes data for variable-width ones), so the compiled twin makes no Python object per row.
No pyarrow here (``rocketpy.spark.convert`` wraps the buffers); the pure function is the reference
and is defined through ``decode_records`` itself, so both readings of a record cannot drift.

A read hands the decode a chunk of pull answers as a list, so the chunk is never joined into one
buffer (a copy of every byte read): the compiled twin decodes each answer in place.

Per row, exactly as ``MessageExt``: ``topic``; ``msg_id`` (UNIQ_KEY, else the offset msg id);
``tags`` (null when the TAGS property is absent); ``keys`` (KEYS split on spaces); ``properties``
(every property but TAGS, KEYS and DELAY, first-seen order, later values win); ``body``
(decompressed); ``queue_id``, ``queue_offset``, ``reconsume_times``; born and store timestamps in
milliseconds. Errors are ``decode_records``'s, in the same order.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from rocketpy._accel import PURE, twin
from rocketpy.record import decode_records  # noqa: F401  (registers the pure decode_records twin)


class ColumnBuffers(NamedTuple):
    """The columns of ``rows`` records (``bytes`` each; offsets are int32, ``rows + 1`` of them)."""

    rows: int
    queue_id: bytes  # int32
    queue_offset: bytes  # int64
    born_ms: bytes  # int64
    store_ms: bytes  # int64
    reconsume_times: bytes  # int32
    topic_offsets: bytes
    topic_data: bytes
    msg_id_offsets: bytes
    msg_id_data: bytes
    tags_validity: bytes  # Arrow bitmap (LSB first), a bit per row, 1 = has tags
    tags_offsets: bytes
    tags_data: bytes
    body_offsets: bytes
    body_data: bytes
    keys_offsets: bytes  # per row into the key strings
    key_offsets: bytes  # per key string into key_data
    key_data: bytes
    properties_offsets: bytes  # per row into the entries
    name_offsets: bytes
    name_data: bytes
    value_offsets: bytes
    value_data: bytes


def _strings(values: Iterable[bytes]) -> tuple[bytes, bytes]:
    offsets = array("i", [0])
    data = bytearray()
    for v in values:
        data += v
        offsets.append(len(data))
    return offsets.tobytes(), bytes(data)


Buffer = bytes | bytearray | memoryview


@twin
def decode_columns(buf: Buffer | list[Buffer]) -> ColumnBuffers:
    """The records of ``buf`` (back to back, as a pull answer's body) as column buffers; a list of
    buffers is read as the buffers joined (a chunk of pull answers: the compiled twin decodes them
    where they are, without the copy, when each holds whole records).

    Raises:
        RecordError: a record is invalid or truncated (and whatever ``decode_records`` raises).
    """
    if isinstance(buf, list):
        buf = b"".join(buf)
    msgs = PURE["decode_records"](buf)
    n = len(msgs)
    validity = bytearray((n + 7) // 8)
    for i, m in enumerate(msgs):
        if m.tags is not None:
            validity[i >> 3] |= 1 << (i & 7)
    keys = [k.encode() for m in msgs for k in m.keys]
    keys_offsets = array("i", [0])
    props_offsets = array("i", [0])
    for m in msgs:
        keys_offsets.append(keys_offsets[-1] + len(m.keys))
        props_offsets.append(props_offsets[-1] + len(m.properties))
    names = [k.encode() for m in msgs for k in m.properties]
    values = [v.encode() for m in msgs for v in m.properties.values()]
    return ColumnBuffers(
        n,
        array("i", [m.queue_id for m in msgs]).tobytes(),
        array("q", [m.queue_offset for m in msgs]).tobytes(),
        array("q", [m.born_timestamp for m in msgs]).tobytes(),
        array("q", [m.store_timestamp for m in msgs]).tobytes(),
        array("i", [m.reconsume_times for m in msgs]).tobytes(),
        *_strings(m.topic.encode() for m in msgs),
        *_strings(m.msg_id.encode() for m in msgs),
        bytes(validity),
        *_strings((m.tags or "").encode() for m in msgs),
        *_strings(m.body for m in msgs),
        keys_offsets.tobytes(),
        *_strings(keys),
        props_offsets.tobytes(),
        *_strings(names),
        *_strings(values),
    )


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy import _speedups
    from rocketpy._accel import same_signature

    same_signature(decode_columns)(_speedups.decode_columns)
    same_signature(_speedups.decode_columns)(decode_columns)
