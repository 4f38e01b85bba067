# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of the SEND_MESSAGE_V2 header's fast read: ``read_typical_v2`` of ``rocketpy/protocol/headers/send.py``.

``rocketpy._accel`` chooses it or its pure twin. The default topic and the field types it expects
are read from ``rocketpy.protocol.headers.send`` the first time it runs (``_bind_send``), not copied:
``rocketpy._accel`` loads this module before that one exists.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.dict cimport PyDict_GetItem
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject

__all__ = ["read_typical_v2"]


# -- the header's shape, bound from rocketpy.protocol.headers.send on first use ------------------------------
cdef bint _send_bound = False
cdef object _DEFAULT_TOPIC = None
cdef object _pure_read_typical_v2 = None


cdef int _bind_send() except -1:
    global _send_bound, _DEFAULT_TOPIC, _pure_read_typical_v2
    from rocketpy import _accel
    from rocketpy.protocol.headers import send

    if send._TYPICAL_V2_TYPES != (str, int, str, int, int, int, int, str, str, int, bool, bool, str):
        raise ImportError("rocketpy.protocol.headers._speedups was built for another send header; rebuild it")
    _DEFAULT_TOPIC = send._DEFAULT_TOPIC
    _pure_read_typical_v2 = _accel.PURE["read_typical_v2"]
    _send_bound = True
    return 0


cdef inline bint _is_int32(object v) except -1:
    # ``v`` is an exact int here; out of the C range counts as out of the int32 range.
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    return overflow == 0 and -2147483648 <= x <= 2147483647


cdef inline object _dget(dict d, str key, object default):
    cdef PyObject* v = PyDict_GetItem(d, key)
    return default if v == NULL else <object>v


def read_typical_v2(h, ext):
    """Fill ``h`` from a plain V2 header (twin of ``rocketpy.protocol.headers.send.read_typical_v2``)."""
    if not _send_bound:
        _bind_send()
    if type(ext) is not dict:  # not what a decoder produces: the pure twin handles any mapping
        return _pure_read_typical_v2(h, ext)
    cdef dict d = <dict>ext
    topic = _dget(d, "b", None)
    queue_id = _dget(d, "e", None)
    properties = _dget(d, "i", "")
    sys_flag = _dget(d, "f", 0)
    born = _dget(d, "g", 0)
    flag = _dget(d, "h", 0)
    reconsume = _dget(d, "j", 0)
    group = _dget(d, "a", "")
    default_topic = _dget(d, "c", _DEFAULT_TOPIC)
    default_nums = _dget(d, "d", 4)
    unit_mode = _dget(d, "k", False)
    batch = _dget(d, "m", False)
    broker_name = _dget(d, "n", "")
    if not (type(topic) is str and type(queue_id) is int and type(properties) is str and type(sys_flag) is int
            and type(born) is int and type(flag) is int and type(reconsume) is int and type(group) is str
            and type(default_topic) is str and type(default_nums) is int and type(unit_mode) is bool
            and type(batch) is bool and type(broker_name) is str):
        return False
    if not (_is_int32(queue_id) and _is_int32(sys_flag) and _is_int32(flag) and _is_int32(reconsume)):
        return False
    h.topic = topic
    h.queue_id = queue_id
    h.properties = properties
    h.sys_flag = sys_flag
    h.born_timestamp = born
    h.flag = flag
    h.reconsume_times = reconsume
    h.producer_group = group
    h.default_topic = default_topic
    h.default_topic_queue_nums = default_nums
    h.unit_mode = unit_mode
    h.batch = batch
    h.broker_name = broker_name
    return True
