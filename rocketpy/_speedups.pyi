"""The record layer's compiled twins (``_speedups.pyx``), as mypy sees them.

Each signature is its pure twin's, checked both ways by mypy (``rocketpy._accel.same_signature``,
at the end of ``record.py``, ``message.py`` and ``record_columns.py``) and against the built module
by ``stubtest`` (``scripts/check``).
"""

from collections.abc import Iterable
from mmap import mmap

from _typeshed import ReadableBuffer

from rocketpy.message import Message, MessageExt
from rocketpy.record_columns import Buffer, ColumnBuffers

__all__ = [
    "_decode_at",
    "crc32",
    "decode_batch",
    "decode_columns",
    "decode_records",
    "encode_batch",
    "pack_record",
    "properties_to_string",
    "string_to_properties",
]

def crc32(data: ReadableBuffer, value: int = 0, /) -> int: ...
def pack_record(
    buf: bytearray | memoryview | mmap,
    pos: int,
    topic_b: bytes,
    props_b: bytes,
    body: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    phys: int,
    sys_flag: int,
    born_ts: int,
    born_host8: bytes,
    store_ts: int,
    store_host8: bytes,
    reconsume_times: int,
    prepared_offset: int,
) -> int: ...
def string_to_properties(s: str) -> dict[str, str]: ...
def properties_to_string(props: dict[str, str]) -> str: ...
def _decode_at(mv: memoryview, offset: int, end: int) -> MessageExt: ...
def decode_records(buf: bytes | bytearray | memoryview) -> list[MessageExt]: ...
def encode_batch(messages: Iterable[Message]) -> bytes: ...
def decode_batch(body: bytes | bytearray | memoryview) -> list[tuple[bytes, int, str]]: ...
def decode_columns(buf: Buffer | list[Buffer]) -> ColumnBuffers: ...
