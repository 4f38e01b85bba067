# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of the broker's pull fast path: ``pull_now`` of ``rocketpy/broker/processors/pullpath.py``.

``rocketpy._accel`` chooses it or its pure twin. The classes, flags and limits are read from
``rocketpy.broker.processors.pullpath`` (and what it imports) the first time it runs (``_bind_pull``),
not copied: ``rocketpy._accel`` loads this module before those exist.

The header's fields are read from the request's map with C dict lookups, the checks read the
tables' dicts directly, the store's one-view read is its own compiled ``get_now``, the units' tag
codes are checked in C, and the body is one copy out of the commitlog's view. The read's views are
released and the pull is counted in the broker's statistics here too, as ``GetMessageResult.release``
and ``BrokerStats.on_get`` do (the twin test compares the statistics), without their Python frames
(``_fastpath.pxd``'s ``count_get``, shared with the pop fast path).

The signature is declared in ``_pullpath.pyi`` (mypy checks it against the pure twin, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from libc.stdint cimport int64_t

from rocketpy._cshared cimport _get_u32
from rocketpy.broker.processors._fastpath cimport count_get, ext_get

__all__ = ["pull_now"]

cdef bint _bound = False
cdef object _MessageStore = None
cdef object _codes = None  # pullpath._codes: the filter, one definition for both twins
cdef object _RemotingCommand = None
cdef object _get_now = None
cdef object _BrokerStats = None
cdef object _new_pair = None
cdef Py_ssize_t _MAX_GROUP_COUNTERS = 0
cdef object _SUCCESS = None
cdef str _TAG = ""
cdef str _STAR = ""
cdef long _PERM_READ = 0
cdef long _FLAG_RESPONSE = 0
cdef long _FLAG_COMMIT_OFFSET = 0
cdef int64_t _MAX_PULL_MSGS = 0
cdef Py_ssize_t _UNIT_SIZE = 0


cdef int _bind_pull() except -1:
    global _bound, _MessageStore, _codes, _RemotingCommand, _get_now, _SUCCESS
    global _TAG, _STAR, _PERM_READ, _FLAG_RESPONSE, _FLAG_COMMIT_OFFSET
    global _MAX_PULL_MSGS, _UNIT_SIZE, _BrokerStats, _new_pair, _MAX_GROUP_COUNTERS
    from rocketpy.broker.processors import pullpath
    from rocketpy.broker.store.consume_queue import UNIT_SIZE

    if pullpath._MASK32 != 0xFFFFFFFF or pullpath.INT64_MAX != (1 << 63) - 1:
        raise ImportError("rocketpy.broker.processors._pullpath was built for other limits; rebuild it")
    _MessageStore = pullpath.MessageStore
    _codes = pullpath._codes
    _RemotingCommand = pullpath.RemotingCommand
    _get_now = pullpath.reads.get_now
    _SUCCESS = pullpath._SUCCESS
    _TAG = pullpath._TAG
    _STAR = "*"
    _PERM_READ = pullpath.PERM_READ
    _FLAG_RESPONSE = pullpath.FLAG_RESPONSE
    _FLAG_COMMIT_OFFSET = pullpath.FLAG_COMMIT_OFFSET
    _MAX_PULL_MSGS = pullpath.MAX_PULL_MSGS
    _UNIT_SIZE = UNIT_SIZE
    _BrokerStats = pullpath.BrokerStats
    _new_pair = pullpath._new_pair
    _MAX_GROUP_COUNTERS = pullpath.MAX_GROUP_COUNTERS
    _bound = True
    return 0


cdef bint _all_match(object raw, Py_ssize_t n, frozenset codes) except -1:
    """Every one of the ``n`` units in ``raw`` has a 32-bit tag code in ``codes``."""
    cdef Py_buffer b
    cdef const unsigned char* p
    cdef Py_ssize_t i
    PyObject_GetBuffer(raw, &b, PyBUF_SIMPLE)
    try:
        if b.len < n * _UNIT_SIZE:
            return False
        p = <const unsigned char*>b.buf
        for i in range(n):
            if _get_u32(p + i * _UNIT_SIZE + 16) not in codes:  # the tag code's low 32 bits
                return False
        return True
    finally:
        PyBuffer_Release(&b)


cdef int _release(object result) except -1:
    """``GetMessageResult.release`` without its frame: the read's views released, none kept."""
    for b in result.buffers:
        if type(b) is memoryview:  # (memoryview cannot be subclassed: isinstance's answer)
            b.release()
    result.buffers = []
    return 0


cdef bytes _copy(object view):
    """``bytes(view)``: one copy of a contiguous view."""
    cdef Py_buffer b
    PyObject_GetBuffer(view, &b, PyBUF_SIMPLE)
    try:
        return PyBytes_FromStringAndSize(<const char*>b.buf, b.len)
    finally:
        PyBuffer_Release(&b)


def pull_now(processor, channel, request):
    """``processor.process(channel, request, allow_suspend=True)`` of a pull the fast path takes,
    else None with nothing changed (twin of ``rocketpy.broker.processors.pullpath.pull_now``)."""
    if not _bound:
        _bind_pull()
    cdef dict ext
    cdef int64_t offset, count, max_bytes, n
    e = request.ext
    if type(e) is not dict:
        return None
    ext = <dict>e
    group = ext_get(ext, "consumerGroup", None)
    topic = ext_get(ext, "topic", None)
    q = ext_get(ext, "queueId", None)
    o = ext_get(ext, "queueOffset", None)
    m = ext_get(ext, "maxMsgNums", None)
    f = ext_get(ext, "sysFlag", 0)
    commit = ext_get(ext, "commitOffset", 0)
    suspend = ext_get(ext, "suspendTimeoutMillis", 0)
    max_msg_bytes = ext_get(ext, "maxMsgBytes", None)
    sub = ext_get(ext, "subscription", _STAR)
    sub_version = ext_get(ext, "subVersion", 0)
    kind = ext_get(ext, "expressionType", _TAG)
    if (type(group) is not str or type(topic) is not str or type(q) is not int or type(o) is not int
            or type(m) is not int or type(f) is not int or type(commit) is not int
            or type(suspend) is not int or type(sub) is not str or type(sub_version) is not int
            or type(kind) is not str
            or (max_msg_bytes is not None and type(max_msg_bytes) is not int)):
        return None
    if not (0 <= o <= 9223372036854775807 and 1 <= m <= 2147483648
            and commit <= 9223372036854775807 and 0 <= suspend <= 9223372036854775807):
        return None
    offset = o
    if not (<long>processor.broker_config.broker_permission & _PERM_READ):
        return None
    guard = processor.guard
    group_config = guard.subscription_groups.table.get(group)
    if group_config is None or not group_config.consume_enable:
        return None
    tc = guard.topic_config.table.get(topic)
    if tc is None or not (<long>tc.perm & _PERM_READ) or not 0 <= q < tc.read_queue_nums:
        return None
    codes = _codes(processor, group, topic, f, sub, kind)
    store = processor.store
    if codes is False or type(store) is not _MessageStore:
        return None
    sc = processor.store_config
    count = min(<int64_t>min(m, _MAX_PULL_MSGS), <int64_t>sc.max_transfer_count_on_message_in_memory)
    max_bytes = sc.max_transfer_bytes_on_message_in_memory
    if max_msg_bytes and max_msg_bytes > 0 and max_msg_bytes < max_bytes:
        max_bytes = max_msg_bytes
    cq = store.dispatcher.cqs.get((topic, q))
    result = _get_now(store.commitlog, cq, offset, count, max_bytes)
    if result is None:
        return None
    n = result.message_count
    if codes is not None:  # every unit read must match (as get_message's run of a tag filter)
        raw, read = cq.read_units(offset, n)
        if read != n or not _all_match(raw, n, <frozenset>codes):
            result.release()
            return None
    stats = store.stats
    stats.get_total += n
    if f & _FLAG_COMMIT_OFFSET and commit >= 0:
        processor.offsets.commit_offset(group, topic, q, commit)
    following = result.next_begin_offset
    suggest = processor.suggest_broker_id
    answer = {
        "suggestWhichBrokerId": suggest(topic, q, following) if suggest is not None else 0,
        "nextBeginOffset": following,
        "minOffset": result.min_offset,
        "maxOffset": result.max_offset,
    }
    body = _copy(result.buffers[0])
    _release(result)
    broker_stats = processor.stats
    if type(broker_stats) is _BrokerStats:
        count_get(broker_stats, group, topic, n, len(body), _MAX_GROUP_COUNTERS, _new_pair)
    else:
        broker_stats.on_get(group, topic, n, len(body))
    tracer = processor.tracer
    if tracer is not None:
        tracer.on_delivered(group, topic, body, channel.remote_addr)
    return _RemotingCommand(_SUCCESS, request.opaque, _FLAG_RESPONSE, None, answer, body,
                            request.serialize_type)
