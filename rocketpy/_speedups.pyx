# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the record layer (``rocketpy/``): the stored record, the batch encoding, the properties
string and the column decode.

``crc32`` (``record.body_crc``; its pure twin is ``zlib.crc32`` itself), ``pack_record``,
``decode_records``, ``_decode_at`` (``record.decode_at``), ``encode_batch`` and ``decode_batch`` twin
``rocketpy/record.py``; ``string_to_properties`` and ``properties_to_string`` twin
``rocketpy/message.py``; ``decode_columns`` twins ``rocketpy/record_columns.py``. ``rocketpy._accel``
chooses them or their pure twins. The record encoder is also declared in ``_speedups.pxd``: the
store's compiled module packs the records of an append through it at C level.

The layout constants, the error class and the message classes are read from ``rocketpy.record``,
``rocketpy.message``, ``rocketpy.msgid`` and ``rocketpy.record_columns`` the first time a function
runs (``_bind_*``), not copied: ``rocketpy._accel`` loads this module before those exist. Every
buffer access is bounds-checked by hand before it happens: no input may crash the process.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, _PyBytes_Resize
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.list cimport PyList_Append
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH, PyUnicode_Substring
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memcmp, memcpy, memset

from rocketpy._cshared cimport (
    PyUnicode_DATA, PyUnicode_IS_ASCII, _Buf, _crc32, _get_u32, _get_u64, _int, _put, _put_u32, _put_u64,
    _struct_error, _writable, rocketpy_crc32,
)

import zlib

__all__ = [
    "crc32", "pack_record", "string_to_properties", "properties_to_string", "_decode_at", "decode_records",
    "encode_batch", "decode_batch", "decode_columns",
]


# -- the record layout, bound from rocketpy.record on first use ----------------------------------
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


def crc32(data, uint32_t value=0, /):
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
                        Py_ssize_t* items_cap, Py_ssize_t* negative, bint body_fixed) except -1:
    """Check one record of ``base[offset:end]`` as ``_decode_one`` does and append its columns
    (``body_fixed``: the body column lives in a bytes object of its final capacity, never grown)."""
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
    if body_fixed and bufs[B_BODY].n + body_n > bufs[B_BODY].cap:  # _body_room's bound: never
        raise SystemError("decode_columns: a body past the room measured for it")
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


# One columnar decode in progress: the column buffers and the counts that run across records. The
# body column (a chunk's largest by far) is written straight into the bytes object it is returned
# as, when ``_body_room`` could bound it: no growth, no copy at the end (``body``: owned, or NULL).
cdef struct _Columns:
    _Buf bufs[_BUFS]
    Py_ssize_t row, n_keys, n_props, items_cap, negative
    _Prop* items
    PyObject* body


cdef Py_ssize_t _body_room(const unsigned char* base, Py_ssize_t n) noexcept:
    """Bytes the bodies of the records of ``base[:n]`` take at most (their records' bytes), or -1
    when that is not known: a compressed record (its body grows), or one whose sizes do not hold."""
    cdef Py_ssize_t pos = 0
    cdef uint32_t total
    while pos < n:
        if n - pos < HEAD_SIZE:
            return -1
        total = _get_u32(base + pos)
        if <Py_ssize_t>total > n - pos or total < HEAD_SIZE or (<int32_t>_get_u32(base + pos + 36)) & COMPRESSED_FLAG:
            return -1
        pos += total
    return n


cdef int _columns_start(_Columns* c, Py_ssize_t body_room) except -1:
    cdef Py_ssize_t i
    memset(c, 0, sizeof(_Columns))
    c.negative = -1
    for i in (B_TOPIC_OFF, B_MSGID_OFF, B_TAGS_OFF, B_BODY_OFF, B_KEYS_OFF, B_KEY_OFF, B_PROPS_OFF,
              B_NAME_OFF, B_VALUE_OFF):
        _put_i32(&c.bufs[i], 0)
    if body_room > 0:
        body = PyBytes_FromStringAndSize(NULL, body_room)
        Py_INCREF(body)
        c.body = <PyObject*>body
        c.bufs[B_BODY].p = PyBytes_AS_STRING(body)
        c.bufs[B_BODY].cap = body_room
    return 0


