"""Index files: hash index from ``topic#key`` to commitlog offsets (RocketMQ's IndexFile layout).

File layout (big-endian)::

    header (40 B): beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 | endPhyOffset i64 |
                   hashSlotCount i32 | indexCount i32
    slots:         maxHashSlotNum x i32 (latest entry number of the bucket, 0 = empty)
    entries:       maxIndexNum x (keyHash i32 | phyOffset i64 | timeDiffSeconds i32 | prevIndex i32)

Entry 0 is unused (indexCount starts at 1). Keys are ``topic#UNIQ_KEY`` and ``topic#k`` for each KEYS
word. Files are named by creation time ``yyyyMMddHHmmssSSS``. The header's end fields are updated
after every dispatched message, so recovery knows where indexing stopped. The index is a hint:
queries re-check every candidate record's topic and keys.
"""

from __future__ import annotations

import itertools
import os
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.broker.store.mapped_file import MappedFile, WriteBackPacer
from rocketpy.broker.store.props import index_keys
from rocketpy.filter.tags import POW31, java_string_hash, key_hash_u32, topic_key_hash
from rocketpy.message_props import KEYS_SEP, UNIQ_SEP, get_property

if TYPE_CHECKING:
    from mmap import mmap

    from rocketpy.broker.store.allocate import AllocateService

HEADER = struct.Struct(">qqqqii")  # begin ts | end ts | begin phys | end phys | slot count | index count
HEADER_SIZE = HEADER.size
SLOT = struct.Struct(">i")
SLOT_SIZE = 4
ENTRY = struct.Struct(">iqii")  # key hash | phys offset | time diff seconds | prev index
ENTRY_SIZE = ENTRY.size
I64 = struct.Struct(">q")
MAX_PENDING_ENTRIES = 1 << 20
_pack_entry = ENTRY.pack_into
_pack_slot = SLOT.pack_into
_unpack_slot = SLOT.unpack_from
HEADER_SYNC_EVERY = 64  # header end fields written every N messages; recovery scans past them


@twin
def put_unique_key_entry(
    mm: mmap | bytearray,
    props: str,
    topic_hash: int,
    phys: int,
    time_diff: int,
    count: int,
    slots: int,
    entries_pos: int,
) -> bool:
    """Write entry ``count`` for a message whose one index key is its UNIQ_KEY and link it into its
    slot (the put path's common case; compiled twin in ``_speedups``).

    ``topic_hash`` is the unsigned hash of ``topic + "#"``. False, with nothing written, when the
    message has KEYS, no UNIQ_KEY, or one that is not ASCII or longer than 64 characters: the caller
    indexes those through ``IndexService.put_message``.
    """
    if KEYS_SEP in props:
        return False
    uniq = get_property(props, UNIQ_SEP)
    if not uniq or len(uniq) > 64 or not uniq.isascii():
        return False
    kh, n = key_hash_u32(uniq)  # == java_string_hash(topic + "#" + uniq) with the topic part below
    h = (topic_hash * POW31[n] + kh) & 0xFFFFFFFF
    h = (0x100000000 - h if h & 0x80000000 else h) & 0x7FFFFFFF  # abs() of the signed hash
    slot_pos = HEADER_SIZE + (h % slots) * SLOT_SIZE
    _pack_entry(mm, entries_pos + count * ENTRY_SIZE, h, phys, time_diff, _unpack_slot(mm, slot_pos)[0])
    _pack_slot(mm, slot_pos, count)
    return True


@twin
def put_key_entries(
    mm: mmap | bytearray,
    props: str,
    topic_hash: int,
    phys: int,
    time_diff: int,
    count: int,
    slots: int,
    entries_pos: int,
    room: int,
) -> int:
    """Write entries ``count``, ``count + 1``, ... for every index key of a message (each KEYS word,
    then its UNIQ_KEY: ``index_keys``' order), each linked into its slot; return how many.

    The entries ``IndexService.put_message`` writes, in one call (compiled twin in ``_indexkeys``: a
    trace message has hundreds of keys). -1, with nothing written, when they do not all fit in
    ``room`` entries or ``props`` is not all Latin-1: the caller indexes those through
    ``put_message``. ``topic_hash`` is the unsigned hash of ``topic + "#"``.
    """
    if not props.isascii():
        try:
            props.encode("latin-1")
        except UnicodeEncodeError:
            return -1
    if slots <= 0:
        raise ZeroDivisionError("integer modulo by zero") if slots == 0 else ValueError("negative slot count")
    keys = index_keys(props)
    if len(keys) > room or count + len(keys) - 1 > 0x7FFFFFFF:
        return -1
    if not keys:
        return 0
    size = len(mm)
    if (
        count < 0
        or entries_pos > size
        or slots > size
        or entries_pos + (count + len(keys)) * ENTRY_SIZE > size
        or HEADER_SIZE + slots * SLOT_SIZE > size
    ):
        raise struct.error(
            f"{len(keys)} index entries from {count} or {slots} slots are outside a {size}-byte file"
        )
    n = count
    for key in keys:
        kh, k = key_hash_u32(key)  # == java_string_hash(topic + "#" + key) with the topic part below
        h = (topic_hash * (POW31[k] if k <= 256 else pow(31, k, 1 << 32)) + kh) & 0xFFFFFFFF
        h = (0x100000000 - h if h & 0x80000000 else h) & 0x7FFFFFFF  # abs() of the signed hash
        slot_pos = HEADER_SIZE + (h % slots) * SLOT_SIZE
        _pack_entry(mm, entries_pos + n * ENTRY_SIZE, h, phys, time_diff, _unpack_slot(mm, slot_pos)[0])
        _pack_slot(mm, slot_pos, n)
        n += 1
    return n - count


