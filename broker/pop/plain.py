"""A plain pop's read of its topic in one step: ``read_plain`` (compiled twin in ``_plain.pyx``).

A *plain* pop has no filter (no expression, or TAG ``*``) and no order flag: the common case of
every SimpleConsumer and POP-mode push consumer. ``read_plain`` does for it what
``PopReader._read_topic(req, req.topic, req.queue_id, None, out)`` does — the same queues in the
same order, the same ledger changes, the same answer — with each queue's common state handled in
place: the group's queue state already made and in step with the offset table, not orderly, nothing
acked ahead, under the in-flight limits, and the store's one-view read (``get_now``, the pull fast
path's) finding the messages. A queue in any other state goes through ``PopReader._read_queue``
(which holds the full semantics) before anything of it changed; so does each queue when the twin
cannot take it as it is. The POP retry topic, filters and orderly pops never come here
(``PopReader.read``).

``tests/unit/test_pop_plain.py`` runs both twins on the same ledgers and stores and compares the
answers and every change they made, and the twins against ``_read_topic``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.broker.pop.types import PoppedQueue
from rocketpy.broker.store import reads
from rocketpy.perm import is_readable
from rocketpy.protocol.receipt import NORMAL_TOPIC

if TYPE_CHECKING:
    from rocketpy.broker.pop.reader import PopRead, PopReader
    from rocketpy.broker.pop.types import PopRequest

__all__ = ["read_plain"]


@twin
def read_plain(reader: PopReader, req: PopRequest, out: PopRead) -> None:
    """``reader._read_topic(req, req.topic, req.queue_id, None, out)`` of a plain pop (see the
    module docstring); the caller has checked it is one (no filter, ``req.order`` false)."""
    topic = req.topic
    tc = reader.topic_config.get(topic)
    if tc is None or not is_readable(tc.perm) or tc.read_queue_nums <= 0:
        return
    n = tc.read_queue_nums
    rotor = reader._rotor
    qids = [req.queue_id] if req.queue_id >= 0 else [(rotor + i) % n for i in range(n)]
    result = out.result
    group, max_msgs = req.group, req.max_msgs
    ledger, limits, store = reader.ledger, reader.limits, reader.store
    queues, cqs = ledger.queues, store.dispatcher.cqs
    table = reader.offsets.table
    offsets_key = reader.offsets.key(topic, group)
    floor: int | None = None
    for i, qid in enumerate(qids):
        if result.count >= max_msgs:  # full: only count what the other queues hold
            result.rest_num += reader._rest(group, topic, qids[i:])
            return
        q = queues.get((group, topic, qid))
        if q is None or q.orderly or q.acked_ahead:
            reader._read_queue(req, topic, qid, None, out)
            continue
        stored_queues = table.get(offsets_key)
        stored = -1 if stored_queues is None else stored_queues.get(qid, -1)
        if (
            (stored >= 0 and stored != q.committed)
            or len(q.inflight) >= limits.per_queue
            or ledger.inflight_total >= limits.total
        ):
            reader._read_queue(req, topic, qid, None, out)
            continue
        start = q.next_offset
        cq = cqs.get((topic, qid))
        r = reads.get_now(store.commitlog, cq, start, max_msgs - result.count, limits.max_bytes)
        if r is None:  # anything but one view of messages: the full read (nothing changed yet)
            reader._read_queue(req, topic, qid, None, out)
            continue
        store.stats.get_total += r.message_count
        result.rest_num += max(0, r.max_offset - r.next_begin_offset)
        out.touched.append(q)
        offsets = r.queue_offsets
        if floor is None:
            floor = reader._revive_floor()
        ck = ledger.pop(q, list(offsets), r.next_begin_offset, result.pop_time, req.invisible_ms, floor,
                        order=False, start_offset=start)  # fmt: skip
        out.cks.append((ck, None))
        result.add(PoppedQueue(NORMAL_TOPIC, qid, start, list(offsets), None), r.buffers)


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.pop import _plain

    same_signature(read_plain)(_plain.read_plain)
    same_signature(_plain.read_plain)(read_plain)
