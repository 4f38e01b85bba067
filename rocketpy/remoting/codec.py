"""Sans-IO frame codec (DESIGN §2): ``encode_frame`` and ``FrameDecoder``.

Frame layout (all big-endian)::

    u32 length          bytes after this field: 4 + header_length + body length
    u8  serialize_type  0x10 msgpack (rocketpy), 0x00 JSON (RocketMQ's clients; ``json_header.py``)
    u24 header_length
    header              encoded by the header codec registered for serialize_type
    body                raw bytes

Header codecs are pluggable per serialize type (``register_header_codec``). The msgpack codec
encodes the header as the array ``[code, opaque, flag, remark, ext]``.

Invariants: the decoder checks the announced length against ``max_frame_bytes``, the header length
against ``max_header_bytes`` and the serialize type against the registry as soon as the 8-byte
prefix is visible, before buffering any of the frame; it never holds more than one incomplete
frame; it raises ``FrameError`` on any malformed input and must not be fed again afterwards.

A body of ``ASSEMBLE_BODY_BYTES`` or more is assembled in place: once its frame's header is
decoded, the body object is allocated and each read is copied straight into it
(``assemble_body``), so completing a 15 MiB frame costs no 15 MiB copy (with its page faults:
10-30 ms on these VMs) in one loop turn, and the bytes are copied once instead of twice.

Decoding a header costs at most about ``max_header_bytes`` small values: msgpack's unpacker is
told the limits (no string or binary longer than the header, no map or array of more than
``MAX_HEADER_ITEMS`` entries, checked before it allocates them), and the JSON header is counted
before it is parsed (``json_header.py``).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Protocol

import msgpack

from rocketpy._accel import twin
from rocketpy.errors import RocketpyError
from rocketpy.limits import (
    DEFAULT_MAX_HEADER_BYTES,
    MAX_FRAME_BYTES,
    MAX_HEADER_BYTES,
    MAX_HEADER_ITEMS,
    WRITE_JOIN_MAX_BODY_BYTES,
)
from rocketpy.remoting.command import SERIALIZE_JSON, SERIALIZE_MSGPACK, RemotingCommand
from rocketpy.remoting.json_header import decode_json_header, encode_json_header

#: ``u32 length | u32 (serialize_type << 24 | header_length)``
PREFIX = struct.Struct(">II")
PREFIX_BYTES = PREFIX.size
LENGTH_BYTES = 4
_HEADER_LENGTH_MASK = 0xFFFFFF
_UNLIMITED = 1 << 62
#: Bodies at least this long are assembled in place as their bytes arrive (``assemble_body``).
ASSEMBLE_BODY_BYTES = 1 << 20


class FrameError(RocketpyError):
    """The byte stream is not a valid frame sequence; the connection must be closed.

    Attributes:
        reason: why, in words fit for a log line.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HeaderCodec(Protocol):
    """Encodes and decodes the header part of a frame for one serialize type."""

    def encode(self, cmd: RemotingCommand) -> bytes:
        """Return the encoded header of ``cmd`` (body excluded)."""
        ...

    def decode(self, header: memoryview, serialize_type: int) -> RemotingCommand:
        """Return a command with an empty body; raise ``FrameError`` if ``header`` is invalid."""
        ...


class MsgpackHeaderCodec:
    """Header = msgpack array ``[code, opaque, flag, remark, ext]`` (serialize type 0x10)."""

    def __init__(self) -> None:
        self._pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack

    def encode(self, cmd: RemotingCommand) -> bytes:
        """Pack the five header fields of ``cmd``."""
        return self._pack([cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext])

    def decode(self, header: memoryview, serialize_type: int) -> RemotingCommand:
        """Unpack and type-check the header array."""
        try:
            fields = msgpack.unpackb(header, raw=False)
        except Exception as exc:  # msgpack raises several types for garbage
            raise FrameError(f"undecodable msgpack header: {exc}") from exc
        return command_from_fields(fields, serialize_type)


def command_from_fields(fields: Any, serialize_type: int) -> RemotingCommand:
    """Type-check a decoded ``[code, opaque, flag, remark, ext]`` array and build the command.

    Raises:
        FrameError: wrong arity or field types.
    """
    if type(fields) is not list or len(fields) != 5:  # never repr the whole value: it may be large
        what = f"a {len(fields)}-element array" if type(fields) is list else type(fields).__name__
        raise FrameError(f"msgpack header must be a 5-element array, got {what}")
    code, opaque, flag, remark, ext = fields
    if type(code) is not int or type(opaque) is not int or type(flag) is not int:
        kinds = "/".join(type(v).__name__ for v in (code, opaque, flag))
        raise FrameError(f"msgpack header code/opaque/flag must be ints, got {kinds}")
    if remark is not None and type(remark) is not str:
        raise FrameError(f"msgpack header remark must be a string or nil, got {type(remark).__name__}")
    if ext is not None and type(ext) is not dict:
        raise FrameError(f"msgpack header ext must be a map or nil, got {type(ext).__name__}")
    return RemotingCommand(code, opaque, flag, remark, ext, b"", serialize_type)


