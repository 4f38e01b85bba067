# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the broker's send-run fast path: ``run_plain``, ``plain_messages``, ``group_plain``
and ``stored_answers`` of ``rocketpy/broker/processors/sendrun.py``.

``run_plain`` does the other three in its one frame (their ``cdef`` bodies, no call between them)
and reads ``SendMessageProcessor._plain``'s conditions and ``_put_group`` / ``_stored_group``'s
common case in place; every other outcome of a put goes to ``SendMessageProcessor._after_put``.

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
from rocketpy.broker.processors._fastpath cimport count_put

__all__ = ["group_plain", "plain_messages", "run_plain", "stored_answers"]


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
cdef Py_ssize_t _MAX_RUN_GROUP = 0
cdef object _PutMessageResult = None
cdef object _PUT_OK = None
cdef dict _host_hex_cache = None
cdef object _BrokerStats = None
cdef object _new_pair = None


cdef int _bind_run() except -1:
    global _run_bound, _BrokerMessage, _RemotingCommand, _host8_of, _host8_cache, _get_property, _UNIQ_SEP
    global _UNSEEN
    global _TRAN_MARK, _TRAN_STR, _V2, _PERM_WRITE, _FLAG_RESPONSE, _SHORT_PROPS, _WAIT_FALSE
    global _MAX_RUN_GROUP, _PutMessageResult, _PUT_OK, _host_hex_cache, _BrokerStats, _new_pair
    from rocketpy.broker.processors import sendrun
    from rocketpy.broker.store import results

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
    _MAX_RUN_GROUP = sendrun.MAX_RUN_GROUP
    _PutMessageResult = sendrun.PutMessageResult
    _PUT_OK = results.PutMessageStatus.PUT_OK
    _host_hex_cache = results._host_hex  # PutMessageResult.host_hex's cache, read without its frame
    _BrokerStats = sendrun.BrokerStats
    _new_pair = sendrun._new_pair
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
    return _plain_messages(requests, topic_config, problems, born, max_body)


cdef list _plain_messages(list requests, object topic_config, dict problems, object born,
                          Py_ssize_t max_body):
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
    return _group_plain(requests, plain, start, out, groups, max_group, put_full, None)


cdef Py_ssize_t _group_plain(list requests, list plain, Py_ssize_t start, list out, dict groups,
                             Py_ssize_t max_group, object put_full, object processor) except -1:
    """``group_plain``; a full group goes to ``put_full``, or to ``_put_group`` of ``processor``
    when it is given."""
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
            if processor is None:
                put_full(groups.pop(key))
            else:
                _put_group(processor, out, groups.pop(key))
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
    return _stored_answers(out, members, result, host_hex)


cdef Py_ssize_t _stored_answers(list out, list members, object result, str host_hex) except -1:
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


def run_plain(processor, channel, list requests):
    """``processor.handle_run``'s answers when every request is a plain send the fast path takes
    and the run's conditions hold, else None with nothing done (twin of
    ``rocketpy.broker.processors.sendrun.run_plain``)."""
    if not _run_bound:
        _bind_run()
    cdef Py_ssize_t i, n = PyList_GET_SIZE(requests)
    for i in range(n):
        if (<object>PyList_GET_ITEM(requests, i)).code != _V2:
            return None
    # SendMessageProcessor._plain's conditions
    born = channel.attrs.get("born_host")
    if (born is None or processor.write_gate is not None or processor.ack_gate is not None
            or not (<long>processor.broker_config.broker_permission & _PERM_WRITE)):
        return None
    send_queue = processor.send_queue
    if (send_queue._entries or send_queue._flush_started()) and send_queue.would_refuse():
        return None  # (would_refuse's own first test, without its frame when nothing waits)
    cdef list plain = _plain_messages(requests, processor.topic_config.get, processor._topic_problems,
                                      born, processor.store_config.max_message_size)
    for i in range(n):
        if <object>PyList_GET_ITEM(plain, i) is None:
            return None
    cdef list out = []
    cdef dict groups = {}
    _group_plain(requests, plain, 0, out, groups, _MAX_RUN_GROUP, None, processor)
    for members in groups.values():
        _put_group(processor, out, <list>members)
    return out


cdef int _put_group(object processor, list out, list members) except -1:
    """``processor._put_group(out, members)``: a group stored at once with PUT_OK and nothing to
    wait for answered here (``_stored_group``'s common case), any other outcome by
    ``processor._after_put``."""
    cdef Py_ssize_t count = PyList_GET_SIZE(members)
    msgs = [(<tuple>out[i])[1] for i in members]
    put = processor.store.put_now(msgs)
    if (type(put) is not _PutMessageResult or processor.replica_future is not None
            or put.status is not _PUT_OK or processor.ack_gate is not None
            or put.sizes is None or len(put.sizes) != count):
        processor._after_put(out, members, msgs, put)
        return 0
    cdef PyObject* hex_ = PyDict_GetItem(_host_hex_cache, put._host8)
    host_hex = <object>hex_ if hex_ != NULL else put.host_hex
    cdef Py_ssize_t size = _stored_answers(out, members, put, host_hex)
    stats = processor.stats
    topic = msgs[0].topic
    if type(stats) is _BrokerStats and type(topic) is str:
        count_put(stats, topic, count, size, _new_pair)
    else:
        stats.on_put(topic, count, size)
    return 0
