# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the store's request-path calls: the coroutine-free put ``put_now`` of
``rocketpy/broker/store/put.py`` and the one-view read ``get_now`` of ``rocketpy/broker/store/reads.py``.

``rocketpy._accel`` chooses them or their pure twins. The record limits, the dispatch, the yield
count and the result class are read from ``rocketpy.broker.store.put`` and ``.reads`` the first
time a function runs (``_bind_put``, ``_bind_get``), not copied: ``rocketpy._accel`` loads this
module before those exist.

The signatures are declared in ``_storepath.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8String
from libc.stdint cimport int32_t, int64_t, uint64_t

from rocketpy._cshared cimport _get_u32

__all__ = ["get_now", "put_now"]


cdef bint _put_bound = False
cdef object _dispatch_run = None
cdef object _append_records = None
cdef str _WAIT_FALSE = ""
cdef Py_ssize_t _HEAD_SIZE = 0
cdef Py_ssize_t _MAX_PROPERTIES_BYTES = 0
cdef Py_ssize_t _END_FILE_MIN_BLANK_BYTES = 0
cdef Py_ssize_t _YIELD_EVERY_PUTS = 0


cdef int _bind_put() except -1:
    global _put_bound, _dispatch_run, _append_records, _WAIT_FALSE, _HEAD_SIZE, _MAX_PROPERTIES_BYTES
    global _END_FILE_MIN_BLANK_BYTES, _YIELD_EVERY_PUTS
    from rocketpy.broker.store import commitlog, put

    _dispatch_run = put.dispatch_run
    _append_records = commitlog.append_records
    _WAIT_FALSE = put.WAIT_FALSE_MARK
    _HEAD_SIZE = put.HEAD_SIZE
    _MAX_PROPERTIES_BYTES = put.MAX_PROPERTIES_BYTES
    _END_FILE_MIN_BLANK_BYTES = put.END_FILE_MIN_BLANK_BYTES
    _YIELD_EVERY_PUTS = put.YIELD_EVERY_PUTS
    _put_bound = True
    return 0


def put_now(service, list msgs):
    """``service.put(msgs)`` without its coroutine in the common case, else None with nothing
    written (twin of ``rocketpy.broker.store.put.put_now``)."""
    if not _put_bound:
        _bind_put()
    cdef Py_ssize_t n = len(msgs), since, fixed, total = 0, body_len, max_body
    cdef list props
    cdef PyObject* found
    if not n or not service.running or service.disk_full_remark or service.read_only_remark:
        return None
    first = msgs[0]
    if service.flush is not None and _WAIT_FALSE not in first.properties:
        return None
    since = service._puts_since_yield + n
    if since >= _YIELD_EVERY_PUTS:
        if service._allocating():
            return None
        since = 0
    topic = first.topic
    queue_id = first.queue_id
    max_body = service._max_body_bytes
    topic_parts = service._topic_parts
    found = PyDict_GetItem(topic_parts, topic) if type(topic_parts) is dict and type(topic) is str else NULL
    if found == NULL:
        return None
    topic_b = <object>found
    fixed = _HEAD_SIZE + len(topic_b) + 2
    props = []
    for m in msgs:
        p = m.properties
        if type(p) is not str:
            return None
        props_b = PyUnicode_AsUTF8String(p)
        body_len = len(m.body)
        if (body_len > max_body or len(props_b) > _MAX_PROPERTIES_BYTES
                or m.queue_id != queue_id or m.topic != topic):
            return None
        props.append(props_b)
        total += fixed + body_len + len(props_b)
    commitlog = service._commitlog
    if total + _END_FILE_MIN_BLANK_BYTES > commitlog.file_size:
        return None
    d = service._dispatcher
    cq = d.cqs.get((topic, queue_id))
    if cq is None:
        return None
    store_ts = int(service._clock() * 1000)
    batch = (msgs, topic_b, props, total, cq, store_ts, service.store_host8)
    # ``commitlog.append`` without its two Python frames when the last file has room for the batch
    # and its end stays within what is faulted in already (no roll, no prefault to ask for)
    files = commitlog.files
    mf = files[len(files) - 1] if files else None
    cdef Py_ssize_t pos
    if (
        mf is not None
        and mf.size - mf._wrote >= total + _END_FILE_MIN_BLANK_BYTES
        and mf.base_offset + mf._wrote + total <= commitlog._prefault_due
    ):
        pos = mf._wrote
        wrote, r = _append_records(mf.mm, mf.base_offset, pos, mf.size - pos, batch)
        mf._wrote = pos + wrote
    else:
        r = commitlog.append(batch)
        if r is None:
            return None
    sizes = r.sizes
    assert sizes is not None
    _dispatch_run(d, cq, r.queue_offset, r.wrote_offset, sizes, msgs, store_ts)
    stats = service._stats
    stats.last_store_ts = store_ts
    stats.put_total += n
    service._puts_since_yield = since
    return r


