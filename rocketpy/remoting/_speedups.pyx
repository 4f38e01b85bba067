# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the frame codec (``rocketpy/remoting/codec.py``): ``encode_frame``, ``split_frames`` and
``assemble_body``.

``rocketpy._accel`` chooses them or their pure twins. The frame layout, limits, error class and
header codecs are read from ``rocketpy.remoting.codec`` the first time a function runs
(``_bind_codec``), not copied: ``rocketpy._accel`` loads this module before that one exists. Every
buffer access is bounds-checked before it happens: no input may crash the process.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.list cimport PyList_Append
from libc.stdint cimport int64_t, uint32_t
from libc.string cimport memcpy

from rocketpy._cshared cimport _get_u32, _put_u32

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
cdef Py_ssize_t WRITE_JOIN_MAX_BODY_BYTES = 0


cdef int _bind_codec() except -1:
    global _codec_bound, FrameError, RemotingCommand, _command_from_fields, _msgpack_pack, _CODECS
    global SERIALIZE_MSGPACK, MAX_HEADER_BYTES, WRITE_JOIN_MAX_BODY_BYTES
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
                    cmd = RemotingCommand.__new__(RemotingCommand)
                    cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext = fields
                    cmd.body = b""
                    cmd.serialize_type = SERIALIZE_MSGPACK
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
