# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of the awaited send's hot path: ``start_usual``, ``batch_body``, ``settle_stored``,
``live_members``, ``earliest_deadline`` and ``finish_sent`` of ``rocketpy/client/send_core.py``.

``rocketpy._accel`` chooses it or its pure twin. The classes, limits and helpers it uses are read
from ``rocketpy.client``, ``rocketpy.message``, ``rocketpy.msgid`` and ``rocketpy.record`` the first
time one of its functions runs (``_bind``), not copied: ``rocketpy._accel`` loads this module before
those exist. Each function reads and writes the same attributes as its pure twin; input the twin
would refuse (a body that is not ``bytes``, properties past 65,535 bytes, a flag past 32 bits) is
handed to the pure twin, so errors are the same.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc
from cpython.method cimport PyMethod_GET_FUNCTION, PyMethod_GET_SELF
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rocketpy._cshared cimport (PyUnicode_DATA, PyUnicode_IS_ASCII, PyUnicode_New, _crc32, _get, _latin1,
                                _put_u32, _set, _slot_offset, new_command)


import asyncio
import functools
import os as _os
import types
import weakref as _weakref
import zlib

__all__ = ["batch_body", "earliest_deadline", "finish_sent", "live_members", "settle_lone", "settle_stored",
           "start_deflate", "start_usual"]


# -- what the functions use, bound on first use ---------------------------------------------------
cdef bint _bound = False
cdef object _Message = None
cdef object _PreparedMessage = None
cdef object _SendResult = None
cdef set _valid_topics = None
cdef object _msgid = None
cdef object _select_queue = None
cdef object _may_be_timed_or_half = None
cdef object _pure_batch_body = None
cdef Py_ssize_t MAX_PROPERTIES_BYTES = 0
cdef Py_ssize_t BATCH_HEAD_SIZE = 0
cdef Py_ssize_t ITEM_OVERHEAD = 0
cdef uint32_t MESSAGE_MAGIC = 0
cdef object _get_running_loop = asyncio.get_running_loop
cdef object _RemotingCommand = None
cdef object _SEND_OK = None
cdef double _QUIET_LATENCY_MS = 0.0  # fault.LATENCY_MAX_MS[2]: a faster send records nothing
cdef Py_ssize_t _MQ[3]
cdef object _Fault = None
cdef object _RoundRobin = None
cdef object _RocketpyError = None
cdef object _AUTO_TOPIC = None
cdef object _V2 = None
cdef object _MSGPACK = None
cdef Py_ssize_t _KEPT_ACCUMULATORS = 0
cdef object _partial = functools.partial
cdef tuple _MQ_NAMES = ("topic", "broker_name", "queue_id")




cdef tuple _MSG_NAMES = ("body", "topic", "tags", "flag", "delay_level", "keys", "properties")
cdef Py_ssize_t _MSG[7]
cdef tuple _Q_NAMES = ("jobs", "n_bytes", "mq", "addr", "in_flight", "timer")
cdef Py_ssize_t _Q[6]
cdef object _Pending = None
cdef object _Instance = None  # MQClientInstance: its route and address lookups are read inline
cdef object _inst_method = None  # Producer._inst: a path's ``instance``, read inline
cdef object _MASTER_ID = None
cdef object _MethodType = types.MethodType
cdef Py_ssize_t _MQ_BROKER = -1
cdef object _MessageQueue = None
cdef tuple _PM_NAMES = ("body", "born_ms", "flag", "needs_compress", "properties", "queue_nums",
                        "sys_flag", "topic", "uniq_key")
cdef Py_ssize_t _PM[9]
cdef tuple _SR_NAMES = ("status", "msg_id", "offset_msg_id", "message_queue", "queue_offset")
cdef Py_ssize_t _SR[5]
cdef tuple _JOB_NAMES = ("prepared", "topic", "attempts", "choice", "tried", "unavailable", "last_broker",
                         "last_error", "last_result", "refresh", "needs_compress", "settled", "item_size",
                         "path", "deadline", "mq", "addr", "started", "future")
cdef Py_ssize_t _JOB[19]
cdef object _job_cls = None  # the class _JOB's offsets are of


cdef int _offsets(type cls, tuple names, Py_ssize_t* out) except -1:
    cdef Py_ssize_t i
    for i in range(len(names)):
        out[i] = _slot_offset(cls, names[i])
    return 0


cdef int _job_offsets(type cls) except -1:
    global _job_cls
    _offsets(cls, _JOB_NAMES, _JOB)
    _job_cls = cls
    return 0


