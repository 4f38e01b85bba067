"""Read paths of the store: get_message, offset lookups, lookup by commitlog offset, key queries.

Owns the status rules of a pull (RocketMQ ``DefaultMessageStore.getMessage``) and returns views of the
commitlog, never re-encoded records: one view for an unfiltered run of records back to back in one
file, else one view per record. Runs on the event loop; reads only mapped memory. ``ReadService``
Each read gets the commitlog and the consume queue (or index) it reads, nothing else of the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.consume_queue import ConsumeQueue, units_struct
from rocketpy.broker.store.index import IndexService
from rocketpy.broker.store.props import index_keys
from rocketpy.broker.store.results import (
    GetMessageResult,
    GetMessageStatus,
    MessageFilter,
    QueryMessageResult,
)
from rocketpy.record import HEAD_SIZE, MESSAGE_MAGIC, POS_BODY_LEN, POS_STORE_TIMESTAMP, Q64, SIZE_MAGIC, U32

MAX_FILTER_SCAN_UNITS = 800
_S = GetMessageStatus
_MASK32 = 0xFFFFFFFF


def min_offset(cl: CommitLog, cq: ConsumeQueue) -> int:
    """The queue's first offset whose record is still in the commitlog."""
    cl_min = cl.min_offset
    lo, hi = cq.min_offset, cq.next_offset
    u = cq.unit(lo) if lo < hi else None
    if u is not None and u[0] >= cl_min:
        return lo
    while lo < hi:  # units point at increasing commitlog offsets: binary search the first stored one
        mid = (lo + hi) // 2
        u = cq.unit(mid)
        if u is None or u[0] < cl_min:
            lo = mid + 1
        else:
            hi = mid
    cq.min_offset = lo
    return lo


