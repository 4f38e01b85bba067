"""A broker's start: what was in flight before the stop (clean or ``kill -9``) is in flight again.

Owns ``restore(service, doc)``: ``doc`` is the last ``config/popState.json`` (``{}`` when none).
Each queue it names starts from its committed offset and next offset there; the revive log is
replayed from its ``reviveOffset`` (``Replay``: per offset the latest ck, minus what acks name),
which puts back in flight every message popped and not acked, with its original pop time and
deadline (a deadline already past revives at once), and moves ``next_offset`` past everything
popped since the snapshot. A queue's committed offset is the snapshot's, or the highest one an
ACKS record carried since; a queue the log names but the snapshot does not (first popped after
it) starts at the offset table's committed offset, else at its oldest replayed ck. Offsets acks
name at or past where a queue reads again (popped under a ck whose CK record was never written,
``ck_buffer.py``) are skipped when read again (``PopQueue.acked_ahead``); an orderly queue keeps
those past its committed offset, since its expired batch is read again from its first offset.
The resulting low-water marks are written to the offset table. Queues of topics deleted since are
left out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rocketpy.broker.pop.ledger import PopLedger
from rocketpy.broker.pop.revive_log import Replay

if TYPE_CHECKING:
    from rocketpy.broker.pop.service import PopService

log = logging.getLogger("rocketpy.broker.pop")

QueueKey = tuple[str, str, int]
#: Records replayed between two yields to the event loop.
YIELD_EVERY = 4096


def _snapshot_queues(doc: dict[str, Any]) -> dict[QueueKey, tuple[int, int]]:
    out: dict[QueueKey, tuple[int, int]] = {}
    for row in doc.get("queues") or ():
        try:
            group, topic, qid, committed, next_offset = row
            out[(str(group), str(topic), int(qid))] = (int(committed), int(next_offset))
        except (TypeError, ValueError):
            log.error("popState.json: queue row %r skipped", row)
    return out


async def _replay(service: PopService, start: int) -> Replay:
    replay = Replay()
    n = 0
    for queue_offset, record in service.revive_log.read_from(start):
        replay.apply(record, queue_offset)
        n += 1
        if n % YIELD_EVERY == 0:
            await asyncio.sleep(0)
    log.info("POP: replayed %d revive-log records from queue offset %d", n, start)
    return replay


def committed_offsets(
    snap: dict[QueueKey, tuple[int, int]], replay: Replay, query_offset: Callable[[str, str, int], int]
) -> dict[QueueKey, int]:
    """Each queue's committed offset at the restart: the snapshot's (else the offset table's, else
    its oldest replayed ck's start), or the highest an ACKS record carried when that is higher."""
    committed = {k: c for k, (c, _) in snap.items()}
    starts: dict[QueueKey, int] = {}
    for ck in replay.cks.values():
        if ck.key not in committed:
            starts[ck.key] = min(starts.get(ck.key, ck.start), ck.start)
    for key in replay.committed:
        if key not in committed and key not in starts:
            starts[key] = -1
    for key, start in starts.items():
        stored = query_offset(*key)
        committed[key] = stored if stored >= 0 else start
    for key, mark in replay.committed.items():
        committed[key] = max(committed[key], mark)
    return committed


def rebuild(
    ledger: PopLedger,
    snap: dict[QueueKey, tuple[int, int]],
    replay: Replay,
    committed: dict[QueueKey, int],
    topic_exists: Callable[[str], bool],
) -> int:
    """Fill the empty ``ledger`` from the snapshot's queues and the replayed records; returns how
    many messages are in flight again (the low-water marks are the caller's to write)."""
    for key, start in committed.items():
        if not topic_exists(key[1]) or start < 0:
            continue
        nxt = max(snap.get(key, (start, start))[1], replay.ends.get(key, 0), start)
        q = ledger.add_queue(key, nxt)
        if q is None:
            log.error("POP: too many queues; %s not restored", key)
            continue
        q.committed = start
    restored = 0
    for ck, alive in replay.in_flight(committed):
        q = ledger.queue(ck.key)
        if q is None:
            continue
        ledger.pop(
            q,
            alive,
            ck.end,
            ck.pop_time,
            ck.invisible_ms,
            ck.floor,
            order=ck.attempts is not None,
            start_offset=ck.start,
            seq=ck.seq,
        )
        if ck.attempts is not None:
            counts = dict(zip(ck.offsets, ck.attempts, strict=True))
            q.attempts.update((o, counts[o]) for o in alive)
        restored += len(alive)
    starts = {k: (q.committed if q.orderly else q.next_offset) for k, q in ledger.queues.items()}
    for key, done in replay.done_from(starts).items():
        q = ledger.queues[key]
        q.acked_ahead = {o for o in done if o not in q.inflight}
    ledger.next_seq = max(ledger.next_seq, replay.max_seq + 1)
    for q in ledger.queues.values():
        q.rebuild_order()
    return restored


async def restore(service: PopService, doc: dict[str, Any]) -> None:
    """Rebuild ``service``'s ledger from ``doc`` and the revive log (see the module docstring)."""
    ledger = service.ledger
    snap = _snapshot_queues(doc)
    replay = await _replay(service, int(doc.get("reviveOffset") or 0))
    committed = committed_offsets(snap, replay, service.offsets.query_offset)
    restored = rebuild(ledger, snap, replay, committed, lambda t: service.topics.get(t) is not None)
    ledger.next_seq = max(ledger.next_seq, int(doc.get("nextCkSeq") or 1))
    for q in ledger.queues.values():
        q.committed = -1  # written below, whatever it was
        service.commit(q)
    if restored or ledger.queues:
        log.info("POP: %d queue(s) restored, %d message(s) in flight again", len(ledger.queues), restored)