cdef int _bind() except -1:
    global _bound, _Message, _PreparedMessage, _SendResult, _valid_topics, _msgid, _select_queue
    global _may_be_timed_or_half, _pure_batch_body, MAX_PROPERTIES_BYTES, BATCH_HEAD_SIZE, ITEM_OVERHEAD
    global MESSAGE_MAGIC, _Pending, _MessageQueue, _MQ_BROKER, _Instance, _inst_method, _MASTER_ID
    global _RemotingCommand, _SEND_OK, _QUIET_LATENCY_MS, _Fault, _RoundRobin, _RocketpyError, _AUTO_TOPIC
    global _V2, _MSGPACK, _KEPT_ACCUMULATORS
    from rocketpy import message, message_props, msgid, record
    from rocketpy._accel import PURE
    from rocketpy import route
    from rocketpy import errors
    from rocketpy.client import coalesce, fault, instance, message_check, producer, results, selector

    _Message = message.Message
    _PreparedMessage = message_check.PreparedMessage
    _SendResult = results.SendResult
    _valid_topics = message_check._valid_topics
    _msgid = msgid
    _select_queue = selector.select_queue
    _may_be_timed_or_half = message_props.may_be_timed_or_half
    _pure_batch_body = PURE["batch_body"]
    _offsets(_PreparedMessage, _PM_NAMES, _PM)
    _offsets(_Message, _MSG_NAMES, _MSG)
    _Pending = coalesce._Pending
    _offsets(_Pending, _Q_NAMES, _Q)
    _MessageQueue = message.MessageQueue
    _MQ_BROKER = _slot_offset(_MessageQueue, "broker_name")
    _Instance = instance.MQClientInstance
    _inst_method = producer.Producer._inst
    _MASTER_ID = route.MASTER_ID
    _offsets(_SendResult, _SR_NAMES, _SR)
    _offsets(_MessageQueue, _MQ_NAMES, _MQ)
    _RemotingCommand = coalesce.RemotingCommand
    _V2 = coalesce.RequestCode.SEND_MESSAGE_V2
    _MSGPACK = _RemotingCommand(0).serialize_type  # a command's default header encoding
    _KEPT_ACCUMULATORS = coalesce.KEPT_ACCUMULATORS
    _Fault = fault.LatencyFaultTolerance
    _RoundRobin = selector.RoundRobinIndex
    _RocketpyError = errors.RocketpyError
    _AUTO_TOPIC = message_check.AUTO_CREATE_TOPIC_KEY_TOPIC
    _SEND_OK = results.SEND_STATUS_BY_CODE.get(0)  # SUCCESS
    _QUIET_LATENCY_MS = fault.LATENCY_MAX_MS[2]
    MAX_PROPERTIES_BYTES = record.MAX_PROPERTIES_BYTES
    BATCH_HEAD_SIZE = record.BATCH_HEAD.size
    ITEM_OVERHEAD = BATCH_HEAD_SIZE + 2
    MESSAGE_MAGIC = record.MESSAGE_MAGIC
    _bound = True
    return 0


cdef str _HEX = "0123456789ABCDEF"


cdef const char* _HEXC = b"0123456789ABCDEF"


cdef str _unique_id(int64_t now_ms):
    """``msgid.new_unique_id()``: the generator's head of this millisecond + the counter's 4 hex
    digits when its head is of ``now_ms``, else the generator's own ``next``."""
    gen = _msgid._GEN
    stamp = gen._stamp
    cdef str head = <str>stamp[1]
    cdef unsigned int c
    cdef Py_ssize_t n
    cdef char* out
    if <int64_t>stamp[0] != now_ms:
        return gen.next()
    c = <unsigned int>(next(gen._counter) & 0xFFFF)
    if not PyUnicode_IS_ASCII(head):  # never: the head is hex
        return head + _HEX[(c >> 12) & 15] + _HEX[(c >> 8) & 15] + _HEX[(c >> 4) & 15] + _HEX[c & 15]
    n = len(head)
    uniq = PyUnicode_New(n + 4, 127)
    out = <char*>PyUnicode_DATA(uniq)
    memcpy(out, PyUnicode_DATA(head), n)
    out[n] = _HEXC[(c >> 12) & 15]
    out[n + 1] = _HEXC[(c >> 8) & 15]
    out[n + 2] = _HEXC[(c >> 4) & 15]
    out[n + 3] = _HEXC[c & 15]
    return <str>uniq


cdef str _ascii_join3(const char* a, Py_ssize_t na, str b, const char* c, Py_ssize_t nc):
    """``a + b + c`` for ASCII ``b`` (``a`` and ``c`` ASCII bytes), in one allocation."""
    cdef Py_ssize_t nb = len(b)
    out_s = PyUnicode_New(na + nb + nc, 127)
    cdef char* out = <char*>PyUnicode_DATA(out_s)
    memcpy(out, a, na)
    memcpy(out + na, PyUnicode_DATA(b), nb)
    memcpy(out + na + nb, c, nc)
    return <str>out_s


