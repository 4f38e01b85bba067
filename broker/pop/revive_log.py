"""The revive log: POP checkpoints and acks as records of ``rmq_sys_REVIVE_LOG_<cluster>``.

Owns the body layout of the two record kinds, their encoders and decoders, and ``Replay``, which
folds the records read back at start into what was in flight. The records are stored through the
store's normal put path (queue 0 of the revive topic), so they are exactly as durable as any
message under the configured flush mode: a ck is put with ``WAIT=false`` (losing one to a machine
crash only redelivers messages), an ack waits for the flush under SYNC_FLUSH (an acknowledged
ack is never lost).

Layouts (big-endian; a record's TAGS property is ``ck`` or ``ack``; kind 2 is read at replay but
no longer written: kind 3 replaced it)::

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

    ACKS off size field                            each entry: off size field
          0  1   kind = 3                                      0  4   queueId
          1  1   reason (0 ack, 1 revived, 2 dead letter)      4  8   seq of the ck
          2  2   groupLen                                     12  8   committed (see below; -1: none)
          4  2   topicLen                                     20  8   base (the smallest offset)
          6  2   entries                                      28  2   count
          8  g   group, then topic, then the entries          30  4c  offset - base, u32 each

A ck of an invisible-time change covers one offset (start = that offset, end = offset + 1) and
supersedes the earlier ck of that offset: replay keeps, per offset, the ck with the highest seq,
so the order in which records reached the log does not matter. An offset is done when an ACK
record names it with that ck's seq.

An ACKS record stands alone: it needs no CK record of its ck (a ck acked within the service's
buffer window is never written, ``ck_buffer.py``). Each entry carries its queue's *committed*
offset once the entry's offsets are done (the low-water mark: every offset below it is done, so
a restart starts the queue there at least), and replay keeps the offsets it names as done even
where no ck names them: those at or past where the restarted queue reads again are skipped by
the pops that read them (``Replay.done_from``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.errors import RocketpyError
from rocketpy.message import MessageConst

QueueKey = tuple[str, str, int]

KIND_CK = 1
KIND_ACK = 2
REASON_ACK = 0
REASON_REVIVED = 1
REASON_DEAD_LETTER = 2
FLAG_ORDERLY = 1

KIND_ACKS = 3

CK_HEAD = struct.Struct(">BBiqqqqqHHH")
ACK_HEAD = struct.Struct(">BBiqqHHH")
ACKS_HEAD = struct.Struct(">BBHHH")
ACKS_ENTRY = struct.Struct(">iqqqH")
assert CK_HEAD.size == 52 and ACK_HEAD.size == 28 and ACKS_HEAD.size == 8 and ACKS_ENTRY.size == 30
#: Most offsets one record carries (an ack batch is split into records of at most this many).
MAX_RECORD_OFFSETS = 4096
_U32_MAX = (1 << 32) - 1

CK_PROPERTIES = f"{MessageConst.TAGS}\x01ck\x02{MessageConst.WAIT}\x01false\x02"
#: A CK record written with an ack (or as an invisible-time change): it waits for the flush as the ack does.
CK_WITH_ACK_PROPERTIES = f"{MessageConst.TAGS}\x01ck\x02"
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


#: An ACKS entry: ``(queue_id, ck seq, committed offset or -1, offsets)``.
AckEntry = tuple[int, int, int, list[int]]


@twin
def encode_acks(group: str, topic: str, entries: list[AckEntry], reason: int = REASON_ACK) -> list[bytes]:
    """ACKS record bodies naming each entry's offsets done (at most ``MAX_RECORD_OFFSETS`` offsets
    per record: a longer list is split, its committed offset kept on each part). The compiled twin
    writes the one record of a batch ack's usual entries in one call."""
    g, t = _names(group, topic)
    out: list[bytes] = []
    parts: list[bytes] = []
    room = MAX_RECORD_OFFSETS
    for queue_id, seq, committed, offsets in entries:
        at = 0
        while at < len(offsets):
            if not room:
                out.append(_acks_body(reason, g, t, parts))
                parts, room = [], MAX_RECORD_OFFSETS
            chunk = offsets[at : at + room] if at or len(offsets) > room else offsets
            at += len(chunk)
            room -= len(chunk)
            parts.append(acks_entry(queue_id, seq, committed, chunk))
    if parts:
        out.append(_acks_body(reason, g, t, parts))
    return out


