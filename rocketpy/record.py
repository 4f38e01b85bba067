"""The stored commitlog record layout (DESIGN §3, RocketMQ 4.x, big-endian) and the batch wire encoding.

Owns the byte layout of one message record and its one encoder, ``pack_record``, shared by the
store (which packs records straight into its mmap through it) and the clients (which decode pull
bodies: raw records back to back). The layout is::

    off size field
      0  4   TOTALSIZE          whole record, this field included
      4  4   MAGICCODE          0xdaa320a7 (message) / 0xcbd43194 (blank tail of a file)
      8  4   BODYCRC            zlib.crc32 of the body as stored (after compression)
     12  4   QUEUEID
     16  4   FLAG               user flag
     20  8   QUEUEOFFSET        logical offset in the consume queue
     28  8   PHYSICALOFFSET     commitlog offset of this record
     36  4   SYSFLAG            0x1 compressed (zlib), 0x4/0x8/0xC transaction bits
     40  8   BORNTIMESTAMP      ms
     48  8   BORNHOST           ipv4 (4) + port int32 (4)
     56  8   STORETIMESTAMP     ms
     64  8   STOREHOST          ipv4 (4) + port int32 (4)
     72  4   RECONSUMETIMES
     76  8   PREPAREDTRANSACTIONOFFSET
     84  4   BODYLEN
     88  n   BODY
      .  1   TOPICLEN           u8, topic <= 127 bytes
      .  t   TOPIC              UTF-8
      .  2   PROPERTIESLEN      u16, <= 32767
      .  p   PROPERTIES         "k\\x01v\\x02" pairs

The batch encoding (SEND_BATCH_MESSAGE body) is, per message: TOTALSIZE u32, MAGICCODE u32,
BODYCRC u32, FLAG u32, BODYLEN u32, BODY, PROPERTIESLEN u16, PROPERTIES.
"""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Iterable
from mmap import mmap
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.errors import RocketpyError
from rocketpy.message import Message, MessageConst, MessageExt
from rocketpy.msgid import new_unique_id

MESSAGE_MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194
COMPRESSED_FLAG = 0x1
#: Transaction state bits of SYSFLAG (RocketMQ ``MessageSysFlag``): ``sys_flag & TRANSACTION_TYPE_MASK``.
TRANSACTION_TYPE_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 32767
END_FILE_MIN_BLANK_BYTES = 8

# Fixed head of a record, up to and including BODYLEN (88 bytes).
RECORD_HEAD = struct.Struct(
    ">I"  # 0  TOTALSIZE
    "I"  # 4  MAGICCODE
    "I"  # 8  BODYCRC
    "i"  # 12 QUEUEID
    "i"  # 16 FLAG
    "q"  # 20 QUEUEOFFSET
    "q"  # 28 PHYSICALOFFSET
    "i"  # 36 SYSFLAG
    "q"  # 40 BORNTIMESTAMP
    "8s"  # 48 BORNHOST (ipv4 + port int32)
    "q"  # 56 STORETIMESTAMP
    "8s"  # 64 STOREHOST (ipv4 + port int32)
    "i"  # 72 RECONSUMETIMES
    "q"  # 76 PREPAREDTRANSACTIONOFFSET
    "I"  # 84 BODYLEN
)
HEAD_SIZE = RECORD_HEAD.size
assert HEAD_SIZE == 88
# TOTALSIZE + MAGIC, used for the blank tail of a file and quick checks.
SIZE_MAGIC = struct.Struct(">II")
BLANK_HEAD = SIZE_MAGIC
U8 = struct.Struct(">B")
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
Q64 = struct.Struct(">q")

POS_QUEUE_OFFSET = 20
POS_PHYSICAL_OFFSET = 28
POS_SYS_FLAG = 36
POS_STORE_TIMESTAMP = 56
POS_STORE_HOST = 64
POS_BODY_LEN = 84

# Batch wire encoding head: TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN (20 bytes).
BATCH_HEAD = struct.Struct(">IIIiI")


def record_size(body_len: int, topic_len: int, properties_len: int) -> int:
    """Total bytes of a record with the given body, topic and properties byte lengths."""
    return HEAD_SIZE + body_len + 1 + topic_len + 2 + properties_len


def pack_host(host: tuple[str, int]) -> bytes:
    """The 8 stored bytes of an ``(ipv4, port)`` address."""
    ip, port = host
    try:
        raw = socket.inet_aton(ip)
    except OSError as e:
        raise ValueError(f"host address must be IPv4, got {ip!r}") from e
    return raw + struct.pack(">i", port)


def unpack_host(raw: bytes) -> tuple[str, int]:
    """Inverse of ``pack_host``."""
    return socket.inet_ntoa(raw[:4]), struct.unpack(">i", raw[4:8])[0]


def topic_part(topic: str) -> bytes:
    """TOPICLEN + TOPIC as stored (the store caches it per topic).

    Raises:
        ValueError: the topic is empty or longer than 127 bytes.
    """
    tb = topic.encode()
    if not tb or len(tb) > MAX_TOPIC_BYTES:
        raise ValueError(f"topic must be 1..{MAX_TOPIC_BYTES} bytes, got {len(tb)}; use a shorter topic name")
    return bytes((len(tb),)) + tb


