# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the broker's send-run fast path: ``plain_messages``, ``group_plain`` and
``stored_answers`` of ``rocketpy/broker/processors/sendrun.py``.

``rocketpy._accel`` chooses them or their pure twins. The classes, marks and limits are read from
``rocketpy.broker.processors.sendrun`` (and what it imports) the first time a function runs
(``_bind_run``), not copied: ``rocketpy._accel`` loads this module before those exist.

The signatures are declared in ``_sendrun.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_Substring

from rocketpy._cshared cimport _contains, _latin1, memmem, new_command
from rocketpy.broker.processors._brokermsg cimport new_broker_message

__all__ = ["group_plain", "plain_messages", "stored_answers"]


cdef bint _run_bound = False
cdef object _BrokerMessage = None
cdef object _RemotingCommand = None
cdef object _host8_of = None
cdef dict _host8_cache = None
cdef object _get_property = None
cdef object _UNIQ_SEP = None
cdef object _UNSEEN = None
cdef bytes _TRAN_MARK = b""
cdef str _TRAN_STR = ""
cdef str _WAIT_FALSE = ""
cdef long _V2 = 0
cdef long _PERM_WRITE = 0
cdef long _FLAG_RESPONSE = 0
cdef Py_ssize_t _SHORT_PROPS = 0


cdef int _bind_run() except -1:
    global _run_bound, _BrokerMessage, _RemotingCommand, _host8_of, _host8_cache, _get_property, _UNIQ_SEP
    global _UNSEEN
    global _TRAN_MARK, _TRAN_STR, _V2, _PERM_WRITE, _FLAG_RESPONSE, _SHORT_PROPS, _WAIT_FALSE
    from rocketpy.broker.processors import sendrun

    _BrokerMessage = sendrun.BrokerMessage
    _RemotingCommand = sendrun.RemotingCommand
    _host8_of = sendrun._host8
    from rocketpy.broker.store import message

    _host8_cache = message._host_cache
    _get_property = sendrun.get_property
    _UNIQ_SEP = sendrun.UNIQ_SEP
    _UNSEEN = sendrun._UNSEEN
    _TRAN_MARK = sendrun.TRAN_MARK.encode("latin-1")
    _TRAN_STR = sendrun.TRAN_MARK
    _WAIT_FALSE = sendrun.WAIT_FALSE_MARK
    _V2 = sendrun._V2
    _PERM_WRITE = sendrun.PERM_WRITE
    _FLAG_RESPONSE = sendrun.FLAG_RESPONSE
    _SHORT_PROPS = sendrun.SHORT_PROPS
    _run_bound = True
    return 0


cdef inline object _get(dict d, str key, object default):
    cdef PyObject* v = PyDict_GetItem(d, key)
    return default if v == NULL else <object>v


cdef inline bint _i32(object v):
    return -2147483648 <= v <= 2147483647


def plain_messages(list requests, topic_config, dict problems, born, Py_ssize_t max_body):
    """For each request: its message when it is a plain single send the fast path takes, else None
    (twin of ``rocketpy.broker.processors.sendrun.plain_messages``)."""
    if not _run_bound:
        _bind_run()
    cdef list out = []
    cdef dict ext
    cdef Py_ssize_t n, queue_id
    cdef const unsigned char* p
    cdef PyObject* cached = PyDict_GetItem(_host8_cache, born)  # _host8's cache, read without its call
    host8 = <object>cached if cached != NULL else _host8_of(born)
    for request in requests:
        e = request.ext
        if request.code != _V2 or type(e) is not dict:
            out.append(None)
            continue
        ext = <dict>e
        topic = _get(ext, "b", None)
        q = _get(ext, "e", None)
        props = _get(ext, "i", "")
        sys_flag = _get(ext, "f", 0)
        born_ts = _get(ext, "g", 0)
        flag = _get(ext, "h", 0)
        reconsume = _get(ext, "j", 0)
        if (type(topic) is not str or type(q) is not int or type(props) is not str
                or type(sys_flag) is not int or type(born_ts) is not int or type(flag) is not int
                or type(reconsume) is not int or _get(ext, "m", False) is not False
                or type(_get(ext, "a", "")) is not str or type(_get(ext, "c", "")) is not str
                or type(_get(ext, "d", 4)) is not int or type(_get(ext, "k", False)) is not bool
                or type(_get(ext, "n", "")) is not str
                or not (_i32(sys_flag) and _i32(flag) and _i32(reconsume))):
            out.append(None)
            continue
        if _get(problems, <str>topic, _UNSEEN) is not None or q < 0 or q > 2147483647:
            out.append(None)
            continue
        queue_id = q
        body = request.body
        if len(body) > max_body:
            out.append(None)
            continue
        p = _latin1(<str>props, &n)
        if p == NULL:  # wider than Latin-1: the same screens on the str
            if len(props) > _SHORT_PROPS or "DELAY" in props or "TIMER_" in props or _TRAN_STR in props:
                out.append(None)
                continue
        elif (n > _SHORT_PROPS or _contains(p, n, b"DELAY", 5) or _contains(p, n, b"TIMER_", 6)
                or _contains(p, n, <const char*>_TRAN_MARK, len(_TRAN_MARK))):
            out.append(None)
            continue
        tc = topic_config(topic)
        if (tc is None or not (<long>tc.perm & _PERM_WRITE)
                or not (queue_id < tc.write_queue_nums or queue_id < tc.read_queue_nums)):
            out.append(None)
            continue
        m = new_broker_message(_BrokerMessage, topic, q, body, props, flag, sys_flag, born_ts, host8,
                               reconsume)
        out.append(m)
    return out


