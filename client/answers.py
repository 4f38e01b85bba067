"""Reading a broker's or NameServer's answer: its code, its header, its body (shared by the API calls).

``check`` raises the registered ``MQBrokerError`` subclass of an error code, ``answer_header`` reads
the answer's ``ext`` as its declared header (a malformed one is an ``MQClientError``), and
``unpack_body`` / ``pack_body`` decode and encode structured bodies in the request's encoding.
"""

from __future__ import annotations

from typing import Any, TypeVar

from rocketpy.errors import HeaderError, MQClientError, broker_error
from rocketpy.protocol.codes import ResponseCode, code_name
from rocketpy.protocol.header import Header
from rocketpy.remoting.body import decode_body, encode_body
from rocketpy.remoting.command import SERIALIZE_MSGPACK, RemotingCommand

_SUCCESS = ResponseCode.SUCCESS
H = TypeVar("H", bound=Header)


def check(resp: RemotingCommand, addr: str, *ok: int) -> RemotingCommand:
    """Return ``resp`` if its code is SUCCESS (or one of ``ok``), else raise its MQBrokerError."""
    if resp.code == _SUCCESS or resp.code in ok:
        return resp
    raise broker_error(resp.code, resp.remark, addr)


def answer_header(resp: RemotingCommand, addr: str, header: type[H]) -> H:
    """The answer's ``ext`` read as ``header`` (``rocketpy.protocol.headers``).

    Raises:
        MQClientError: the server's answer does not have the fields its spec declares.
    """
    try:
        return header.from_ext(resp.ext)
    except HeaderError as e:
        raise MQClientError(f"the answer of {addr} to {code_name(resp.code)} is malformed: {e}") from None


def unpack_body(resp: RemotingCommand) -> Any:
    """Decode a structured body in the response's encoding (None when empty).

    Raises:
        MQClientError: the body does not decode.
    """
    if not resp.body:
        return None
    try:
        return decode_body(resp.body, resp.serialize_type, code_name(resp.code) + " answer")
    except HeaderError as e:
        raise MQClientError(str(e)) from None


def pack_body(obj: Any, serialize_type: int = SERIALIZE_MSGPACK) -> bytes:
    """Encode a structured request body (msgpack, or JSON for ``SERIALIZE_JSON``)."""
    return encode_body(obj, serialize_type)