def index_file_size(slots: int, entries: int) -> int:
    """Bytes of an index file with ``slots`` hash slots and ``entries`` entries."""
    return HEADER_SIZE + slots * SLOT_SIZE + entries * ENTRY_SIZE


class IndexFile:
    """One index file: header fields mirrored in attributes, written through to the mmap."""

    __slots__ = (
        "begin_phys",
        "begin_ts",
        "end_phys",
        "end_ts",
        "entries_pos",
        "index_count",
        "max_index",
        "mf",
        "mm",
        "slots",
    )

    def __init__(self, mf: MappedFile, slots: int, max_index: int) -> None:
        self.mf = mf
        self.mm = mf.mm
        self.slots = slots
        self.max_index = max_index
        self.entries_pos = HEADER_SIZE + slots * SLOT_SIZE
        b_ts, e_ts, b_phys, e_phys, _slot_count, count = HEADER.unpack_from(mf.mm, 0)
        if count <= 0 or count > max_index:  # new file, or a header that cannot be trusted
            b_ts = e_ts = b_phys = e_phys = 0
            count = 1
        self.begin_ts, self.end_ts, self.begin_phys, self.end_phys = b_ts, e_ts, b_phys, e_phys
        self.index_count = count
        self._recount()

    def _recount(self) -> None:
        """Count entries written after the header was last synced (after a crash the header lags)."""
        base = HEADER_SIZE + self.slots * SLOT_SIZE
        mm = self.mf.mm
        while self.index_count < self.max_index:
            pos = base + self.index_count * ENTRY_SIZE
            if not any(mm[pos : pos + ENTRY_SIZE]):
                break
            _h, phys, diff, _prev = ENTRY.unpack_from(mm, pos)
            if phys > self.end_phys:
                self.end_phys, self.end_ts = phys, self.begin_ts + diff * 1000
            self.index_count += 1

    @property
    def full(self) -> bool:
        """True when no entry is left."""
        return self.index_count >= self.max_index

    def put(self, key_hash: int, phys: int, store_ts: int) -> None:
        """Append one entry and link it into its bucket (caller checks ``full``)."""
        mm = self.mm
        n = self.index_count
        if n == 1:
            self.begin_ts, self.begin_phys = store_ts, phys
            self.write_header(store_ts, phys)  # entries store times relative to begin_ts
        slot_pos = HEADER_SIZE + (key_hash % self.slots) * SLOT_SIZE
        diff = (store_ts - self.begin_ts) // 1000
        _pack_entry(mm, self.entries_pos + n * ENTRY_SIZE, key_hash, phys, diff if diff > 0 else 0,
                    _unpack_slot(mm, slot_pos)[0])  # fmt: skip
        _pack_slot(mm, slot_pos, n)
        self.index_count = n + 1

    def write_header(self, store_ts: int, phys: int) -> None:
        """Record the last dispatched message (even one without keys) in the header."""
        self.end_ts, self.end_phys = store_ts, phys
        HEADER.pack_into(
            self.mf.mm, 0, self.begin_ts, store_ts, self.begin_phys, phys, self.slots, self.index_count
        )

    def lookup(self, key_hash: int, begin_ts: int, end_ts: int, max_num: int) -> list[int]:
        """Commitlog offsets of entries with ``key_hash`` stored in [begin_ts, end_ts], newest first."""
        mm = self.mf.mm
        out: list[int] = []
        n = SLOT.unpack_from(mm, HEADER_SIZE + (key_hash % self.slots) * SLOT_SIZE)[0]
        entries_pos = HEADER_SIZE + self.slots * SLOT_SIZE
        steps = 0
        while 0 < n < self.index_count and len(out) < max_num and steps < self.max_index:
            h, phys, diff, prev = ENTRY.unpack_from(mm, entries_pos + n * ENTRY_SIZE)
            ts = self.begin_ts + diff * 1000
            if h == key_hash and begin_ts - 999 <= ts <= end_ts:
                out.append(phys)
            if prev >= n:
                break
            n = prev
            steps += 1
        return out


