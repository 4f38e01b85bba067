# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled core: C twins of the byte-layout hot loops (see ``rocketpy/_accel.py``).

Every function here has a pure-Python twin of the same name and signature in ``rocketpy/record.py``
or ``rocketpy/remoting/codec.py``; ``rocketpy._accel.twin`` picks one at import time. The twins give
the same bytes out for the same input and raise the same exception types (tests/unit/test_speedups.py
checks both with the same random and hostile inputs).

The layout constants and error classes are read from the Python modules on first use (``_bind_*``),
not copied: those modules import this one through ``rocketpy._accel`` while they load. Every buffer
access is bounds-checked by hand before it happens: no input may crash the process.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_Append
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH, PyUnicode_Substring
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memcmp, memcpy, memset

from rocketpy._cshared cimport (
    PyUnicode_1BYTE_KIND, PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_IS_ASCII, PyUnicode_KIND,
    PyUnicode_New, PyUnicode_READY, _Buf, _contains, _crc32, _get_u32, _get_u64, _grow, _int, _latin1, _put,
    _put_u32, _put_u64, _struct_error, _writable, memmem, rocketpy_crc32,
)

import zlib

__all__ = (
    "crc32", "pack_record", "append_records", "string_to_properties", "properties_to_string", "_decode_at",
    "decode_records", "encode_batch", "decode_batch", "read_typical_v2", "decode_columns", "signed_ext",
    "hmac_signature", "tags_hash", "put_unique_key_entry", "read_record", "dispatch_run", "redispatch",
    "batch_messages",
)


# -- layout bound from the pure modules on first use ----------------------------------------------
cdef bint _record_bound = False
cdef object RecordError = None
cdef uint32_t MESSAGE_MAGIC = 0
cdef Py_ssize_t HEAD_SIZE = 0
cdef Py_ssize_t BATCH_HEAD_SIZE = 0
cdef Py_ssize_t MAX_PROPERTIES_BYTES = 0
cdef int32_t COMPRESSED_FLAG = 0
cdef object _ensure_unique_key = None

cdef object _new_ext = None  # MessageExt.__new__, bound with the record layout
cdef object _MessageExt = None
cdef object _decompress = zlib.decompress


cdef int _bind_record() except -1:
    global _record_bound, RecordError, MESSAGE_MAGIC, HEAD_SIZE, BATCH_HEAD_SIZE, MAX_PROPERTIES_BYTES
    global COMPRESSED_FLAG, _ensure_unique_key, _new_ext, _MessageExt
    from rocketpy import record
    from rocketpy.message import MessageExt

    if record.HEAD_SIZE != 88 or record.BATCH_HEAD.size != 20:
        raise ImportError("rocketpy._speedups was built for another record layout; rebuild it")
    RecordError = record.RecordError
    MESSAGE_MAGIC = record.MESSAGE_MAGIC
    HEAD_SIZE = record.HEAD_SIZE
    BATCH_HEAD_SIZE = record.BATCH_HEAD.size
    MAX_PROPERTIES_BYTES = record.MAX_PROPERTIES_BYTES
    COMPRESSED_FLAG = record.COMPRESSED_FLAG
    _ensure_unique_key = record._ensure_unique_key
    _new_ext, _MessageExt = MessageExt.__new__, MessageExt
    _record_bound = True
    return 0


def crc32(data, uint32_t value=0):
    """CRC-32 of ``data`` continuing from ``value``, as ``zlib.crc32`` (its twin: ``rocketpy.record.body_crc``)."""
    cdef Py_buffer b
    cdef uint32_t c
    PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
    try:
        with nogil:
            c = rocketpy_crc32(value, <const unsigned char*>b.buf, <size_t>b.len)
    finally:
        PyBuffer_Release(&b)
    return c


cdef inline void _put_host(unsigned char* p, const Py_buffer* b) noexcept nogil:
    # struct's "8s": copied, truncated or zero-padded to 8 bytes.
    cdef Py_ssize_t n = b.len if b.len < 8 else 8
    memcpy(p, b.buf, n)
    if n < 8:
        memset(p + n, 0, 8 - n)


# -- the record encoder -------------------------------------------------------------------------
cdef Py_ssize_t _pack_record(Py_buffer* out, Py_ssize_t pos, topic_b, props_b, body, queue_id, flag,
                             queue_offset, phys, sys_flag, born_ts, born_host8, store_ts, store_host8,
                             reconsume_times, prepared_offset) except -1:
    """``pack_record`` into an acquired writable buffer; the record's size."""
    cdef int32_t c_queue_id = <int32_t>_int(queue_id, -2147483648, 2147483647, "i")
    cdef int32_t c_flag = <int32_t>_int(flag, -2147483648, 2147483647, "i")
    cdef int64_t c_queue_offset = _int(queue_offset, -9223372036854775807 - 1, 9223372036854775807, "q")
    cdef int64_t c_phys = _int(phys, -9223372036854775807 - 1, 9223372036854775807, "q")
    cdef int32_t c_sys_flag = <int32_t>_int(sys_flag, -2147483648, 2147483647, "i")
    cdef int64_t c_born_ts = _int(born_ts, -9223372036854775807 - 1, 9223372036854775807, "q")
    cdef int64_t c_store_ts = _int(store_ts, -9223372036854775807 - 1, 9223372036854775807, "q")
    cdef int32_t c_reconsume = <int32_t>_int(reconsume_times, -2147483648, 2147483647, "i")
    cdef int64_t c_prepared = _int(prepared_offset, -9223372036854775807 - 1, 9223372036854775807, "q")
    cdef Py_buffer tb, pb, bb, bh, sh
    cdef int got = 0
    cdef Py_ssize_t total, body_len
    cdef unsigned char* p
    try:
        PyObject_GetBuffer(topic_b, &tb, PyBUF_SIMPLE)
        got = 1
        PyObject_GetBuffer(props_b, &pb, PyBUF_SIMPLE)
        got = 2
        PyObject_GetBuffer(body, &bb, PyBUF_SIMPLE)
        got = 3
        PyObject_GetBuffer(born_host8, &bh, PyBUF_SIMPLE)
        got = 4
        PyObject_GetBuffer(store_host8, &sh, PyBUF_SIMPLE)
        got = 5
        body_len = bb.len
        if body_len > 0xFFFFFFFF or pb.len > 0xFFFF:
            raise _struct_error("body or properties too long for their length fields")
        total = HEAD_SIZE + body_len + tb.len + 2 + pb.len
        if pos < 0 or pos > out.len or out.len - pos < total:
            raise ValueError(f"a record of {total} bytes does not fit at {pos} of a {out.len}-byte buffer")
        p = <unsigned char*>out.buf + pos
        with nogil:
            _put_u32(p, <uint32_t>total)
            _put_u32(p + 4, MESSAGE_MAGIC)
            _put_u32(p + 8, _crc32(<const unsigned char*>bb.buf, body_len))
            _put_u32(p + 12, <uint32_t>c_queue_id)
            _put_u32(p + 16, <uint32_t>c_flag)
            _put_u64(p + 20, <uint64_t>c_queue_offset)
            _put_u64(p + 28, <uint64_t>c_phys)
            _put_u32(p + 36, <uint32_t>c_sys_flag)
            _put_u64(p + 40, <uint64_t>c_born_ts)
            _put_host(p + 48, &bh)
            _put_u64(p + 56, <uint64_t>c_store_ts)
            _put_host(p + 64, &sh)
            _put_u32(p + 72, <uint32_t>c_reconsume)
            _put_u64(p + 76, <uint64_t>c_prepared)
            _put_u32(p + 84, <uint32_t>body_len)
            p += 88
            memcpy(p, bb.buf, body_len)
            p += body_len
            memcpy(p, tb.buf, tb.len)
            p += tb.len
            p[0] = <unsigned char>(pb.len >> 8)
            p[1] = <unsigned char>pb.len
            memcpy(p + 2, pb.buf, pb.len)
        return total
    finally:
        if got >= 5:
            PyBuffer_Release(&sh)
        if got >= 4:
            PyBuffer_Release(&bh)
        if got >= 3:
            PyBuffer_Release(&bb)
        if got >= 2:
            PyBuffer_Release(&pb)
        if got >= 1:
            PyBuffer_Release(&tb)


