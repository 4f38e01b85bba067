"""Structured bodies (maps and lists) in the encoding of the request that carries them.

A request's serialize type decides its structured bodies both ways: msgpack maps for rocketpy's
own frames (0x10), JSON for RocketMQ's clients (0x00, as fastjson writes them; int map keys become
strings, e.g. a route's ``brokerAddrs`` ``{"0": "ip:port"}``). Every daemon and the SDK encode and
decode structured bodies here and nowhere else.

A body longer than ``BODY_INLINE_BYTES`` is not decoded at once while a server's handler runs
(``SLICES.allowed``, set by ``ProcessorTable``): ``decode_body`` raises ``DecodeInSlices``, the
table decodes the body a slice at a time (``slices.py``) with the loop free in between, and runs the
handler again with the document at hand (``SLICES.predecoded``). Anywhere else (the SDK reading an
answer, a handler's task after an ``await``) it is decoded at once, as before.

Invariants: ``decode_body`` raises ``HeaderError`` (answered as INVALID_PARAMETER) for an empty,
oversize, undecodable, too deeply nested or misshapen body (``shape.py``), with a message naming
the expected structure and never quoting the input at length; ``encode_body`` never fails on the
documents the daemons build (str keys or int keys, str / int / bool / float / None / list / dict values).
"""

from __future__ import annotations

import json
from typing import Any

import msgpack

from rocketpy.errors import HeaderError, RocketpyError
from rocketpy.protocol.shape import Shape, check_doc, check_shape
from rocketpy.remoting.command import SERIALIZE_JSON, Body

MAX_BODY_DOC_BYTES = 8 * 1024 * 1024
#: Bodies up to this long are decoded at once: the worst of them (the smallest values back to back)
#: takes about 1 ms. A legal heartbeat of a few dozen consumer groups fits; longer bodies are
#: decoded in slices while a server's handler runs.
BODY_INLINE_BYTES = 32 * 1024


class DecodeInSlices(RocketpyError):
    """Raised by ``decode_body`` for a body too long to decode at once while a server's handler runs.

    Not an error a caller sees: ``ProcessorTable`` catches it and decodes the body in slices.

    Attributes:
        body / serialize_type / what: what to decode (``slices.decode_in_slices``).
    """

    def __init__(self, body: Body, serialize_type: int, what: str) -> None:
        super().__init__(f"the {what} body of {len(body)} bytes is decoded in slices")
        self.body, self.serialize_type, self.what = body, serialize_type, what


class _SliceState:
    """Whether a server's handler runs (``allowed``), and the one body decoded for its second run."""

    __slots__ = ("allowed", "predecoded")

    def __init__(self) -> None:
        self.allowed = False
        self.predecoded: tuple[Body, int, Any] | None = None


#: Set by ``ProcessorTable`` around handler calls (the loop thread only).
SLICES = _SliceState()

_json_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_msgpack_pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack


def encode_body(doc: Any, serialize_type: int) -> bytes:
    """``doc`` as a body in the encoding of ``serialize_type``."""
    if serialize_type == SERIALIZE_JSON:
        return _json_dumps(doc).encode()
    return _msgpack_pack(doc)


def decode_body(body: Body, serialize_type: int, what: str, shape: Shape | None = None) -> Any:
    """Decode a structured body and check it (``rocketpy.protocol.shape``).

    Args:
        body: the raw body.
        serialize_type: the carrying command's serialize type.
        what: the expected structure's name, for the error message (e.g. "HeartbeatData").
        shape: the structure's declared shape, checked after decoding (None: depth and keys only).

    Raises:
        HeaderError: the body is empty, too large, undecodable, nests too deeply, has map keys
            that are not strings or integers, or does not match ``shape``.
        DecodeInSlices: the body is longer than ``BODY_INLINE_BYTES`` and a server's handler runs
            (``ProcessorTable`` decodes it in slices and calls the handler again).
    """
    kind = "JSON" if serialize_type == SERIALIZE_JSON else "msgpack"
    if not body:
        raise HeaderError(f"the request body is empty; it must be a {kind} {what}")
    if len(body) > MAX_BODY_DOC_BYTES:
        raise HeaderError(f"the {what} body is {len(body)} bytes; the limit is {MAX_BODY_DOC_BYTES}")
    if len(body) > BODY_INLINE_BYTES:
        done = SLICES.predecoded
        if done is not None and done[0] is body and done[1] == serialize_type:
            if shape is not None:  # depth and map keys were checked while it was decoded
                check_shape(done[2], shape, what)
            return done[2]
        if SLICES.allowed:
            raise DecodeInSlices(body, serialize_type, what)
    try:
        if serialize_type == SERIALIZE_JSON:
            doc = json.loads(str(body, "utf-8"))
        else:
            doc = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except (RecursionError, msgpack.exceptions.StackError):  # JSON's and msgpack's depth limits
        raise HeaderError(f"the {what} body nests too deeply") from None
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as e:
        # ValueError: JSON, UTF-8 and msgpack syntax; TypeError: a map key msgpack cannot hash
        # (an array or a map); OverflowError: an ext type msgpack cannot represent.
        why = str(e)[:120] or type(e).__name__
        raise HeaderError(f"the request body is not a {kind} {what}: {why}") from None
    check_doc(doc, what)
    if shape is not None:
        check_shape(doc, shape, what)
    return doc


def decode_body_map(body: Body, serialize_type: int, what: str, shape: Shape | None = None) -> dict[str, Any]:
    """``decode_body`` for a body that must be a map.

    Raises:
        HeaderError: as ``decode_body``, or the document is not a map.
    """
    doc = decode_body(body, serialize_type, what, shape)
    if not isinstance(doc, dict):
        kind = "JSON" if serialize_type == SERIALIZE_JSON else "msgpack"
        raise HeaderError(f"the request body must be a {kind} {what} map, got {type(doc).__name__}")
    return doc