def get_message(
    cl: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_msgs: int,
    max_bytes: int,
    message_filter: MessageFilter | None,
) -> GetMessageResult:
    """See ``MessageStore.get_message`` (``cq`` None: the queue is unknown).

    A read with no filter, a match-all one or one decided by its tag codes first tries
    ``_take_run`` (the units' records back to back: one view); anything else, or a run that is not
    contiguous, goes record by record (``_collect_each``).
    """
    if cq is None:
        return GetMessageResult(_S.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
    lo, hi = min_offset(cl, cq), cq.next_offset
    if hi == 0:
        return GetMessageResult(_S.NO_MESSAGE_IN_QUEUE, 0, lo, hi)
    if offset < lo:
        return GetMessageResult(_S.OFFSET_TOO_SMALL, lo, lo, hi)
    if offset == hi:
        return GetMessageResult(_S.OFFSET_OVERFLOW_ONE, offset, lo, hi)
    if offset > hi:
        return GetMessageResult(_S.OFFSET_OVERFLOW_BADLY, lo if lo == 0 else hi, lo, hi)
    result = GetMessageResult(_S.NO_MATCHED_MESSAGE, offset, lo, hi)
    scan_limit = max(max_msgs, MAX_FILTER_SCAN_UNITS) if message_filter is not None else max_msgs
    flt, codes = message_filter, None
    if flt is not None:
        if getattr(flt, "matches_all", False):
            flt = None  # a match-all filter ("*"): no per-message filter call
        else:
            codes = getattr(flt, "tag_codes", None)
    first: tuple[int, ...] = ()  # the units read for the fast path, reused by _collect_each
    if flt is None or codes is not None:
        raw, n = cq.read_units(offset, max_msgs)
        first = t = units_struct(n).unpack_from(raw) if n else ()
        whole = n == max_msgs or offset + n == cq.next_offset  # else the batch goes on in the next CQ file
        if t and whole and (codes is None or all(c & _MASK32 in codes for c in t[2::3])):
            if _take_run(cl, result, offset, t, max_bytes):  # every unit passes the filter: maybe one view
                return result
    _collect_each(cl, cq, result, offset, max_msgs, max_bytes, scan_limit, flt, codes, first)
    return result


@twin
def get_now(
    cl: CommitLog, cq: ConsumeQueue | None, offset: int, max_msgs: int, max_bytes: int
) -> GetMessageResult | None:
    """``get_message``'s common case without a filter (or with a match-all one): ``offset`` inside
    the queue, the queue's first unit still in the commitlog, and the next ``max_msgs`` units'
    records back to back in one file within ``max_bytes``: FOUND with one view. None for anything
    else, with nothing changed: ``get_message`` answers it (compiled twin in ``_storepath``)."""
    if cq is None or max_msgs <= 0:
        return None
    lo, hi = cq.min_offset, cq.next_offset
    if not lo <= offset < hi:
        return None
    u = cq.unit(lo)  # min_offset's first test: the queue's first unit is still stored
    if u is None or u[0] < cl.min_offset:
        return None
    raw, n = cq.read_units(offset, max_msgs)
    if not n or not (n == max_msgs or offset + n == hi):
        return None
    result = GetMessageResult(_S.NO_MATCHED_MESSAGE, offset, lo, hi)
    return result if _take_run(cl, result, offset, units_struct(n).unpack_from(raw), max_bytes) else None


def _take_run(cl: CommitLog, r: GetMessageResult, offset: int, t: tuple[int, ...], max_bytes: int) -> bool:
    """Unfiltered fast path: records back to back in one commitlog file come back as ONE view.

    Units point at increasing, non-overlapping records, so when the span from the first record's
    start to the last one's end equals the sum of the sizes there is no gap. False (nothing taken)
    when the run is not contiguous, crosses a file, has a removed record or exceeds ``max_bytes``.
    """
    sizes = t[1::3]
    first, total = t[0], sum(sizes)
    end = t[-3] + t[-2]
    files = cl.files
    if not files or end - first != total or total > max_bytes or min(sizes) <= 0:
        return False
    file_size = cl.file_size
    base = files[0].base_offset
    idx = (first - base) // file_size
    if first < base or idx >= len(files) or (end - 1 - base) // file_size != idx:
        return False
    mf = files[idx]
    pos = first - mf.base_offset
    n = len(sizes)
    r.buffers.append(mf.view[pos : pos + total])
    r.queue_offsets.extend(range(offset, offset + n))
    r.status = GetMessageStatus.FOUND
    r.next_begin_offset = offset + n
    r.buffer_total_size = total
    r.message_count = n
    return True


def _collect_each(
    cl: CommitLog,
    cq: ConsumeQueue,
    r: GetMessageResult,
    offset: int,
    max_msgs: int,
    max_bytes: int,
    scan_limit: int,
    flt: MessageFilter | None,
    codes: frozenset[int] | None,
    first: tuple[int, ...],
) -> None:
    """One view per record; ``codes`` (a tag filter's 32-bit codes) replaces both filter calls."""
    files = cl.files
    file_size = cl.file_size
    first_base = files[0].base_offset if files else 0
    buffers = r.buffers
    total_bytes = 0
    scanned = 0
    cur = offset
    status = r.status
    tag_ok: dict[int, bool] = {}  # consume-queue decision per tag code: one filter call per distinct code
    call_flt = flt is not None and codes is None
    while scanned < scan_limit and len(buffers) < max_msgs:
        if first:
            t, first = first, ()
            n = len(t) // 3
        else:
            raw, n = cq.read_units(cur, min(scan_limit - scanned, 4096))
            if n == 0:
                break
            t = units_struct(n).unpack_from(raw)
        i = 0
        while i < n:
            phys, size, tag = t[3 * i], t[3 * i + 1], t[3 * i + 2]
            idx = (phys - first_base) // file_size
            if size <= 0 or phys < first_base or idx >= len(files):
                status = _S.MESSAGE_WAS_REMOVING if not buffers else status
                i += 1
                continue
            if codes is not None:
                if tag & _MASK32 not in codes:
                    i += 1
                    continue
            elif flt is not None:
                ok = tag_ok.get(tag)
                if ok is None:
                    ok = tag_ok[tag] = flt.is_matched_by_consume_queue(tag)
                if not ok:
                    i += 1
                    continue
            mf = files[idx]
            pos = phys - mf.base_offset
            if total_bytes + size > max_bytes and buffers:
                n = -1
                break
            view = mf.view[pos : pos + size]
            if call_flt and not flt.is_matched_by_commit_log(view):  # type: ignore[union-attr]
                i += 1
                continue
            buffers.append(view)
            r.queue_offsets.append(cur + i)
            total_bytes += size
            status = _S.FOUND
            i += 1
            if len(buffers) >= max_msgs:
                break
        scanned += i
        cur += i
        if n == -1 or i < n:
            break
    r.status = status
    r.next_begin_offset = cur
    r.buffer_total_size = total_bytes
    r.message_count = len(buffers)


def _store_ts(cl: CommitLog, phys: int) -> int:
    mf = cl.file_for(phys)
    if mf is None:
        return -1
    return int(Q64.unpack_from(mf.mm, phys - mf.base_offset + POS_STORE_TIMESTAMP)[0])


def offset_by_time(cl: CommitLog, cq: ConsumeQueue | None, timestamp_ms: int) -> int:
    """See ``MessageStore.get_offset_in_queue_by_time``."""
    if cq is None:
        return 0
    lo, hi = min_offset(cl, cq), cq.next_offset
    while lo < hi:
        mid = (lo + hi) // 2
        u = cq.unit(mid)
        ts = _store_ts(cl, u[0]) if u else -1
        if ts < timestamp_ms:
            lo = mid + 1
        else:
            hi = mid
    return lo


def store_time_at(cl: CommitLog, cq: ConsumeQueue | None, offset: int) -> int:
    """See ``MessageStore.get_message_store_time``."""
    if cq is None or not 0 <= offset < cq.next_offset:
        return -1
    u = cq.unit(offset)
    return _store_ts(cl, u[0]) if u else -1


def earliest_time(cl: CommitLog, cq: ConsumeQueue | None) -> int:
    """See ``MessageStore.get_earliest_message_time``."""
    if cq is None:
        return -1
    off = min_offset(cl, cq)
    u = cq.unit(off) if off < cq.next_offset else None
    return _store_ts(cl, u[0]) if u else -1


def record_view(cl: CommitLog, phys: int) -> memoryview | None:
    """A view of the message record at ``phys``, or None when there is none."""
    mf = cl.file_for(phys)
    if mf is None:
        return None
    pos = phys - mf.base_offset
    if pos + HEAD_SIZE > mf.wrote or phys < 0:
        return None
    size, magic = SIZE_MAGIC.unpack_from(mf.mm, pos)
    if magic != MESSAGE_MAGIC or pos + size > mf.wrote or size < HEAD_SIZE:
        return None
    return mf.view[pos : pos + size]


def record_at(cl: CommitLog, phys: int) -> bytes | None:
    """A copy of the record at ``phys``."""
    v = record_view(cl, phys)
    return bytes(v) if v is not None else None


def _topic_and_props(v: memoryview) -> tuple[str, str]:
    body_len = U32.unpack_from(v, POS_BODY_LEN)[0]
    t = HEAD_SIZE + body_len
    tl = v[t]
    topic = bytes(v[t + 1 : t + 1 + tl]).decode(errors="replace")
    return topic, bytes(v[t + 3 + tl :]).decode(errors="replace")


def query_message(
    cl: CommitLog, index: IndexService | None, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
) -> QueryMessageResult:
    """See ``MessageStore.query_message``."""
    res = QueryMessageResult()
    if index is None or max_num <= 0:
        return res
    if index.files:
        res.index_last_update_timestamp = index.files[-1].end_ts
        res.index_last_update_phyoffset = index.files[-1].end_phys
    seen: set[int] = set()
    for phys in index.lookup(topic, key, max_num * 4, begin_ts, end_ts):
        v = record_view(cl, phys)
        if v is None or phys in seen:
            continue
        t, props = _topic_and_props(v)
        if t == topic and key in index_keys(props):
            seen.add(phys)
            res.buffers.append(bytes(v))
            if len(res.buffers) >= max_num:
                break
    return res


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.store import _storepath

    same_signature(get_now)(_storepath.get_now)
    same_signature(_storepath.get_now)(get_now)
