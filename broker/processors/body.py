"""Decoding of structured (msgpack map) request bodies, with clear errors.

Owns ``decode_map``: a request body that is not a msgpack map raises ``HeaderError``, which the
server answers as INVALID_PARAMETER with a remark naming the expected shape.
"""

from __future__ import annotations

from typing import Any

import msgpack

from rocketpy.remoting.headers import HeaderError

MAX_BODY_MAP_BYTES = 8 * 1024 * 1024


def decode_map(body: bytes | bytearray | memoryview, what: str) -> dict[str, Any]:
    """Decode ``body`` as a msgpack map.

    Args:
        body: the request body.
        what: the expected structure's name, for the error message (e.g. "HeartbeatData").

    Raises:
        HeaderError: the body is empty, too large, not msgpack, or not a map.
    """
    if not body:
        raise HeaderError(f"the request body is empty; it must be a msgpack {what} map")
    if len(body) > MAX_BODY_MAP_BYTES:
        raise HeaderError(f"the {what} body is {len(body)} bytes; the limit is {MAX_BODY_MAP_BYTES}")
    try:
        doc = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as e:
        raise HeaderError(f"the request body is not a msgpack {what}: {e}") from e
    if not isinstance(doc, dict):
        raise HeaderError(f"the request body must be a msgpack {what} map, got {type(doc).__name__}")
    return doc


def encode(doc: Any) -> bytes:
    """Encode a response body document as msgpack."""
    return msgpack.packb(doc, use_bin_type=True)