class JsonHeaderCodec:
    """Header = RocketMQ's JSON object (serialize type 0x00; ``json_header.py``)."""

    def encode(self, cmd: RemotingCommand) -> bytes:
        """The JSON text of ``cmd``'s header."""
        return encode_json_header(cmd)

    def decode(self, header: memoryview, serialize_type: int) -> RemotingCommand:
        """Parse the JSON header; anything malformed is a ``FrameError``."""
        try:
            return decode_json_header(header, serialize_type)
        except ValueError as exc:
            raise FrameError(str(exc)) from None


_CODECS: dict[int, HeaderCodec] = {SERIALIZE_MSGPACK: MsgpackHeaderCodec(), SERIALIZE_JSON: JsonHeaderCodec()}
_msgpack_pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack


def register_header_codec(serialize_type: int, codec: HeaderCodec) -> None:
    """Register the header codec used for frames of ``serialize_type`` (0..255)."""
    if not 0 <= serialize_type <= 0xFF:
        raise ValueError(f"serialize type must fit in one byte, got {serialize_type}")
    _CODECS[serialize_type] = codec


def header_codec(serialize_type: int) -> HeaderCodec | None:
    """Return the codec registered for ``serialize_type``, or None."""
    return _CODECS.get(serialize_type)


@twin
def encode_frame(cmd: RemotingCommand) -> list[bytes | memoryview]:
    """Encode ``cmd`` as frame parts for ``transport.writelines``.

    Small bodies are joined to the header (one buffer); large bodies are returned as their own
    part and never copied.

    Raises:
        ValueError: unknown serialize type, or a header too long for the 24-bit length field.
    """
    if cmd.serialize_type == SERIALIZE_MSGPACK:  # the hot path: skip the registry lookup
        header = _msgpack_pack([cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext])
    else:
        codec = _CODECS.get(cmd.serialize_type)
        if codec is None:
            raise ValueError(f"no header codec registered for serialize type {cmd.serialize_type:#x}")
        header = codec.encode(cmd)
    header_len = len(header)
    if header_len > MAX_HEADER_BYTES:
        raise ValueError(f"encoded header is {header_len} bytes; the limit is {MAX_HEADER_BYTES}")
    body = cmd.body
    body_len = len(body)
    prefix = PREFIX.pack(4 + header_len + body_len, (cmd.serialize_type << 24) | header_len)
    if body_len == 0:
        return [prefix + header]
    if body_len < WRITE_JOIN_MAX_BODY_BYTES:
        return [b"".join((prefix, header, body))]
    return [prefix + header, body if isinstance(body, bytes | memoryview) else memoryview(body)]


def encode_frame_bytes(cmd: RemotingCommand) -> bytes:
    """Encode ``cmd`` as one contiguous ``bytes`` (copies the body; for tests and tools)."""
    return b"".join(encode_frame(cmd))


