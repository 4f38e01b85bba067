# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the frame codec (``rocketpy/remoting/codec.py``): ``encode_frame``, ``split_frames`` and
``assemble_body``.

``rocketpy._accel`` chooses them or their pure twins. The frame layout, limits, error class and
header codecs are read from ``rocketpy.remoting.codec`` the first time a function runs
(``_bind_codec``), not copied: ``rocketpy._accel`` loads this module before that one exists. Every
buffer access is bounds-checked before it happens: no input may crash the process.

A msgpack header of the usual shape (``[code, opaque, flag, remark, ext]`` with ints, nil, a str
remark and a map of str keys to ints, strs, bools or nil) is decoded here without msgpack's
Unpacker (``_usual_header``), with the short ASCII strings (the keys, topics, groups) taken from a
small cache of recent ones; any other header, and any it cannot take as it is, goes to the
Unpacker as before, which gives the same command or the precise error.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_SetItem
from cpython.list cimport PyList_Append
from cpython.long cimport PyLong_FromLongLong, PyLong_FromUnsignedLongLong
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from rocketpy._cshared cimport PyUnicode_DATA, _get_u32, _get_u64, _put_u32, new_command

from sys import intern as _intern

__all__ = ["assemble_body", "encode_frame", "split_frames"]


# -- the frame layout, bound from rocketpy.remoting.codec on first use -------------------------------
cdef bint _codec_bound = False
cdef object FrameError = None
cdef object RemotingCommand = None
cdef object _command_from_fields = None
cdef object _msgpack_pack = None
cdef object _CODECS = None
cdef int SERIALIZE_MSGPACK = 0
cdef Py_ssize_t MAX_HEADER_BYTES = 0
cdef Py_ssize_t MAX_HEADER_ITEMS = 0
cdef Py_ssize_t WRITE_JOIN_MAX_BODY_BYTES = 0


cdef int _bind_codec() except -1:
    global _codec_bound, FrameError, RemotingCommand, _command_from_fields, _msgpack_pack, _CODECS
    global SERIALIZE_MSGPACK, MAX_HEADER_BYTES, WRITE_JOIN_MAX_BODY_BYTES, MAX_HEADER_ITEMS
    from rocketpy.remoting import codec

    if codec.PREFIX_BYTES != 8 or codec.LENGTH_BYTES != 4:
        raise ImportError("rocketpy.remoting._speedups was built for another frame layout; rebuild it")
    FrameError = codec.FrameError
    RemotingCommand = codec.RemotingCommand
    _command_from_fields = codec.command_from_fields
    _msgpack_pack = codec._msgpack_pack
    _CODECS = codec._CODECS
    SERIALIZE_MSGPACK = codec.SERIALIZE_MSGPACK
    MAX_HEADER_BYTES = codec.MAX_HEADER_BYTES
    MAX_HEADER_ITEMS = codec.MAX_HEADER_ITEMS
    WRITE_JOIN_MAX_BODY_BYTES = codec.WRITE_JOIN_MAX_BODY_BYTES
    _codec_bound = True
    return 0


def encode_frame(cmd):
    """Frame parts for ``transport.writelines`` (twin of ``rocketpy.remoting.codec.encode_frame``)."""
    if not _codec_bound:
        _bind_codec()
    cdef int serialize_type = cmd.serialize_type
    cdef Py_ssize_t header_len, body_len
    cdef Py_buffer hb, bb
    cdef unsigned char* p
    if serialize_type == SERIALIZE_MSGPACK:
        header = _msgpack_pack([cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext])
    else:
        codec = _CODECS.get(serialize_type)
        if codec is None:
            raise ValueError(f"no header codec registered for serialize type {serialize_type:#x}")
        header = codec.encode(cmd)
    header_len = len(header)
    if header_len > MAX_HEADER_BYTES:
        raise ValueError(f"encoded header is {header_len} bytes; the limit is {MAX_HEADER_BYTES}")
    body = cmd.body
    body_len = len(body)
    joined = body_len < WRITE_JOIN_MAX_BODY_BYTES
    out = PyBytes_FromStringAndSize(NULL, 8 + header_len + (body_len if joined else 0))
    p = <unsigned char*>PyBytes_AS_STRING(out)
    _put_u32(p, <uint32_t>(4 + header_len + body_len))
    _put_u32(p + 4, (<uint32_t>serialize_type << 24) | <uint32_t>header_len)
    PyObject_GetBuffer(header, &hb, PyBUF_SIMPLE)
    memcpy(p + 8, hb.buf, header_len)
    PyBuffer_Release(&hb)
    if body_len == 0:
        return [out]
    if joined:
        PyObject_GetBuffer(body, &bb, PyBUF_SIMPLE)
        memcpy(p + 8 + header_len, bb.buf, bb.len if bb.len <= body_len else body_len)
        PyBuffer_Release(&bb)
        return [out]
    return [out, body if isinstance(body, (bytes, memoryview)) else memoryview(body)]


# -- the usual msgpack header, without msgpack's Unpacker -------------------------------------------
cdef enum:
    _STR_CACHE_SLOTS = 256  # a power of two
    _STR_CACHE_MAX = 32  # the longest string kept