@twin
def acks_entry(queue_id: int, seq: int, committed: int, offsets: list[int]) -> bytes:
    """One entry of an ACKS record: its head (``ACKS_ENTRY``) and each offset less the smallest.

    Raises:
        struct.error: a field out of its range.
        AssertionError: no offsets, or offsets further than ``2**32 - 1`` apart.
    """
    assert offsets
    base = min(offsets)
    deltas = [o - base for o in offsets]
    assert max(deltas) <= _U32_MAX, (base, offsets)
    return ACKS_ENTRY.pack(queue_id, seq, committed, base, len(offsets)) + struct.pack(
        f">{len(deltas)}I", *deltas
    )


def _acks_body(reason: int, g: bytes, t: bytes, parts: list[bytes]) -> bytes:
    return b"".join((ACKS_HEAD.pack(KIND_ACKS, reason, len(g), len(t), len(parts)), g, t, *parts))


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
    """A decoded ACK record, or one entry of an ACKS record (``committed``: its queue's committed
    offset once these offsets are done; -1 for kind 2, which does not carry it)."""

    key: QueueKey
    seq: int
    offsets: list[int]
    reason: int
    committed: int = -1


def _text(body: bytes | memoryview, pos: int, size: int) -> str:
    return str(body[pos : pos + size], "utf-8")


Record = CkRecord | AckRecord | list[AckRecord]


def decode(body: bytes | memoryview) -> Record:
    """Decode a revive-log body (an ACKS record: one ``AckRecord`` per entry).

    Raises:
        ReviveLogError: unknown kind, truncated, or lengths that do not add up.
    """
    try:
        kind = body[0]
        if kind == KIND_CK:
            return _decode_ck(body)
        if kind == KIND_ACK:
            return _decode_ack(body)
        if kind == KIND_ACKS:
            return _decode_acks(body)
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


def _decode_acks(body: bytes | memoryview) -> list[AckRecord]:
    _, reason, glen, tlen, entries = ACKS_HEAD.unpack_from(body)
    pos = ACKS_HEAD.size
    group, topic = _text(body, pos, glen), _text(body, pos + glen, tlen)
    pos += glen + tlen
    out = []
    for _ in range(entries):
        qid, seq, committed, base, count = ACKS_ENTRY.unpack_from(body, pos)
        pos += ACKS_ENTRY.size
        offsets = [base + d for d in struct.unpack_from(f">{count}I", body, pos)]
        pos += 4 * count
        out.append(AckRecord((group, topic, qid), seq, offsets, reason, committed))
    if pos != len(body):
        raise ReviveLogError(f"an acks record of {len(body)} bytes holds {pos}")
    return out


@dataclass
class Replay:
    """The revive log's records folded into what is still in flight (order-independent).

    Attributes:
        cks: seq -> the ck record.
        acked: (queue, offset, seq) of every acked (or revived, dead-lettered) message.
        ends: per queue, the furthest offset a replayed pop read up to.
        committed: per queue, the highest committed offset an ACKS entry carried.
        max_seq: the highest ck seq seen.
    """

    cks: dict[int, CkRecord] = field(default_factory=dict)
    acked: set[tuple[QueueKey, int, int]] = field(default_factory=set)
    ends: dict[QueueKey, int] = field(default_factory=dict)
    committed: dict[QueueKey, int] = field(default_factory=dict)
    max_seq: int = 0

    def apply(self, record: Record, floor: int) -> None:
        """Fold one record, found at revive-log queue offset ``floor``."""
        if isinstance(record, CkRecord):
            record.floor = floor
            self.cks[record.seq] = record
            self.max_seq = max(self.max_seq, record.seq)
            self.ends[record.key] = max(self.ends.get(record.key, 0), record.end)
            return
        for ack in record if isinstance(record, list) else (record,):
            self.acked.update((ack.key, o, ack.seq) for o in ack.offsets)
            if ack.committed > self.committed.get(ack.key, -1):
                self.committed[ack.key] = ack.committed

    def done_from(self, starts: dict[QueueKey, int]) -> dict[QueueKey, set[int]]:
        """Per queue, the offsets acks name at or past ``starts[queue]`` (where the restarted queue
        reads again; queues not in ``starts`` are left out): the pops that read them skip them."""
        out: dict[QueueKey, set[int]] = {}
        for key, offset, _ in self.acked:
            start = starts.get(key)
            if start is not None and offset >= start:
                out.setdefault(key, set()).add(offset)
        return out

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


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.pop import _speedups

    same_signature(acks_entry)(_speedups.acks_entry)
    same_signature(_speedups.acks_entry)(acks_entry)
    same_signature(encode_acks)(_speedups.encode_acks)
    same_signature(_speedups.encode_acks)(encode_acks)