cdef int _columns_of(_Columns* c, const unsigned char* base, Py_ssize_t n) except -1:
    """Append the columns of the records of ``base[:n]`` (``c.negative``: the first record there
    whose offset msg id would be refused, as an offset into ``base``)."""
    cdef Py_ssize_t pos = 0
    while pos < n:
        if (c.row >> 3) >= c.bufs[B_TAGS_VALID].n:  # one more validity byte every 8 rows
            _put(&c.bufs[B_TAGS_VALID], b"\0", 1)
        _column_record(c.bufs, base, pos, n, c.row, &c.n_keys, &c.n_props, &c.items, &c.items_cap,
                       &c.negative, c.body != NULL)
        pos += _get_u32(base + pos)  # the record's total size, checked to fit
        c.row += 1
    return 0


cdef object _columns_result(_Columns* c):
    cdef Py_ssize_t i
    columns = [PyBytes_FromStringAndSize(c.bufs[i].p, c.bufs[i].n) if i != B_BODY or c.body == NULL else None
               for i in range(_BUFS)]
    if c.body != NULL:  # cut to what was written (in place: the object is this decode's alone)
        c.bufs[B_BODY].p = NULL
        _PyBytes_Resize(&c.body, c.bufs[B_BODY].n)
        columns[B_BODY] = <object>c.body
    return _ColumnBuffers(c.row, *columns)


cdef void _columns_free(_Columns* c) noexcept:
    cdef Py_ssize_t i
    PyMem_Free(c.items)
    if c.body != NULL:
        c.bufs[B_BODY].p = NULL  # inside the bytes object
        Py_DECREF(<object>c.body)
        c.body = NULL
    for i in range(_BUFS):
        PyMem_Free(c.bufs[i].p)


cdef object _decode_parts(list parts):
    """The columns of the records of ``parts`` read as one buffer, each part holding whole records
    (a pull answer's body each); None when a part is not a buffer, a record runs across two parts,
    or a record is refused: the caller decodes the parts joined, which raises as the pure twin."""
    cdef _Columns c
    cdef Py_buffer b
    cdef bint ok
    cdef Py_ssize_t room = 0, r
    for part in parts:  # the body column's room: every part's (none when one is not known)
        try:
            PyObject_GetBuffer(part, &b, PyBUF_SIMPLE)
        except Exception:
            return None
        r = _body_room(<const unsigned char*>b.buf, b.len)
        PyBuffer_Release(&b)
        if r < 0:
            room = -1
            break
        room += r
    _columns_start(&c, room)
    try:
        for part in parts:
            try:
                PyObject_GetBuffer(part, &b, PyBUF_SIMPLE)
            except Exception:
                return None
            try:
                ok = True
                try:
                    _columns_of(&c, <const unsigned char*>b.buf, b.len)
                except Exception:
                    ok = False
            finally:
                PyBuffer_Release(&b)
            if not ok or c.negative >= 0:
                return None
        return _columns_result(&c)
    finally:
        _columns_free(&c)


def decode_columns(buf):
    """Records back to back as column buffers (twin of ``rocketpy.record_columns.decode_columns``)."""
    if not _record_bound:
        _bind_record()
    if not _columns_bound:
        _bind_columns()
    if type(buf) is list:  # a chunk's pull answers, decoded without joining them first
        columns = _decode_parts(<list>buf)
        if columns is not None:
            return columns
        buf = b"".join(buf)
    cdef Py_buffer b
    cdef _Columns c
    cdef const unsigned char* base
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        base = <const unsigned char*>b.buf
        _columns_start(&c, _body_room(base, b.len))
        _columns_of(&c, base, b.len)
        if c.negative >= 0:  # as the pure twin: every record decoded first, then msgid's error
            _offset_msg_id_from_packed(
                PyBytes_FromStringAndSize(<const char*>(base + c.negative + 64), 8),
                <int64_t>_get_u64(base + c.negative + 28),
            )
        return _columns_result(&c)
    finally:
        PyBuffer_Release(&b)
        _columns_free(&c)
