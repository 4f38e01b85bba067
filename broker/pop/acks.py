"""The batch ack's hot steps: reading a BATCH_ACK_MESSAGE body's acks and their offsets.

Owns ``read_acks``, the reader of a decoded ``BatchAckMessageRequestBody`` in the one form
rocketpy's SDK and RocketMQ's clients write it (short field names, strings and integers of their
exact types, a base64 bit set): one pass, no shape walk. Anything else (long field names, numbers
as text, a field missing or malformed) gives None, and the caller checks the body against
``BATCH_ACK_BODY`` and reads it with ``read_batch_acks``, which accept every form and name what is
wrong. ``offsets_of`` turns an ack's bit set into offsets. ``apply_batch_acks`` is the service's
bookkeeping of a batch ack's entries (the ledger's acks, the offset commits, the counters);
``commit_queues`` the offset commit of the queues a pop or an ack moved. All four have compiled
twins (``_speedups.pyx``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketpy._accel import twin
from rocketpy.protocol.headers.pop import MAX_BATCH_ACK_BITS, MAX_BATCH_ACKS, BatchAck, decode_bitset
from rocketpy.topic import pop_retry_topic

if TYPE_CHECKING:
    from rocketpy.broker.pop.ledger import PopQueue
    from rocketpy.broker.pop.service import PopService

#: What a batch ack did to one ck: (its queue, its seq, the offsets acked under it).
AckedRun = tuple["PopQueue", int, list[int]]

#: Longest string field the body's shape admits (``rocketpy.protocol.shape.Scalar``'s default).
MAX_FIELD_CHARS = 4096


@twin
def read_acks(doc: dict[str, Any]) -> list[BatchAck] | None:
    """The acks of a decoded BatchAckMessageRequestBody in its usual form, each as ``BatchAck``;
    None when the body is in any other form or has no acks (see the module docstring)."""
    broker = doc.get("brokerName")
    if broker is not None and (type(broker) is not str or len(broker) > MAX_FIELD_CHARS):
        return None
    acks = doc.get("acks")
    if type(acks) is not list or not acks or len(acks) > MAX_BATCH_ACKS:
        return None
    out = []
    for entry in acks:
        if type(entry) is not dict:
            return None
        try:
            c, t, r, so, q, rq, pt, it, b = (entry["c"], entry["t"], entry["r"], entry["so"], entry["q"],
                                             entry["rq"], entry["pt"], entry["it"], entry["b"])  # fmt: skip
        except KeyError:
            return None
        if type(c) is not str or type(t) is not str or type(r) is not str or type(b) is not str:
            return None
        if type(so) is not int or type(q) is not int or type(rq) is not int or type(pt) is not int:
            return None
        if type(it) is not int:
            return None
        if (
            len(c) > MAX_FIELD_CHARS
            or len(t) > MAX_FIELD_CHARS
            or len(r) > MAX_FIELD_CHARS
            or len(b) > MAX_BATCH_ACK_BITS
        ):
            return None
        try:
            bits = decode_bitset(b)
        except ValueError:
            return None
        out.append(BatchAck(c, t, r == "1", so, q, rq, pt, it, bits))
    return out


@twin
def offsets_of(start: int, bits: tuple[int, ...]) -> list[int]:
    """The offsets a batch ack names: ``start + i`` for each set bit ``i`` (``BatchAck.offsets``)."""
    return [start + i for i in bits]


@twin
def commit_queues(service: PopService, queues: list[PopQueue]) -> None:
    """``service.commit(q)`` of each of ``queues`` (the compiled twin takes each low-water mark
    without ``PopQueue.low_water``'s frame when nothing is acked ahead of it)."""
    for q in queues:
        service.commit(q)


@twin
def apply_batch_acks(service: PopService, acks: list[BatchAck]) -> tuple[list[AckedRun], int, int]:
    """The bookkeeping of a BATCH_ACK_MESSAGE's entries on ``service`` (``PopService.ack_batch``
    checks the broker name first and writes the records after): each ack's offsets in flight under
    its pop are acknowledged in the ledger (the others skipped, RocketMQ's rule), its queue's
    low-water mark committed, the group's counters raised and a waiting orderly pop woken. Returns
    what was acked per ck, in the acks' order, and ``(acked, asked)`` message counts."""
    done: list[AckedRun] = []
    acked = asked = 0
    ledger = service.ledger
    queues = ledger.queues
    for a in acks:
        topic = pop_retry_topic(a.group, a.topic) if a.retry else a.topic
        q = queues.get((a.group, topic, a.queue_id))
        offsets = offsets_of(a.start_offset, a.bits)
        asked += len(offsets)
        if q is None:
            continue
        by_seq = ledger.ack_many(q, offsets, a.pop_time)
        if not by_seq:
            continue
        n = 0
        for seq, offs in by_seq.items():
            done.append((q, seq, offs))
            n += len(offs)
        acked += n
        service.commit(q)
        service._count(a.group, topic, n, 0)
        service._maybe_unblocked(q)
    return done, acked, asked


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.pop import _speedups

    same_signature(read_acks)(_speedups.read_acks)
    same_signature(_speedups.read_acks)(read_acks)
    same_signature(apply_batch_acks)(_speedups.apply_batch_acks)
    same_signature(_speedups.apply_batch_acks)(apply_batch_acks)
    same_signature(offsets_of)(_speedups.offsets_of)
    same_signature(_speedups.offsets_of)(offsets_of)
    same_signature(commit_queues)(_speedups.commit_queues)
    same_signature(_speedups.commit_queues)(commit_queues)
