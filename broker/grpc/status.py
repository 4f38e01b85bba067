"""The API's status codes (``apache.rocketmq.v2.Code``) and how broker answers map onto them.

Every RPC answers with a ``Status`` inside its response message, never a raw gRPC error for a
user's mistake (RocketMQ proxy's rule, which the 5.x clients rely on: they read ``status.code``).
``RpcError`` carries such a status out of a handler; ``code_of_response`` maps the broker's
remoting response codes (what the processors the endpoint calls answer) onto the API's codes.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, cast

from rocketpy.errors import RocketpyError
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.protocol.codes import ResponseCode

#: ``apache.rocketmq.v2.Code`` as an IntEnum (a plain class attribute read on the hot path; the
#: protobuf enum wrapper resolves every ``pb.Code.OK`` through ``__getattr__``).
Code: Any = cast(Any, IntEnum)("Code", list(pb.Code.items()))

#: Remoting response code -> API code (the rest: INTERNAL_SERVER_ERROR).
_BY_RESPONSE: dict[int, int] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.INVALID_PARAMETER: Code.BAD_REQUEST,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    ResponseCode.SERVICE_NOT_AVAILABLE: Code.INTERNAL_SERVER_ERROR,
    ResponseCode.PULL_NOT_FOUND: Code.MESSAGE_NOT_FOUND,
    ResponseCode.PULL_RETRY_IMMEDIATELY: Code.MESSAGE_NOT_FOUND,
    ResponseCode.PULL_OFFSET_MOVED: Code.ILLEGAL_OFFSET,
    ResponseCode.QUERY_NOT_FOUND: Code.OFFSET_NOT_FOUND,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.TRANSACTION_SHOULD_COMMIT: Code.INVALID_TRANSACTION_ID,
    ResponseCode.TRANSACTION_SHOULD_ROLLBACK: Code.INVALID_TRANSACTION_ID,
    ResponseCode.TRANSACTION_STATE_UNKNOW: Code.INVALID_TRANSACTION_ID,
    ResponseCode.TRANSACTION_STATE_GROUP_WRONG: Code.INVALID_TRANSACTION_ID,
    ResponseCode.TRANSACTION_FAILED: Code.INVALID_TRANSACTION_ID,
}


def code_of_response(response_code: int) -> int:
    """The API code for a broker answer's remoting response code."""
    return int(_BY_RESPONSE.get(response_code, Code.INTERNAL_SERVER_ERROR))


def status(code: int = Code.OK, message: str = "OK") -> pb.Status:
    """A ``Status`` message."""
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


_OK = int(Code.OK)


def set_ok(st: pb.Status) -> None:
    """Make ``st`` (a response's own status field) OK in place (no Status built and copied in)."""
    st.code = _OK  # type: ignore[assignment]
    st.message = "OK"


class RpcError(RocketpyError):
    """A refusal with the API's status: the handler's response carries it (not a gRPC error).

    Args:
        code: an ``apache.rocketmq.v2.Code`` value.
        message: what went wrong and what to do, for the client's exception text.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def status(self) -> pb.Status:
        """This refusal as a ``Status``."""
        return status(self.code, self.message)


def code_name(code: int) -> str:
    """``Code``'s name for ``code`` (its number when unknown)."""
    try:
        return Code(code).name
    except ValueError:
        return str(code)