cdef str _tagged_props(str tags, str uniq):
    """The properties string of ``tags`` and ``uniq`` (TAGS, then UNIQ_KEY), both ASCII, in one
    allocation."""
    cdef Py_ssize_t nt = len(tags), nu = len(uniq)
    out_s = PyUnicode_New(5 + nt + 10 + nu + 1, 127)
    cdef char* out = <char*>PyUnicode_DATA(out_s)
    memcpy(out, b"TAGS\x01", 5)
    memcpy(out + 5, PyUnicode_DATA(tags), nt)
    memcpy(out + 5 + nt, b"\x02UNIQ_KEY\x01", 10)
    memcpy(out + 15 + nt, PyUnicode_DATA(uniq), nu)
    out[15 + nt + nu] = 2
    return <str>out_s


def start_usual(path, job_cls, msg, Py_ssize_t max_bytes, Py_ssize_t compress_over_bytes, queue_nums,
                retry_times, double remaining):
    """The first attempt of ``msg`` when it is the usual message (twin of
    ``rocketpy.client.send_core.start_usual``)."""
    if not _bound:
        _bind()
    inst = _instance_of(path.instance)
    co = path.coalescer
    if type(msg) is not _Message:
        return None
    body = _get(msg, _MSG[0], "body")
    topic = _get(msg, _MSG[1], "topic")
    tags = _get(msg, _MSG[2], "tags")
    flag = _get(msg, _MSG[3], "flag")
    delay = _get(msg, _MSG[4], "delay_level")
    if type(body) is not bytes:
        return None
    cdef Py_ssize_t n_body = PyBytes_GET_SIZE(body)
    if (n_body <= 0 or n_body > max_bytes or n_body > compress_over_bytes or _get(msg, _MSG[5], "keys")
            or _get(msg, _MSG[6], "properties")
            or type(delay) is not int or delay != 0 or type(flag) is not int
            or not -2147483648 <= flag <= 2147483647
            or (tags is not None and (type(tags) is not str or tags == "" or "||" in tags))
            or topic not in _valid_topics):
        return None
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    cdef int64_t now_ms = <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000
    cdef str uniq = _unique_id(now_ms)
    cdef str props
    cdef Py_ssize_t n_props
    if tags is None:
        if PyUnicode_IS_ASCII(uniq):
            props = _ascii_join3(b"UNIQ_KEY\x01", 9, uniq, b"\x02", 1)
        else:
            props = "UNIQ_KEY\x01" + uniq + "\x02"
        n_props = len(props)
    else:
        if PyUnicode_IS_ASCII(tags) and PyUnicode_IS_ASCII(uniq):
            props = _tagged_props(<str>tags, uniq)
            n_props = len(props)
        else:
            props = "TAGS\x01" + <str>tags + "\x02UNIQ_KEY\x01" + uniq + "\x02"
            n_props = len(props) if PyUnicode_IS_ASCII(props) else len(props.encode())
        if n_props > MAX_PROPERTIES_BYTES or _may_be_timed_or_half(props):
            return None
    cdef Py_ssize_t size = ITEM_OVERHEAD + n_body + n_props
    cdef Py_ssize_t batch_max = co.batch_max_bytes if co is not None else 0
    if co is not None and size > batch_max:
        return None
    p = _PreparedMessage.__new__(_PreparedMessage)
    _set(p, _PM[0], "body", body)
    _set(p, _PM[1], "born_ms", now_ms)
    _set(p, _PM[2], "flag", flag)
    _set(p, _PM[3], "needs_compress", False)
    _set(p, _PM[4], "properties", props)
    _set(p, _PM[5], "queue_nums", queue_nums)
    _set(p, _PM[6], "sys_flag", 0)
    _set(p, _PM[7], "topic", topic)
    _set(p, _PM[8], "uniq_key", uniq)
    if job_cls is not _job_cls:
        _job_offsets(job_cls)
    job = job_cls.__new__(job_cls)
    _set(job, _JOB[0], "prepared", p)
    _set(job, _JOB[1], "topic", topic)
    _set(job, _JOB[2], "attempts", 1 + retry_times)
    _set(job, _JOB[3], "choice", None)
    _set(job, _JOB[4], "tried", 0)
    _set(job, _JOB[5], "unavailable", 0)
    _set(job, _JOB[6], "last_broker", None)
    _set(job, _JOB[7], "last_error", None)
    _set(job, _JOB[8], "last_result", None)
    _set(job, _JOB[9], "refresh", None)
    _set(job, _JOB[10], "needs_compress", False)
    _set(job, _JOB[11], "settled", False)
    _set(job, _JOB[12], "item_size", size if co is not None else 0)
    loop = co.loop if co is not None else None
    if loop is None:
        loop = _get_running_loop()
    now = loop.time()
    _set(job, _JOB[13], "path", path)
    _set(job, _JOB[14], "deadline", now + remaining)
    cdef bint real = type(inst) is _Instance  # its lookups are read inline (``_broker_addr``)
    tp = inst._publish.get(topic) if real else inst.publish_info(topic)
    if tp is None or not tp.message_queues:
        return path.run(job)
    fault = path.fault
    if co is None:  # auto-batch off: SendPath.start's first attempt (SendPath._attempt's write)
        mq = _next_queue(tp.message_queues, tp.index, fault)
        addr = _broker_addr(inst, _broker_of(mq)) if real else inst.find_broker_addr(_broker_of(mq))
        if addr is None:
            return path.run(job, mq)
        _set(job, _JOB[4], "tried", 1)
        _set(job, _JOB[15], "mq", mq)
        _set(job, _JOB[16], "addr", addr)
        _set(job, _JOB[17], "started", now)
        request = _v2_request(path.group, p, mq) if type(mq) is _MessageQueue else job.request(path.group, mq)
        _set(job, _JOB[18], "future", inst.remoting.invoke_future(addr, request, remaining))
        return job
    q = co._filling.get(topic)
    cdef Py_ssize_t qo0 = -1, qo1 = -1, qo2 = -1, qo3 = -1, qo4 = -1, qo5 = -1
    if q is not None and type(q) is _Pending:
        qo0, qo1, qo2, qo3, qo4, qo5 = _Q[0], _Q[1], _Q[2], _Q[3], _Q[4], _Q[5]
    if (q is not None and _get(q, qo0, "jobs") and <Py_ssize_t>_get(q, qo1, "n_bytes") < batch_max
            and (not fault.enabled or fault.is_available(_broker_of(_get(q, qo2, "mq"))))):
        mq = _get(q, qo2, "mq")  # join the batch still filling (``Coalescer.filling``)
    else:
        q = None
        mq = _next_queue(tp.message_queues, tp.index, fault)
    addr = _broker_addr(inst, _broker_of(mq)) if real else inst.find_broker_addr(_broker_of(mq))
    if addr is None or co._room_waiters or co.held_bytes + size > co.total_batch_max_bytes:
        return path.run(job, mq)
    _set(job, _JOB[4], "tried", 1)
    _set(job, _JOB[15], "mq", mq)
    _set(job, _JOB[16], "addr", addr)
    _set(job, _JOB[17], "started", now)
    if q is not None and _get(q, qo3, "addr") == addr and <Py_ssize_t>_get(q, qo1, "n_bytes") + size <= batch_max:
        fut = loop.create_future()  # ``Coalescer.add`` to a batch still filling
        _set(job, _JOB[18], "future", fut)
        jobs = _get(q, qo0, "jobs")
        if type(jobs) is list:
            (<list>jobs).append(job)
        else:
            jobs.append(job)
        _set(q, qo1, "n_bytes", _get(q, qo1, "n_bytes") + size)
        co.held_bytes += size
        if _get(q, qo4, "in_flight") == 0 and _get(q, qo5, "timer") is None:
            if co.batch_max_delay > 0:
                _set(q, qo5, "timer", loop.call_later(co.batch_max_delay, co._flush, q))
            else:
                _set(q, qo5, "timer", loop.call_soon(co._flush, q))
    else:
        fut = _send_lone(co, job, p, mq, addr, size, now)
        if fut is None:
            fut = co.add(job, mq, addr)
        _set(job, _JOB[18], "future", fut)
    return job


