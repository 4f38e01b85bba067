"""Start-up recovery: load the files, cut a torn commitlog tail, rebuild consume queues and index.

Runs in a thread before the store serves anything. Steps: map the commitlog files (a file that does not
continue the sequence is set aside as ``.bad``); load each consume queue and find its last unit; load
the index; scan the commitlog from the start of the file holding the earliest of (what the consume
queues and index hold, the checkpoint's flushed offset after an abnormal stop, the last file), checking
magic, length, physical offset and body CRC; hand every valid record past what the queues and index hold
to ``Dispatcher.dispatch``, as a live put does; cut at the first invalid record, zero the garbage after
it, and drop consume-queue units past the new end. Nothing here raises on damaged data: it logs what it
cut.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.consume_queue import UNIT, UNIT_SIZE, ConsumeQueue
from rocketpy.broker.store.dispatch import Dispatcher
from rocketpy.broker.store.index import ENTRY_SIZE
from rocketpy.broker.store.mapped_file import MappedFile, list_offset_files
from rocketpy.broker.store.results import StoreError
from rocketpy.record import BLANK_MAGIC, HEAD_SIZE, MESSAGE_MAGIC, RECORD_HEAD, body_crc

log = logging.getLogger("rocketpy.store")

PRE_BLANK_SIZE = 0x7FFFFFFF
ZERO_WINDOW_BYTES = 1 << 20
_PAGE = 4096
_ZERO_PAGE = bytes(_PAGE)


def set_aside(path: str, why: str) -> None:
    """Rename a damaged/unexpected file to ``*.bad`` so it is kept for inspection but not loaded."""
    log.warning("store file %s %s; renaming it to %s.bad", path, why, path)
    os.replace(path, path + ".bad")


def load_offset_files(
    directory: str,
    file_size: int,
    what: str,
    keep_fd: bool = True,
    short: list[str] | None = None,
    readahead: bool = False,
) -> list[MappedFile]:
    """Map the contiguous 20-digit-named files of ``directory``; set aside the rest.

    Files shorter than ``file_size`` (torn) are extended with zeros and listed in ``short``.
    ``readahead``: map them for a sequential scan (``MappedFile.open``).
    """
    files: list[MappedFile] = []
    for base, path in list_offset_files(directory):
        actual = os.path.getsize(path)
        if actual > file_size:
            raise StoreError(
                f"{what} file {path} is {actual} bytes but the configured file size is {file_size}; "
                f"restore the size setting used to create this store"
            )
        if base % file_size or (files and base != files[-1].end_offset):
            set_aside(path, "does not continue the file sequence")
            continue
        if actual < file_size and short is not None:
            log.warning("%s file %s is %d bytes, shorter than %d: it will be rebuilt past its end", what,
                        path, actual, file_size)  # fmt: skip
            short.append(path)
        files.append(MappedFile.open(path, base, file_size, keep_fd, readahead))
    return files


def load_consume_queues(dispatcher: Dispatcher, commitlog_min: int) -> None:
    """Load every consume queue under the dispatcher's root and find its last unit."""
    root = dispatcher.cq_root
    if not os.path.isdir(root):
        return
    for topic in os.listdir(root):
        tdir = os.path.join(root, topic)
        if not os.path.isdir(tdir):
            continue
        for qid in os.listdir(tdir):
            if not qid.isdigit():
                continue
            cq = dispatcher.cq(topic, int(qid))
            short: list[str] = []
            cq.files = load_offset_files(cq.directory, cq.file_size, "consume queue", False, short)
            if short:  # units after a torn file cannot be trusted to be contiguous: rebuild them
                first = next(i for i, mf in enumerate(cq.files) if mf.path in short)
                for mf in cq.files[first + 1 :]:
                    mf.destroy(force=True)
                del cq.files[first + 1 :]
            _find_queue_end(cq)
            if short:  # torn queue: the scan must start no later than what it still holds
                dispatcher.rebuild_from = min(dispatcher.rebuild_from, cq.max_phys_end)
            _find_queue_min(cq, commitlog_min)


def _unit_size_at(mf: MappedFile, i: int) -> int:
    return UNIT.unpack_from(mf.mm, i * UNIT_SIZE)[1]


