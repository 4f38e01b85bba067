"""Result types of sends and pulls: SendStatus, SendResult, PullStatus, PullResult.

Owns the mapping of broker response codes to send/pull statuses (reference §1.4) and the one
mapper of a send response to its results (``send_result``, ``batch_results``); a code that did not
store the message becomes its registered ``MQBrokerError`` (``rocketpy.errors.broker_error``).
Public as ``rocketpy.SendResult``/``rocketpy.SendStatus`` (re-exported by ``client.producer`` and
``client.api``).
"""

from __future__ import annotations

from enum import Enum

from rocketpy.errors import HeaderError, MQClientError, broker_error
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.send import SendMessageResponseHeader
from rocketpy.remoting.command import RemotingCommand


class SendStatus(Enum):
    """Outcome of a stored send (reference §1.4 mapping)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


SEND_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


class SendResult:
    """The broker's answer to one stored message.

    Attributes:
        status: SEND_OK, or a stored-but-not-durable status.
        msg_id: the client unique id (UNIQ_KEY).
        offset_msg_id: store host + commitlog offset (32 hex chars), for ``queryMsgById``.
        message_queue: the queue the message went to.
        queue_offset: its logical offset in that queue.
    """

    __slots__ = ("message_queue", "msg_id", "offset_msg_id", "queue_offset", "status")

    def __init__(
        self,
        status: SendStatus,
        msg_id: str,
        offset_msg_id: str,
        message_queue: MessageQueue,
        queue_offset: int,
    ) -> None:
        self.status = status
        self.msg_id = msg_id
        self.offset_msg_id = offset_msg_id
        self.message_queue = message_queue
        self.queue_offset = queue_offset

    def __repr__(self) -> str:
        return (
            f"SendResult(status={self.status.name}, msg_id={self.msg_id}, offset_msg_id={self.offset_msg_id},"
            f" message_queue={self.message_queue!r}, queue_offset={self.queue_offset})"
        )


def send_result(resp: RemotingCommand, addr: str, mq: MessageQueue, uniq_key: str) -> SendResult:
    """The SendResult of a SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE response from ``mq``'s broker.

    The queue id and offset are the broker's (``queueId``, ``queueOffset``); ``msg_id`` is
    ``uniq_key``, or the broker's ``transactionId`` when empty.

    Raises:
        MQBrokerError: (its subclass for the code) the message was not stored.
    """
    status = SEND_STATUS_BY_CODE.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise broker_error(resp.code, resp.remark, addr)
    try:
        h = SendMessageResponseHeader.from_ext(resp.ext)
    except HeaderError as e:
        raise MQClientError(f"the answer of broker {addr} to a send is malformed: {e}") from None
    queue_id = mq.queue_id if h.queue_id is None else h.queue_id
    return SendResult(
        status,
        uniq_key or h.transaction_id or "",
        h.msg_id,
        MessageQueue(mq.topic, mq.broker_name, queue_id),
        h.queue_offset,
    )


def batch_results(first: SendResult, uniq_keys: list[str]) -> list[SendResult]:
    """One SendResult per message of a stored batch, from the ``send_result`` of its response
    (whose ``offset_msg_id`` lists the messages' offset ids separated by commas)."""
    offset_ids = first.offset_msg_id.split(",")
    if len(offset_ids) < len(uniq_keys):
        offset_ids += [""] * (len(uniq_keys) - len(offset_ids))
    status, mq, base = first.status, first.message_queue, first.queue_offset
    return [
        SendResult(status, uid, oid, mq, base + i)
        for i, (uid, oid) in enumerate(zip(uniq_keys, offset_ids, strict=False))
    ]


class PullStatus(Enum):
    """Outcome of a pull (reference §1.4 pull mapping)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


PULL_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


class PullResult:
    """One pull's outcome; ``messages`` is decoded (and decompressed) only when FOUND.

    ``body`` is the answer's records undecoded when the pull asked for them raw (else empty).
    """

    __slots__ = (
        "body",
        "max_offset",
        "messages",
        "min_offset",
        "next_begin_offset",
        "status",
        "suggest_which_broker_id",
    )

    def __init__(
        self,
        status: PullStatus,
        next_begin_offset: int,
        min_offset: int,
        max_offset: int,
        messages: list[MessageExt],
        suggest_which_broker_id: int = 0,
        body: bytes = b"",
    ) -> None:
        self.body = body
        self.status = status
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.messages = messages
        self.suggest_which_broker_id = suggest_which_broker_id

    def __repr__(self) -> str:
        return (
            f"PullResult({self.status.name}, next_begin_offset={self.next_begin_offset},"
            f" min={self.min_offset}, max={self.max_offset}, messages={len(self.messages)})"
        )
