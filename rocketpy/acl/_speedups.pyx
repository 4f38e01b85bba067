# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the ACL signature (``rocketpy/acl/signing.py``): ``signed_ext`` and ``hmac_signature``.

``hmac_signature`` hashes a request with a body of at most ``OWN_SHA1_MAX_BODY`` bytes itself:
HmacSHA1 from the key's pads (``HmacKey.pads``) with the SHA-1 below (FIPS 180-4), in one C call
with nothing allocated. OpenSSL's HMAC object costs more for the few blocks of a pull or a small
send: a copy of its state allocated, updated, digested and cleansed per request (in a busy broker
~7.6 µs a pull's signature against ~6.2). Larger bodies go to OpenSSL's, faster per byte (SHA
instructions).

``rocketpy._accel`` chooses them or their pure twins. The unsigned field names, the cache bound,
the body size hashed here and the ext value text form are read from ``rocketpy.acl.signing`` and
``rocketpy.remoting.json_header`` the first time a function runs (``_bind_signing``), not copied:
``rocketpy._accel`` loads this module before those exist.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free
from cpython.unicode cimport PyUnicode_GET_LENGTH
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy

from rocketpy._cshared cimport (
    PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_IS_ASCII, PyUnicode_New, PyUnicode_READY, _Buf, _put,
    _put_int,
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
cdef Py_ssize_t _OWN_SHA1_MAX_BODY = 0


cdef int _bind_signing() except -1:
    global _signing_bound, _ext_text, _UNSIGNED, _MAX_ORDERS, _pure_signed_ext, _OWN_SHA1_MAX_BODY
    from rocketpy._accel import PURE
    from rocketpy.acl import signing
    from rocketpy.remoting import json_header

    _ext_text = json_header.ext_text
    _UNSIGNED = signing._UNSIGNED
    _MAX_ORDERS = signing.MAX_CACHED_KEY_SETS
    _pure_signed_ext = PURE["signed_ext"]
    _OWN_SHA1_MAX_BODY = signing.OWN_SHA1_MAX_BODY
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
    cdef char digits[24]
    if overflow:
        return _put_text(b, str(v))
    return _put(b, digits, _put_int(digits, x))


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


def hmac_signature(key, ext, body):
    """``Base64(HmacSHA1)`` of a request under ``key`` (an ``HmacKey``); twin of
    ``rocketpy.acl.signing.hmac_signature``."""
    cdef Py_buffer bb
    cdef _Buf text = _Buf(NULL, 0, 0)
    cdef unsigned char digest[20]
    cdef const unsigned char* p
    if not _signing_bound:
        _bind_signing()
    if body and len(body) > _OWN_SHA1_MAX_BODY:
        mac = key._base.copy()
        if ext:
            mac.update(_signed_bytes(ext))
        mac.update(body)
        raw = mac.digest()
        return _base64(<const unsigned char*>PyBytes_AS_STRING(raw), len(raw))
    cdef bytes pads = key.pads
    if len(pads) != 128:
        raise ValueError("an HmacKey's pads are 128 bytes")
    p = <const unsigned char*>PyBytes_AS_STRING(pads)
    try:
        if ext:
            _signed_text(&text, ext)
        if not body:
            _hmac_sha1(p, <const unsigned char*>text.p, text.n, NULL, 0, digest)
        else:
            PyObject_GetBuffer(body, &bb, PyBUF_SIMPLE)
            try:
                _hmac_sha1(p, <const unsigned char*>text.p, text.n, <const unsigned char*>bb.buf, bb.len, digest)
            finally:
                PyBuffer_Release(&bb)
    finally:
        PyMem_Free(text.p)
    return _base64(digest, 20)


# -- HmacSHA1 over a key's pads: SHA-1 as FIPS 180-4 defines it -----------------------------------
cdef struct _Sha1:
    uint32_t h[5]
    uint64_t length  # bytes hashed
    unsigned char block[64]
    Py_ssize_t used  # bytes of ``block`` filled


cdef inline uint32_t _rol(uint32_t x, int n) noexcept nogil:
    return (x << n) | (x >> (32 - n))


cdef void _sha1_compress(uint32_t* h, const unsigned char* p) noexcept nogil:
    """One 64-byte block: the schedule, then the 80 rounds in their four kinds."""
    cdef uint32_t w[80]
    cdef uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], t
    cdef int i
    for i in range(16):
        w[i] = (<uint32_t>p[4 * i] << 24) | (<uint32_t>p[4 * i + 1] << 16) | (<uint32_t>p[4 * i + 2] << 8) | p[4 * i + 3]
    for i in range(16, 80):
        w[i] = _rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1)
    for i in range(0, 20):
        t = _rol(a, 5) + ((b & c) | (~b & d)) + e + <uint32_t>0x5A827999 + w[i]
        e = d
        d = c
        c = _rol(b, 30)
        b = a
        a = t
    for i in range(20, 40):
        t = _rol(a, 5) + (b ^ c ^ d) + e + <uint32_t>0x6ED9EBA1 + w[i]
        e = d
        d = c
        c = _rol(b, 30)
        b = a
        a = t
    for i in range(40, 60):
        t = _rol(a, 5) + ((b & c) | (b & d) | (c & d)) + e + <uint32_t>0x8F1BBCDC + w[i]
        e = d
        d = c
        c = _rol(b, 30)
        b = a
        a = t
    for i in range(60, 80):
        t = _rol(a, 5) + (b ^ c ^ d) + e + <uint32_t>0xCA62C1D6 + w[i]
        e = d
        d = c
        c = _rol(b, 30)
        b = a
        a = t
    h[0] += a
    h[1] += b
    h[2] += c
    h[3] += d
    h[4] += e


