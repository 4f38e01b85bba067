"""The broker's structured request and answer bodies, in the request's encoding.

Owns ``decode_map`` and ``encode``: every processor reads and writes structured bodies through
them, so a body is msgpack for rocketpy's frames and JSON for RocketMQ's clients (the request's
serialize type, ``rocketpy.remoting.body``) without any processor knowing which. A request body
that is not a map raises ``HeaderError``, answered as INVALID_PARAMETER with a remark naming the
expected shape.
"""

from __future__ import annotations

from typing import Any

from rocketpy.protocol.shape import Shape
from rocketpy.remoting.body import decode_body_map, encode_body
from rocketpy.remoting.command import RemotingCommand


def decode_map(request: RemotingCommand, what: str, shape: Shape | None = None) -> dict[str, Any]:
    """Decode ``request``'s body as a map (``what`` names the structure in errors).

    Args:
        request: the request.
        what: the structure's name (RocketMQ's class name, e.g. "LockBatchRequestBody").
        shape: its declared shape (``rocketpy.protocol.shape``), checked before a handler reads it.

    Raises:
        HeaderError: the body is empty, too large, undecodable, not a map or not of ``shape``.
    """
    return decode_body_map(request.body, request.serialize_type, what, shape)


def encode(doc: Any, request: RemotingCommand) -> bytes:
    """Encode the answer body ``doc`` for ``request`` (its serialize type)."""
    return encode_body(doc, request.serialize_type)