class FrameDecoder:
    """Split a byte stream into ``RemotingCommand`` objects.

    Feed it whatever the transport delivers; it returns every complete frame. The internal buffer
    holds at most one incomplete frame (bounded by ``max_frame_bytes``) and is compacted once per
    ``feed`` call, so feeding is linear in the bytes received.
    """

    __slots__ = (
        "_body",
        "_body_len",
        "_body_pos",
        "_buf",
        "_failed",
        "_head",
        "_unpacked_bytes",
        "_unpacker",
        "max_frame_bytes",
        "max_header_bytes",
    )

    def __init__(
        self, max_frame_bytes: int = MAX_FRAME_BYTES, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    ) -> None:
        if max_frame_bytes < 4:
            raise ValueError(f"max_frame_bytes must be at least 4, got {max_frame_bytes}")
        if not 0 < max_header_bytes <= MAX_HEADER_BYTES:
            raise ValueError(f"max_header_bytes must be 1 to {MAX_HEADER_BYTES}, got {max_header_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self.max_header_bytes = max_header_bytes
        self._buf = bytearray()
        self._failed = False
        # Streaming msgpack headers through one Unpacker per connection is cheaper than unpackb. Its
        # limits are checked before a value is allocated: a header's cost is bounded by its length.
        self._unpacker = msgpack.Unpacker(
            raw=False,
            max_buffer_size=max(max_header_bytes, 1 << 20),
            max_str_len=max_header_bytes,
            max_bin_len=max_header_bytes,
            max_ext_len=max_header_bytes,
            max_array_len=MAX_HEADER_ITEMS,
            max_map_len=MAX_HEADER_ITEMS,
        )
        self._unpacked_bytes = 0
        # The command of the incomplete frame at the buffer's start, decoded as soon as its header
        # arrived (an undecodable header fails the stream without waiting for the body).
        self._head: RemotingCommand | None = None
        # The large body being assembled for ``_head`` (``assemble_body``; _body_len 0: none): the
        # compiled twin's bytes object under construction or the pure twin's list of parts.
        self._body: Any = None
        self._body_len = 0
        self._body_pos = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf) + self._body_pos

    def feed(self, data: bytes | bytearray | memoryview, max_frames: int = 0) -> list[RemotingCommand]:
        """Consume ``data`` and return the commands of the frames it completes.

        Args:
            data: the bytes received (may be empty: decode what is buffered).
            max_frames: return at most this many commands (0: all); complete frames past it stay
                buffered for the next call, so a caller can spread a large read over loop turns.

        Raises:
            FrameError: oversize length, unknown serialize type or undecodable header.
        """
        if self._failed:
            raise FrameError("decoder already failed; the connection must be closed")
        done: list[RemotingCommand] = []
        if self._body_len:  # a large body is being assembled: the data is its next part
            used = assemble_body(self, data)
            if self._body_pos < self._body_len:
                return done
            done.append(self._finish_body())
            data = memoryview(data)[used:]
            if max_frames == 1:
                self._buf += data  # the next turn decodes the rest
                return done
            max_frames = max_frames - 1 if max_frames else 0
        buf = self._buf
        if buf:
            buf += data
            src: bytes | bytearray | memoryview = buf
        else:
            src = data
        try:
            out, used = split_frames(self, src, max_frames or _UNLIMITED)
        except FrameError:
            self._failed = True
            raise
        if src is buf:
            del buf[:used]  # bytearray deletes from the front without moving the rest
        elif used < len(src):
            buf += memoryview(src)[used:]
        if self._head is not None and len(buf) >= PREFIX_BYTES:
            self._maybe_assemble(buf)
        return done + out if done else out

    def _maybe_assemble(self, buf: bytearray) -> None:
        """The incomplete frame at the start of ``buf`` has its header decoded: a large body is
        assembled in place from now on (what arrived of it moves there, the buffer is emptied)."""
        length, type_and_len = PREFIX.unpack_from(buf, 0)
        body_start = PREFIX_BYTES + (type_and_len & _HEADER_LENGTH_MASK)
        body_len = LENGTH_BYTES + length - body_start
        if body_len < ASSEMBLE_BODY_BYTES:
            return
        self._body, self._body_len, self._body_pos = None, body_len, 0
        with memoryview(buf) as view:
            assemble_body(self, view[body_start:])
        buf.clear()

    def _finish_body(self) -> RemotingCommand:
        """The assembled frame's command, with its body."""
        cmd, body = self._head, self._body
        assert cmd is not None and self._body_pos == self._body_len
        cmd.body = body if type(body) is bytes else b"".join(body)
        self._head, self._body, self._body_len, self._body_pos = None, None, 0, 0
        return cmd

    def _decode_header(self, header: memoryview, serialize_type: int) -> RemotingCommand:
        if serialize_type == SERIALIZE_MSGPACK:
            return self._decode_msgpack(header)
        return _CODECS[serialize_type].decode(header, serialize_type)

    def _decode_msgpack(self, header: memoryview) -> RemotingCommand:
        unpacker = self._unpacker
        unpacker.feed(header)
        self._unpacked_bytes += len(header)
        try:
            fields = unpacker.unpack()
        except Exception as exc:  # msgpack raises several types for garbage
            raise FrameError(f"undecodable msgpack header: {exc!r}") from exc
        if unpacker.tell() != self._unpacked_bytes:
            raise FrameError("msgpack header has trailing bytes")
        return command_from_fields(fields, SERIALIZE_MSGPACK)

    def _check_length(self, length: int) -> None:
        if length > self.max_frame_bytes:
            raise FrameError(f"frame of {length} bytes exceeds maxFrameBytes={self.max_frame_bytes}")
        if length < 4:
            raise FrameError(f"frame length {length} is shorter than its 4-byte type/header field")

    def _check_prefix(self, length: int, type_and_len: int) -> None:
        self._check_length(length)  # then the same conditions as _split's fast check, one by one
        serialize_type = type_and_len >> 24
        if serialize_type not in _CODECS:
            raise FrameError(f"unknown serialize type {serialize_type:#04x}")
        header_len = type_and_len & _HEADER_LENGTH_MASK
        if header_len > length - 4:
            raise FrameError(f"header length {header_len} exceeds frame length {length}")
        if header_len > self.max_header_bytes:
            raise FrameError(f"header of {header_len} bytes exceeds maxHeaderBytes={self.max_header_bytes}")


