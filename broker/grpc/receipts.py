"""Receipt handles as the 5.x clients hold them, and POP's refusals as the API's status codes.

A gRPC receipt handle is the message's ``POP_CK`` text (``rocketpy.protocol.receipt``: checkpoint
offset, pop time, invisible time, revive queue, topic kind, broker name, queue id, queue offset),
the same a remoting client acks with, so either protocol may ack what the other received. The
clients treat it as opaque and send it back in AckMessage, ChangeInvisibleDuration and
ForwardMessageToDeadLetterQueue; a handle that does not parse, names another broker or a queue
this broker does not have is INVALID_RECEIPT_HANDLE (the code the clients stop retrying on),
never a raw gRPC error.

``rpc_error`` turns the POP service's ``PopError`` (a remoting response code and remark) into the
API's code: the topic, group and permission codes as every RPC maps them (``status.py``), an
unparsable subscription ILLEGAL_FILTER_EXPRESSION, and, for a request that carries a handle, the
codes that say the handle names nothing in flight INVALID_RECEIPT_HANDLE.
"""

from __future__ import annotations

from rocketpy.broker.grpc.status import Code, RpcError, code_of_response
from rocketpy.broker.pop.types import PopError
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.receipt import ReceiptError, ReceiptHandle

#: Remoting codes that, answering a request with a receipt handle, mean the handle is no good:
#: garbled or foreign (INVALID_PARAMETER), a queue out of range (MESSAGE_ILLEGAL), a message no
#: longer in flight or outside its queue (NO_MESSAGE).
_HANDLE_CODES = frozenset(
    {ResponseCode.INVALID_PARAMETER, ResponseCode.MESSAGE_ILLEGAL, ResponseCode.NO_MESSAGE}
)


def parse_handle(text: str, broker_name: str) -> ReceiptHandle:
    """The handle ``text`` names, checked to be this broker's.

    Raises:
        RpcError: INVALID_RECEIPT_HANDLE, saying what is wrong with it.
    """
    try:
        h = ReceiptHandle.parse(text)
    except ReceiptError as e:
        raise RpcError(
            Code.INVALID_RECEIPT_HANDLE,
            f"the receipt handle is not one a rocketpy broker gave ({e}); send the one the message came with",
        ) from None
    if h.broker_name != broker_name:
        raise RpcError(
            Code.INVALID_RECEIPT_HANDLE,
            f"the receipt handle was issued by broker {h.broker_name!r}, this is {broker_name!r}: "
            "send it to the endpoint the message was received from",
        )
    return h


def rpc_error(e: PopError, *, handle: bool = False) -> RpcError:
    """The API's refusal for a POP refusal (``handle``: the request carried a receipt handle)."""
    if handle and e.code in _HANDLE_CODES:
        return RpcError(Code.INVALID_RECEIPT_HANDLE, e.remark)
    if e.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:
        return RpcError(Code.ILLEGAL_FILTER_EXPRESSION, e.remark)
    return RpcError(code_of_response(e.code), e.remark)
