"""Cutting a running store back to a commitlog offset: the commitlog, its consume queues and its index.

Owns the on-loop half of ``MessageStore.truncate`` (controller mode: a master's torn replica tail,
and a rejoining broker's bytes past the end its new master confirms). Everything here runs on the
event loop while no put and no replica append runs: file lists, write positions and the index's
hash chains change in memory; the files that end up past the cut are returned, to be destroyed in a
thread (as cleanup does). Bytes past the cut in the files that stay are zeroed, so recovery after a
crash finds the log ending there too.

Invariants after ``cut_store(..., end)``: the commitlog's max offset is ``end``; no consume-queue unit
and no index entry points at or past ``end``; the pre-created next commitlog file, if its start no
longer follows the last file, is dropped (the caller asks for a new one).
"""

from __future__ import annotations

import logging

from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.dispatch import Dispatcher
from rocketpy.broker.store.index import (
    ENTRY,
    ENTRY_SIZE,
    HEADER_SIZE,
    SLOT,
    SLOT_SIZE,
    IndexFile,
    IndexService,
)
from rocketpy.broker.store.mapped_file import MappedFile

log = logging.getLogger("rocketpy.store")

#: Bytes zeroed per slice (a slice is one memset of the map; no huge temporary buffer).
ZERO_SLICE_BYTES = 1 << 20


def zero_range(mf: MappedFile, start: int, end: int) -> None:
    """Zero ``mf``'s bytes in ``[start, end)`` in slices."""
    zeros = bytes(min(ZERO_SLICE_BYTES, max(0, end - start)))
    pos = start
    while pos < end:
        n = min(len(zeros), end - pos)
        mf.mm[pos : pos + n] = zeros[:n]
        pos += n


def cut_commitlog(commitlog: CommitLog, end: int) -> list[MappedFile]:
    """Cut the commitlog at ``end``; the files to destroy (past the cut, and a next file that no
    longer fits)."""
    assert commitlog.min_offset <= end <= commitlog.max_offset, (end, commitlog.min_offset)
    keep = [mf for mf in commitlog.files if mf.base_offset <= end]
    dropped = commitlog.files[len(keep) :]
    commitlog.files = keep
    last = keep[-1]
    pos = end - last.base_offset
    zero_range(last, pos, last.wrote)
    last.recover_position(pos)
    commitlog.flushed_offset = min(commitlog.flushed_offset, end)
    nxt = commitlog._next
    if nxt is not None and nxt.base_offset != last.end_offset:
        dropped.append(nxt)
        commitlog._next = None
    return dropped


def cut_queues(dispatcher: Dispatcher, end: int) -> list[MappedFile]:
    """Drop every consume-queue unit whose record does not end by ``end``; the files to destroy."""
    dropped: list[MappedFile] = []
    for cq in dispatcher.cqs.values():
        if cq.max_phys_end > end:
            before = cq.next_offset
            cq.truncate_to_phys(end, dropped)
            log.warning("consume queue %s/%d cut from %d to %d units", cq.topic, cq.queue_id, before,
                        cq.next_offset)  # fmt: skip
    dispatcher.dispatched_to = min(dispatcher.dispatched_to, end)
    return dropped


def cut_index_file(f: IndexFile, end: int) -> None:
    """Remove ``f``'s entries that point at or past ``end``, unlinking them from their buckets."""
    mm, base = f.mm, f.entries_pos
    lo, hi = 1, f.index_count
    while lo < hi:  # entries are in commitlog order: the first one at or past ``end``
        mid = (lo + hi) // 2
        if ENTRY.unpack_from(mm, base + mid * ENTRY_SIZE)[1] < end:
            lo = mid + 1
        else:
            hi = mid
    for n in range(f.index_count - 1, lo - 1, -1):  # newest first: each bucket head moves back
        h, _phys, _diff, prev = ENTRY.unpack_from(mm, base + n * ENTRY_SIZE)
        slot_pos = HEADER_SIZE + (h % f.slots) * SLOT_SIZE
        if SLOT.unpack_from(mm, slot_pos)[0] == n:
            SLOT.pack_into(mm, slot_pos, prev if prev < n else 0)
        mm[base + n * ENTRY_SIZE : base + (n + 1) * ENTRY_SIZE] = bytes(ENTRY_SIZE)
    f.index_count = lo
    if lo > 1:
        _h, phys, diff, _prev = ENTRY.unpack_from(mm, base + (lo - 1) * ENTRY_SIZE)
        f.write_header(f.begin_ts + diff * 1000, phys)
    else:
        f.begin_ts = f.begin_phys = 0
        f.write_header(0, 0)


def cut_index(index: IndexService | None, end: int) -> list[MappedFile]:
    """Remove index entries pointing at or past ``end``; the files to destroy (wholly past it)."""
    if index is None:
        return []
    dropped: list[MappedFile] = []
    while len(index.files) > 1 and index.files[-1].begin_phys >= end:
        dropped.append(index.files.pop().mf)
    for f in index.files[-2:]:
        if f.end_phys >= end:
            cut_index_file(f, end)
    index.last_phys = min(index.last_phys, end - 1)
    return dropped


def cut_store(commitlog: CommitLog, dispatcher: Dispatcher, end: int) -> list[MappedFile]:
    """Cut commitlog, consume queues and index at ``end`` (on the loop); the files to destroy."""
    dropped = cut_commitlog(commitlog, end)
    dropped += cut_queues(dispatcher, end)
    dropped += cut_index(dispatcher.index, end)
    return dropped