cdef object _next_queue(object queues, object index, object fault):
    """``select_queue(queues, index, fault, None)``: the round robin's next queue, read here when
    every broker is available to it (fault tolerance off, or nothing recorded)."""
    cdef Py_ssize_t n = len(queues)
    if (type(index) is not _RoundRobin or type(fault) is not _Fault or n == 0
            or (fault.enabled and fault._items)):
        return _select_queue(queues, index, fault, None)
    cdef long value = (<long>index._value + 1) & 0x7FFFFFFF  # RoundRobinIndex.next
    index._value = value
    return queues[value % n]


cdef object _send_lone(object co, object job, object p, object mq, object addr, Py_ssize_t size,
                       double now):
    """``co.add(job, mq, addr)`` when it is ``Coalescer._send_lone`` on the queue's idle accumulator
    (a sequential sender: the last send went alone and nothing is held): the request (``MessageJob
    .request``) written now and its response future, the job's own; None, with nothing done,
    otherwise."""
    if (not co.last_lone or co.held_bytes or co.batch_max_delay > 0 or type(mq) is not _MessageQueue
            or type(p) is not _PreparedMessage):
        return None
    topic = _get(mq, _MQ[0], "topic")
    broker = _get(mq, _MQ[1], "broker_name")
    queue_id = _get(mq, _MQ[2], "queue_id")
    q = co._queues.get((addr, topic, broker, queue_id))
    if (q is None or type(q) is not _Pending or _get(q, _Q[0], "jobs") or _get(q, _Q[4], "in_flight") != 0
            or _get(q, _Q[5], "timer") is not None):
        return None
    deadline = _get(job, _JOB[14], "deadline")
    if deadline <= now:
        return None  # Coalescer.add fails it
    request = _v2_request(co.group, p, mq)
    try:
        response = co.invoke(_get(q, _Q[3], "addr"), request, deadline - now)
    except _RocketpyError as err:  # refused at once (too many pending requests)
        co._maybe_forget(q)
        return co._failed(job, err)
    stats = co.stats
    stats.requests += 1
    stats.messages += 1
    _set(q, _Q[4], "in_flight", _get(q, _Q[4], "in_flight") + 1)
    co.held_bytes += size
    _set(job, _JOB[18], "future", response)
    response.add_done_callback(_partial(settle_lone, co, q, size))
    return response


