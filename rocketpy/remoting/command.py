"""``RemotingCommand``: one request or response on the wire (DESIGN §2).

A command is a plain ``__slots__`` object (no pydantic: it is on every hot path). ``flag`` bit 0
marks a response and bit 1 a oneway request; a response carries its request's ``opaque`` and
serialize type.
"""

from __future__ import annotations

from typing import Any

from rocketpy.protocol.codes import ResponseCode, code_name, response_name

SERIALIZE_JSON = 0x00
SERIALIZE_MSGPACK = 0x10
#: Option value -> serialize type (the SDK's ``serialize_type`` setting).
SERIALIZE_TYPES = {"msgpack": SERIALIZE_MSGPACK, "json": SERIALIZE_JSON}

FLAG_RESPONSE = 1
FLAG_ONEWAY = 2

Body = bytes | bytearray | memoryview


class RemotingCommand:
    """One frame's content: code, opaque, flag, remark, ext fields and raw body.

    Attributes:
        code: the request code (requests) or response code (responses).
        opaque: the request id chosen by the sender; a response echoes it.
        flag: bit 0 = response, bit 1 = oneway.
        remark: human-readable text, set on error responses.
        ext: header fields (str keys; int, str or bool values), or None.
        body: raw payload bytes; never copied by the codec on encode.
        serialize_type: header encoding, ``SERIALIZE_MSGPACK`` (0x10) or ``SERIALIZE_JSON`` (0x00).
    """

    __slots__ = ("body", "code", "ext", "flag", "opaque", "remark", "serialize_type")

    def __init__(
        self,
        code: int,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext: dict[str, Any] | None = None,
        body: Body = b"",
        serialize_type: int = SERIALIZE_MSGPACK,
    ) -> None:
        self.code = code
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext = ext
        self.body = body
        self.serialize_type = serialize_type

    @classmethod
    def request(
        cls, code: int, ext: dict[str, Any] | None = None, body: Body = b"", *, oneway: bool = False
    ) -> RemotingCommand:
        """Build a request; the connection assigns its opaque when it is sent."""
        return cls(code, 0, FLAG_ONEWAY if oneway else 0, None, ext, body)

    @classmethod
    def response(
        cls,
        request: RemotingCommand,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext: dict[str, Any] | None = None,
        body: Body = b"",
    ) -> RemotingCommand:
        """Build the response to ``request`` (same opaque and serialize type)."""
        return cls(code, request.opaque, FLAG_RESPONSE, remark, ext, body, request.serialize_type)

    @property
    def is_response(self) -> bool:
        """True when the response bit of ``flag`` is set."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """True when the oneway bit of ``flag`` is set (no response will be sent)."""
        return bool(self.flag & FLAG_ONEWAY)

    def __repr__(self) -> str:
        name = response_name(self.code) if self.flag & FLAG_RESPONSE else code_name(self.code)
        return (
            f"RemotingCommand({name}, opaque={self.opaque}, flag={self.flag}, remark={self.remark!r}, "
            f"ext={self.ext!r}, body={len(self.body)} bytes)"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return (
            self.code == other.code
            and self.opaque == other.opaque
            and self.flag == other.flag
            and self.remark == other.remark
            and self.ext == other.ext
            and bytes(self.body) == bytes(other.body)
            and self.serialize_type == other.serialize_type
        )

    __hash__ = None  # type: ignore[assignment]
