# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of the broker's plain-pop fast path: ``pop_now`` of ``rocketpy/broker/processors/poppath.py``.

``rocketpy._accel`` chooses it or its pure twin. The classes, limits and helpers are read from
``rocketpy.broker.processors.poppath`` (and what it imports) the first time it runs (``_bind_pop``),
not copied: ``rocketpy._accel`` loads this module before those exist.

The pure twin calls ``PopService.read_once``; this one does what it does for a plain pop in this
frame: ``PopReader.read`` (the rotor, the POP retry topic read only when that topic exists and is
readable, else skipped as ``_read_topic`` skips it, the plain read by the compiled ``read_plain``),
the queues' commits (``commit_queues``, compiled in ``rocketpy.broker.pop``), the cks held back
(``CkBuffer.records_for_pops``; a plain pop's one ck offered to ``CkBuffer.hold`` first), the
counts; then the answer's header and body. Without a Python frame where the pure path has one: the
clocks (PopService's default wall clock and the CK buffer's monotonic one read from the system
clocks), the broker's name (its config's, as the reader's callable reads it), the POP retry
topic of a (group, topic) pair (remembered: a pure function of the pair).

The signature is declared in ``_poppath.pyi`` (mypy checks it against the pure twin, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from libc.stdint cimport int64_t

from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec

from rocketpy._cshared cimport new_command
from rocketpy.broker.processors._fastpath cimport count_get, ext_get

__all__ = ["pop_now"]

cdef bint _bound = False
cdef object _PopRequest = None
cdef object _PopResult = None
cdef object _PopRead = None
cdef object _FOUND = None
cdef object _NO_MESSAGE = None
cdef object _RemotingCommand = None
cdef object _SUCCESS = None
cdef object _pop_response = None
cdef object _read_plain = None
cdef object _format_start = None
cdef object _format_msgs = None
cdef object _ACK_PROPERTIES = None
cdef object _CK_PROPERTIES = None
cdef str _TAG = ""
cdef str _FOUND_REMARK = "FOUND"
cdef long _PERM_READ = 0
cdef long _FLAG_RESPONSE = 0
cdef int64_t _MAX_QUEUE_ID = 0
cdef int64_t _MAX_POP_MSGS = 0
cdef int64_t _MAX_INVISIBLE = 0
cdef object _INT64_MAX = None
cdef object _BrokerStats = None
cdef object _new_pair = None
cdef Py_ssize_t _MAX_GROUP_COUNTERS = 0
cdef object _commit_queues = None
cdef object _retry_topic_fits = None
cdef object _wall_ms = None  # PopService's default clock
cdef object _POP_ORDER_REVIVE = None
#: The POP retry topic of (group, topic) as ``retry_topic_fits`` answers it (a pure function of its
#: arguments), kept for at most this many pairs (cleared when full).
cdef dict _retry_of_pair = {}
cdef Py_ssize_t _RETRY_PAIRS_KEPT = 4096


cdef int _bind_pop() except -1:
    global _bound, _PopRequest, _PopResult, _PopRead, _FOUND, _NO_MESSAGE, _RemotingCommand, _SUCCESS
    global _pop_response, _read_plain, _format_start, _format_msgs
    global _ACK_PROPERTIES, _CK_PROPERTIES, _TAG, _PERM_READ, _FLAG_RESPONSE
    global _MAX_QUEUE_ID, _MAX_POP_MSGS, _MAX_INVISIBLE, _INT64_MAX
    global _BrokerStats, _new_pair, _MAX_GROUP_COUNTERS, _commit_queues, _retry_topic_fits
    global _wall_ms, _POP_ORDER_REVIVE
    from rocketpy.broker.pop import acks, plain, reader, revive_log, service, types
    from rocketpy.broker.processors import poppath

    _PopRequest = poppath.PopRequest
    _PopResult = poppath.PopResult
    _PopRead = reader.PopRead
    _FOUND = poppath.PopStatus.FOUND
    _NO_MESSAGE = poppath.PopStatus.NO_MESSAGE
    _RemotingCommand = poppath.RemotingCommand
    _SUCCESS = poppath.ResponseCode.SUCCESS
    _pop_response = poppath.pop_response
    _read_plain = plain.read_plain  # the active twin
    _format_start = types.format_start_offsets  # rocketpy.protocol.receipt's, as PopResult has them
    _format_msgs = types.format_msg_offsets
    _ACK_PROPERTIES = revive_log.ACK_PROPERTIES
    _CK_PROPERTIES = revive_log.CK_PROPERTIES
    _TAG = poppath._TAG
    _PERM_READ = poppath.PERM_READ
    _FLAG_RESPONSE = poppath.FLAG_RESPONSE
    _MAX_QUEUE_ID = poppath.MAX_QUEUE_ID
    _MAX_POP_MSGS = poppath.MAX_POP_MSGS
    _MAX_INVISIBLE = poppath.MAX_INVISIBLE_TIME_MS
    _INT64_MAX = poppath.INT64_MAX
    _BrokerStats = poppath.BrokerStats
    _new_pair = poppath._new_pair
    _MAX_GROUP_COUNTERS = poppath.MAX_GROUP_COUNTERS
    _commit_queues = acks.commit_queues  # the active twin
    _retry_topic_fits = poppath.retry_topic_fits
    _wall_ms = service.wall_ms
    _POP_ORDER_REVIVE = types.POP_ORDER_REVIVE_QUEUE
    _bound = True
    return 0


cdef bint _readable(object tc) except -1:
    """``PopReader._read_topic`` reads the topic of ``tc`` (it returns at once otherwise)."""
    return tc is not None and (<long>tc.perm & _PERM_READ) != 0 and tc.read_queue_nums > 0


cdef object _new_request(str group, str topic, object queue_id, object max_msgs, object invisible,
                         object poll, object exp_type, object exp, object init_mode):
    """``PopRequest(group, topic, queue_id, max_msgs, invisible, poll, exp_type, exp, False,
    init_mode)`` without its ``__init__`` frame."""
    req = _PopRequest.__new__(_PopRequest)
    req.group = group
    req.topic = topic
    req.queue_id = queue_id
    req.max_msgs = max_msgs
    req.invisible_ms = invisible
    req.poll_ms = poll
    req.expression_type = exp_type
    req.expression = exp
    req.order = False
    req.init_mode = init_mode
    return req


cdef object _new_result(object broker_name, object pop_time, object invisible):
    """``PopResult(PopStatus.NO_MESSAGE, broker_name, pop_time, invisible, False)`` without its
    ``__init__`` frame."""
    result = _PopResult.__new__(_PopResult)
    result.status = _NO_MESSAGE
    result.broker_name = broker_name
    result.pop_time = pop_time
    result.invisible_ms = invisible
    result.order = False
    result.rest_num = 0
    result.parts = []
    result.queues = []
    result.size = 0
    result.count = 0
    return result


cdef object _new_read(object result):
    """``PopRead(result, [], [], [])`` without its ``__init__`` frame."""
    out = _PopRead.__new__(_PopRead)
    out.result = result
    out.cks = []
    out.acks = []
    out.touched = []
    return out


cdef int _count_pops(object service, object group, object topic, object count) except -1:
    """``service._count(group, topic, 0, count)``; its frame only for a row not made yet."""
    cdef PyObject* row = PyDict_GetItem(service.counts, (group, topic))
    if row == NULL:
        service._count(group, topic, 0, count)
    else:
        (<object>row)[0] += count
    return 0


cdef object _answer(object request, object result):
    """``pop_response`` of a FOUND result."""
    cdef list queues = result.queues
    cdef Py_ssize_t i, n = PyList_GET_SIZE(queues)
    starts = []
    msgs = []
    for i in range(n):
        pq = <object>PyList_GET_ITEM(queues, i)
        kind = pq.kind
        qid = pq.queue_id
        starts.append((kind, qid, pq.start_offset))
        msgs.append((kind, qid, pq.offsets))
    ext = {
        "popTime": result.pop_time,
        "invisibleTime": result.invisible_ms,
        "reviveQid": _POP_ORDER_REVIVE if result.order else 0,  # PopResult.revive_qid
        "restNum": result.rest_num,
        "startOffsetInfo": _format_start(starts),
        "msgOffsetInfo": _format_msgs(msgs),
    }
    body = b"".join(result.parts)
    return new_command(_RemotingCommand, _SUCCESS, request.opaque, _FLAG_RESPONSE, _FOUND_REMARK, ext, body,
                       request.serialize_type)


cdef object _retry_of(str group, str topic):
    """``retry_topic_fits(group, topic)``, remembered per pair."""
    key = (group, topic)
    cdef PyObject* found = PyDict_GetItem(_retry_of_pair, key)
    if found != NULL:
        return <object>found
    retry = _retry_topic_fits(group, topic)
    if len(_retry_of_pair) >= _RETRY_PAIRS_KEPT:
        _retry_of_pair.clear()
    _retry_of_pair[key] = retry
    return retry


cdef inline object _ms(int clock):
    """``time.time_ns() // 1_000_000`` (CLOCK_REALTIME) or ``time.monotonic_ns() // 1_000_000``."""
    cdef timespec ts
    clock_gettime(clock, &ts)
    return <long long>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef list _held_back(object buffer, list cks, object now_ms):
    """``buffer.records_for_pops(cks, now_ms)``: a plain pop's one ck handed to ``buffer.hold``
    directly (what ``records_for_pops`` does first), ``records_for_pops`` only when it is not held
    (``hold`` refuses without a change, so it may ask again)."""
    if PyList_GET_SIZE(cks) == 1:
        ck, counts = <tuple>cks[0]
        if counts is None and buffer.hold(ck, now_ms):
            return []
    return buffer.records_for_pops(cks, now_ms)


def pop_now(processor, request):
    """``processor.pop``'s answer to a pop the fast path takes, else None with nothing changed
    (twin of ``rocketpy.broker.processors.poppath.pop_now``)."""
    if not _bound:
        _bind_pop()
    cdef dict ext
    e = request.ext
    if type(e) is not dict:
        return None
    ext = <dict>e
    group = ext_get(ext, "consumerGroup", None)
    topic = ext_get(ext, "topic", None)
    queue_id = ext_get(ext, "queueId", None)
    max_msgs = ext_get(ext, "maxMsgNums", None)
    invisible = ext_get(ext, "invisibleTime", None)
    poll = ext_get(ext, "pollTime", 0)
    born = ext_get(ext, "bornTime", 0)
    init_mode = ext_get(ext, "initMode", 0)
    order = ext_get(ext, "order", False)
    exp_type = ext_get(ext, "expType", None)
    exp = ext_get(ext, "exp", None)
    attempt = ext_get(ext, "attemptId", None)
    if (type(group) is not str or not group or type(topic) is not str or not topic
            or type(queue_id) is not int or type(max_msgs) is not int or type(invisible) is not int
            or type(poll) is not int or type(born) is not int or type(init_mode) is not int
            or order is not False
            or (exp_type is not None and type(exp_type) is not str)
            or (exp is not None and type(exp) is not str)
            or (attempt is not None and type(attempt) is not str)):
        return None
    if not (queue_id <= _MAX_QUEUE_ID and 1 <= max_msgs <= _MAX_POP_MSGS
            and 1 <= invisible <= _MAX_INVISIBLE and 0 <= poll <= _INT64_MAX and 0 <= init_mode <= 1):
        return None
    if exp and (exp != "*" or (exp_type and exp_type != _TAG)):
        return None
    service = processor.service
    checks = service.checks
    if not (<long>checks.broker_config.broker_permission & _PERM_READ):
        return None
    topics = checks.topics.table
    tc = topics.get(topic)
    if tc is None or not (<long>tc.perm & _PERM_READ) or queue_id >= tc.read_queue_nums:
        return None
    group_config = checks.groups.table.get(group)
    if group_config is None or not group_config.consume_enable:
        return None
    retry = _retry_of(group, topic)  # one definition (poppath's), remembered per pair
    if retry is None:
        return None
    req = _new_request(group, topic, -1 if queue_id < 0 else queue_id, max_msgs, invisible, poll,
                       exp_type or _TAG, exp, init_mode)
    # PopReader.read of a plain pop
    reader = service.reader
    clock_ms = service.clock_ms
    now_ms = _ms(CLOCK_REALTIME) if clock_ms is _wall_ms else clock_ms()
    result = _new_result(checks.broker_config.broker_name, now_ms, invisible)  # reader._broker_name()
    out = _new_read(result)
    rotor = reader._rotor + 1
    reader._rotor = rotor
    retry_first = rotor % 5 == 0
    retry_readable = _readable(topics.get(retry))
    if retry_first and retry_readable:
        reader._read_topic(req, retry, -1, None, out)
    _read_plain(reader, req, out)
    if not retry_first and result.count < max_msgs and retry_readable:
        reader._read_topic(req, retry, -1, None, out)
    found = bool(result.queues)
    if found:
        result.status = _FOUND
    # the rest of PopService.read_once
    _commit_queues(service, out.touched)
    writes = []
    if out.acks:
        writes.append((out.acks, _ACK_PROPERTIES))
    if out.cks:
        bodies = _held_back(service.buffer, out.cks, _ms(CLOCK_MONOTONIC))  # service._monotonic_ms
        if bodies:
            writes.append((bodies, _CK_PROPERTIES))
    if found:
        count = result.count
        stats = service.stats
        if type(stats) is _BrokerStats:
            count_get(stats, group, topic, count, result.size, _MAX_GROUP_COUNTERS, _new_pair)
        else:
            stats.on_get(group, topic, count, result.size)
        _count_pops(service, group, topic, count)
    if not writes:
        if found:
            return _answer(request, result)
        if poll <= 0:
            return _pop_response(request, req, result)
    return processor.rest(request, req, result, writes)