def pack_record(buf, Py_ssize_t pos, topic_b, props_b, body, queue_id, flag, queue_offset, phys, sys_flag,
                born_ts, born_host8, store_ts, store_host8, reconsume_times, prepared_offset):
    """Write one record at ``buf[pos:]``; returns its size (twin of ``rocketpy.record.pack_record``)."""
    if not _record_bound:
        _bind_record()
    cdef Py_buffer out
    _writable(buf, &out)
    try:
        return _pack_record(&out, pos, topic_b, props_b, body, queue_id, flag, queue_offset, phys, sys_flag,
                            born_ts, born_host8, store_ts, store_host8, reconsume_times, prepared_offset)
    finally:
        PyBuffer_Release(&out)


# -- the commitlog's append callback --------------------------------------------------------------
cdef bint _commitlog_bound = False
cdef Py_ssize_t END_FILE_MIN_BLANK_BYTES = 0
cdef object _pack_blank = None
cdef object _END_OF_FILE = None
cdef object _PUT_OK = None
cdef object _PutMessageResult = None


cdef int _bind_commitlog() except -1:
    global _commitlog_bound, END_FILE_MIN_BLANK_BYTES, _pack_blank, _END_OF_FILE, _PUT_OK, _PutMessageResult
    from rocketpy.broker.store import commitlog

    if not _record_bound:
        _bind_record()
    END_FILE_MIN_BLANK_BYTES = commitlog.END_FILE_MIN_BLANK_BYTES
    _pack_blank = commitlog.pack_blank
    _END_OF_FILE = commitlog._END_OF_FILE
    _PUT_OK = commitlog._PUT_OK
    _PutMessageResult = commitlog.PutMessageResult
    _commitlog_bound = True
    return 0


def append_records(mm, Py_ssize_t base_offset, Py_ssize_t pos, Py_ssize_t room, batch):
    """``batch`` as records at ``mm[pos:]`` (twin of ``rocketpy.broker.store.commitlog.append_records``)."""
    if not _commitlog_bound:
        _bind_commitlog()
    msgs, topic_b, props, total, cq, store_ts, host8 = batch
    if total + END_FILE_MIN_BLANK_BYTES > room:
        if room >= END_FILE_MIN_BLANK_BYTES:
            _pack_blank(mm, pos, room)
        return room, _END_OF_FILE
    queue_offset = cq.next_offset
    cdef Py_ssize_t start = pos, size, i = 0
    cdef list sizes = []
    cdef Py_buffer out
    _writable(mm, &out)
    try:
        for m in msgs:
            size = _pack_record(&out, pos, topic_b, props[i], m.body, m.queue_id, m.flag, queue_offset + i,
                                base_offset + pos, m.sys_flag, m.born_timestamp, m.born_host8, store_ts, host8,
                                m.reconsume_times, m.prepared_transaction_offset)
            PyList_Append(sizes, size)
            pos += size
            i += 1
    finally:
        PyBuffer_Release(&out)
    if pos - start != total:
        raise AssertionError("batch size does not match its records")
    return total, _PutMessageResult(
        _PUT_OK, "", base_offset + start, total, queue_offset, store_ts, len(sizes), host8, sizes
    )


# -- the record decoder -------------------------------------------------------------------------
cdef dict _split_properties(str s):
    """``string_to_properties``: each ``name\\x01value`` item with a name; later names win."""
    cdef dict out = {}
    for item in s.split("\x02"):
        name, sep, value = item.partition("\x01")
        if sep and name:
            out[name] = value
    return out


cdef inline Py_ssize_t _item_end(const unsigned char* p, Py_ssize_t n, Py_ssize_t i, Py_ssize_t* sep) noexcept nogil:
    """Where the property item at ``p[i]`` ends (its ``\\x02``, or ``n``); ``sep`` gets its first
    ``\\x01`` (-1: none)."""
    sep[0] = -1
    while i < n and p[i] != 2:
        if p[i] == 1 and sep[0] < 0:
            sep[0] = i
        i += 1
    return i


cdef dict _split_ascii_properties(str s, const unsigned char* p, Py_ssize_t n):
    """``_split_properties`` of an ASCII ``s`` whose bytes are ``p[:n]``: scanned in C, sliced once."""
    cdef dict out = {}
    cdef Py_ssize_t i = 0, start, sep
    while i < n:
        start = i
        i = _item_end(p, n, i, &sep)
        if sep > start:  # a separator and a non-empty name
            out[PyUnicode_Substring(s, start, sep)] = PyUnicode_Substring(s, sep + 1, i)
        i += 1
    return out


def string_to_properties(s):
    """Decode a RocketMQ properties string (twin of ``rocketpy.message.string_to_properties``)."""
    if not s:
        return {}
    if type(s) is str and PyUnicode_IS_ASCII(s):  # str subclasses and non-ASCII: the generic path
        return _split_ascii_properties(s, <const unsigned char*>PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s))
    return _split_properties(s)


def properties_to_string(props):
    """Encode properties (twin of ``rocketpy.message.properties_to_string``): ``name\\x01value\\x02``
    per pair whose value is not None."""
    cdef list parts = []
    for k, v in props.items():
        if v is None:
            continue
        parts.append(k if type(k) is str else format(k))
        parts.append("\x01")
        parts.append(v if type(v) is str else format(v))
        parts.append("\x02")
    return "".join(parts)


cdef int _fill_properties(object msg, const unsigned char* p, Py_ssize_t n) except -1:
    """``msg.set_properties_string`` of the UTF-8 bytes ``p[:n]`` (same fields, same errors)."""
    cdef dict props
    if n == 0:
        props = {}
    else:
        s = PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
        props = _split_ascii_properties(s, p, n) if PyUnicode_GET_LENGTH(s) == n else _split_properties(s)
    msg.tags = props.pop("TAGS", None)
    keys = props.pop("KEYS", None)
    msg.keys = [] if keys is None else [k for k in keys.split(" ") if k]
    delay = props.pop("DELAY", None)
    msg.delay_level = int(delay) if delay and delay.isdigit() else 0
    msg.properties = props
    return 0


