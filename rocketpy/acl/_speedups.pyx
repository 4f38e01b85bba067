# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the ACL signature (``rocketpy/acl/signing.py``): ``signed_ext`` and ``hmac_signature``.

``rocketpy._accel`` chooses them or their pure twins. The unsigned field names, the cache bound and
the ext value text form are read from ``rocketpy.acl.signing`` and ``rocketpy.remoting.json_header``
the first time a function runs (``_bind_signing``), not copied: ``rocketpy._accel`` loads this
module before those exist.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free
from cpython.unicode cimport PyUnicode_GET_LENGTH
from libc.stdint cimport uint32_t

from rocketpy._cshared cimport (
    PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_IS_ASCII, PyUnicode_New, PyUnicode_READY, _Buf, _put,
)

__all__ = ["signed_ext", "hmac_signature"]


# -- the signing rules, bound from rocketpy.acl.signing on first use ------------------------------
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
