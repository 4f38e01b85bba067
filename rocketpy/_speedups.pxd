# cython: language_level=3
# What other compiled modules cimport from the record layer's (rocketpy/_speedups.pyx): the commitlog's
# append loop (rocketpy/broker/store/_speedups.pyx) packs each record through the record encoder at C
# level, as it did when both were one module.


# Read the record layout from rocketpy.record (again if done already); call it before _pack_record.
cdef int _bind_record() except -1

# pack_record into an acquired writable buffer; the record's size.
cdef Py_ssize_t _pack_record(Py_buffer* out, Py_ssize_t pos, topic_b, props_b, body, queue_id, flag,
                             queue_offset, phys, sys_flag, born_ts, born_host8, store_ts, store_host8,
                             reconsume_times, prepared_offset) except -1
