"""The revive log: POP checkpoints and acks as records of ``rmq_sys_REVIVE_LOG_<cluster>``.

Owns the body layout of the two record kinds, their encoders and decoders, and ``Replay``, which
folds the records read back at start into what was in flight. The records are stored through the
store's normal put path (queue 0 of the revive topic), so they are exactly as durable as any
message under the configured flush mode: a ck is put with ``WAIT=false`` (losing one to a machine
crash only redelivers messages), an ack waits for the flush under SYNC_FLUSH (an acknowledged
ack is never lost).

Layouts (big-endian; a record's TAGS property is ``ck`` or ``ack``)::

    CK   off size field                     ACK  off size field
          0  1   kind = 1                          0  1   kind = 2
          1  1   flags (bit 0: orderly)            1  1   reason (0 ack, 1 revived, 2 dead letter)
          2  4   queueId                           2  4   queueId
          6  8   seq (the ck's number)             6  8   seq of the ck the offsets were under
         14  8   startOffset (read from)          14  8   base (the smallest offset)
         22  8   endOffset (read up to)           22  2   count
         30  8   popTime ms                       24  2   groupLen
         38  8   invisibleTime ms                 26  2   topicLen
         46  2   count                            28  g   group (UTF-8)
         48  2   groupLen                          .  t   topic (UTF-8)
         50  2   topicLen                          .  4c  offset - base, u32 each
         52  g   group, then topic, then count × u32 (offset - startOffset), then for an orderly
             ck count × u16 (times each was handed out before)

A ck of an invisible-time change covers one offset (start = that offset, end = offset + 1) and
supersedes the earlier ck of that offset: replay keeps, per offset, the ck with the highest seq,
so the order in which records reached the log does not matter. An offset is done when an ACK
record names it with that ck's seq.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from rocketpy.errors import RocketpyError
from rocketpy.message import MessageConst

QueueKey = tuple[str, str, int]

KIND_CK = 1
KIND_ACK = 2
REASON_ACK = 0
REASON_REVIVED = 1
REASON_DEAD_LETTER = 2
FLAG_ORDERLY = 1

CK_HEAD = struct.Struct(">BBiqqqqqHHH")
ACK_HEAD = struct.Struct(">BBiqqHHH")
assert CK_HEAD.size == 52 and ACK_HEAD.size == 28
#: Most offsets one record carries (an ack batch is split into records of at most this many).
MAX_RECORD_OFFSETS = 4096
_U32_MAX = (1 << 32) - 1

CK_PROPERTIES = f"{MessageConst.TAGS}\x01ck\x02{MessageConst.WAIT}\x01false\x02"
ACK_PROPERTIES = f"{MessageConst.TAGS}\x01ack\x02"


class ReviveLogError(RocketpyError, ValueError):
    """A revive-log body that is not one of the two layouts (skipped at replay, and logged)."""


def _names(group: str, topic: str) -> tuple[bytes, bytes]:
    g, t = group.encode(), topic.encode()
    assert len(g) <= 0xFFFF and len(t) <= 0xFFFF
    return g, t


def encode_ck(
    key: QueueKey,
    seq: int,
    start: int,
    end: int,
    pop_time: int,
    invisible_ms: int,
    offsets: list[int],
    attempts: list[int] | None = None,
) -> bytes:
    """A CK record body (``attempts``: an orderly ck's counts, one per offset)."""
    group, topic, queue_id = key
    assert 0 < len(offsets) <= MAX_RECORD_OFFSETS and (attempts is None or len(attempts) == len(offsets))
    g, t = _names(group, topic)
    deltas = [o - start for o in offsets]
    assert min(deltas) >= 0 and max(deltas) <= _U32_MAX, (start, offsets)
    flags = FLAG_ORDERLY if attempts is not None else 0
    parts = [
        CK_HEAD.pack(KIND_CK, flags, queue_id, seq, start, end, pop_time, invisible_ms, len(offsets),
                     len(g), len(t)),
        g, t, struct.pack(f">{len(deltas)}I", *deltas),
    ]  # fmt: skip
    if attempts is not None:
        parts.append(struct.pack(f">{len(attempts)}H", *(min(a, 0xFFFF) for a in attempts)))
    return b"".join(parts)


def encode_ack(key: QueueKey, seq: int, offsets: list[int], reason: int = REASON_ACK) -> bytes:
    """An ACK record body: ``offsets`` (of one queue, in flight under ck ``seq``) are done."""
    group, topic, queue_id = key
    assert 0 < len(offsets) <= MAX_RECORD_OFFSETS
    g, t = _names(group, topic)
    base = min(offsets)
    deltas = [o - base for o in offsets]
    assert max(deltas) <= _U32_MAX, (base, offsets)
    head = ACK_HEAD.pack(KIND_ACK, reason, queue_id, seq, base, len(offsets), len(g), len(t))
    return b"".join((head, g, t, struct.pack(f">{len(deltas)}I", *deltas)))


@dataclass(slots=True)
class CkRecord:
    """A decoded CK record (``floor``: its queue offset in the revive log)."""

    key: QueueKey
    seq: int
    start: int
    end: int
    pop_time: int
    invisible_ms: int
    offsets: list[int]
    attempts: list[int] | None
    floor: int = 0


@dataclass(slots=True)
class AckRecord:
    """A decoded ACK record."""

    key: QueueKey
    seq: int
    offsets: list[int]
    reason: int


def _text(body: bytes | memoryview, pos: int, size: int) -> str:
    return str(body[pos : pos + size], "utf-8")


def decode(body: bytes | memoryview) -> CkRecord | AckRecord:
    """Decode a revive-log body.

    Raises:
        ReviveLogError: unknown kind, truncated, or lengths that do not add up.
    """
    try:
        kind = body[0]
        if kind == KIND_CK:
            return _decode_ck(body)
        if kind == KIND_ACK:
            return _decode_ack(body)
    except (IndexError, struct.error, UnicodeDecodeError) as e:
        raise ReviveLogError(f"malformed revive-log record: {e}") from None
    raise ReviveLogError(f"unknown revive-log record kind {kind}")


def _decode_ck(body: bytes | memoryview) -> CkRecord:
    _, flags, qid, seq, start, end, pop_time, invisible, count, glen, tlen = CK_HEAD.unpack_from(body)
    pos = CK_HEAD.size
    group, topic = _text(body, pos, glen), _text(body, pos + glen, tlen)
    pos += glen + tlen
    offsets = [start + d for d in struct.unpack_from(f">{count}I", body, pos)]
    pos += 4 * count
    attempts = None
    if flags & FLAG_ORDERLY:
        attempts = list(struct.unpack_from(f">{count}H", body, pos))
        pos += 2 * count
    if pos != len(body):
        raise ReviveLogError(f"a ck record of {len(body)} bytes holds {pos}")
    return CkRecord((group, topic, qid), seq, start, end, pop_time, invisible, offsets, attempts)


def _decode_ack(body: bytes | memoryview) -> AckRecord:
    _, reason, qid, seq, base, count, glen, tlen = ACK_HEAD.unpack_from(body)
    pos = ACK_HEAD.size
    group, topic = _text(body, pos, glen), _text(body, pos + glen, tlen)
    pos += glen + tlen
    offsets = [base + d for d in struct.unpack_from(f">{count}I", body, pos)]
    if pos + 4 * count != len(body):
        raise ReviveLogError(f"an ack record of {len(body)} bytes holds {pos + 4 * count}")
    return AckRecord((group, topic, qid), seq, offsets, reason)


@dataclass
class Replay:
    """The revive log's records folded into what is still in flight (order-independent).

    Attributes:
        cks: seq -> the ck record.
        acked: (queue, offset, seq) of every acked (or revived, dead-lettered) message.
        ends: per queue, the furthest offset a replayed pop read up to.
        max_seq: the highest ck seq seen.
    """

    cks: dict[int, CkRecord] = field(default_factory=dict)
    acked: set[tuple[QueueKey, int, int]] = field(default_factory=set)
    ends: dict[QueueKey, int] = field(default_factory=dict)
    max_seq: int = 0

    def apply(self, record: CkRecord | AckRecord, floor: int) -> None:
        """Fold one record, found at revive-log queue offset ``floor``."""
        if isinstance(record, CkRecord):
            record.floor = floor
            self.cks[record.seq] = record
            self.max_seq = max(self.max_seq, record.seq)
            self.ends[record.key] = max(self.ends.get(record.key, 0), record.end)
        else:
            self.acked.update((record.key, o, record.seq) for o in record.offsets)

    def in_flight(self, committed: dict[QueueKey, int]) -> list[tuple[CkRecord, list[int]]]:
        """Each ck with its offsets still in flight, in seq order: an offset at or above its
        queue's committed offset (``committed``; absent: 0), under its latest ck, not acked under it."""
        latest: dict[tuple[QueueKey, int], int] = {}
        for seq, ck in self.cks.items():
            for o in ck.offsets:
                k = (ck.key, o)
                if latest.get(k, -1) < seq:
                    latest[k] = seq
        out = []
        for seq in sorted(self.cks):
            ck = self.cks[seq]
            floor = committed.get(ck.key, 0)
            alive = [
                o for o in ck.offsets
                if o >= floor and latest[(ck.key, o)] == seq and (ck.key, o, seq) not in self.acked
            ]  # fmt: skip
            if alive:
                out.append((ck, alive))
        return out