# -- get_now --------------------------------------------------------------------------------------
cdef bint _get_bound = False
cdef object _GetMessageResult = None
cdef object _FOUND = None
cdef Py_ssize_t _UNIT_SIZE = 0


cdef int _bind_get() except -1:
    global _get_bound, _GetMessageResult, _FOUND, _UNIT_SIZE
    from rocketpy.broker.store import reads
    from rocketpy.broker.store.consume_queue import UNIT_SIZE

    if UNIT_SIZE != 20:
        raise ImportError("rocketpy.broker.store._storepath was built for another unit layout; rebuild it")
    _GetMessageResult = reads.GetMessageResult
    _FOUND = reads.GetMessageStatus.FOUND
    _UNIT_SIZE = UNIT_SIZE
    _get_bound = True
    return 0


cdef inline int64_t _i64(const unsigned char* p) noexcept nogil:
    return <int64_t>((<uint64_t>_get_u32(p) << 32) | <uint64_t>_get_u32(p + 4))


cdef object _cq_bytes(object cq, int64_t pos, int64_t* rel):
    """Where consume-queue byte ``pos`` is stored, as ``ConsumeQueue.read_units`` finds it: the
    units still waiting for their file (``_pending``) or a mapped file's view; ``rel`` gets the
    position inside it. None when not stored. Read in place: no call into Python and no slice."""
    cdef int64_t idx, base
    pending = cq._pending
    if pending:
        base = cq._pending_base
        if pos >= base:
            rel[0] = pos - base
            return pending
    files = cq.files
    if not files:
        return None
    idx = (pos - <int64_t>files[0].base_offset) // <int64_t>cq.file_size
    if not 0 <= idx < len(files):
        return None
    mf = files[idx]
    rel[0] = pos - <int64_t>mf.base_offset
    return mf.view


def get_now(cl, cq, int64_t offset, int64_t max_msgs, int64_t max_bytes):
    """``get_message``'s common case: FOUND with one view, else None with nothing changed (twin of
    ``rocketpy.broker.store.reads.get_now``)."""
    if not _get_bound:
        _bind_get()
    cdef int64_t lo, hi, n, i, first, end, total = 0, size, min_size = 0, base, file_size, idx, pos
    cdef int64_t rel = 0, phys, cl_min
    cdef Py_buffer b
    cdef const unsigned char* p
    if cq is None or max_msgs <= 0:
        return None
    lo = cq.min_offset
    hi = cq.next_offset
    if not lo <= offset < hi:
        return None
    files = cl.files
    if not files:
        return None
    cl_min = files[0].base_offset
    # min_offset's first test (``cq.unit(lo)``): the queue's first unit is still stored
    src = _cq_bytes(cq, lo * _UNIT_SIZE, &rel)
    if src is None:
        return None
    PyObject_GetBuffer(src, &b, PyBUF_SIMPLE)
    try:
        if rel < 0 or b.len < rel + _UNIT_SIZE:
            return None
        p = <const unsigned char*>b.buf + rel
        phys = _i64(p)
        size = <int32_t>_get_u32(p + 8)
    finally:
        PyBuffer_Release(&b)
    if size <= 0 or phys < cl_min:
        return None
    # the next units (``cq.read_units``: within one file, or all waiting ones)
    src = _cq_bytes(cq, offset * _UNIT_SIZE, &rel)
    if src is None:
        return None
    PyObject_GetBuffer(src, &b, PyBUF_SIMPLE)
    try:
        n = min(max_msgs, hi - offset, (b.len - rel) // _UNIT_SIZE)  # read_units: within one file
        if rel < 0 or n <= 0 or not (n == max_msgs or offset + n == hi):
            return None
        p = <const unsigned char*>b.buf + rel
        first = _i64(p)
        for i in range(n):
            size = <int32_t>_get_u32(p + i * 20 + 8)
            total += size
            if i == 0 or size < min_size:
                min_size = size
        end = _i64(p + (n - 1) * 20) + <int32_t>_get_u32(p + (n - 1) * 20 + 8)
    finally:
        PyBuffer_Release(&b)
    if end - first != total or total > max_bytes or min_size <= 0:
        return None
    file_size = cl.file_size
    base = files[0].base_offset
    if first < base:
        return None
    idx = (first - base) // file_size
    if idx >= len(files) or (end - 1 - base) // file_size != idx:
        return None
    mf = files[idx]
    pos = first - mf.base_offset
    result = _GetMessageResult.__new__(_GetMessageResult)  # every slot set here, without __init__'s frame
    result.status = _FOUND
    result.next_begin_offset = offset + n
    result.min_offset = lo
    result.max_offset = hi
    result.buffers = [mf.view[pos : pos + total]]
    result.queue_offsets = list(range(offset, offset + n))
    result.buffer_total_size = total
    result.message_count = n
    result.suggest_pulling_from_slave = False
    return result