class IndexService:
    """The index files of a store; the newest takes new entries.

    Args:
        directory: the index directory.
        slots: hash slots per file.
        max_index: entries per file.
        clock: seconds clock (names new files).
    """

    def __init__(self, directory: str, slots: int, max_index: int, clock: Callable[[], float]) -> None:
        self.directory = directory
        self.slots = slots
        self.max_index = max_index
        self.file_size = index_file_size(slots, max_index)
        self.clock = clock
        self.files: list[IndexFile] = []
        self._allocator: AllocateService | None = None
        self._pending: list[tuple[int, int, int]] = []
        # The waiting entries by key hash, so a query finds them without scanning the list: a message
        # is findable from its put on, also while the first file (or the next) is still being created.
        self._pending_by_hash: dict[int, list[tuple[int, int]]] = {}
        self._requested = False
        self._unsynced = 0
        self._topic_hashes: dict[str, int] = {}
        # Commitlog offset of the last record indexed: recovery re-dispatches from before it, and a
        # record at or before it is not indexed twice (RocketMQ's buildIndex skips the same way).
        self.last_phys = -1
        self._last_flushed: IndexFile | None = None

    @property
    def end_phys(self) -> int:
        """Commitlog offset of the last dispatched message (-1 when none)."""
        for f in reversed(self.files):
            if f.end_ts:
                return f.end_phys
        return -1

    def load(self, files: list[MappedFile]) -> None:
        """Adopt existing index files (recovery thread), oldest first."""
        self.files = [IndexFile(mf, self.slots, self.max_index) for mf in files]
        self.last_phys = self.end_phys

    def forget_from(self, phys: int) -> None:
        """The commitlog was cut at ``phys`` (recovery): records written there from now on are indexed.

        Entries already pointing past the cut stay; the index is a hint, queries re-check records.
        """
        self.last_phys = min(self.last_phys, phys - 1)

    def attach_allocator(self, allocator: AllocateService) -> None:
        """From now on create files through ``allocator``."""
        self._allocator = allocator

    def put_message(self, topic: str, keys: list[str], phys: int, store_ts: int) -> None:
        """Index one message's keys (hot path)."""
        cur = self.files[-1] if self.files else None
        th = self._topic_hashes.get(topic) if keys else 0
        if th is None:
            th = self._topic_hash(topic)
        for key in keys:
            kh, n = key_hash_u32(key)  # == java_string_hash(topic + "#" + key), unsigned
            h = (th * (POW31[n] if n <= 256 else pow(31, n, 1 << 32)) + kh) & 0xFFFFFFFF
            h = (0x100000000 - h if h & 0x80000000 else h) & 0x7FFFFFFF  # abs() of the signed hash
            if cur is None or cur.index_count >= cur.max_index or self._pending:
                self._enqueue(h, phys, store_ts)
                cur = self.files[-1] if self.files else None
            else:
                cur.put(h, phys, store_ts)
        if cur is not None and not self._pending:  # waiting entries: the header must not pass them
            cur.end_ts, cur.end_phys = store_ts, phys
            self._unsynced += 1
            if self._unsynced >= HEADER_SYNC_EVERY:
                cur.write_header(store_ts, phys)
                self._unsynced = 0

    def put_props(self, topic: str, props: str, phys: int, store_ts: int) -> None:
        """Index one message straight from its properties string: the dispatcher's one indexing call.

        The common case (one key, the UNIQ_KEY; the newest file ready with room, nothing waiting)
        writes its entry with ``put_unique_key_entry``; every other case goes through
        ``put_message``. Same entries, same hash values either way. A record already indexed
        (``last_phys``) is skipped.
        """
        if phys <= self.last_phys:
            return
        self.last_phys = phys
        cur = self.files[-1] if self.files else None
        if cur is None or self._pending or not props or not 1 < cur.index_count < cur.max_index:
            self.put_message(topic, index_keys(props) if props else [], phys, store_ts)
            return
        th = self._topic_hashes.get(topic)
        if th is None:
            th = self._topic_hash(topic)
        diff = (store_ts - cur.begin_ts) // 1000
        diff = diff if diff > 0 else 0
        n = cur.index_count
        if put_unique_key_entry(cur.mm, props, th, phys, diff, n, cur.slots, cur.entries_pos):
            cur.index_count = n + 1
        else:  # keys besides the UNIQ_KEY (a trace message has hundreds): all in one call when they fit
            written = put_key_entries(
                cur.mm, props, th, phys, diff, n, cur.slots, cur.entries_pos, cur.max_index - n
            )
            if written < 0:
                self.put_message(topic, index_keys(props), phys, store_ts)
                return
            cur.index_count = n + written
        cur.end_ts, cur.end_phys = store_ts, phys
        self._unsynced += 1
        if self._unsynced >= HEADER_SYNC_EVERY:
            cur.write_header(store_ts, phys)
            self._unsynced = 0

    def _topic_hash(self, topic: str) -> int:
        th = java_string_hash(topic + "#") & 0xFFFFFFFF
        if len(self._topic_hashes) < 100_000:
            self._topic_hashes[topic] = th
        return th

    def _enqueue(self, h: int, phys: int, store_ts: int) -> None:
        if len(self._pending) < MAX_PENDING_ENTRIES:
            self._pending.append((h, phys, store_ts))
            self._pending_by_hash.setdefault(h, []).append((phys, store_ts))
        self._request_file()

    def retry_file(self) -> None:
        """Ask again for a file for the waiting entries, after its creation failed (on the loop)."""
        if self._pending:
            self._request_file()

    def _request_file(self) -> None:
        if self._requested:
            return
        ts_ms = int(self.clock() * 1000)
        if self.files:
            ts_ms = max(ts_ms, _name_ms(self.files[-1].mf.path) + 1)
        path = os.path.join(
            self.directory,
            time.strftime("%Y%m%d%H%M%S", time.localtime(ts_ms / 1000)) + f"{ts_ms % 1000:03d}",
        )
        if self._allocator is None:
            os.makedirs(self.directory, exist_ok=True)
            self._on_file(MappedFile.open(path, 0, self.file_size), None)
            return
        self._requested = True
        self._allocator.request(path, 0, self.file_size, self._on_file)

    def _on_file(self, mf: MappedFile | None, err: BaseException | None) -> None:
        self._requested = False
        if mf is None:  # reported by the allocator (the store turns read-only); ``retry_file`` asks again
            return
        self.files.append(IndexFile(mf, self.slots, self.max_index))
        pending, self._pending = self._pending, []
        self._pending_by_hash = {}
        for h, phys, ts in pending:
            cur = self.files[-1]
            if cur.full:
                self._enqueue(h, phys, ts)
            else:
                cur.put(h, phys, ts)
                cur.write_header(ts, phys)

    def lookup(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> list[int]:
        """Candidate commitlog offsets for ``key`` (newest first; the caller re-checks records)."""
        h = topic_key_hash(topic, key)
        h = (-h if h < 0 else h) & 0x7FFFFFFF
        waiting = self._pending_by_hash.get(h, ())
        out = list(itertools.islice((p for p, ts in reversed(waiting) if begin_ts <= ts <= end_ts), max_num))
        for f in reversed(self.files):
            if len(out) >= max_num:
                break
            if f.index_count <= 1 or f.begin_ts > end_ts:
                continue
            out.extend(f.lookup(h, begin_ts, end_ts, max_num - len(out)))
        return out

    def sync_header(self) -> None:
        """Write the newest file's header from its in-memory fields (loop, before a flush)."""
        if self.files:
            f = self.files[-1]
            f.write_header(f.end_ts, f.end_phys)
            self._unsynced = 0

    def flush(self, pacer: WriteBackPacer | None = None) -> None:
        """Sync the header and fdatasync the files written since the last flush (blocking: flush
        thread); ``pacer`` writes their slots and entries back first.

        Writing the header from this thread races benignly with the loop: both write whole,
        valid snapshots, and recovery recounts entries past the header anyway.
        """
        files = list(self.files)
        if not files:
            return
        self.sync_header()
        last = self._last_flushed  # the newest file at the last flush: it may have been written since
        first = next((i for i, f in enumerate(files) if f is last), 0)
        for f in files[first:]:
            if pacer is not None:
                pacer.write_back(f.mf, 0, f.entries_pos + f.index_count * ENTRY_SIZE)
            f.mf.flush()
        self._last_flushed = files[-1]  # full files are not written again

    def close(self) -> None:
        """Unmap every file (blocking)."""
        self.sync_header()
        for f in self.files:
            f.mf.close()


def _name_ms(path: str) -> int:
    name = os.path.basename(path)
    try:
        t = time.mktime(time.strptime(name[:14], "%Y%m%d%H%M%S"))
        return int(t * 1000) + int(name[14:17])
    except ValueError:
        return 0


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.store import _indexkeys, _speedups

    same_signature(put_unique_key_entry)(_speedups.put_unique_key_entry)
    same_signature(_speedups.put_unique_key_entry)(put_unique_key_entry)
    same_signature(put_key_entries)(_indexkeys.put_key_entries)
    same_signature(_indexkeys.put_key_entries)(put_key_entries)