@twin
def split_frames(
    decoder: FrameDecoder, src: bytes | bytearray | memoryview, max_frames: int = _UNLIMITED
) -> tuple[list[RemotingCommand], int]:
    """The first ``max_frames`` complete frames at the start of ``src`` as commands, and the bytes
    they used.

    ``FrameDecoder.feed``'s inner loop (a module function so it has a compiled twin); it reads
    the decoder's limit and its streaming msgpack ``Unpacker`` and raises through its checks. The
    header of an incomplete frame is decoded as soon as it is whole (kept as ``decoder._head``),
    so an undecodable header fails the stream without waiting for the body.
    """
    out: list[RemotingCommand] = []
    end = len(src)
    pos = 0
    view = memoryview(src)
    unpack_from = PREFIX.unpack_from
    codecs = _CODECS
    max_length = decoder.max_frame_bytes
    max_header = decoder.max_header_bytes
    unpacker = decoder._unpacker
    command_class = RemotingCommand
    new_command = object.__new__
    head, decoder._head = decoder._head, None
    try:
        while end - pos >= PREFIX_BYTES and len(out) < max_frames:
            length, type_and_len = unpack_from(src, pos)
            serialize_type = type_and_len >> 24
            header_len = type_and_len & _HEADER_LENGTH_MASK
            if (
                length > max_length
                or header_len > length - 4
                or header_len > max_header
                or serialize_type not in codecs
            ):
                decoder._check_prefix(length, type_and_len)  # raises the precise FrameError
            frame_end = pos + LENGTH_BYTES + length
            header_end = pos + PREFIX_BYTES + header_len
            if frame_end > end:
                if header_end <= end and head is None:
                    head = decoder._decode_header(view[pos + PREFIX_BYTES : header_end], serialize_type)
                break
            if head is not None:  # decoded while its body was still arriving
                cmd, head = head, None
            elif serialize_type == SERIALIZE_MSGPACK:
                # Inlined _decode_msgpack + command_from_fields (same checks): two calls per
                # frame are a measurable share of a no-op round trip.
                header = view[pos + PREFIX_BYTES : header_end]
                unpacker.feed(header)
                decoder._unpacked_bytes += header_end - pos - PREFIX_BYTES
                try:
                    fields = unpacker.unpack()
                except Exception as exc:  # msgpack raises several types for garbage
                    raise FrameError(f"undecodable msgpack header: {exc!r}") from exc
                if unpacker.tell() != decoder._unpacked_bytes:
                    raise FrameError("msgpack header has trailing bytes")
                if type(fields) is list and len(fields) == 5:
                    code, opaque, flag, remark, ext = fields
                    if (
                        type(code) is int
                        and type(opaque) is int
                        and type(flag) is int
                        and (remark is None or type(remark) is str)
                        and (ext is None or type(ext) is dict)
                    ):
                        cmd = new_command(command_class)
                        cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext = fields
                        cmd.body, cmd.serialize_type = b"", SERIALIZE_MSGPACK
                    else:
                        cmd = command_from_fields(fields, SERIALIZE_MSGPACK)  # raises the precise error
                else:
                    cmd = command_from_fields(fields, SERIALIZE_MSGPACK)
            else:
                cmd = codecs[serialize_type].decode(view[pos + PREFIX_BYTES : header_end], serialize_type)
            if header_end < frame_end:
                cmd.body = bytes(view[header_end:frame_end])
            out.append(cmd)
            pos = frame_end
        decoder._head = head
        if head is None and pos + LENGTH_BYTES <= end:  # a lone length field: reject oversize early
            decoder._check_length(int.from_bytes(view[pos : pos + LENGTH_BYTES], "big"))
    finally:
        view.release()
    return out, pos


@twin
def assemble_body(decoder: FrameDecoder, data: bytes | bytearray | memoryview) -> int:
    """Copy the next part of the large body ``decoder`` assembles from the start of ``data``; the
    bytes used (the rest of ``data`` belongs to the frames after it).

    The pure twin keeps the parts (joined when the body is complete); the compiled one allocates
    the body's bytes object on the first part and copies every part into its place.
    """
    n = min(len(data), decoder._body_len - decoder._body_pos)
    if decoder._body is None:
        decoder._body = []
    decoder._body.append(bytes(memoryview(data)[:n]))
    decoder._body_pos += n
    return n


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.remoting import _speedups

    same_signature(encode_frame)(_speedups.encode_frame)
    same_signature(_speedups.encode_frame)(encode_frame)
    same_signature(split_frames)(_speedups.split_frames)
    same_signature(_speedups.split_frames)(split_frames)
    same_signature(assemble_body)(_speedups.assemble_body)
    same_signature(_speedups.assemble_body)(assemble_body)