cdef object _v2_request(object group, object p, object mq):
    """``MessageJob.request(group, mq)`` of a job whose prepared message is ``p`` (a
    ``PreparedMessage``; ``mq`` a ``MessageQueue``): ``ext_for``'s header (``send_ext_v2``)."""
    ext = {
        "a": group, "b": _get(p, _PM[7], "topic"), "c": _AUTO_TOPIC, "d": _get(p, _PM[5], "queue_nums"),
        "e": _get(mq, _MQ[2], "queue_id"), "f": _get(p, _PM[6], "sys_flag"), "g": _get(p, _PM[1], "born_ms"),
        "h": _get(p, _PM[2], "flag"), "i": _get(p, _PM[4], "properties"), "j": 0, "k": False, "m": False,
        "n": _get(mq, _MQ[1], "broker_name"),
    }
    return new_command(_RemotingCommand, _V2, 0, 0, None, ext, _get(p, _PM[0], "body"), _MSGPACK)


def settle_lone(co, q, Py_ssize_t size, _done):
    """``Coalescer._settle`` of a ``_send_lone`` request (twin of
    ``rocketpy.client.send_core.settle_lone``)."""
    if not _bound:
        _bind()
    cdef Py_ssize_t o_jobs = -1, o_in_flight = -1, o_timer = -1
    if type(q) is _Pending:
        o_jobs, o_in_flight, o_timer = _Q[0], _Q[4], _Q[5]
    _set(q, o_in_flight, "in_flight", _get(q, o_in_flight, "in_flight") - 1)
    co.held_bytes -= size  # Coalescer._release
    if co._room_waiters:
        co._wake_room()
    if _get(q, o_jobs, "jobs") and _get(q, o_timer, "timer") is None:
        co._flush(q)
    elif len(co._queues) > _KEPT_ACCUMULATORS:  # Coalescer._maybe_forget's first test, here
        co._maybe_forget(q)


cdef inline object _instance_of(object fn):
    """``fn()`` for a path's ``instance``: a started producer's instance read from it when ``fn`` is
    ``Producer._inst`` bound to it (which raises when it is not started)."""
    if type(fn) is _MethodType and <object>PyMethod_GET_FUNCTION(fn) is _inst_method:
        inst = getattr(<object>PyMethod_GET_SELF(fn), "_instance", None)
        if inst is not None:
            return inst
    return fn()


cdef inline object _broker_addr(object inst, object broker_name):
    """``MQClientInstance.find_broker_addr(broker_name)`` (the master's address, or None)."""
    table = inst._broker_addrs.get(broker_name)
    if not table:
        return None
    return table.get(_MASTER_ID)


cdef inline object _broker_of(object mq):
    """``mq.broker_name``."""
    return _get(mq, _MQ_BROKER if type(mq) is _MessageQueue else -1, "broker_name")