cdef int _check_record(const unsigned char* base, Py_ssize_t offset, Py_ssize_t end,
                       Py_ssize_t* pos, Py_ssize_t* t_end, Py_ssize_t* props_len) except -1:
    """Check that ``base[offset:end]`` starts with a whole record (the pure ``_decode_at``'s checks
    and errors); set where its topic (``pos``: the length byte), properties and their length are."""
    cdef const unsigned char* p
    cdef uint32_t total, magic, body_len
    if end - offset < HEAD_SIZE:
        raise RecordError(f"truncated record at {offset}: {end - offset} bytes left")
    p = base + offset
    total = _get_u32(p)
    magic = _get_u32(p + 4)
    body_len = _get_u32(p + 84)
    if magic != MESSAGE_MAGIC:
        raise RecordError(f"bad magic 0x{magic:08x} at {offset}")
    if <Py_ssize_t>total > end - offset or <uint64_t>total < <uint64_t>HEAD_SIZE + body_len + 3:
        raise RecordError(f"bad total size {total} at {offset}")
    pos[0] = offset + HEAD_SIZE + body_len
    t_end[0] = pos[0] + 1 + base[pos[0]]
    if t_end[0] + 2 > offset + <Py_ssize_t>total:
        raise RecordError(f"record at {offset}: field lengths do not add up to {total}")
    props_len[0] = (<Py_ssize_t>base[t_end[0]] << 8) | base[t_end[0] + 1]
    if t_end[0] + 2 + props_len[0] - offset != <Py_ssize_t>total:
        raise RecordError(f"record at {offset}: field lengths do not add up to {total}")
    return 0


cdef object _decode_one(const unsigned char* base, Py_ssize_t offset, Py_ssize_t end):
    """One record of ``base[offset:end]`` as a ``MessageExt`` (``end`` is within the buffer)."""
    cdef const unsigned char* p = base + offset
    cdef uint32_t total, body_len
    cdef Py_ssize_t pos, t_end, props_len, topic_len
    _check_record(base, offset, end, &pos, &t_end, &props_len)  # before any read of the record
    total, body_len = _get_u32(p), _get_u32(p + 84)
    topic_len = base[pos]
    cdef int32_t sys_flag = <int32_t>_get_u32(p + 36)
    body = PyBytes_FromStringAndSize(<const char*>(p + HEAD_SIZE), body_len)
    if sys_flag & COMPRESSED_FLAG:
        body = _decompress(body)
    msg = _new_ext(_MessageExt)
    msg.topic = PyUnicode_DecodeUTF8(<const char*>(base + pos + 1), topic_len, NULL)
    msg.body = body
    msg.flag = <int32_t>_get_u32(p + 16)
    _fill_properties(msg, base + t_end + 2, props_len)
    msg._msg_id = None
    msg._offset_msg_id = None
    msg.queue_id = <int32_t>_get_u32(p + 12)
    msg.queue_offset = <int64_t>_get_u64(p + 20)
    msg.commitlog_offset = <int64_t>_get_u64(p + 28)
    msg.born_timestamp = <int64_t>_get_u64(p + 40)
    msg.store_timestamp = <int64_t>_get_u64(p + 56)
    msg._born_host = None
    msg._born_host8 = PyBytes_FromStringAndSize(<const char*>(p + 48), 8)
    msg._store_host = None
    msg._store_host8 = PyBytes_FromStringAndSize(<const char*>(p + 64), 8)
    msg.reconsume_times = <int32_t>_get_u32(p + 72)
    msg.store_size = total
    msg.body_crc = _get_u32(p + 8)
    msg.sys_flag = sys_flag
    msg.prepared_transaction_offset = <int64_t>_get_u64(p + 76)
    return msg


def _decode_at(mv, Py_ssize_t offset, Py_ssize_t end):
    """One record of ``mv[offset:end]`` (twin of ``rocketpy.record._decode_at``)."""
    if not _record_bound:
        _bind_record()
    cdef Py_buffer b
    PyObject_GetBuffer(mv, &b, PyBUF_SIMPLE)
    try:
        if offset < 0 or end > b.len or offset > end:
            raise RecordError(f"record at {offset}..{end} lies outside the {b.len}-byte buffer")
        return _decode_one(<const unsigned char*>b.buf, offset, end)
    finally:
        PyBuffer_Release(&b)


def decode_records(buf):
    """Records back to back (twin of ``rocketpy.record.decode_records``)."""
    if not _record_bound:
        _bind_record()
    cdef Py_buffer b
    cdef Py_ssize_t pos = 0
    cdef list out = []
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        while pos < b.len:
            msg = _decode_one(<const unsigned char*>b.buf, pos, b.len)
            PyList_Append(out, msg)
            pos += _get_u32(<const unsigned char*>b.buf + pos)  # == msg.store_size, checked to fit
        return out
    finally:
        PyBuffer_Release(&b)


# -- the batch wire encoding ----------------------------------------------------------------------
def encode_batch(messages):
    """SEND_BATCH_MESSAGE body (twin of ``rocketpy.record.encode_batch``)."""
    if not _record_bound:
        _bind_record()
    cdef list bodies = []
    cdef list props = []
    cdef list flags = []
    cdef Py_ssize_t size = 0, n, i
    cdef Py_buffer bb
    cdef unsigned char* p
    for msg in messages:
        _ensure_unique_key(msg)
        props_b = msg.properties_string().encode()
        if len(props_b) > MAX_PROPERTIES_BYTES:
            raise ValueError(f"properties are {len(props_b)} bytes; the limit is {MAX_PROPERTIES_BYTES}")
        body = msg.body
        flag = <int32_t>_int(msg.flag, -2147483648, 2147483647, "i")
        size += BATCH_HEAD_SIZE + len(body) + 2 + len(props_b)
        bodies.append(body)
        props.append(props_b)
        flags.append(flag)
    out = PyBytes_FromStringAndSize(NULL, size)
    p = <unsigned char*>PyBytes_AS_STRING(out)
    cdef unsigned char* out_end = p + size
    n = len(bodies)
    for i in range(n):
        props_b = props[i]
        PyObject_GetBuffer(bodies[i], &bb, PyBUF_SIMPLE)
        try:
            if out_end - p < BATCH_HEAD_SIZE + bb.len + 2 + len(props_b):  # a body whose len() is not its bytes
                raise ValueError(f"message body of {bb.len} bytes does not match its len() {len(bodies[i])}")
            _put_u32(p, <uint32_t>(BATCH_HEAD_SIZE + bb.len + 2 + len(props_b)))
            _put_u32(p + 4, MESSAGE_MAGIC)
            _put_u32(p + 8, _crc32(<const unsigned char*>bb.buf, bb.len))
            _put_u32(p + 12, <uint32_t><int32_t>flags[i])
            _put_u32(p + 16, <uint32_t>bb.len)
            p += BATCH_HEAD_SIZE
            memcpy(p, bb.buf, bb.len)
            p += bb.len
        finally:
            PyBuffer_Release(&bb)
        p[0] = <unsigned char>(len(props_b) >> 8)
        p[1] = <unsigned char>len(props_b)
        memcpy(p + 2, PyBytes_AS_STRING(props_b), len(props_b))
        p += 2 + len(props_b)
    return out


