# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the store's put and recovery loops (``rocketpy/broker/store/``).

``append_records`` (``commitlog.py``: the append callback, each record packed by the record layer's
C encoder, cimported from ``rocketpy._speedups``), ``tags_hash`` (``props.py``),
``put_unique_key_entry`` (``index.py``), ``read_record`` and ``redispatch`` (``recovery.py``) and
``dispatch_run`` (``dispatch.py``), and ``group_commit_sync`` (``flush.py``: the SYNC_FLUSH flush
thread's wait, sync and answer with the GIL released). ``rocketpy._accel`` chooses them or their pure
twins.

Layout constants, result types and the pure twins a function hands its uncommon cases to
(``rocketpy._accel.PURE``) are read from ``rocketpy.broker.store`` and the layer below it
(``rocketpy.record``, ``rocketpy.topic``) the first time a function runs (``_bind_*``), never from the
rest of the broker: ``rocketpy._accel`` loads this module before those exist. Every buffer access is
bounds-checked before it happens: no input may crash the process.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.list cimport PyList_Append
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.math cimport ceil, fmin
from libc.string cimport strerror

from rocketpy._cshared cimport (
    _contains, _crc32, _get_u32, _get_u64, _int, _latin1, _property_value, _put_u32, _put_u64, _struct_error,
    _writable,
)
from rocketpy._speedups cimport _bind_record, _pack_record

__all__ = [
    "append_records", "tags_hash", "put_unique_key_entry", "read_record", "dispatch_run", "redispatch",
    "group_commit_sync",
]


# -- the commitlog's append callback --------------------------------------------------------------
cdef bint _commitlog_bound = False
cdef Py_ssize_t END_FILE_MIN_BLANK_BYTES = 0
cdef object _pack_blank = None
cdef object _END_OF_FILE = None
cdef object _PUT_OK = None
cdef object _PutMessageResult = None


cdef int _bind_commitlog() except -1:
    global _commitlog_bound, END_FILE_MIN_BLANK_BYTES, _pack_blank, _END_OF_FILE, _PUT_OK, _PutMessageResult
    from rocketpy.broker.store import commitlog

    _bind_record()  # the record module's layout, which _pack_record writes
    END_FILE_MIN_BLANK_BYTES = commitlog.END_FILE_MIN_BLANK_BYTES
    _pack_blank = commitlog.pack_blank
    _END_OF_FILE = commitlog._END_OF_FILE
    _PUT_OK = commitlog._PUT_OK
    _PutMessageResult = commitlog.PutMessageResult
    _commitlog_bound = True
    return 0


def append_records(mm, Py_ssize_t base_offset, Py_ssize_t pos, Py_ssize_t room, batch):
    """``batch`` as records at ``mm[pos:]`` (twin of ``rocketpy.broker.store.commitlog.append_records``)."""
    if not _commitlog_bound:
        _bind_commitlog()
    msgs, topic_b, props, total, cq, store_ts, host8 = batch
    if total + END_FILE_MIN_BLANK_BYTES > room:
        if room >= END_FILE_MIN_BLANK_BYTES:
            _pack_blank(mm, pos, room)
        return room, _END_OF_FILE
    queue_offset = cq.next_offset
    cdef Py_ssize_t start = pos, size, i = 0
    cdef list sizes = []
    cdef Py_buffer out
    _writable(mm, &out)
    try:
        for m in msgs:
            size = _pack_record(&out, pos, topic_b, props[i], m.body, m.queue_id, m.flag, queue_offset + i,
                                base_offset + pos, m.sys_flag, m.born_timestamp, m.born_host8, store_ts, host8,
                                m.reconsume_times, m.prepared_transaction_offset)
            PyList_Append(sizes, size)
            pos += size
            i += 1
    finally:
        PyBuffer_Release(&out)
    if pos - start != total:
        raise AssertionError("batch size does not match its records")
    return total, _put_ok(base_offset + start, total, queue_offset, store_ts, host8, sizes)


cdef object _put_ok(object wrote_offset, object total, object queue_offset, object store_ts, object host8,
                    list sizes):
    """``PutMessageResult(PUT_OK, "", wrote_offset, total, queue_offset, store_ts, len(sizes), host8,
    sizes)`` without its ``__init__`` frame."""
    r = _PutMessageResult.__new__(_PutMessageResult)
    r.status = _PUT_OK
    r.remark = ""
    r.wrote_offset = wrote_offset
    r.wrote_bytes = total
    r.queue_offset = queue_offset
    r.store_timestamp = store_ts
    r.msg_num = len(sizes)
    r._host8 = host8
    r.sizes = sizes
    return r


# -- the put path's property reads (twins of rocketpy.broker.store.props.tags_hash and ---------------
# -- rocketpy.broker.store.index.put_unique_key_entry) ---------------------------------------------
cdef bint _put_path_bound = False
cdef object _pure_tags_hash = None
cdef object _pure_put_unique_key_entry = None
cdef Py_ssize_t INDEX_HEADER_SIZE = 0
cdef Py_ssize_t INDEX_SLOT_SIZE = 0
cdef Py_ssize_t INDEX_ENTRY_SIZE = 0


cdef int _bind_put_path() except -1:
    global _put_path_bound, _pure_tags_hash, _pure_put_unique_key_entry
    global INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, INDEX_ENTRY_SIZE
    from rocketpy._accel import PURE
    from rocketpy.broker.store import index

    if index.SLOT_SIZE != 4 or index.ENTRY_SIZE != 20 or index.HEADER_SIZE != 40:
        raise ImportError("rocketpy.broker.store._speedups was built for another index layout; rebuild it")
    INDEX_HEADER_SIZE = index.HEADER_SIZE
    INDEX_SLOT_SIZE = index.SLOT_SIZE
    INDEX_ENTRY_SIZE = index.ENTRY_SIZE
    _pure_tags_hash = PURE["tags_hash"]
    _pure_put_unique_key_entry = PURE["put_unique_key_entry"]
    _put_path_bound = True
    return 0


cdef inline int32_t _tags_code(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Java ``hashCode`` of the TAGS value of the Latin-1 properties ``p[:n]``, 0 without one."""
    cdef Py_ssize_t end = 0
    cdef Py_ssize_t start = _property_value(p, n, b"TAGS\x01", 5, &end)
    cdef uint32_t h = 0
    if start < 0:
        return 0
    while start < end:  # Latin-1 code points are their own UTF-16 units
        h = 31 * h + p[start]
        start += 1
    return <int32_t>h


def tags_hash(str props):
    """Java ``hashCode`` of the TAGS value, 0 without one (twin of ``rocketpy.broker.store.props.tags_hash``)."""
    if not _put_path_bound:
        _bind_put_path()
    cdef Py_ssize_t n
    cdef const unsigned char* p = _latin1(props, &n)
    if p == NULL:
        return _pure_tags_hash(props)
    return _tags_code(p, n)


cdef inline Py_ssize_t _unique_key(const unsigned char* p, Py_ssize_t n, Py_ssize_t* end) noexcept nogil:
    """Where the UNIQ_KEY of the Latin-1 properties ``p[:n]`` starts when it is the message's one index
    key (-1: KEYS present, no UNIQ_KEY, or one not ASCII or longer than 64); ``end`` gets its end."""
    cdef Py_ssize_t start, i
    if _contains(p, n, b"KEYS\x01", 5):
        return -1
    start = _property_value(p, n, b"UNIQ_KEY\x01", 9, end)
    if start < 0 or end[0] == start or end[0] - start > 64:
        return -1
    for i in range(start, end[0]):
        if p[i] >= 128:
            return -1
    return start


cdef int _write_key_entry(object mm, const unsigned char* key, Py_ssize_t k, uint32_t h, int64_t phys,
                          int32_t diff, int32_t count, int64_t slots, Py_ssize_t entries_pos) except -1:
    """Hash ``key[:k]`` onto ``h`` (the topic part), write entry ``count`` and link it into its slot."""
    cdef Py_ssize_t i, slot_pos, entry_pos
    cdef Py_buffer out
    cdef unsigned char* q
    for i in range(k):
        h = 31 * h + key[i]
    if h & 0x80000000:
        h = 0 - h  # abs() of the signed hash, as uint32 arithmetic
    h &= 0x7FFFFFFF
    if slots <= 0:
        raise ZeroDivisionError("integer modulo by zero") if slots == 0 else ValueError("negative slot count")
    slot_pos = INDEX_HEADER_SIZE + <Py_ssize_t>(h % slots) * INDEX_SLOT_SIZE
    entry_pos = entries_pos + <Py_ssize_t>count * INDEX_ENTRY_SIZE
    _writable(mm, &out)
    try:
        if slot_pos + INDEX_SLOT_SIZE > out.len or entry_pos < 0 or entry_pos + INDEX_ENTRY_SIZE > out.len:
            raise _struct_error(f"an index entry at {entry_pos} or slot at {slot_pos} is outside a {out.len}-byte file")
        q = <unsigned char*>out.buf
        _put_u32(q + entry_pos, h)
        _put_u64(q + entry_pos + 4, <uint64_t>phys)
        _put_u32(q + entry_pos + 12, <uint32_t>diff)
        _put_u32(q + entry_pos + 16, _get_u32(q + slot_pos))  # the bucket's previous entry
        _put_u32(q + slot_pos, <uint32_t>count)
    finally:
        PyBuffer_Release(&out)
    return 0


def put_unique_key_entry(mm, str props, topic_hash, phys, time_diff, count, slots, entries_pos):
    """Index entry ``count`` for a message whose one key is its UNIQ_KEY, linked into its slot (twin of
    ``rocketpy.broker.store.index.put_unique_key_entry``); False with nothing written otherwise."""
    if not _put_path_bound:
        _bind_put_path()
    cdef Py_ssize_t n, start, end = 0
    cdef const unsigned char* p = _latin1(props, &n)
    if p == NULL:
        return _pure_put_unique_key_entry(mm, props, topic_hash, phys, time_diff, count, slots, entries_pos)
    start = _unique_key(p, n, &end)
    if start < 0:
        return False
    _write_key_entry(
        mm, p + start, end - start, <uint32_t>_int(topic_hash, 0, 0xFFFFFFFF, "I"),
        _int(phys, -9223372036854775807 - 1, 9223372036854775807, "q"),
        <int32_t>_int(time_diff, -2147483648, 2147483647, "i"), <int32_t>_int(count, -2147483648, 2147483647, "i"),
        _int(slots, -9223372036854775807 - 1, 9223372036854775807, "q"),
        <Py_ssize_t>_int(entries_pos, 0, 9223372036854775807, "q"),
    )
    return True


# -- a stored record as recovery and replicas check it (twin of rocketpy.broker.store.recovery.read_record)
cdef bint _recovery_bound = False
cdef uint32_t MESSAGE_MAGIC = 0
cdef uint32_t BLANK_MAGIC = 0
cdef Py_ssize_t HEAD_SIZE = 0


cdef int _bind_recovery() except -1:
    global _recovery_bound, MESSAGE_MAGIC, BLANK_MAGIC, HEAD_SIZE
    from rocketpy import record

    if record.HEAD_SIZE != 88:
        raise ImportError("rocketpy.broker.store._speedups was built for another record layout; rebuild it")
    MESSAGE_MAGIC = record.MESSAGE_MAGIC
    BLANK_MAGIC = record.BLANK_MAGIC
    HEAD_SIZE = record.HEAD_SIZE
    _recovery_bound = True
    return 0


def read_record(buf, Py_ssize_t pos, Py_ssize_t room, int64_t phys, bint check_crc, bint text):
    """The record at ``buf[pos:]`` checked as recovery checks it: (size, queue id, queue offset, store
    timestamp, topic, properties), 0 for a blank tail or the file's end, -1 if invalid (twin of
    ``rocketpy.broker.store.recovery.read_record``)."""
    if not _recovery_bound:
        _bind_recovery()
    cdef Py_buffer b
    cdef const unsigned char* p
    cdef uint32_t total, magic, body_len
    cdef Py_ssize_t t_pos, p_pos
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        if pos < 0 or room < 0 or pos > b.len or room > b.len - pos:
            raise ValueError(f"{room} bytes at {pos} are not within a {b.len}-byte buffer")
        if room < 8:
            return 0 if room == 0 else -1
        p = <const unsigned char*>b.buf + pos
        total = _get_u32(p)
        magic = _get_u32(p + 4)
        if magic == BLANK_MAGIC:
            return 0 if <Py_ssize_t>total == room else -1
        if magic != MESSAGE_MAGIC or <Py_ssize_t>total > room or total < HEAD_SIZE + 3 or room < HEAD_SIZE:
            return -1
        body_len = _get_u32(p + 84)
        if <int64_t>_get_u64(p + 28) != phys or <uint64_t>HEAD_SIZE + body_len + 3 > total:
            return -1
        t_pos = HEAD_SIZE + body_len
        p_pos = t_pos + 1 + p[t_pos]
        if p_pos + 2 > <Py_ssize_t>total or p_pos + 2 + ((<Py_ssize_t>p[p_pos] << 8) | p[p_pos + 1]) != total:
            return -1
        if check_crc and _crc32(p + HEAD_SIZE, body_len) != _get_u32(p + 8):
            return -1
        if not text:
            return (total, <int32_t>_get_u32(p + 12), <int64_t>_get_u64(p + 20), <int64_t>_get_u64(p + 56), "", "")
        return (total, <int32_t>_get_u32(p + 12), <int64_t>_get_u64(p + 20), <int64_t>_get_u64(p + 56),
                PyUnicode_DecodeUTF8(<const char*>p + t_pos + 1, p[t_pos], "replace"),
                PyUnicode_DecodeUTF8(<const char*>p + p_pos + 2, total - p_pos - 2, "replace"))
    finally:
        PyBuffer_Release(&b)


# -- the put path's dispatch of one put's records (twin of rocketpy.broker.store.dispatch.dispatch_run)
cdef bint _dispatch_bound = False
cdef object _SCHEDULE_TOPIC = None
cdef object _pure_dispatch_run = None
cdef object _pure_redispatch = None
cdef Py_ssize_t CQ_UNIT_SIZE = 0
cdef Py_ssize_t HEADER_SYNC_EVERY = 0


cdef int _bind_dispatch() except -1:
    global _dispatch_bound, _SCHEDULE_TOPIC, _pure_dispatch_run, _pure_redispatch, CQ_UNIT_SIZE, HEADER_SYNC_EVERY
    from rocketpy._accel import PURE
    from rocketpy.broker.store import consume_queue, index, recovery  # recovery: registers redispatch
    from rocketpy.topic import SCHEDULE_TOPIC

    if not _put_path_bound:
        _bind_put_path()
    if consume_queue.UNIT.format != ">qiq":
        raise ImportError("rocketpy.broker.store._speedups was built for another consume queue layout; rebuild it")
    CQ_UNIT_SIZE = consume_queue.UNIT_SIZE
    HEADER_SYNC_EVERY = index.HEADER_SYNC_EVERY
    _SCHEDULE_TOPIC = SCHEDULE_TOPIC
    _pure_dispatch_run = PURE["dispatch_run"]
    _pure_redispatch = PURE["redispatch"]
    _dispatch_bound = True
    return 0


cdef int _index_record(object index, str topic, str props, const unsigned char* p, Py_ssize_t n,
                       int64_t phys, int64_t store_ts) except -1:
    """``IndexService.put_props`` of one record: its UNIQ_KEY entry written here when the newest file
    takes it (the state updated as put_props updates it), else put_props itself."""
    cdef Py_ssize_t start, end = 0
    cdef int64_t count, diff
    if phys <= <int64_t>index.last_phys:
        return 0
    files = index.files
    if n == 0:  # no properties, so no keys: put_props' bookkeeping (put_message with no keys), no entry
        index.last_phys = phys
        if files and not index._pending:
            _index_end(index, files[len(files) - 1], phys, store_ts)
        return 0
    start = _unique_key(p, n, &end)
    if start < 0 or not files or index._pending:
        index.put_props(topic, props, phys, store_ts)
        return 0
    cur = files[len(files) - 1]  # (wraparound is off in this module)
    count = cur.index_count
    th = index._topic_hashes.get(topic)
    if not 1 < count < <int64_t>cur.max_index or th is None:
        index.put_props(topic, props, phys, store_ts)
        return 0
    diff = store_ts - <int64_t>cur.begin_ts
    diff = diff // 1000 if diff > 0 else 0  # floor division as Python's, clamped at 0 alike
    if diff > 2147483647 or count > 2147483647:
        raise _struct_error("'i' format requires -2147483648 <= number <= 2147483647")
    _write_key_entry(cur.mm, p + start, end - start, <uint32_t>_int(th, 0, 0xFFFFFFFF, "I"), phys,
                     <int32_t>diff, <int32_t>count, cur.slots, cur.entries_pos)
    index.last_phys = phys
    cur.index_count = count + 1
    _index_end(index, cur, phys, store_ts)
    return 0


cdef int _index_end(object index, object cur, int64_t phys, int64_t store_ts) except -1:
    """The newest index file now ends at the record at ``phys``; its header is written every
    ``HEADER_SYNC_EVERY`` records (as ``IndexService.put_message`` does)."""
    cur.end_ts = store_ts
    cur.end_phys = phys
    unsynced = index._unsynced + 1
    if unsynced >= HEADER_SYNC_EVERY:
        cur.write_header(store_ts, phys)
        unsynced = 0
    index._unsynced = unsynced
    return 0


cdef object _dispatch_log():
    from rocketpy.broker.store import dispatch

    return dispatch.log


cdef int _dispatch_record(object d, object cq, object mf, int64_t unit_pos, int64_t queue_offset, int64_t phys,
                          int64_t size, str topic, str props, const unsigned char* p, Py_ssize_t k, int64_t store_ts,
                          object index, bint first) except -1:
    """``Dispatcher.dispatch`` of one record whose unit goes at ``unit_pos`` of ``mf``, the last file of a
    queue at its end (the caller checked): unit, queue and file state, listeners, index entry."""
    cdef int64_t code = _tags_code(p, k)  # the unit's tag code, as tags_hash
    cdef Py_buffer out
    cdef unsigned char* u
    _writable(mf.mm, &out)
    try:
        u = <unsigned char*>out.buf + unit_pos
        _put_u64(u, <uint64_t>phys)
        _put_u32(u + 8, <uint32_t>size)
        _put_u64(u + 12, <uint64_t>code)
    finally:
        PyBuffer_Release(&out)
    mf._wrote = unit_pos + CQ_UNIT_SIZE
    cq.next_offset = queue_offset + 1
    cq.max_phys_end = phys + size
    if first:
        d.dirty_cqs.add(cq)
    listeners = d.listeners
    if listeners:  # Dispatcher.notify's loop, without its frame per record
        for fn in listeners:
            try:
                fn(cq.topic, cq.queue_id, queue_offset, code, store_ts)
            except Exception:
                _dispatch_log().exception("dispatch listener %r failed", fn)
    if index is not None:
        _index_record(index, topic, props, p, k, phys, store_ts)
    d.dispatched_to = phys + size
    return 0


cdef object _queue_end_file(object cq, int64_t queue_offset, int64_t phys, Py_ssize_t count, int64_t* rel):
    """The last file of ``cq`` when the queue is at its end there with room for ``count`` units (``rel``:
    where the first goes), else None: the pure twin takes the records."""
    files = cq.files
    if not files or cq._pending or queue_offset != <int64_t>cq.next_offset or phys < <int64_t>cq.max_phys_end:
        return None
    mf = files[len(files) - 1]  # (wraparound is off in this module)
    rel[0] = queue_offset * CQ_UNIT_SIZE - <int64_t>mf.base_offset
    if rel[0] < 0 or rel[0] + count * CQ_UNIT_SIZE > <int64_t>mf.size:
        return None
    return mf


def dispatch_run(d, cq, int64_t queue_offset, int64_t phys, list sizes, list msgs, int64_t store_ts):
    """Dispatch the records of one put (twin of ``rocketpy.broker.store.dispatch.dispatch_run``):
    the common case in C, any other run through the pure twin."""
    if not _dispatch_bound:
        _bind_dispatch()
    cdef Py_ssize_t count = len(msgs), i, k
    cdef int64_t size, rel = 0
    topic = cq.topic
    mf = None
    if count and len(sizes) == count and topic != _SCHEDULE_TOPIC:
        mf = _queue_end_file(cq, queue_offset, phys, count, &rel)
    if mf is None:
        return _pure_dispatch_run(d, cq, queue_offset, phys, sizes, msgs, store_ts)
    cdef list props = []
    for m in msgs:
        s = m.properties
        if m.tags_code is not None or type(s) is not str or _latin1(s, &k) == NULL:
            return _pure_dispatch_run(d, cq, queue_offset, phys, sizes, msgs, store_ts)
        props.append(s)
    index = d.index
    for i in range(count):
        s = props[i]
        size = <int32_t>_int(sizes[i], -2147483648, 2147483647, "i")
        _dispatch_record(d, cq, mf, rel + i * CQ_UNIT_SIZE, queue_offset + i, phys, size, topic, s,
                         _latin1(s, &k), k, store_ts, index, i == 0)
        phys += size
    return phys


def redispatch(d, tuple record, int64_t phys):
    """One stored record to the dispatcher (twin of ``rocketpy.broker.store.recovery.redispatch``): the
    common case in C, as ``dispatch_run`` takes it, anything else through the pure twin."""
    if not _dispatch_bound:
        _bind_dispatch()
    cdef Py_ssize_t k
    cdef int64_t rel = 0
    cdef const unsigned char* p = NULL
    total, queue_id, queue_offset, store_ts, topic, props = record
    cq = d.cqs.get((topic, queue_id)) if type(topic) is str and topic != _SCHEDULE_TOPIC else None
    if cq is not None and type(props) is str:
        p = _latin1(props, &k)
    if p == NULL:
        return _pure_redispatch(d, record, phys)
    mf = _queue_end_file(cq, queue_offset, phys, 1, &rel)
    if mf is None:
        return _pure_redispatch(d, record, phys)
    _dispatch_record(d, cq, mf, rel, queue_offset, phys, <int32_t>_int(total, -2147483648, 2147483647, "i"),
                     topic, props, p, k, store_ts, d.index, True)


# -- the SYNC_FLUSH group commit ------------------------------------------------------------------
cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd* fds, unsigned long nfds, int timeout)
    enum: POLLIN


cdef extern from "<unistd.h>" nogil:
    ssize_t read(int fd, void* buf, size_t count)
    ssize_t write(int fd, const void* buf, size_t count)
    int fdatasync(int fd)


cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec* tp)
    enum: CLOCK_MONOTONIC


cdef extern from "<errno.h>" nogil:
    int errno
    enum: EINTR
    enum: EAGAIN


cdef inline double _monotonic() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef enum:
    _KICKS = 1024  # 8 KiB of kicks per read (the pure twin's PIPE_READ_BYTES)


def group_commit_sync(int wake_fd, int sync_fd, int done_fd, int64_t flushed, int64_t limit, double timeout_s,
                      double[::1] started):
    """One SYNC_FLUSH group commit of the flush thread, all of it with the GIL released (twin of
    ``rocketpy.broker.store.flush.group_commit_sync``): waits for kicks, syncs, tells the loop."""
    if started.shape[0] < 1:
        raise ValueError("started needs one slot")
    cdef int64_t kicks[_KICKS]
    cdef int64_t target = 0
    cdef int64_t value
    cdef bint general = False
    cdef pollfd pfd
    cdef ssize_t n, i
    cdef int rc, err = 0, state = 0
    cdef double t0 = 0.0, took = 0.0
    # whole milliseconds, rounded up; none when not positive (NaN too), at most INT_MAX (MAX_WAIT_MS)
    cdef int timeout_ms = <int>ceil(fmin(timeout_s * 1000, 2147483647.0)) if timeout_s > 0 else 0
    with nogil:
        pfd.fd = wake_fd
        pfd.events = POLLIN
        pfd.revents = 0
        rc = poll(&pfd, 1, timeout_ms)
        if rc < 0 and errno != EINTR:
            err = errno
        elif rc > 0:
            while True:
                n = read(wake_fd, kicks, sizeof(kicks))
                if n < 0:
                    if errno == EINTR:
                        continue
                    if errno != EAGAIN:  # else drained
                        err = errno
                    break
                for i in range(n // 8):
                    value = kicks[i]
                    if value < 0:
                        general = True
                    elif value > target:
                        target = value
                if n < <ssize_t>sizeof(kicks):
                    break
            if err == 0 and not general and target > flushed and target <= limit and sync_fd >= 0:
                t0 = _monotonic()
                started[0] = t0
                rc = fdatasync(sync_fd)
                if rc != 0:
                    err = errno
                took = _monotonic() - t0
                started[0] = 0.0
                if err == 0:
                    state = 2
                    while True:
                        n = write(done_fd, &target, 8)
                        if n < 0 and errno == EINTR:
                            continue
                        if n == 8:
                            state = 1
                        break
    if err:
        raise OSError(err, strerror(err).decode())
    if state == 0:
        return target, 0, 0.0
    return target, state, took
