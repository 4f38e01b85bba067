"""The broker's structured request and answer bodies, in the request's encoding.

Owns ``decode_map`` and ``encode``: every processor reads and writes structured bodies through
them, so a body is msgpack for rocketpy's frames and JSON for RocketMQ's clients (the request's
serialize type, ``rocketpy.remoting.body``) without any processor knowing which. A request body
that is not a map raises ``HeaderError``, answered as INVALID_PARAMETER with a remark naming the
expected shape.
"""

from __future__ import annotations

from typing import Any

from rocketpy.remoting.body import decode_body_map, encode_body
from rocketpy.remoting.command import RemotingCommand


def decode_map(request: RemotingCommand, what: str) -> dict[str, Any]:
    """Decode ``request``'s body as a map (``what`` names the structure in errors).

    Raises:
        HeaderError: the body is empty, too large, undecodable or not a map.
    """
    return decode_body_map(request.body, request.serialize_type, what)


def encode(doc: Any, request: RemotingCommand) -> bytes:
    """Encode the answer body ``doc`` for ``request`` (its serialize type)."""
    return encode_body(doc, request.serialize_type)
