# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of the store's coroutine-free put: ``put_now`` of ``rocketpy/broker/store/put.py``.

``rocketpy._accel`` chooses it or its pure twin. The record limits, the dispatch and the yield
count are read from ``rocketpy.broker.store.put`` the first time it runs (``_bind_put``), not
copied: ``rocketpy._accel`` loads this module before that one exists.

The signature is declared in ``_putnow.pyi`` (mypy checks it against the pure twin, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8String

__all__ = ["put_now"]


cdef bint _put_bound = False
cdef object _dispatch_run = None
cdef str _WAIT_FALSE = ""
cdef Py_ssize_t _HEAD_SIZE = 0
cdef Py_ssize_t _MAX_PROPERTIES_BYTES = 0
cdef Py_ssize_t _END_FILE_MIN_BLANK_BYTES = 0
cdef Py_ssize_t _YIELD_EVERY_PUTS = 0


cdef int _bind_put() except -1:
    global _put_bound, _dispatch_run, _WAIT_FALSE, _HEAD_SIZE, _MAX_PROPERTIES_BYTES
    global _END_FILE_MIN_BLANK_BYTES, _YIELD_EVERY_PUTS
    from rocketpy.broker.store import put

    _dispatch_run = put.dispatch_run
    _WAIT_FALSE = put._WAIT_FALSE
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
    r = commitlog.append((msgs, topic_b, props, total, cq, store_ts, service.store_host8))
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