cdef list _str_cache = [None] * _STR_CACHE_SLOTS  # recent short ASCII strings (interned), by hash
cdef object _NOT_USUAL = object()  # a value the usual shape does not have: msgpack decodes the header


cdef object _string(const unsigned char* p, Py_ssize_t n):
    """The str of the UTF-8 bytes ``p[:n]``, a short ASCII one from the cache (decoded and kept on a
    miss); ``_NOT_USUAL`` when the bytes are not UTF-8 (msgpack's Unpacker then says why)."""
    cdef uint32_t h = <uint32_t>n
    cdef Py_ssize_t i
    cdef bint ascii = True
    if n > _STR_CACHE_MAX:
        ascii = False
    else:
        for i in range(n):
            if p[i] >= 0x80:
                ascii = False
                break
            h = h * 31 + p[i]
    if not ascii:
        try:
            return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
        except UnicodeDecodeError:
            return _NOT_USUAL
    slot = h & (_STR_CACHE_SLOTS - 1)
    s = _str_cache[slot]
    if s is not None and PyUnicode_GET_LENGTH(s) == n and memcmp(PyUnicode_DATA(s), p, n) == 0:
        return s
    s = PyUnicode_DecodeUTF8(<const char*>p, n, NULL)  # ASCII: cannot fail
    s = _intern(s)  # as msgpack does for map keys
    _str_cache[slot] = s
    return s


cdef object _scalar(const unsigned char* p, Py_ssize_t n, Py_ssize_t* at):
    """The int, str, bool or nil at ``p[at]`` (``at`` moves past it), else ``_NOT_USUAL`` (another
    type, or one that runs past ``n``)."""
    cdef Py_ssize_t i = at[0], k
    cdef unsigned char t
    if i >= n:
        return _NOT_USUAL
    t = p[i]
    i += 1
    if t <= 0x7F:  # positive fixint
        at[0] = i
        return PyLong_FromLongLong(t)
    if t >= 0xE0:  # negative fixint
        at[0] = i
        return PyLong_FromLongLong(<long long>t - 256)
    if 0xA0 <= t <= 0xBF:  # fixstr
        k = t & 0x1F
    elif t == 0xD9 or t == 0xDA or t == 0xDB:  # str 8 / 16 / 32
        k = 1 if t == 0xD9 else (2 if t == 0xDA else 4)
        if i + k > n:
            return _NOT_USUAL
        if t == 0xD9:
            k, i = p[i], i + 1
        elif t == 0xDA:
            k, i = (p[i] << 8) | p[i + 1], i + 2
        else:
            k, i = _get_u32(p + i), i + 4
    elif t == 0xC0:
        at[0] = i
        return None
    elif t == 0xC2 or t == 0xC3:
        at[0] = i
        return t == 0xC3
    elif 0xCC <= t <= 0xD3:  # uint 8..64, int 8..64
        k = 1 << ((t - 0xCC) & 3)
        if i + k > n:
            return _NOT_USUAL
        at[0] = i + k
        if t == 0xCC:
            return PyLong_FromLongLong(p[i])
        if t == 0xCD:
            return PyLong_FromLongLong(<uint16_t>((p[i] << 8) | p[i + 1]))
        if t == 0xCE:
            return PyLong_FromLongLong(_get_u32(p + i))
        if t == 0xCF:
            return PyLong_FromUnsignedLongLong(_get_u64(p + i))
        if t == 0xD0:
            return PyLong_FromLongLong(<int8_t>p[i])
        if t == 0xD1:
            return PyLong_FromLongLong(<int16_t>((p[i] << 8) | p[i + 1]))
        if t == 0xD2:
            return PyLong_FromLongLong(<int32_t>_get_u32(p + i))
        return PyLong_FromLongLong(<int64_t>_get_u64(p + i))
    else:
        return _NOT_USUAL
    if k > n - i:
        return _NOT_USUAL
    at[0] = i + k
    return _string(p + i, k)


cdef object _usual_header(const unsigned char* p, Py_ssize_t n):
    """The command of the msgpack header ``p[:n]`` when it has the usual shape, else None."""
    cdef Py_ssize_t at = 1, count, i
    cdef unsigned char t
    if n < 6 or p[0] != 0x95:  # a fixarray of 5
        return None
    code = _scalar(p, n, &at)
    opaque = _scalar(p, n, &at)
    flag = _scalar(p, n, &at)
    remark = _scalar(p, n, &at)
    if (type(code) is not int or type(opaque) is not int or type(flag) is not int
            or not (remark is None or type(remark) is str) or at >= n):
        return None
    t = p[at]
    at += 1
    if t == 0xC0:
        ext = None
        count = -1
    elif 0x80 <= t <= 0x8F:
        count = t & 0x0F
    elif t == 0xDE and at + 2 <= n:
        count = (p[at] << 8) | p[at + 1]
        at += 2
    elif t == 0xDF and at + 4 <= n:
        count = _get_u32(p + at)
        at += 4
    else:
        return None
    if count > MAX_HEADER_ITEMS or count > (n - at) // 2:  # (msgpack refuses past its max_map_len)
        return None
    if count >= 0:
        ext = {}
        for i in range(count):
            key = _scalar(p, n, &at)
            if type(key) is not str:
                return None
            value = _scalar(p, n, &at)
            if value is _NOT_USUAL:
                return None
            PyDict_SetItem(ext, key, value)
    if at != n:  # trailing bytes: msgpack's check says so
        return None
    return new_command(RemotingCommand, code, opaque, flag, remark, ext, b"", SERIALIZE_MSGPACK)