cdef void _sha1_init(_Sha1* s) noexcept nogil:
    s.h[0] = 0x67452301
    s.h[1] = 0xEFCDAB89
    s.h[2] = 0x98BADCFE
    s.h[3] = 0x10325476
    s.h[4] = 0xC3D2E1F0
    s.length = 0
    s.used = 0


cdef void _sha1_update(_Sha1* s, const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t take
    s.length += <uint64_t>n
    if s.used:
        take = 64 - s.used if n > 64 - s.used else n
        memcpy(s.block + s.used, p, take)
        s.used += take
        p += take
        n -= take
        if s.used < 64:
            return
        _sha1_compress(s.h, s.block)
        s.used = 0
    while n >= 64:
        _sha1_compress(s.h, p)
        p += 64
        n -= 64
    if n:
        memcpy(s.block, p, n)
        s.used = n


cdef void _sha1_final(_Sha1* s, unsigned char* out) noexcept nogil:
    cdef uint64_t bits = s.length * 8
    cdef int i
    s.block[s.used] = 0x80
    s.used += 1
    if s.used > 56:
        while s.used < 64:
            s.block[s.used] = 0
            s.used += 1
        _sha1_compress(s.h, s.block)
        s.used = 0
    while s.used < 56:
        s.block[s.used] = 0
        s.used += 1
    for i in range(8):
        s.block[56 + i] = <unsigned char>(bits >> (56 - 8 * i))
    _sha1_compress(s.h, s.block)
    for i in range(5):
        out[4 * i] = <unsigned char>(s.h[i] >> 24)
        out[4 * i + 1] = <unsigned char>(s.h[i] >> 16)
        out[4 * i + 2] = <unsigned char>(s.h[i] >> 8)
        out[4 * i + 3] = <unsigned char>s.h[i]


cdef void _hmac_sha1(const unsigned char* pads, const unsigned char* text, Py_ssize_t text_n,
                     const unsigned char* body, Py_ssize_t body_n, unsigned char* out) noexcept nogil:
    """HmacSHA1 of ``text + body``; ``pads`` = key ^ ipad (64 bytes), then key ^ opad (64 bytes)."""
    cdef _Sha1 s
    cdef unsigned char inner[20]
    _sha1_init(&s)
    _sha1_update(&s, pads, 64)
    if text_n:
        _sha1_update(&s, text, text_n)
    if body_n:
        _sha1_update(&s, body, body_n)
    _sha1_final(&s, inner)
    _sha1_init(&s)
    _sha1_update(&s, pads + 64, 64)
    _sha1_update(&s, inner, 20)
    _sha1_final(&s, out)


cdef const char* _B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


cdef str _base64(const unsigned char* p, Py_ssize_t n):
    """Standard base64 with padding of ``p[:n]``, as ``binascii.b2a_base64(raw, newline=False)``
    (as text)."""
    cdef Py_ssize_t i = 0, j = 0
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
