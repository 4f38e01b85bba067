# cython: language_level=3
"""C helpers the compiled modules share: cimported by each ``_speedups.pyx``, compiled into each.

Declarations and ``inline`` functions only, so there is no module of this name at run time and no
state: big-endian reads and writes, the CRC-32 of ``crc32_fold.h``, the ``struct``-style integer
check, an exact int as a C long long, writable-buffer acquisition, Latin-1 access to a str, a
growable byte buffer, a ``RemotingCommand`` made without its ``__init__`` call, an integer's
decimal text, an object slot read or written at its offset, and the ``Python.h`` calls Cython does
not declare. Every module that cimports this builds with ``rocketpy/`` on its include path and
links zlib (``setup.py``).
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyObject_GetBuffer
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Realloc
from cpython.object cimport PyObject, PyTypeObject, Py_TYPE
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_GET_LENGTH
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy


cdef extern from "Python.h":
    int PyUnicode_READY(object o) except -1
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    bint PyUnicode_IS_ASCII(object o)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size) except NULL
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    int PyUnicode_1BYTE_KIND
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    PyTypeObject PyMemberDescr_Type


cdef extern from "structmember.h":
    int T_OBJECT_EX
    int READONLY


cdef extern from "crc32_fold.h":
    uint32_t rocketpy_crc32(uint32_t crc, const unsigned char *buf, size_t length) nogil


cdef extern from "string.h":
    void* memmem(const void* haystack, size_t n, const void* needle, size_t k) nogil  # GNU (pyconfig.h sets _GNU_SOURCE)


# -- big-endian helpers ------------------------------------------------------------------------
cdef inline void _put_u32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void _put_u64(unsigned char* p, uint64_t v) noexcept nogil:
    _put_u32(p, <uint32_t>(v >> 32))
    _put_u32(p + 4, <uint32_t>v)


cdef inline uint32_t _get_u32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline uint64_t _get_u64(const unsigned char* p) noexcept nogil:
    return (<uint64_t>_get_u32(p) << 32) | <uint64_t>_get_u32(p + 4)


cdef inline uint32_t _crc32(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    return rocketpy_crc32(0, p, <size_t>n)


# -- integers and buffers as struct checks them ----------------------------------------------------
cdef inline object _struct_error(str message):
    """A ``struct.error``, as the pure twins' ``struct`` calls raise (imported on error paths only:
    a .pxd keeps no module state)."""
    import struct
    return struct.error(message)


cdef inline int64_t _int(object v, int64_t lo, int64_t hi, str fmt) except? -1:
    """``v`` as a C integer within [lo, hi], else ``struct.error`` as ``struct.pack`` raises."""
    cdef int64_t x
    if type(v) is not int and not isinstance(v, int):
        raise _struct_error("required argument is not an integer")
    try:
        x = v
    except OverflowError:
        raise _struct_error("argument out of range") from None
    if x < lo or x > hi:
        raise _struct_error(f"'{fmt}' format requires {lo} <= number <= {hi}")
    return x


cdef inline bint _as_i64(object v, long long* out):
    """``v`` as a C long long; False when it is not exactly an ``int`` or does not fit (the caller
    hands such a value to its pure twin)."""
    cdef int overflow = 0
    if type(v) is not int:
        return False
    out[0] = PyLong_AsLongLongAndOverflow(v, &overflow)
    return overflow == 0


cdef inline int _writable(object buf, Py_buffer* out) except -1:
    try:
        PyObject_GetBuffer(buf, out, PyBUF_WRITABLE)
    except BufferError:  # as struct.pack_into says it
        raise TypeError(f"argument must be read-write bytes-like object, not {type(buf).__name__}") from None
    return 0


# -- str as bytes ---------------------------------------------------------------------------------
cdef inline const unsigned char* _latin1(str s, Py_ssize_t* n) except? NULL:
    """The code points of ``s`` as bytes when every one is below 256 (else NULL: use the pure twin)."""
    PyUnicode_READY(s)
    n[0] = PyUnicode_GET_LENGTH(s)
    if PyUnicode_KIND(s) != PyUnicode_1BYTE_KIND:
        return NULL
    return <const unsigned char*>PyUnicode_DATA(s)


cdef inline bint _contains(const unsigned char* p, Py_ssize_t n, const char* word, Py_ssize_t k) noexcept nogil:
    return n >= k and memmem(p, <size_t>n, word, <size_t>k) != NULL


# -- a growable byte buffer -----------------------------------------------------------------------
cdef struct _Buf:
    char* p
    Py_ssize_t n
    Py_ssize_t cap


cdef inline int _grow(_Buf* b, Py_ssize_t k) except -1:
    cdef Py_ssize_t cap = b.cap * 2
    cdef char* q
    if cap < b.n + k:
        cap = b.n + k
    if cap < 256:
        cap = 256
    q = <char*>PyMem_Realloc(b.p, cap)
    if q == NULL:
        raise MemoryError()
    b.p = q
    b.cap = cap
    return 0


cdef inline int _put(_Buf* b, const void* src, Py_ssize_t k) except -1:
    if b.n + k > b.cap:
        _grow(b, k)
    memcpy(b.p + b.n, src, k)
    b.n += k
    return 0


cdef inline Py_ssize_t _property_value(const unsigned char* p, Py_ssize_t n, const char* name_sep, Py_ssize_t k,
                                       Py_ssize_t* end) noexcept nogil:
    """``get_property`` over the Latin-1 properties ``p[:n]``: where the value of the first pair named
    ``name_sep[:k]`` (name + ``\\x01``) starts (-1: none); ``end`` gets where it ends."""
    cdef Py_ssize_t i = 0
    while i < n:
        if n - i >= k and memcmp(p + i, name_sep, k) == 0:
            i += k
            end[0] = i
            while end[0] < n and p[end[0]] != 2:
                end[0] += 1
            return i
        while i < n and p[i] != 2:  # on to the next pair
            i += 1
        i += 1
    return -1


cdef inline object new_command(object cls, object code, object opaque, object flag, object remark,
                               object ext, object body, object serialize_type):
    """A ``cls`` (``RemotingCommand``) with every field its ``__init__`` sets, without the call: the
    one way the compiled modules make one."""
    cmd = cls.__new__(cls)
    cmd.code = code
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.ext = ext
    cmd.body = body
    cmd.serialize_type = serialize_type
    return cmd


# -- decimal text ------------------------------------------------------------------------------
cdef inline Py_ssize_t _put_int(char* out, long long v) noexcept nogil:
    """Write ``v`` in decimal at ``out`` (at most 20 characters, as ``str(v)``); its length."""
    cdef char tmp[24]
    cdef Py_ssize_t n = 0, i
    cdef unsigned long long u
    if v < 0:
        u = <unsigned long long>(-(v + 1)) + 1
    else:
        u = <unsigned long long>v
    while True:
        tmp[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    i = 0
    if v < 0:
        out[0] = 45  # '-'
        i = 1
    while n > 0:
        n -= 1
        out[i] = tmp[n]
        i += 1
    return i


# -- slot reads and writes ----------------------------------------------------------------------------------
# Instances of classes with ``__slots__`` (a PreparedMessage, a job, a SendResult, a MessageExt):
# an attribute is read or written straight in its slot, at the
# offset the class's member descriptor gives (what ``setattr`` ends up doing, without looking the
# name up along the class's MRO every time). A name that is not a plain writable object slot of
# the class (a subclass's property, say) has offset -1 and is set with ``setattr``.

cdef inline Py_ssize_t _slot_offset(type cls, str name) except -2:
    """The byte offset of ``cls``'s writable object slot ``name``, or -1 when it is not one."""
    d = getattr(cls, name, None)  # on the class: the member descriptor itself
    if Py_TYPE(d) is not &PyMemberDescr_Type or not issubclass(cls, d.__objclass__):
        return -1
    cdef PyMemberDef* m = (<PyMemberDescrObject*><PyObject*>d).d_member
    if m.type != T_OBJECT_EX or m.flags & READONLY:
        return -1
    return m.offset


cdef inline int _set(object obj, Py_ssize_t off, str name, object value) except -1:
    """``setattr(obj, name, value)``; straight into the slot at ``off`` when ``off`` >= 0."""
    cdef PyObject** slot
    cdef PyObject* old
    if off < 0:
        setattr(obj, name, value)
        return 0
    slot = <PyObject**>((<char*><PyObject*>obj) + off)
    old = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject*>value
    Py_XDECREF(old)
    return 0


cdef inline object _get(object obj, Py_ssize_t off, str name):
    """``getattr(obj, name)``; straight from the slot at ``off`` when ``off`` >= 0 and it is set."""
    cdef PyObject* v
    if off >= 0:
        v = (<PyObject**>((<char*><PyObject*>obj) + off))[0]
        if v is not NULL:
            return <object>v
    return getattr(obj, name)