_pack_head = RECORD_HEAD.pack_into
_pack_u16 = U16.pack


#: The BODYCRC field: CRC-32 of a body as stored. ``zlib.crc32`` is itself the pure twin (no
#: wrapper call in pure mode); the compiled ``_speedups.crc32`` folds 16-byte blocks with carry-less
#: multiplication, several times faster.
body_crc = twin(zlib.crc32)


@twin
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
) -> int:
    """Write one record at ``buf[pos:]``; returns its size. THE record encoder (store and tests).

    ``topic_b`` is TOPICLEN + TOPIC (``topic_part``), ``props_b`` the encoded properties (at most
    32767 bytes), hosts are packed (``pack_host``). The caller checked that the record fits.
    Positional arguments only: the store calls it once per message.
    """
    body_len = len(body)
    total = HEAD_SIZE + body_len + len(topic_b) + 2 + len(props_b)
    _pack_head(
        buf, pos, total, MESSAGE_MAGIC, body_crc(body), queue_id, flag, queue_offset, phys, sys_flag, born_ts,
        born_host8, store_ts, store_host8, reconsume_times, prepared_offset, body_len,
    )  # fmt: skip
    b = pos + HEAD_SIZE
    e = b + body_len
    buf[b:e] = body
    tail = topic_b + _pack_u16(len(props_b)) + props_b
    buf[e : e + len(tail)] = tail
    return total


def pack_blank(buf: bytearray | memoryview | mmap, pos: int, size: int) -> None:
    """Write the blank record filling the ``size`` bytes left at a file's tail (``size`` >= 8)."""
    SIZE_MAGIC.pack_into(buf, pos, size, BLANK_MAGIC)