def decode_batch(body):
    """``(body, flag, properties_str)`` per message (twin of ``rocketpy.record.decode_batch``)."""
    if not _record_bound:
        _bind_record()
    cdef Py_buffer b
    cdef const unsigned char* base
    cdef Py_ssize_t pos = 0, end, b_start, p_pos, props_end
    cdef uint32_t total, body_len
    cdef int32_t flag
    cdef list out = []
    PyObject_GetBuffer(body, &b, PyBUF_SIMPLE)
    try:
        base = <const unsigned char*>b.buf
        end = b.len
        while pos < end:
            if end - pos < BATCH_HEAD_SIZE + 2:
                raise RecordError(f"batch truncated at byte {pos}: {end - pos} bytes left")
            total = _get_u32(base + pos)
            flag = <int32_t>_get_u32(base + pos + 12)
            body_len = _get_u32(base + pos + 16)
            b_start = pos + BATCH_HEAD_SIZE
            p_pos = b_start + body_len
            if <Py_ssize_t>total > end - pos or p_pos + 2 > pos + <Py_ssize_t>total:
                raise RecordError(f"batch message at byte {pos}: size {total} does not fit the batch")
            props_end = p_pos + 2 + ((<Py_ssize_t>base[p_pos] << 8) | base[p_pos + 1])
            if props_end != pos + <Py_ssize_t>total:
                raise RecordError(f"batch message at byte {pos}: field lengths do not add up to {total}")
            PyList_Append(out, (
                PyBytes_FromStringAndSize(<const char*>(base + b_start), body_len),
                flag,
                PyUnicode_DecodeUTF8(<const char*>(base + p_pos + 2), props_end - p_pos - 2, NULL),
            ))
            pos += total
        return out
    finally:
        PyBuffer_Release(&b)


# -- the SEND_MESSAGE_V2 request header ---------------------------------------------------------
cdef bint _send_bound = False
cdef object _DEFAULT_TOPIC = None
cdef object _pure_read_typical_v2 = None


cdef int _bind_send() except -1:
    global _send_bound, _DEFAULT_TOPIC, _pure_read_typical_v2
    from rocketpy import _accel
    from rocketpy.header import send

    if send._TYPICAL_V2_TYPES != (str, int, str, int, int, int, int, str, str, int, bool, bool, str):
        raise ImportError("rocketpy._speedups was built for another send header; rebuild it")
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
    """Fill ``h`` from a plain V2 header (twin of ``rocketpy.header.send.read_typical_v2``)."""
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


# -- records -> column buffers (twin of rocketpy.record_columns.decode_columns) -------------------
cdef bint _columns_bound = False
cdef object _ColumnBuffers = None
cdef object _offset_msg_id_from_packed = None


cdef int _bind_columns() except -1:
    global _columns_bound, _ColumnBuffers, _offset_msg_id_from_packed
    from rocketpy import msgid, record_columns

    _ColumnBuffers = record_columns.ColumnBuffers
    _offset_msg_id_from_packed = msgid.offset_msg_id_from_packed
    _columns_bound = True
    return 0


cdef inline int _put_i32(_Buf* b, Py_ssize_t v) except -1:
    cdef int32_t x
    if v > 0x7FFFFFFF:
        raise OverflowError("a column of one decode exceeds 2 GiB: decode fewer records at once")
    x = <int32_t>v
    return _put(b, &x, 4)


cdef inline int _put_i64(_Buf* b, int64_t v) except -1:
    return _put(b, &v, 8)


cdef inline int _put_str(_Buf* data, _Buf* offsets, const unsigned char* p, Py_ssize_t n) except -1:
    """One string (or binary) value: its bytes, then the offset of its end."""
    _put(data, p, n)
    return _put_i32(offsets, data.n)


cdef inline bint _ascii(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] >= 0x80:
            return False
    return True


cdef inline bint _is(const unsigned char* p, Py_ssize_t n, const char* word, Py_ssize_t w) noexcept nogil:
    return n == w and memcmp(p, word, w) == 0


# One property item of a record: name and value spans into the record's bytes.
cdef struct _Prop:
    const unsigned char* name
    Py_ssize_t name_len
    const unsigned char* value
    Py_ssize_t value_len


cdef enum:
    B_QID = 0
    B_QOFF = 1
    B_BORN = 2
    B_STORE = 3
    B_RECONSUME = 4
    B_TOPIC_OFF = 5
    B_TOPIC = 6
    B_MSGID_OFF = 7
    B_MSGID = 8
    B_TAGS_VALID = 9
    B_TAGS_OFF = 10
    B_TAGS = 11
    B_BODY_OFF = 12
    B_BODY = 13
    B_KEYS_OFF = 14
    B_KEY_OFF = 15
    B_KEY = 16
    B_PROPS_OFF = 17
    B_NAME_OFF = 18
    B_NAME = 19
    B_VALUE_OFF = 20
    B_VALUE = 21
    _BUFS = 22


cdef int _column_props(_Buf* bufs, const unsigned char* p, Py_ssize_t n, Py_ssize_t row,
                       Py_ssize_t* n_keys, Py_ssize_t* n_props, const unsigned char** uniq,
                       Py_ssize_t* uniq_len, _Prop* items) except -1:
    """Split one record's properties ``p[:n]`` into the tags, keys and properties columns."""
    cdef Py_ssize_t i = 0, start, sep, j, count = 0, k
    cdef const unsigned char* tags = NULL
    cdef Py_ssize_t tags_len = 0
    cdef const unsigned char* keys = NULL
    cdef Py_ssize_t keys_len = -1
    cdef const unsigned char* delay = NULL
    cdef Py_ssize_t delay_len = -1
    cdef const unsigned char* name
    cdef const unsigned char* value
    cdef Py_ssize_t name_len, value_len
    cdef unsigned char bit
    while i < n:
        start = i
        i = _item_end(p, n, i, &sep)
        if sep > start:  # a separator and a non-empty name (string_to_properties)
            name, name_len = p + start, sep - start
            value, value_len = p + sep + 1, i - sep - 1
            if _is(name, name_len, "TAGS", 4):
                tags, tags_len = value, value_len
            elif _is(name, name_len, "KEYS", 4):
                keys, keys_len = value, value_len
            elif _is(name, name_len, "DELAY", 5):
                delay, delay_len = value, value_len
            else:
                for j in range(count):  # a later value of a name wins, in the first one's place
                    if items[j].name_len == name_len and memcmp(items[j].name, name, name_len) == 0:
                        items[j].value, items[j].value_len = value, value_len
                        break
                else:
                    items[count].name, items[count].name_len = name, name_len
                    items[count].value, items[count].value_len = value, value_len
                    count += 1
        i += 1
    if delay_len > 0 and not _ascii(delay, delay_len):  # MessageExt reads DELAY with int(): same error
        d = PyUnicode_DecodeUTF8(<const char*>delay, delay_len, NULL)
        if d.isdigit():
            int(d)
    if tags != NULL:
        bit = <unsigned char>(1 << (row & 7))
        bufs[B_TAGS_VALID].p[row >> 3] |= bit
        _put_str(&bufs[B_TAGS], &bufs[B_TAGS_OFF], tags, tags_len)
    else:
        _put_i32(&bufs[B_TAGS_OFF], bufs[B_TAGS].n)
    if keys_len > 0:  # KEYS split on single spaces, empty pieces dropped
        j = 0
        while j <= keys_len:
            k = j
            while k < keys_len and keys[k] != 32:
                k += 1
            if k > j:
                _put_str(&bufs[B_KEY], &bufs[B_KEY_OFF], keys + j, k - j)
                n_keys[0] += 1
            j = k + 1
    _put_i32(&bufs[B_KEYS_OFF], n_keys[0])
    uniq[0] = NULL
    uniq_len[0] = 0
    for j in range(count):
        _put_str(&bufs[B_NAME], &bufs[B_NAME_OFF], items[j].name, items[j].name_len)
        _put_str(&bufs[B_VALUE], &bufs[B_VALUE_OFF], items[j].value, items[j].value_len)
        if _is(items[j].name, items[j].name_len, "UNIQ_KEY", 8):
            uniq[0], uniq_len[0] = items[j].value, items[j].value_len
    n_props[0] += count
    _put_i32(&bufs[B_PROPS_OFF], n_props[0])
    return 0