def split_frames(decoder, src, Py_ssize_t max_frames=1 << 62):
    """The first ``max_frames`` complete frames of ``src`` and the bytes used (twin of
    ``rocketpy.remoting.codec.split_frames``)."""
    if not _codec_bound:
        _bind_codec()
    cdef Py_buffer b
    cdef const unsigned char* base
    cdef Py_ssize_t end, pos = 0, frame_end, header_end, max_length = decoder.max_frame_bytes
    cdef Py_ssize_t max_header = decoder.max_header_bytes
    cdef uint32_t length, type_and_len, header_len
    cdef int serialize_type
    cdef long long unpacked = decoder._unpacked_bytes
    cdef list out = []
    unpacker = decoder._unpacker
    feed, unpack, tell = unpacker.feed, unpacker.unpack, unpacker.tell  # looked up once per call
    codecs = _CODECS
    PyObject_GetBuffer(src, &b, PyBUF_SIMPLE)
    view = memoryview(src)
    head = decoder._head
    decoder._head = None
    try:
        base = <const unsigned char*>b.buf
        end = b.len
        while end - pos >= 8 and len(out) < max_frames:
            length = _get_u32(base + pos)
            type_and_len = _get_u32(base + pos + 4)
            serialize_type = type_and_len >> 24
            header_len = type_and_len & 0xFFFFFF
            if (<Py_ssize_t>length > max_length or <int64_t>header_len > <int64_t>length - 4
                    or <Py_ssize_t>header_len > max_header or serialize_type not in codecs):
                decoder._check_prefix(length, type_and_len)  # raises the precise FrameError
            frame_end = pos + 4 + length
            header_end = pos + 8 + header_len
            if frame_end > end:
                if header_end <= end and head is None:  # decode the header now (the body is coming)
                    decoder._unpacked_bytes = unpacked
                    head = decoder._decode_header(view[pos + 8 : header_end], serialize_type)
                    unpacked = decoder._unpacked_bytes
                break
            if head is not None:  # decoded while its body was still arriving
                cmd = head
                head = None
            elif serialize_type == SERIALIZE_MSGPACK:
                cmd = _usual_header(base + pos + 8, header_len)
                if cmd is None:  # another shape: msgpack's Unpacker decodes it (or says what is wrong)
                    feed(view[pos + 8 : header_end])
                    unpacked += header_len
                    try:
                        fields = unpack()
                    except Exception as exc:  # msgpack raises several types for garbage
                        raise FrameError(f"undecodable msgpack header: {exc!r}") from exc
                    if tell() != unpacked:
                        raise FrameError("msgpack header has trailing bytes")
                    if (type(fields) is list and len(fields) == 5 and type(fields[0]) is int
                            and type(fields[1]) is int and type(fields[2]) is int
                            and (fields[3] is None or type(fields[3]) is str)
                            and (fields[4] is None or type(fields[4]) is dict)):
                        cmd = new_command(RemotingCommand, fields[0], fields[1], fields[2], fields[3],
                                          fields[4], b"", SERIALIZE_MSGPACK)
                    else:
                        cmd = _command_from_fields(fields, SERIALIZE_MSGPACK)  # raises the precise error
            else:
                cmd = codecs[serialize_type].decode(view[pos + 8 : header_end], serialize_type)
            if header_end < frame_end:
                cmd.body = PyBytes_FromStringAndSize(<const char*>(base + header_end), frame_end - header_end)
            PyList_Append(out, cmd)
            pos = frame_end
        decoder._head = head
        if head is None and pos + 4 <= end:  # a lone length field: reject oversize early
            decoder._check_length(_get_u32(base + pos))
    finally:
        decoder._unpacked_bytes = unpacked
        view.release()
        PyBuffer_Release(&b)
    return out, pos


def assemble_body(decoder, data):
    """Copy the next part of the large body ``decoder`` assembles (twin of
    ``rocketpy.remoting.codec.assemble_body``): the body's bytes object is allocated on the first
    part, uninitialised and known only to the decoder until it is complete, and every part is
    copied into its place."""
    cdef Py_buffer b
    cdef Py_ssize_t pos = decoder._body_pos, total = decoder._body_len, n
    body = decoder._body
    if body is None:
        body = PyBytes_FromStringAndSize(NULL, total)
        decoder._body = body
    PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
    try:
        n = b.len if b.len < total - pos else total - pos
        if n > 0:
            memcpy(PyBytes_AS_STRING(body) + pos, b.buf, n)
    finally:
        PyBuffer_Release(&b)
    decoder._body_pos = pos + n
    return n
