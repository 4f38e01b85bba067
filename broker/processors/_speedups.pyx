# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of the send processor's batch helper: ``batch_messages`` of ``rocketpy/broker/processors/send.py``.

``rocketpy._accel`` chooses it or its pure twin. The message class and the transaction mark are read
from ``rocketpy.broker.store`` and ``rocketpy.broker.transaction`` the first time it runs
(``_bind_batch``), not copied: ``rocketpy._accel`` loads this module before those exist.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.unicode cimport PyUnicode_Substring

from rocketpy._cshared cimport _contains, _latin1, memmem
from rocketpy.broker.processors._brokermsg cimport new_broker_message

__all__ = ["batch_messages"]


# -- the message class and marks, bound on first use ----------------------------------------------
cdef bint _batch_bound = False
cdef object _BrokerMessage = None
cdef object _host8_of = None
cdef object _pure_batch_messages = None
cdef bytes _TRAN_MARK = b""


cdef int _bind_batch() except -1:
    global _batch_bound, _BrokerMessage, _host8_of, _pure_batch_messages, _TRAN_MARK
    from rocketpy._accel import PURE
    from rocketpy.broker.store import message
    from rocketpy.broker.transaction import half

    _BrokerMessage = message.BrokerMessage
    _host8_of = message._host8
    _TRAN_MARK = half._TRAN_MARK.encode("latin-1")
    _pure_batch_messages = PURE["batch_messages"]
    _batch_bound = True
    return 0


cdef inline str _unique_key_of(str s, const unsigned char* p, Py_ssize_t n):
    """``unique_key_of(s) or ""`` (its first ``UNIQ_KEY\\x01`` only, as it finds it)."""
    cdef const unsigned char* at = <const unsigned char*>memmem(p, <size_t>n, b"UNIQ_KEY\x01", 9) if n >= 9 else NULL
    cdef Py_ssize_t start, end
    if at == NULL or (at != p and at[-1] != 2):
        return ""
    start = at - p + 9
    end = start
    while end < n and p[end] != 2:
        end += 1
    return PyUnicode_Substring(s, start, end)


def batch_messages(list items, str topic, queue_id, sys_flag, born_ts, born, reconsume, Py_ssize_t max_body,
                   Py_ssize_t short_props):
    """The messages of a decoded batch, their UNIQ_KEYs comma-joined and the items to look at closer
    (twin of ``rocketpy.broker.processors.send.batch_messages``)."""
    if not _batch_bound:
        _bind_batch()
    cdef list msgs = [], uniqs = [], screened = []
    cdef Py_ssize_t i = 0, n
    cdef const unsigned char* p
    host8 = _host8_of(born)
    for item in items:
        body, flag, props = item
        if type(props) is not str:
            return _pure_batch_messages(items, topic, queue_id, sys_flag, born_ts, born, reconsume, max_body,
                                        short_props)
        p = _latin1(props, &n)
        if p == NULL:
            return _pure_batch_messages(items, topic, queue_id, sys_flag, born_ts, born, reconsume, max_body,
                                        short_props)
        if (len(body) > max_body or n > short_props or _contains(p, n, b"DELAY", 5) or _contains(p, n, b"TIMER_", 6)
                or _contains(p, n, <const char*>_TRAN_MARK, len(_TRAN_MARK))):
            screened.append(i)
        m = new_broker_message(_BrokerMessage, topic, queue_id, body, props, flag, sys_flag, born_ts, host8,
                               reconsume)
        msgs.append(m)
        uniqs.append(_unique_key_of(props, p, n))
        i += 1
    return msgs, ",".join(uniqs), screened