def batch_body(list jobs):
    """The SEND_BATCH_MESSAGE body of ``jobs``' prepared messages (twin of
    ``rocketpy.client.send_core.batch_body``)."""
    if not _bound:
        _bind()
    cdef Py_ssize_t n = len(jobs), i, size = 0, k
    cdef list bodies = [None] * n
    cdef list props = [None] * n
    cdef list flags = [None] * n
    cdef unsigned char* out_p
    cdef const unsigned char* src
    for i in range(n):
        prepared = jobs[i].prepared
        body = prepared.body
        flag = prepared.flag
        s = prepared.properties
        if type(body) is not bytes or type(flag) is not int or not -2147483648 <= flag <= 2147483647 \
                or type(s) is not str:
            return _pure_batch_body(jobs)
        props_b = (<str>s).encode("ascii") if PyUnicode_IS_ASCII(s) else (<str>s).encode()
        if PyBytes_GET_SIZE(props_b) > 0xFFFF:
            return _pure_batch_body(jobs)
        bodies[i] = body
        props[i] = props_b
        flags[i] = flag
        size += ITEM_OVERHEAD + PyBytes_GET_SIZE(body) + PyBytes_GET_SIZE(props_b)
    out = PyBytes_FromStringAndSize(NULL, size)
    out_p = <unsigned char*>PyBytes_AS_STRING(out)
    for i in range(n):
        body = bodies[i]
        props_b = props[i]
        k = PyBytes_GET_SIZE(body)
        src = <const unsigned char*>PyBytes_AS_STRING(body)
        _put_u32(out_p, <uint32_t>(ITEM_OVERHEAD + k + PyBytes_GET_SIZE(props_b)))
        _put_u32(out_p + 4, MESSAGE_MAGIC)
        _put_u32(out_p + 8, _crc32(src, k))
        _put_u32(out_p + 12, <uint32_t><int32_t><int64_t>flags[i])
        _put_u32(out_p + 16, <uint32_t>k)
        out_p += BATCH_HEAD_SIZE
        memcpy(out_p, src, k)
        out_p += k
        k = PyBytes_GET_SIZE(props_b)
        out_p[0] = <unsigned char>(k >> 8)
        out_p[1] = <unsigned char>k
        memcpy(out_p + 2, PyBytes_AS_STRING(props_b), k)
        out_p += 2 + k
    return out


def settle_stored(list jobs, first, bint quiet):
    """Resolve each member's future with its ``SendResult`` of a stored batch (twin of
    ``rocketpy.client.send_core.settle_stored``)."""
    if not _bound:
        _bind()
    cdef list offset_ids = first.offset_msg_id.split(",")
    cdef Py_ssize_t n_ids = len(offset_ids), i, n = len(jobs)
    status = first.status
    mq = first.message_queue
    base = first.queue_offset
    settled = True if quiet else False
    for i in range(n):
        j = jobs[i]
        result = _SendResult.__new__(_SendResult)
        _set(result, _SR[0], "status", status)
        _set(result, _SR[1], "msg_id", j.prepared.uniq_key)
        _set(result, _SR[2], "offset_msg_id", offset_ids[i] if i < n_ids else "")
        _set(result, _SR[3], "message_queue", mq)
        _set(result, _SR[4], "queue_offset", base + i)
        fut = j.future
        if not fut.done():
            if type(j) is _job_cls:
                _set(j, _JOB[11], "settled", settled)
            else:
                j.settled = settled
            fut.set_result(result)


def live_members(list jobs):
    """The members of a leaving batch not done yet, the others' bytes and the latest live deadline
    (twin of ``rocketpy.client.send_core.live_members``)."""
    cdef list live = []
    dropped = 0
    deadline = 0.0
    for j in jobs:
        if j.future.done():
            dropped += j.item_size
        else:
            d = j.deadline
            if not live or d > deadline:
                deadline = d
            live.append(j)
    return live, dropped, deadline


def earliest_deadline(list jobs, before):
    """The earliest deadline before ``before`` among members not done yet (twin of
    ``rocketpy.client.send_core.earliest_deadline``)."""
    earliest = before
    for j in jobs:
        d = j.deadline
        if d < earliest and not j.future.done():
            earliest = d
    return earliest


