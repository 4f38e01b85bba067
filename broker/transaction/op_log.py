"""The op queue (``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0): the durable log of transaction decisions.

Owns the op record format and its replay. An op record names one event about one or more half
messages: tag ``d`` (RocketMQ's "removed" mark) and property ``TRAN_OP`` = COMMIT, ROLLBACK or
DISCARD for a decision, tag ``c`` and ``TRAN_OP=CHECK`` for a check sent; the body is the half
queue offsets in decimal, comma-separated, as RocketMQ 5 batches them (one decision on many half
messages writes one record per ``OFFSETS_PER_OP_RECORD``; a lone offset is the 4.x body; a trailing
comma, as RocketMQ 5 writes, is accepted). Records are only appended, so a restart rebuilds the
``HalfWindow`` by replaying the queue from its ``op_floor``; a decision is never applied twice and
check counts survive restarts.

Also owns ``read_records``: raw records of a queue, by offset, for the replay and the check scan.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence

from rocketpy.broker.store import BrokerMessage, Store
from rocketpy.broker.transaction.half import HALF_QUEUE_ID
from rocketpy.broker.transaction.window import HalfWindow, Outcome
from rocketpy.message import MessageConst, string_to_properties
from rocketpy.record import HEAD_SIZE, RECORD_HEAD
from rocketpy.topic import TRANS_OP_HALF_TOPIC

log = logging.getLogger("rocketpy.broker.transaction")

#: The op record property naming the event.
OP_PROPERTY = "TRAN_OP"
CHECK_OP = "CHECK"
_DECIDED_TAG = "d"
_CHECK_TAG = "c"
#: Records read between two yields to the event loop.
READ_YIELD_EVERY = 1024
#: Half offsets named by one op record (a body of at most ~5 KiB: far below any message limit).
OFFSETS_PER_OP_RECORD = 256


def op_message(
    half_offsets: Sequence[int], op: Outcome | None, host: tuple[str, int], now_ms: int
) -> BrokerMessage:
    """The op record of a decision (``op``) or of a check (None) about ``half_offsets`` (at most
    ``OFFSETS_PER_OP_RECORD``)."""
    assert 0 < len(half_offsets) <= OFFSETS_PER_OP_RECORD
    name = op.value if op is not None else CHECK_OP
    tag = _DECIDED_TAG if op is not None else _CHECK_TAG
    props = f"{MessageConst.TAGS}\x01{tag}\x02{OP_PROPERTY}\x01{name}\x02"
    body = ",".join(map(str, half_offsets)).encode()
    return BrokerMessage(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, body, props, 0, 0, now_ms, host)


def op_next_offset(store: Store) -> int:
    """Where the next op record goes in the op queue."""
    return store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)


async def read_records(store: Store, topic: str, start: int, end: int) -> AsyncIterator[tuple[int, bytes]]:
    """``(queue offset, record copy)`` of queue 0 of ``topic`` from ``start`` up to ``end`` (records
    already cleaned up are skipped); yields to the loop every ``READ_YIELD_EVERY`` records."""
    start = max(start, store.get_min_offset_in_queue(topic, HALF_QUEUE_ID))
    for n, offset in enumerate(range(start, end)):
        if n and n % READ_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        phys = store.get_commit_log_offset_in_queue(topic, HALF_QUEUE_ID, offset)
        record = store.lookup_message_by_offset(phys) if phys >= 0 else None
        if record is not None:
            yield offset, record


def parse_op(record: bytes) -> tuple[list[int], Outcome | None] | None:
    """``(half offsets, outcome or None for a check)`` of an op record, None when it is not one."""
    body_len = RECORD_HEAD.unpack_from(record, 0)[-1]
    pos = HEAD_SIZE + body_len
    parts = record[HEAD_SIZE:pos].split(b",")
    if parts[-1] == b"" and len(parts) > 1:
        parts.pop()  # RocketMQ 5 ends every offset with the separator
    if not all(p.isdigit() for p in parts):
        return None
    offsets = [int(p) for p in parts]
    props = string_to_properties(record[pos + 3 + record[pos] :].decode(errors="replace"))
    op = props.get(OP_PROPERTY, "")
    if op == CHECK_OP:
        return offsets, None
    try:
        return offsets, Outcome(op)
    except ValueError:
        return None


async def replay(store: Store, window: HalfWindow, start: int) -> int:
    """Apply the op records from ``start`` to the queue's end to ``window``; returns how many."""
    n = 0
    async for offset, record in read_records(store, TRANS_OP_HALF_TOPIC, start, op_next_offset(store)):
        parsed = parse_op(record)
        if parsed is None:
            log.warning("op record at op offset %d is malformed; skipped", offset)
            continue
        half_offsets, outcome = parsed
        for half_offset in half_offsets:
            if outcome is None:
                window.note_check(half_offset, offset)
            else:
                window.apply(half_offset, outcome, offset)
        n += 1
    return n
