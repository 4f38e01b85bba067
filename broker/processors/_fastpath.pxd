# cython: language_level=3
"""What the compiled fast paths share (cimported by ``_pullpath.pyx``, ``_poppath.pyx`` and
``_sendrun.pyx``, compiled into each; no module of this name at run time): a header field read
from the request's map, and ``BrokerStats.on_get`` / ``on_put`` without their frames (the twin
tests compare the statistics both paths leave)."""

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject


cdef inline object ext_get(dict ext, str key, object default):
    """``ext.get(key, default)`` with a C dict lookup."""
    cdef PyObject* v = PyDict_GetItem(ext, key)
    return default if v == NULL else <object>v


cdef inline int count_get(object stats, str group, str topic, Py_ssize_t n, Py_ssize_t size,
                          Py_ssize_t max_group_counters, object new_pair) except -1:
    """``stats.on_get(group, topic, n, size)``: the same counters, bounds and order
    (``max_group_counters``, ``new_pair``: ``rocketpy.broker.stats``' ``MAX_GROUP_COUNTERS``,
    ``_new_pair``)."""
    cdef dict per_group = stats.group_get_msgs
    cdef dict per_pair = stats.group_topic_gets
    cdef PyObject* found
    stats.get_msgs_total += n
    stats.get_bytes_total += size
    stats.get_requests_total += 1
    found = PyDict_GetItem(per_group, group)
    if found != NULL:
        per_group[group] = <object>found + n
    elif len(per_group) < max_group_counters:
        per_group[group] = n
    key = (group, topic)
    found = PyDict_GetItem(per_pair, key)
    pair = <object>found if found != NULL and <object>found else new_pair(per_pair, key)
    pair[0] += n
    pair[1] += size
    pair[2] += 1
    return 0


cdef inline int count_put(object stats, str topic, Py_ssize_t n, Py_ssize_t size, object new_pair) except -1:
    """``stats.on_put(topic, n, size)``: the same counters (``new_pair``: ``rocketpy.broker.stats``'
    ``_new_pair``)."""
    cdef dict per_topic = stats.topic_puts
    cdef PyObject* found
    stats.put_msgs_total += n
    stats.put_bytes_total += size
    stats.put_requests_total += 1
    found = PyDict_GetItem(per_topic, topic)
    pair = <object>found if found != NULL and <object>found else new_pair(per_topic, topic)
    pair[0] += n
    pair[1] += size
    pair[2] += 1
    return 0