def finish_sent(job, done):
    """``job.finish(done)`` (twin of ``rocketpy.client.send_core.finish_sent``): a SUCCESS answer's
    ``SendResult`` made here (``send_result`` of ``MessageJob.results``), the broker's latency
    recorded as ``SendPath._settle`` records it; any other outcome by ``job.finish``."""
    if not _bound:
        _bind()
    if type(job) is not _job_cls or _SEND_OK is None:
        return job.finish(done)
    try:
        resp = done.result()
    except BaseException:  # a failure, or not done: finish raises it or says retry
        return job.finish(done)
    if type(resp) is not _RemotingCommand or resp.code != 0 or type(resp.ext) is not dict:
        return job.finish(done)
    cdef dict ext = <dict>resp.ext
    offset_id = ext.get("msgId", "")
    queue_id = ext.get("queueId")
    queue_offset = ext.get("queueOffset", 0)
    txid = ext.get("transactionId")
    if (type(offset_id) is not str or type(queue_offset) is not int
            or (queue_id is not None and type(queue_id) is not int)
            or (txid is not None and type(txid) is not str)):
        return job.finish(done)  # the header codec's conversions, or its error
    mq = _get(job, _JOB[15], "mq")
    if type(mq) is not _MessageQueue:
        return job.finish(done)
    fault = _get(job, _JOB[13], "path").fault
    broker_name = _get(mq, _MQ[1], "broker_name")
    cdef double latency_ms = (done.get_loop().time() - <double>_get(job, _JOB[17], "started")) * 1000.0
    if type(fault) is not _Fault or (  # else LatencyFaultTolerance.quiet's test, without its frame
            fault.enabled and (latency_ms >= _QUIET_LATENCY_MS or broker_name in fault._items)):
        fault.update(broker_name, latency_ms)
    queue = _MessageQueue.__new__(_MessageQueue)
    _set(queue, _MQ[0], "topic", _get(mq, _MQ[0], "topic"))
    _set(queue, _MQ[1], "broker_name", broker_name)
    _set(queue, _MQ[2], "queue_id", _get(mq, _MQ[2], "queue_id") if queue_id is None else queue_id)
    result = _SendResult.__new__(_SendResult)
    _set(result, _SR[0], "status", _SEND_OK)
    prepared = _get(job, _JOB[0], "prepared")
    uniq = _get(prepared, _PM[8] if type(prepared) is _PreparedMessage else -1, "uniq_key")
    _set(result, _SR[1], "msg_id", uniq or txid or "")
    _set(result, _SR[2], "offset_msg_id", offset_id)
    _set(result, _SR[3], "message_queue", queue)
    _set(result, _SR[4], "queue_offset", queue_offset)
    return result


# -- large bodies' compression off the loop (twin of ``client/deflate.py``'s ``start_deflate``) ---
# A body is compressed by a C thread of this module, which never takes the GIL: the loop queues a
# job (the body's bytes, kept alive by the loop's table of pending jobs until it is settled) and
# goes on; the thread compresses it and writes the job's address to its loop's pipe; the loop's
# reader settles the job's future. A Python worker thread would take the GIL twice a body, each
# up to the interpreter's switch interval (5 ms) while the loop is busy: a loop sending a few
# hundred large bodies a second (a traced consumer's trace messages) fell behind on them.

cdef extern from "zlib.h":
    ctypedef unsigned long uLong
    ctypedef unsigned long uLongf
    ctypedef unsigned char Bytef
    uLong compressBound(uLong source_len) nogil
    int compress2(Bytef* dest, uLongf* dest_len, const Bytef* source, uLong source_len, int level) nogil
    int Z_OK
    int Z_MEM_ERROR


cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef struct pthread_attr_t:
        pass
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*run)(void*) noexcept nogil,
                       void* arg)
    int pthread_detach(pthread_t thread)
    int pthread_mutex_init(pthread_mutex_t* m, const void* attr)
    int pthread_mutex_lock(pthread_mutex_t* m)
    int pthread_mutex_unlock(pthread_mutex_t* m)
    int pthread_cond_init(pthread_cond_t* c, const void* attr)
    int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m)
    int pthread_cond_signal(pthread_cond_t* c)


cdef extern from "<unistd.h>" nogil:
    ssize_t write(int fd, const void* buf, size_t n)
    int close(int fd)
    int getpid()


cdef extern from "<errno.h>" nogil:
    int errno
    int EINTR


cdef struct _Job:
    const Bytef* src
    uLong src_len
    int level
    Bytef* dst
    uLongf dst_len
    int rc
    int notify_fd  # the write end of the job's loop's pipe
    _Job* next


cdef struct _Jobs:
    pthread_mutex_t lock
    pthread_cond_t ready
    _Job* head
    _Job* tail


# (reached through the pointer the thread is given, so the compiler reloads it after each lock call)
cdef _Jobs _jobs
cdef int _deflater_pid = 0  # the process whose thread runs (a forked child starts its own)


cdef void* _deflater(void* arg) noexcept nogil:
    """The C thread: compress queued jobs one after another, each announced on its loop's pipe."""
    cdef _Jobs* jobs = <_Jobs*>arg
    cdef _Job* job
    cdef size_t address
    while True:
        pthread_mutex_lock(&jobs.lock)
        while jobs.head is NULL:
            pthread_cond_wait(&jobs.ready, &jobs.lock)
        job = jobs.head
        jobs.head = job.next
        if jobs.head is NULL:
            jobs.tail = NULL
        pthread_mutex_unlock(&jobs.lock)
        job.dst_len = compressBound(job.src_len)
        job.dst = <Bytef*>PyMem_RawMalloc(job.dst_len + 1)
        if job.dst is NULL:
            job.rc = Z_MEM_ERROR
        else:
            job.rc = compress2(job.dst, &job.dst_len, job.src, job.src_len, job.level)
        address = <size_t>job
        while write(job.notify_fd, &address, sizeof(address)) < 0 and errno == EINTR:
            pass  # (a closed pipe: its loop is gone, and the job with it)
    return NULL