def encode_record(
    *,
    topic: str,
    body: bytes,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: tuple[str, int] = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: tuple[str, int] = ("127.0.0.1", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    properties: str = "",
) -> bytes:
    """One complete record as bytes, through ``pack_record`` (the store's encoder).

    Raises:
        ValueError: topic empty or longer than 127 bytes, or properties longer than 32767 bytes.
    """
    topic_b = topic_part(topic)
    props_b = properties.encode()
    if len(props_b) > MAX_PROPERTIES_BYTES:
        raise ValueError(f"properties are {len(props_b)} bytes; the limit is {MAX_PROPERTIES_BYTES}")
    buf = bytearray(HEAD_SIZE + len(body) + len(topic_b) + 2 + len(props_b))
    pack_record(buf, 0, topic_b, props_b, body, queue_id, flag, queue_offset, physical_offset, sys_flag,
                born_timestamp, pack_host(born_host), store_timestamp, pack_host(store_host), reconsume_times,
                prepared_transaction_offset)  # fmt: skip
    return bytes(buf)


class RecordError(RocketpyError, ValueError):
    """Bytes that are not a valid record (bad magic, length or truncated)."""


def decode_record(buf: bytes | bytearray | memoryview, offset: int = 0) -> MessageExt:
    """Decode the record starting at ``offset`` of ``buf`` into a ``MessageExt``.

    A compressed body (sys flag 0x1, zlib) is decompressed.

    Raises:
        RecordError: the bytes are not a complete message record.
    """
    mv = memoryview(buf)
    if not 0 <= offset <= len(mv):
        raise RecordError(f"record offset {offset} is outside the {len(mv)}-byte buffer")
    return decode_at(mv, offset, len(mv))


@twin
def decode_records(buf: bytes | bytearray | memoryview) -> list[MessageExt]:
    """Decode a run of records back to back (a pull response body).

    Raises:
        RecordError: a record in the run is invalid or truncated.
    """
    mv = memoryview(buf)
    out: list[MessageExt] = []
    append = out.append
    pos = 0
    end = len(mv)
    while pos < end:
        msg = _decode_at(mv, pos, end)
        append(msg)
        pos += msg.store_size
    return out


_new_ext = MessageExt.__new__
_unpack_head = RECORD_HEAD.unpack_from


def _decode_at(mv: memoryview, offset: int, end: int) -> MessageExt:
    """Decode one record of ``mv[offset:end]`` (consumer hot path).

    Builds the ``MessageExt`` without ``__init__`` (every slot assigned here); the hosts and the
    offset msg id stay packed until first read (see ``MessageExt``).
    """
    if end - offset < HEAD_SIZE:
        raise RecordError(f"truncated record at {offset}: {end - offset} bytes left")
    (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_host, store_ts,
     store_host, reconsume, prepared, body_len) = _unpack_head(mv, offset)  # fmt: skip
    if magic != MESSAGE_MAGIC:
        raise RecordError(f"bad magic 0x{magic:08x} at {offset}")
    if total > end - offset or total < HEAD_SIZE + body_len + 3:
        raise RecordError(f"bad total size {total} at {offset}")
    pos = offset + HEAD_SIZE + body_len
    topic_len = mv[pos]
    t_end = pos + 1 + topic_len
    if t_end + 2 > offset + total:
        raise RecordError(f"record at {offset}: field lengths do not add up to {total}")
    props_len = (mv[t_end] << 8) | mv[t_end + 1]
    if t_end + 2 + props_len - offset != total:
        raise RecordError(f"record at {offset}: field lengths do not add up to {total}")
    body = bytes(mv[offset + HEAD_SIZE : pos])
    if sys_flag & COMPRESSED_FLAG:
        body = zlib.decompress(body)
    msg = _new_ext(MessageExt)
    msg.topic = str(mv[pos + 1 : t_end], "utf-8")
    msg.body = body
    msg.flag = flag
    msg.set_properties_string(str(mv[t_end + 2 : t_end + 2 + props_len], "utf-8") if props_len else "")
    msg._msg_id = None
    msg._offset_msg_id = None
    msg.queue_id = queue_id
    msg.queue_offset = queue_offset
    msg.commitlog_offset = phys
    msg.born_timestamp = born_ts
    msg.store_timestamp = store_ts
    msg._born_host = None
    msg._born_host8 = born_host
    msg._store_host = None
    msg._store_host8 = store_host
    msg.reconsume_times = reconsume
    msg.store_size = total
    msg.body_crc = crc
    msg.sys_flag = sys_flag
    msg.prepared_transaction_offset = prepared
    return msg


#: The record decoder ``decode_record`` calls: ``_decode_at`` or its compiled twin. (The pure
#: ``decode_records`` calls the pure ``_decode_at``, so the pure twin is pure all the way down.)
decode_at = twin(_decode_at)


def _ensure_unique_key(msg: Message) -> None:
    if MessageConst.UNIQ_KEY not in msg.properties:
        msg.properties[MessageConst.UNIQ_KEY] = new_unique_id()


@twin
def encode_batch(messages: Iterable[Message]) -> bytes:
    """RocketMQ's batch wire encoding of ``messages`` (SEND_BATCH_MESSAGE body).

    A message without a ``UNIQ_KEY`` property gets one (set on the message, as RocketMQ's client
    does), so the producer can report each message's id.
    """
    parts: list[bytes] = []
    for msg in messages:
        _ensure_unique_key(msg)
        props_b = msg.properties_string().encode()
        if len(props_b) > MAX_PROPERTIES_BYTES:
            raise ValueError(f"properties are {len(props_b)} bytes; the limit is {MAX_PROPERTIES_BYTES}")
        body = msg.body
        total = BATCH_HEAD.size + len(body) + 2 + len(props_b)
        parts.append(BATCH_HEAD.pack(total, MESSAGE_MAGIC, body_crc(body), msg.flag, len(body)))
        parts.append(body)
        parts.append(U16.pack(len(props_b)))
        parts.append(props_b)
    return b"".join(parts)


@twin
def decode_batch(body: bytes | bytearray | memoryview) -> list[tuple[bytes, int, str]]:
    """Split a batch body into ``(body, flag, properties_str)`` per message (broker batch hot path).

    Raises:
        RecordError: the batch is truncated or its lengths do not add up.
    """
    mv = memoryview(body)
    out: list[tuple[bytes, int, str]] = []
    append = out.append
    unpack_head = BATCH_HEAD.unpack_from
    head_size = BATCH_HEAD.size
    pos = 0
    end = len(mv)
    while pos < end:
        if end - pos < head_size + 2:
            raise RecordError(f"batch truncated at byte {pos}: {end - pos} bytes left")
        total, _magic, _crc, flag, body_len = unpack_head(mv, pos)
        b_start = pos + head_size
        p_pos = b_start + body_len
        if total > end - pos or p_pos + 2 > pos + total:
            raise RecordError(f"batch message at byte {pos}: size {total} does not fit the batch")
        props_end = p_pos + 2 + ((mv[p_pos] << 8) | mv[p_pos + 1])
        if props_end != pos + total:
            raise RecordError(f"batch message at byte {pos}: field lengths do not add up to {total}")
        append((bytes(mv[b_start:p_pos]), flag, str(mv[p_pos + 2 : props_end], "utf-8")))
        pos += total
    return out


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy import _speedups
    from rocketpy._accel import same_signature

    same_signature(zlib.crc32)(_speedups.crc32)
    same_signature(_speedups.crc32)(zlib.crc32)
    same_signature(pack_record)(_speedups.pack_record)
    same_signature(_speedups.pack_record)(pack_record)
    same_signature(decode_records)(_speedups.decode_records)
    same_signature(_speedups.decode_records)(decode_records)
    same_signature(_decode_at)(_speedups._decode_at)
    same_signature(_speedups._decode_at)(_decode_at)
    same_signature(encode_batch)(_speedups.encode_batch)
    same_signature(_speedups.encode_batch)(encode_batch)
    same_signature(decode_batch)(_speedups.decode_batch)
    same_signature(_speedups.decode_batch)(decode_batch)