def _find_queue_end(cq: ConsumeQueue) -> None:
    while cq.files:
        mf = cq.files[-1]
        n = mf.size // UNIT_SIZE
        lo, hi = 0, n  # first unit with size 0 (units are prefix-filled, pre-blank included)
        while lo < hi:
            mid = (lo + hi) // 2
            if _unit_size_at(mf, mid) != 0:
                lo = mid + 1
            else:
                hi = mid
        if lo > 0 or len(cq.files) == 1:
            mf.recover_position(lo * UNIT_SIZE)
            cq.next_offset = (mf.base_offset + mf.wrote) // UNIT_SIZE
            if lo > 0:
                phys, size, _ = UNIT.unpack_from(mf.mm, (lo - 1) * UNIT_SIZE)
                cq.max_phys_end = phys + size if size != PRE_BLANK_SIZE else 0
            return
        cq.files.pop().destroy()  # an empty trailing file
    cq.next_offset = 0


def _find_queue_min(cq: ConsumeQueue, commitlog_min: int) -> None:
    """First unit that is not a pre-blank and points at stored commitlog data."""
    if not cq.files:
        return
    for mf in cq.files[:-1]:
        mf.recover_position(mf.size)
    first = cq.files[0]
    lo, hi = 0, first.wrote // UNIT_SIZE
    while lo < hi:
        mid = (lo + hi) // 2
        phys, size, _ = UNIT.unpack_from(first.mm, mid * UNIT_SIZE)
        if size == PRE_BLANK_SIZE or phys < commitlog_min:
            lo = mid + 1
        else:
            hi = mid
    cq.min_offset = min((first.base_offset // UNIT_SIZE) + lo, cq.next_offset)


#: A valid record as the dispatcher needs it: (size, queue id, queue offset, store timestamp, topic,
#: properties); topic and properties are "" unless asked for.
StoredRecord = tuple[int, int, int, int, str, str]


@twin
def read_record(
    buf: memoryview | bytes | bytearray, pos: int, room: int, phys: int, check_crc: bool, text: bool
) -> StoredRecord | int:
    """Check the record at ``buf[pos:]``, ``room`` bytes before its file ends, as recovery and replicas
    check records: magic, sizes, physical offset ``phys``, body CRC (``check_crc``). The record
    (with its topic and properties decoded when ``text``), 0 for a blank tail or the file's end, -1
    if it is not a valid record (compiled twin in ``_speedups``).

    Raises:
        ValueError: ``pos`` and ``room`` are not within ``buf``.
    """
    view = memoryview(buf)
    if pos < 0 or room < 0 or pos + room > len(view):
        raise ValueError(f"{room} bytes at {pos} are not within a {len(view)}-byte buffer")
    if room < 8:
        return 0 if room == 0 else -1
    total, magic = int.from_bytes(view[pos : pos + 4], "big"), int.from_bytes(view[pos + 4 : pos + 8], "big")
    if magic == BLANK_MAGIC:
        return 0 if total == room else -1
    if magic != MESSAGE_MAGIC or total > room or total < HEAD_SIZE + 3 or room < HEAD_SIZE:
        return -1
    fields = RECORD_HEAD.unpack_from(view, pos)
    body_len = fields[14]
    if fields[6] != phys or HEAD_SIZE + body_len + 3 > total:
        return -1
    t_pos = pos + HEAD_SIZE + body_len
    p_pos = t_pos + 1 + view[t_pos]
    if p_pos + 2 - pos > total or p_pos + 2 + int.from_bytes(view[p_pos : p_pos + 2], "big") - pos != total:
        return -1
    if check_crc and body_crc(view[pos + HEAD_SIZE : t_pos]) != fields[2]:
        return -1
    if not text:
        return total, fields[3], fields[5], fields[10], "", ""
    topic = bytes(view[t_pos + 1 : p_pos]).decode(errors="replace")
    props = bytes(view[p_pos + 2 : pos + total]).decode(errors="replace")
    return total, fields[3], fields[5], fields[10], topic, props


def scan_start(commitlog: CommitLog, dispatched: int, flushed: int | None) -> int:
    """Where the recovery scan starts: the start of the file holding the earliest point to check."""
    point = dispatched if flushed is None else min(dispatched, flushed)
    point = max(point, commitlog.min_offset)
    files = commitlog.files
    if files:
        last = files[-1]
        if len(files) > 1 and not any(last.view[:8]):  # an unused pre-allocated file: check the one before
            last = files[-2]
        point = min(point, last.base_offset)
    return point - (point - commitlog.min_offset) % commitlog.file_size


def zero_garbage(mf: MappedFile, pos: int) -> None:
    """Zero non-zero pages after ``pos`` in a bounded window so stale bytes never look like records."""
    end = min(mf.size, pos + ZERO_WINDOW_BYTES)
    first_page_end = min(end, (pos // _PAGE + 1) * _PAGE)
    mf.mm[pos:first_page_end] = bytes(first_page_end - pos)
    p = first_page_end
    while p < end:
        q = min(end, p + _PAGE)
        if mf.view[p:q] != _ZERO_PAGE[: q - p]:
            mf.mm[p:q] = bytes(q - p)
        p = q


def _dispatched_point(dispatcher: Dispatcher) -> int:
    """Commitlog offset up to which consume queues (and the index) hold every record."""
    point = max((cq.max_phys_end for cq in dispatcher.cqs.values()), default=0)
    point = min(point, dispatcher.rebuild_from)
    if dispatcher.index is not None:
        point = min(point, max(dispatcher.index.end_phys, 0))
    return point


@twin
def redispatch(d: Dispatcher, record: StoredRecord, phys: int) -> None:
    """Hand one valid record (read with its text) at ``phys`` to the dispatcher ``d`` (which skips what
    its queue and the index hold). The compiled twin in ``_speedups`` takes a record whose queue
    exists and is at its end with room in its last file as ``dispatch_run`` does, in C."""
    total, queue_id, queue_offset, store_ts, topic, props = record
    d.dispatch(d.cq(topic, queue_id), queue_offset, phys, total, None, props, store_ts)


def recover(
    commitlog: CommitLog,
    dispatcher: Dispatcher,
    flushed: tuple[int, int] | None,
    check_crc: bool,
    rebooted: bool = False,
) -> int:
    """Scan, re-dispatch and cut the commitlog (recovery thread).

    Args:
        commitlog: with its files loaded.
        dispatcher: with consume queues and index loaded, no allocator attached (files are created inline).
        flushed: the checkpoint's (flushed offset, dispatched offset) after an abnormal stop, None
            after a clean stop.
        check_crc: verify body CRCs.
        rebooted: the machine rebooted since the checkpoint was written: the dispatched offset is
            the durable one, and the units and index entries past it, which lived in the lost page
            cache, may be missing or torn on disk: they are cut and dispatched again.

    Returns:
        The commitlog offset where the valid records end.
    """
    if not commitlog.files:
        _drop_all(dispatcher)
        return 0
    if rebooted and flushed is not None:
        _cut_dispatch(dispatcher, flushed[1])
    dispatched = _dispatched_point(dispatcher)
    if flushed is not None:  # abnormal stop: units that waited in memory for a file were lost
        dispatched = min(dispatched, flushed[1])
    off = scan_start(commitlog, dispatched, flushed[0] if flushed is not None else None)
    count = 0
    while True:
        mf = commitlog.file_for(off)
        if mf is None:
            break
        pos = off - mf.base_offset
        rec = read_record(mf.view, pos, mf.size - pos, off, check_crc, off >= dispatched)
        if rec == 0:
            mf.recover_position(mf.size)
            off = mf.end_offset
            continue
        if isinstance(rec, int):
            _log_cut(mf, pos, off)
            break
        total = rec[0]
        if off + total > dispatched:  # before that point queues and index hold every record
            if off < dispatched:  # the one record across that point: read again with its text
                rec = read_record(mf.view, pos, mf.size - pos, off, check_crc, True)
                assert not isinstance(rec, int)
            redispatch(dispatcher, rec, off)
        mf.recover_position(pos + total)
        off += total
        count += 1
    _truncate(commitlog, dispatcher, off)
    log.info("recovery checked %d records; commitlog ends at %d", count, off)
    return off


def _cut_dispatch(dispatcher: Dispatcher, point: int) -> None:
    """Drop every consume-queue unit of a record ending past ``point`` and index again from it."""
    log.warning(
        "the machine rebooted since the last start: consume queues and index are rebuilt from %d", point
    )
    for cq in dispatcher.cqs.values():
        if cq.max_phys_end > point:
            cq.truncate_to_phys(point)
    if dispatcher.index is not None:
        dispatcher.index.forget_from(point)


def _drop_all(dispatcher: Dispatcher) -> None:
    """No commitlog at all: queues and index point at nothing, so they start over."""
    index = dispatcher.index
    if not any(cq.files for cq in dispatcher.cqs.values()) and not (index and index.files):
        return
    log.warning("store has consume queues or index files but no commitlog; dropping them")
    for cq in dispatcher.cqs.values():
        for mf in cq.files:
            mf.destroy(force=True)
        cq.files = []
        cq.next_offset = cq.min_offset = cq.max_phys_end = 0
    if index is not None:
        for f in index.files:
            f.mf.destroy(force=True)
        index.files = []
        index.last_phys = -1


def _log_cut(mf: MappedFile, pos: int, off: int) -> None:
    if any(mf.view[pos : min(mf.size, pos + 64)]):
        log.warning(
            "commitlog %s: invalid or torn record at file position %d (offset %d); cutting the log there",
            mf.path,
            pos,
            off,
        )


def _truncate(commitlog: CommitLog, dispatcher: Dispatcher, end: int) -> None:
    keep = [mf for mf in commitlog.files if mf.base_offset <= end]
    for mf in commitlog.files[len(keep) :]:
        log.warning("deleting commitlog file %s past the valid end %d", mf.path, end)
        mf.destroy(force=True)
    commitlog.files = keep
    if keep:
        last = keep[-1]
        last.recover_position(end - last.base_offset)
        for mf in keep[:-1]:
            mf.recover_position(mf.size)
        if last.wrote < last.size:
            zero_garbage(last, last.wrote)
    commitlog.flushed_offset = end
    if dispatcher.index is not None:
        dispatcher.index.forget_from(end)
    for cq in dispatcher.cqs.values():
        if cq.max_phys_end > end:
            before = cq.next_offset
            cq.truncate_to_phys(end)
            log.warning(
                "consume queue %s/%d cut from %d to %d units (past the commitlog end)",
                cq.topic,
                cq.queue_id,
                before,
                cq.next_offset,
            )


def base_pages_at_write_ends(commitlog: CommitLog, dispatcher: Dispatcher) -> None:
    """Cache the parts of the files still to be written in base pages (recovery thread, at its end).

    The last commitlog file from its write position (its files were mapped for the scan, with
    read-ahead), the last file of every consume queue from its end and the newest index file from
    its next entry: see ``MappedFile.base_pages_from``. Files the store creates from now on are
    mapped that way from the start.
    """
    if commitlog.files:
        last = commitlog.files[-1]
        last.base_pages_from(last.wrote)
        log.debug("commitlog %s is cached in base pages from %d", last.path, last.wrote)
    for cq in dispatcher.cqs.values():
        if cq.files:
            cq.files[-1].base_pages_from(cq.files[-1].wrote)
    index = dispatcher.index
    if index is not None and index.files:
        newest = index.files[-1]
        newest.mf.base_pages_from(newest.entries_pos + newest.index_count * ENTRY_SIZE)


def load_index_files(directory: str, size: int) -> list[MappedFile]:
    """Map the index files (named by creation time) of ``directory``, oldest first."""
    if not os.path.isdir(directory):
        return []
    out = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not (len(name) == 17 and name.isdigit()):
            continue
        if os.path.getsize(path) != size:
            set_aside(path, f"has a size other than the configured index size {size}")
            continue
        out.append(MappedFile.open(path, 0, size))
    return out


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.store import _speedups

    same_signature(read_record)(_speedups.read_record)
    same_signature(_speedups.read_record)(read_record)
    same_signature(redispatch)(_speedups.redispatch)
    same_signature(_speedups.redispatch)(redispatch)