cdef int _start_deflater() except -1:
    cdef pthread_t thread
    global _deflater_pid
    pthread_mutex_init(&_jobs.lock, NULL)
    pthread_cond_init(&_jobs.ready, NULL)
    _jobs.head = _jobs.tail = NULL
    if pthread_create(&thread, NULL, _deflater, &_jobs) != 0:
        raise OSError("could not start the compression thread")
    pthread_detach(thread)
    _deflater_pid = getpid()
    return 0


cdef class _LoopPipe:
    """One loop's end of the compression thread: the pipe the thread announces finished jobs on,
    and the loop's pending jobs by address (each with its body, kept alive, and its future)."""

    cdef int read_fd, write_fd
    cdef dict pending

    def __init__(self, loop):
        self.read_fd, self.write_fd = _os.pipe2(_os.O_CLOEXEC)
        _os.set_blocking(self.read_fd, False)
        self.pending = {}
        loop.add_reader(self.read_fd, self.on_ready)

    def __dealloc__(self):
        # (C calls only: this may run while the interpreter shuts down, its modules gone)
        if self.pending:  # the loop went with jobs in the thread: keep their bodies and the pipe
            for body, _ in self.pending.values():
                Py_INCREF(body)
            return
        close(self.read_fd)
        close(self.write_fd)

    def on_ready(self):
        """Settle the jobs the thread finished."""
        cdef _Job* job
        cdef Py_ssize_t i
        try:
            data = _os.read(self.read_fd, 8 * 1024)
        except BlockingIOError:
            return
        cdef const char* p = PyBytes_AS_STRING(data)
        for i in range(0, PyBytes_GET_SIZE(data) - 7, 8):
            job = (<_Job**>(p + i))[0]
            body, done = self.pending.pop(<size_t>job)
            try:
                if job.rc == Z_OK:
                    out = PyBytes_FromStringAndSize(<char*>job.dst, job.dst_len)
                    if not done.done():
                        done.set_result(out)
                elif not done.done():
                    done.set_exception(
                        MemoryError() if job.rc == Z_MEM_ERROR else zlib.error(f"Error {job.rc} while compressing data")
                    )
            finally:
                PyMem_RawFree(job.dst)
                PyMem_RawFree(job)


cdef object _pipes = None  # the loops' _LoopPipe, by loop (weakly)
cdef object _pure_start_deflate = None


def start_deflate(loop, bytes body, int level, done):
    """Twin of ``rocketpy.client.deflate.start_deflate``: ``zlib.compress(body, level)`` made by the
    compression thread (the same zlib stream: ``compress2`` is zlib's one-shot deflate with the
    defaults Python's uses); ``done`` gets it on ``loop``. Level 0 (stored blocks, which Python's
    zlib splits its own way) goes to a worker thread as the pure twin does."""
    global _pipes, _pure_start_deflate
    if _pipes is None:
        from rocketpy._accel import PURE

        _pure_start_deflate = PURE["start_deflate"]
        _pipes = _weakref.WeakKeyDictionary()
    if level < -1 or level > 9 or level == 0:  # zlib's error, or stored blocks
        _pure_start_deflate(loop, body, level, done)
        return
    pipe = _pipes.get(loop)
    if pipe is None:
        pipe = _pipes[loop] = _LoopPipe(loop)
    if _deflater_pid != getpid():
        _start_deflater()
    cdef _Job* job = <_Job*>PyMem_RawMalloc(sizeof(_Job))
    if job is NULL:
        raise MemoryError()
    job.src = <const Bytef*>PyBytes_AS_STRING(body)
    job.src_len = <uLong>PyBytes_GET_SIZE(body)
    job.level = level
    job.dst = NULL
    job.notify_fd = (<_LoopPipe>pipe).write_fd
    job.next = NULL
    (<_LoopPipe>pipe).pending[<size_t>job] = (body, done)
    cdef _Jobs* jobs = &_jobs
    with nogil:
        pthread_mutex_lock(&jobs.lock)
        if jobs.tail is NULL:
            jobs.head = jobs.tail = job
        else:
            jobs.tail.next = job
            jobs.tail = job
        pthread_cond_signal(&jobs.ready)
        pthread_mutex_unlock(&jobs.lock)