cdef inline void _hex_upper(char* out, const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef const char* digits = "0123456789ABCDEF"
    cdef Py_ssize_t i
    for i in range(n):
        out[2 * i] = digits[p[i] >> 4]
        out[2 * i + 1] = digits[p[i] & 15]


cdef int _column_record(_Buf* bufs, const unsigned char* base, Py_ssize_t offset, Py_ssize_t end,
                        Py_ssize_t row, Py_ssize_t* n_keys, Py_ssize_t* n_props, _Prop** items,
                        Py_ssize_t* items_cap, Py_ssize_t* negative) except -1:
    """Check one record of ``base[offset:end]`` as ``_decode_one`` does and append its columns."""
    cdef const unsigned char* p = base + offset
    cdef Py_ssize_t pos, t_end, props_len, topic_len, uniq_len
    cdef const unsigned char* uniq
    cdef const unsigned char* body_p
    cdef Py_ssize_t body_n
    cdef char hexbuf[32]
    cdef _Prop* grown
    _check_record(base, offset, end, &pos, &t_end, &props_len)
    topic_len = base[pos]
    cdef int32_t sys_flag = <int32_t>_get_u32(p + 36)
    body_p, body_n = p + HEAD_SIZE, <Py_ssize_t>_get_u32(p + 84)
    unpacked = None
    if sys_flag & COMPRESSED_FLAG:
        unpacked = _decompress(PyBytes_FromStringAndSize(<const char*>body_p, body_n))
        body_p, body_n = <const unsigned char*>PyBytes_AS_STRING(unpacked), len(unpacked)
    if not _ascii(base + pos + 1, topic_len):  # the UTF-8 checks MessageExt's decode makes
        PyUnicode_DecodeUTF8(<const char*>(base + pos + 1), topic_len, NULL)
    if not _ascii(base + t_end + 2, props_len):
        PyUnicode_DecodeUTF8(<const char*>(base + t_end + 2), props_len, NULL)
    if props_len // 2 + 1 > items_cap[0]:  # an item takes at least 2 bytes
        grown = <_Prop*>PyMem_Realloc(items[0], (props_len // 2 + 1) * sizeof(_Prop))
        if grown == NULL:
            raise MemoryError()
        items[0], items_cap[0] = grown, props_len // 2 + 1
    cdef int32_t i32
    i32 = <int32_t>_get_u32(p + 12)
    _put(&bufs[B_QID], &i32, 4)
    _put_i64(&bufs[B_QOFF], <int64_t>_get_u64(p + 20))
    _put_i64(&bufs[B_BORN], <int64_t>_get_u64(p + 40))
    _put_i64(&bufs[B_STORE], <int64_t>_get_u64(p + 56))
    i32 = <int32_t>_get_u32(p + 72)
    _put(&bufs[B_RECONSUME], &i32, 4)
    _put_str(&bufs[B_TOPIC], &bufs[B_TOPIC_OFF], base + pos + 1, topic_len)
    _put_str(&bufs[B_BODY], &bufs[B_BODY_OFF], body_p, body_n)
    _column_props(bufs, base + t_end + 2, props_len, row, n_keys, n_props, &uniq, &uniq_len, items[0])
    if uniq_len > 0:
        _put_str(&bufs[B_MSGID], &bufs[B_MSGID_OFF], uniq, uniq_len)
    else:  # the offset msg id: store host (8 bytes) + commitlog offset, uppercase hex
        if p[28] & 0x80 and negative[0] < 0:  # msgid refuses a negative offset: raised at the end
            negative[0] = offset
        _hex_upper(hexbuf, p + 64, 8)
        _hex_upper(hexbuf + 16, p + 28, 8)
        _put_str(&bufs[B_MSGID], &bufs[B_MSGID_OFF], <const unsigned char*>hexbuf, 32)
    return 0


def decode_columns(buf):
    """Records back to back as column buffers (twin of ``rocketpy.record_columns.decode_columns``)."""
    if not _record_bound:
        _bind_record()
    if not _columns_bound:
        _bind_columns()
    cdef Py_buffer b
    cdef _Buf bufs[_BUFS]
    cdef Py_ssize_t pos = 0, row = 0, n_keys = 0, n_props = 0, i, items_cap = 0, negative = -1
    cdef _Prop* items = NULL
    cdef const unsigned char* base
    memset(bufs, 0, sizeof(bufs))
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        base = <const unsigned char*>b.buf
        for i in (B_TOPIC_OFF, B_MSGID_OFF, B_TAGS_OFF, B_BODY_OFF, B_KEYS_OFF, B_KEY_OFF, B_PROPS_OFF,
                  B_NAME_OFF, B_VALUE_OFF):
            _put_i32(&bufs[i], 0)
        while pos < b.len:
            if (row >> 3) >= bufs[B_TAGS_VALID].n:  # one more validity byte every 8 rows
                _put(&bufs[B_TAGS_VALID], b"\0", 1)
            _column_record(bufs, base, pos, b.len, row, &n_keys, &n_props, &items, &items_cap, &negative)
            pos += _get_u32(base + pos)  # the record's total size, checked to fit
            row += 1
        if negative >= 0:  # as the pure twin: every record decoded first, then msgid's error
            _offset_msg_id_from_packed(
                PyBytes_FromStringAndSize(<const char*>(base + negative + 64), 8),
                <int64_t>_get_u64(base + negative + 28),
            )
        return _ColumnBuffers(row, *[PyBytes_FromStringAndSize(bufs[i].p, bufs[i].n) for i in range(_BUFS)])
    finally:
        PyBuffer_Release(&b)
        PyMem_Free(items)
        for i in range(_BUFS):
            PyMem_Free(bufs[i].p)


# -- the ACL signature (twins of rocketpy.acl.signing.signed_ext and .hmac_signature) -------------
cdef bint _signing_bound = False
cdef object _ext_text = None
cdef tuple _UNSIGNED = ()
cdef Py_ssize_t _MAX_ORDERS = 0
#: insertion-ordered key tuple -> signed keys in sorted order (the pure twin's ``_ORDERS``)
cdef dict _sign_orders = {}
cdef object _pure_signed_ext = None


cdef int _bind_signing() except -1:
    global _signing_bound, _ext_text, _UNSIGNED, _MAX_ORDERS, _pure_signed_ext
    from rocketpy._accel import PURE
    from rocketpy.acl import signing
    from rocketpy.remoting import json_header

    _ext_text = json_header.ext_text
    _UNSIGNED = signing._UNSIGNED
    _MAX_ORDERS = signing.MAX_CACHED_KEY_SETS
    _pure_signed_ext = PURE["signed_ext"]
    _signing_bound = True
    return 0


cdef int _put_text(_Buf* b, str s) except -1:
    """``s`` as UTF-8 (a lone surrogate raises UnicodeEncodeError, as ``str.encode`` does)."""
    cdef Py_ssize_t n
    cdef const char* p
    PyUnicode_READY(s)
    if PyUnicode_IS_ASCII(s):
        return _put(b, PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s))
    p = PyUnicode_AsUTF8AndSize(s, &n)
    return _put(b, p, n)


cdef int _put_decimal(_Buf* b, object v) except -1:
    """An int as ``str(v)`` writes it, without the str for the ints of a header (64-bit)."""
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    cdef unsigned long long u
    cdef char digits[24]
    cdef int i = 24
    if overflow:
        return _put_text(b, str(v))
    u = <unsigned long long>(-(x + 1)) + 1 if x < 0 else <unsigned long long>x
    while True:
        i -= 1
        digits[i] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if x < 0:
        i -= 1
        digits[i] = 45  # '-'
    return _put(b, digits + i, 24 - i)


cdef int _signed_text(_Buf* b, object ext) except -1:
    """The signed ext part into ``b``: values (minus Signature) sorted by key, as UTF-8 text."""
    if not _signing_bound:
        _bind_signing()
    try:
        return _write_signed_text(b, ext)
    except UnicodeEncodeError:  # a lone surrogate: the pure twin's error, placed in the whole text
        _pure_signed_ext(ext)
        raise


cdef int _write_signed_text(_Buf* b, object ext) except -1:
    cdef tuple keys = tuple(ext)
    cdef object order = _sign_orders.get(keys)
    if order is None:
        if len(_sign_orders) >= _MAX_ORDERS:
            _sign_orders.clear()
        order = _sign_orders[keys] = tuple(sorted([k for k in keys if k not in _UNSIGNED]))
    for k in <tuple>order:
        v = ext[k]
        if v is None:
            continue
        if type(v) is str:
            _put_text(b, <str>v)
        elif type(v) is int:
            _put_decimal(b, v)
        elif v is True:  # ext_text's booleans, without the call
            _put(b, b"true", 4)
        elif v is False:
            _put(b, b"false", 5)
        else:
            _put_text(b, _ext_text(v))
    return 0


cdef bytes _signed_bytes(object ext):
    """The signed ext part as bytes (its buffer freed here, whatever happens)."""
    cdef _Buf b = _Buf(NULL, 0, 0)
    try:
        _signed_text(&b, ext)
        return PyBytes_FromStringAndSize(b.p, b.n)
    finally:
        PyMem_Free(b.p)


def signed_ext(ext):
    """The signed ext part of an ACL signature (twin of ``rocketpy.acl.signing.signed_ext``)."""
    return _signed_bytes(ext) if ext else b""


def hmac_signature(mac, ext, body):
    """``Base64(HmacSHA1)`` of a request under the keyed ``mac`` (copied, never changed); twin of
    ``rocketpy.acl.signing.hmac_signature``."""
    mac = mac.copy()
    if ext:
        mac.update(_signed_bytes(ext))
    if body:
        mac.update(body)
    return _base64(mac.digest())


cdef const char* _B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


cdef str _base64(bytes raw):
    """Standard base64 with padding, as ``binascii.b2a_base64(raw, newline=False)`` (as text)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = len(raw), i = 0, j = 0
    cdef uint32_t v
    cdef str out = PyUnicode_New(4 * ((n + 2) // 3), 127)
    cdef char* q = <char*>PyUnicode_DATA(out)
    while i + 3 <= n:
        v = (<uint32_t>p[i] << 16) | (<uint32_t>p[i + 1] << 8) | p[i + 2]
        q[j] = _B64[v >> 18]
        q[j + 1] = _B64[(v >> 12) & 63]
        q[j + 2] = _B64[(v >> 6) & 63]
        q[j + 3] = _B64[v & 63]
        i += 3
        j += 4
    if i < n:
        v = <uint32_t>p[i] << 16
        if i + 1 < n:
            v |= <uint32_t>p[i + 1] << 8
        q[j] = _B64[v >> 18]
        q[j + 1] = _B64[(v >> 12) & 63]
        q[j + 2] = _B64[(v >> 6) & 63] if i + 1 < n else 61  # '='
        q[j + 3] = 61
    return out


# -- the put path's property reads (twins of rocketpy.broker.store.props.tags_hash and ---------------
# -- rocketpy.broker.store.index.put_unique_key_entry) ---------------------------------------------
cdef bint _put_path_bound = False
cdef object _pure_tags_hash = None
cdef object _pure_put_unique_key_entry = None
cdef Py_ssize_t INDEX_HEADER_SIZE = 0
cdef Py_ssize_t INDEX_SLOT_SIZE = 0
cdef Py_ssize_t INDEX_ENTRY_SIZE = 0


cdef int _bind_put_path() except -1:
    global _put_path_bound, _pure_tags_hash, _pure_put_unique_key_entry
    global INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, INDEX_ENTRY_SIZE
    from rocketpy._accel import PURE
    from rocketpy.broker.store import index

    if index.SLOT_SIZE != 4 or index.ENTRY_SIZE != 20 or index.HEADER_SIZE != 40:
        raise ImportError("rocketpy._speedups was built for another index layout; rebuild it")
    INDEX_HEADER_SIZE = index.HEADER_SIZE
    INDEX_SLOT_SIZE = index.SLOT_SIZE
    INDEX_ENTRY_SIZE = index.ENTRY_SIZE
    _pure_tags_hash = PURE["tags_hash"]
    _pure_put_unique_key_entry = PURE["put_unique_key_entry"]
    _put_path_bound = True
    return 0


cdef inline Py_ssize_t _property_value(const unsigned char* p, Py_ssize_t n, const char* name_sep, Py_ssize_t k,
                                       Py_ssize_t* end) noexcept nogil:
    """``get_property``: where the value of the first item named ``name_sep[:k]`` (name + ``\\x01``)
    starts (-1: none); ``end`` gets where it ends."""
    cdef Py_ssize_t i = 0
    while i < n:
        if n - i >= k and memcmp(p + i, name_sep, k) == 0:
            i += k
            end[0] = i
            while end[0] < n and p[end[0]] != 2:
                end[0] += 1
            return i
        while i < n and p[i] != 2:  # on to the next item
            i += 1
        i += 1
    return -1


cdef inline int32_t _tags_code(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Java ``hashCode`` of the TAGS value of the Latin-1 properties ``p[:n]``, 0 without one."""
    cdef Py_ssize_t end = 0
    cdef Py_ssize_t start = _property_value(p, n, b"TAGS\x01", 5, &end)
    cdef uint32_t h = 0
    if start < 0:
        return 0
    while start < end:  # Latin-1 code points are their own UTF-16 units
        h = 31 * h + p[start]
        start += 1
    return <int32_t>h


def tags_hash(str props):
    """Java ``hashCode`` of the TAGS value, 0 without one (twin of ``rocketpy.broker.store.props.tags_hash``)."""
    if not _put_path_bound:
        _bind_put_path()
    cdef Py_ssize_t n
    cdef const unsigned char* p = _latin1(props, &n)
    if p == NULL:
        return _pure_tags_hash(props)
    return _tags_code(p, n)


cdef inline Py_ssize_t _unique_key(const unsigned char* p, Py_ssize_t n, Py_ssize_t* end) noexcept nogil:
    """Where the UNIQ_KEY of the Latin-1 properties ``p[:n]`` starts when it is the message's one index
    key (-1: KEYS present, no UNIQ_KEY, or one not ASCII or longer than 64); ``end`` gets its end."""
    cdef Py_ssize_t start, i
    if _contains(p, n, b"KEYS\x01", 5):
        return -1
    start = _property_value(p, n, b"UNIQ_KEY\x01", 9, end)
    if start < 0 or end[0] == start or end[0] - start > 64:
        return -1
    for i in range(start, end[0]):
        if p[i] >= 128:
            return -1
    return start


cdef int _write_key_entry(object mm, const unsigned char* key, Py_ssize_t k, uint32_t h, int64_t phys,
                          int32_t diff, int32_t count, int64_t slots, Py_ssize_t entries_pos) except -1:
    """Hash ``key[:k]`` onto ``h`` (the topic part), write entry ``count`` and link it into its slot."""
    cdef Py_ssize_t i, slot_pos, entry_pos
    cdef Py_buffer out
    cdef unsigned char* q
    for i in range(k):
        h = 31 * h + key[i]
    if h & 0x80000000:
        h = 0 - h  # abs() of the signed hash, as uint32 arithmetic
    h &= 0x7FFFFFFF
    if slots <= 0:
        raise ZeroDivisionError("integer modulo by zero") if slots == 0 else ValueError("negative slot count")
    slot_pos = INDEX_HEADER_SIZE + <Py_ssize_t>(h % slots) * INDEX_SLOT_SIZE
    entry_pos = entries_pos + <Py_ssize_t>count * INDEX_ENTRY_SIZE
    _writable(mm, &out)
    try:
        if slot_pos + INDEX_SLOT_SIZE > out.len or entry_pos < 0 or entry_pos + INDEX_ENTRY_SIZE > out.len:
            raise _struct_error(f"an index entry at {entry_pos} or slot at {slot_pos} is outside a {out.len}-byte file")
        q = <unsigned char*>out.buf
        _put_u32(q + entry_pos, h)
        _put_u64(q + entry_pos + 4, <uint64_t>phys)
        _put_u32(q + entry_pos + 12, <uint32_t>diff)
        _put_u32(q + entry_pos + 16, _get_u32(q + slot_pos))  # the bucket's previous entry
        _put_u32(q + slot_pos, <uint32_t>count)
    finally:
        PyBuffer_Release(&out)
    return 0


def put_unique_key_entry(mm, str props, topic_hash, phys, time_diff, count, slots, entries_pos):
    """Index entry ``count`` for a message whose one key is its UNIQ_KEY, linked into its slot (twin of
    ``rocketpy.broker.store.index.put_unique_key_entry``); False with nothing written otherwise."""
    if not _put_path_bound:
        _bind_put_path()
    cdef Py_ssize_t n, start, end = 0
    cdef const unsigned char* p = _latin1(props, &n)
    if p == NULL:
        return _pure_put_unique_key_entry(mm, props, topic_hash, phys, time_diff, count, slots, entries_pos)
    start = _unique_key(p, n, &end)
    if start < 0:
        return False
    _write_key_entry(
        mm, p + start, end - start, <uint32_t>_int(topic_hash, 0, 0xFFFFFFFF, "I"),
        _int(phys, -9223372036854775807 - 1, 9223372036854775807, "q"),
        <int32_t>_int(time_diff, -2147483648, 2147483647, "i"), <int32_t>_int(count, -2147483648, 2147483647, "i"),
        _int(slots, -9223372036854775807 - 1, 9223372036854775807, "q"),
        <Py_ssize_t>_int(entries_pos, 0, 9223372036854775807, "q"),
    )
    return True


# -- a stored record as recovery and replicas check it (twin of rocketpy.broker.store.recovery.read_record)
cdef bint _recovery_bound = False
cdef uint32_t BLANK_MAGIC = 0


cdef int _bind_recovery() except -1:
    global _recovery_bound, BLANK_MAGIC
    from rocketpy import record

    if not _record_bound:
        _bind_record()
    BLANK_MAGIC = record.BLANK_MAGIC
    _recovery_bound = True
    return 0


def read_record(buf, Py_ssize_t pos, Py_ssize_t room, int64_t phys, bint check_crc, bint text):
    """The record at ``buf[pos:]`` checked as recovery checks it: (size, queue id, queue offset, store
    timestamp, topic, properties), 0 for a blank tail or the file's end, -1 if invalid (twin of
    ``rocketpy.broker.store.recovery.read_record``)."""
    if not _recovery_bound:
        _bind_recovery()
    cdef Py_buffer b
    cdef const unsigned char* p
    cdef uint32_t total, magic, body_len
    cdef Py_ssize_t t_pos, p_pos
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        if pos < 0 or room < 0 or pos > b.len or room > b.len - pos:
            raise ValueError(f"{room} bytes at {pos} are not within a {b.len}-byte buffer")
        if room < 8:
            return 0 if room == 0 else -1
        p = <const unsigned char*>b.buf + pos
        total = _get_u32(p)
        magic = _get_u32(p + 4)
        if magic == BLANK_MAGIC:
            return 0 if <Py_ssize_t>total == room else -1
        if magic != MESSAGE_MAGIC or <Py_ssize_t>total > room or total < HEAD_SIZE + 3 or room < HEAD_SIZE:
            return -1
        body_len = _get_u32(p + 84)
        if <int64_t>_get_u64(p + 28) != phys or <uint64_t>HEAD_SIZE + body_len + 3 > total:
            return -1
        t_pos = HEAD_SIZE + body_len
        p_pos = t_pos + 1 + p[t_pos]
        if p_pos + 2 > <Py_ssize_t>total or p_pos + 2 + ((<Py_ssize_t>p[p_pos] << 8) | p[p_pos + 1]) != total:
            return -1
        if check_crc and _crc32(p + HEAD_SIZE, body_len) != _get_u32(p + 8):
            return -1
        if not text:
            return (total, <int32_t>_get_u32(p + 12), <int64_t>_get_u64(p + 20), <int64_t>_get_u64(p + 56), "", "")
        return (total, <int32_t>_get_u32(p + 12), <int64_t>_get_u64(p + 20), <int64_t>_get_u64(p + 56),
                PyUnicode_DecodeUTF8(<const char*>p + t_pos + 1, p[t_pos], "replace"),
                PyUnicode_DecodeUTF8(<const char*>p + p_pos + 2, total - p_pos - 2, "replace"))
    finally:
        PyBuffer_Release(&b)


# -- the put path's dispatch of one put's records (twin of rocketpy.broker.store.dispatch.dispatch_run)
cdef bint _dispatch_bound = False
cdef object _SCHEDULE_TOPIC = None
cdef object _pure_dispatch_run = None
cdef object _pure_redispatch = None
cdef Py_ssize_t CQ_UNIT_SIZE = 0
cdef Py_ssize_t HEADER_SYNC_EVERY = 0


cdef int _bind_dispatch() except -1:
    global _dispatch_bound, _SCHEDULE_TOPIC, _pure_dispatch_run, _pure_redispatch, CQ_UNIT_SIZE, HEADER_SYNC_EVERY
    from rocketpy._accel import PURE
    from rocketpy.broker.store import consume_queue, index, recovery  # recovery: registers redispatch
    from rocketpy.topic import SCHEDULE_TOPIC

    if not _put_path_bound:
        _bind_put_path()
    if consume_queue.UNIT.format != ">qiq":
        raise ImportError("rocketpy._speedups was built for another consume queue layout; rebuild it")
    CQ_UNIT_SIZE = consume_queue.UNIT_SIZE
    HEADER_SYNC_EVERY = index.HEADER_SYNC_EVERY
    _SCHEDULE_TOPIC = SCHEDULE_TOPIC
    _pure_dispatch_run = PURE["dispatch_run"]
    _pure_redispatch = PURE["redispatch"]
    _dispatch_bound = True
    return 0


cdef int _index_record(object index, str topic, str props, const unsigned char* p, Py_ssize_t n,
                       int64_t phys, int64_t store_ts) except -1:
    """``IndexService.put_props`` of one record: its UNIQ_KEY entry written here when the newest file
    takes it (the state updated as put_props updates it), else put_props itself."""
    cdef Py_ssize_t start, end = 0
    cdef int64_t count, diff
    if phys <= <int64_t>index.last_phys:
        return 0
    files = index.files
    start = _unique_key(p, n, &end) if n else -1
    if start < 0 or not files or index._pending:
        index.put_props(topic, props, phys, store_ts)
        return 0
    cur = files[len(files) - 1]  # (wraparound is off in this module)
    count = cur.index_count
    th = index._topic_hashes.get(topic)
    if not 1 < count < <int64_t>cur.max_index or th is None:
        index.put_props(topic, props, phys, store_ts)
        return 0
    diff = store_ts - <int64_t>cur.begin_ts
    diff = diff // 1000 if diff > 0 else 0  # floor division as Python's, clamped at 0 alike
    if diff > 2147483647 or count > 2147483647:
        raise _struct_error("'i' format requires -2147483648 <= number <= 2147483647")
    _write_key_entry(cur.mm, p + start, end - start, <uint32_t>_int(th, 0, 0xFFFFFFFF, "I"), phys,
                     <int32_t>diff, <int32_t>count, cur.slots, cur.entries_pos)
    index.last_phys = phys
    cur.index_count = count + 1
    cur.end_ts = store_ts
    cur.end_phys = phys
    unsynced = index._unsynced + 1
    if unsynced >= HEADER_SYNC_EVERY:
        cur.write_header(store_ts, phys)
        unsynced = 0
    index._unsynced = unsynced
    return 0


cdef int _dispatch_record(object d, object cq, object mf, int64_t unit_pos, int64_t queue_offset, int64_t phys,
                          int64_t size, str topic, str props, const unsigned char* p, Py_ssize_t k, int64_t store_ts,
                          object index, bint first) except -1:
    """``Dispatcher.dispatch`` of one record whose unit goes at ``unit_pos`` of ``mf``, the last file of a
    queue at its end (the caller checked): unit, queue and file state, listeners, index entry."""
    cdef int64_t code = _tags_code(p, k)  # the unit's tag code, as tags_hash
    cdef Py_buffer out
    cdef unsigned char* u
    _writable(mf.mm, &out)
    try:
        u = <unsigned char*>out.buf + unit_pos
        _put_u64(u, <uint64_t>phys)
        _put_u32(u + 8, <uint32_t>size)
        _put_u64(u + 12, <uint64_t>code)
    finally:
        PyBuffer_Release(&out)
    mf._wrote = unit_pos + CQ_UNIT_SIZE
    cq.next_offset = queue_offset + 1
    cq.max_phys_end = phys + size
    if first:
        d.dirty_cqs.add(cq)
    if d.listeners:
        d.notify(cq, queue_offset, code, store_ts)
    if index is not None:
        _index_record(index, topic, props, p, k, phys, store_ts)
    d.dispatched_to = phys + size
    return 0


cdef object _queue_end_file(object cq, int64_t queue_offset, int64_t phys, Py_ssize_t count, int64_t* rel):
    """The last file of ``cq`` when the queue is at its end there with room for ``count`` units (``rel``:
    where the first goes), else None: the pure twin takes the records."""
    files = cq.files
    if not files or cq._pending or queue_offset != <int64_t>cq.next_offset or phys < <int64_t>cq.max_phys_end:
        return None
    mf = files[len(files) - 1]  # (wraparound is off in this module)
    rel[0] = queue_offset * CQ_UNIT_SIZE - <int64_t>mf.base_offset
    if rel[0] < 0 or rel[0] + count * CQ_UNIT_SIZE > <int64_t>mf.size:
        return None
    return mf


def dispatch_run(d, cq, int64_t queue_offset, int64_t phys, list sizes, list msgs, int64_t store_ts):
    """Dispatch the records of one put (twin of ``rocketpy.broker.store.dispatch.dispatch_run``):
    the common case in C, any other run through the pure twin."""
    if not _dispatch_bound:
        _bind_dispatch()
    cdef Py_ssize_t count = len(msgs), i, k
    cdef int64_t size, rel = 0
    topic = cq.topic
    mf = None
    if count and len(sizes) == count and topic != _SCHEDULE_TOPIC:
        mf = _queue_end_file(cq, queue_offset, phys, count, &rel)
    if mf is None:
        return _pure_dispatch_run(d, cq, queue_offset, phys, sizes, msgs, store_ts)
    cdef list props = []
    for m in msgs:
        s = m.properties
        if m.tags_code is not None or type(s) is not str or _latin1(s, &k) == NULL:
            return _pure_dispatch_run(d, cq, queue_offset, phys, sizes, msgs, store_ts)
        props.append(s)
    index = d.index
    for i in range(count):
        s = props[i]
        size = <int32_t>_int(sizes[i], -2147483648, 2147483647, "i")
        _dispatch_record(d, cq, mf, rel + i * CQ_UNIT_SIZE, queue_offset + i, phys, size, topic, s,
                         _latin1(s, &k), k, store_ts, index, i == 0)
        phys += size
    return phys


def redispatch(d, tuple record, int64_t phys):
    """One stored record to the dispatcher (twin of ``rocketpy.broker.store.recovery.redispatch``): the
    common case in C, as ``dispatch_run`` takes it, anything else through the pure twin."""
    if not _dispatch_bound:
        _bind_dispatch()
    cdef Py_ssize_t k
    cdef int64_t rel = 0
    cdef const unsigned char* p = NULL
    total, queue_id, queue_offset, store_ts, topic, props = record
    cq = d.cqs.get((topic, queue_id)) if type(topic) is str and topic != _SCHEDULE_TOPIC else None
    if cq is not None and type(props) is str:
        p = _latin1(props, &k)
    if p == NULL:
        return _pure_redispatch(d, record, phys)
    mf = _queue_end_file(cq, queue_offset, phys, 1, &rel)
    if mf is None:
        return _pure_redispatch(d, record, phys)
    _dispatch_record(d, cq, mf, rel, queue_offset, phys, <int32_t>_int(total, -2147483648, 2147483647, "i"),
                     topic, props, p, k, store_ts, d.index, True)


# -- the broker's messages of a batch (twin of rocketpy.broker.processors.send.batch_messages) -------
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
        m = _BrokerMessage.__new__(_BrokerMessage)  # the fields BrokerMessage.__init__ sets, without its call
        m.topic = topic
        m.queue_id = queue_id
        m.body = body
        m.properties = props
        m.flag = flag
        m.sys_flag = sys_flag
        m.born_timestamp = born_ts
        m.born_host8 = host8
        m.reconsume_times = reconsume
        m.prepared_transaction_offset = 0
        m.tags_code = None
        msgs.append(m)
        uniqs.append(_unique_key_of(props, p, n))
        i += 1
    return msgs, ",".join(uniqs), screened