def group_plain(list requests, list plain, Py_ssize_t start, list out, dict groups, Py_ssize_t max_group,
                put_full):
    """Add the plain sends from ``requests[start]`` on to their open group (twin of
    ``rocketpy.broker.processors.sendrun.group_plain``); returns the index of the first request
    that is not plain (the requests' count when there is none)."""
    if not _run_bound:
        _bind_run()
    cdef Py_ssize_t i = start, n = PyList_GET_SIZE(requests)
    cdef PyObject* found
    if start < 0 or PyList_GET_SIZE(plain) < n:
        raise IndexError("group_plain: a message (or None) for each request from start on")
    while i < n:
        msg = <object>PyList_GET_ITEM(plain, i)
        if msg is None:
            return i
        topic, queue_id, props = msg.topic, msg.queue_id, msg.properties
        key = (topic, queue_id, _WAIT_FALSE not in props)
        found = PyDict_GetItem(groups, key)
        if found == NULL:
            members = []
            groups[key] = members
        else:
            members = <object>found
        members.append(PyList_GET_SIZE(out))
        out.append((<object>PyList_GET_ITEM(requests, i), msg, queue_id, props))
        if len(members) >= max_group:
            put_full(groups.pop(key))
        i += 1
    return n


cdef inline object _unique_key(str props):
    """``get_property(props, UNIQ_SEP)``: the first ``UNIQ_KEY\\x01`` that starts a pair."""
    cdef Py_ssize_t n, start, end
    cdef const unsigned char* p = _latin1(props, &n)
    cdef const unsigned char* at
    cdef const unsigned char* from_
    if p == NULL:
        return _get_property(props, _UNIQ_SEP)
    from_ = p
    while True:
        if p + n - from_ < 9:
            return None
        at = <const unsigned char*>memmem(from_, <size_t>(p + n - from_), b"UNIQ_KEY\x01", 9)
        if at == NULL:
            return None
        if at == p or at[-1] == 2:
            break
        from_ = at + 1
    start = at - p + 9
    end = start
    while end < n and p[end] != 2:
        end += 1
    return PyUnicode_Substring(props, start, end)


def stored_answers(list out, list members, result, str host_hex):
    """Answer the sends at ``members`` of ``out`` stored by the one append ``result``; returns the
    bodies' bytes (twin of ``rocketpy.broker.processors.sendrun.stored_answers``)."""
    if not _run_bound:
        _bind_run()
    cdef list sizes = result.sizes
    cdef Py_ssize_t k, count = PyList_GET_SIZE(members), total = 0
    cdef long long offset = result.wrote_offset, queue_offset = result.queue_offset
    assert sizes is not None and PyList_GET_SIZE(sizes) == count
    for k in range(count):
        i = <object>PyList_GET_ITEM(members, k)
        request, _msg, queue_id, props = out[i]
        ext = {"msgId": f"{host_hex}{offset:016X}", "queueOffset": queue_offset + k, "queueId": queue_id}
        uniq = _unique_key(props)
        if uniq:
            ext["transactionId"] = uniq
        out[i] = new_command(_RemotingCommand, 0, request.opaque, _FLAG_RESPONSE, None, ext, b"",
                             request.serialize_type)
        total += len(request.body)
        offset += <long long>(<object>PyList_GET_ITEM(sizes, k))
    return total
