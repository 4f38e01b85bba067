"""Result types of sends and pulls: SendStatus, SendResult, PullStatus, PullResult.

Owns the mapping of broker response codes to send/pull statuses (reference §1.4). Public as
``rocketpy.SendResult``/``rocketpy.SendStatus`` (re-exported by ``client.producer`` and ``client.api``).
"""

from __future__ import annotations

from enum import Enum

from rocketpy.message import MessageExt, MessageQueue
from rocketpy.remoting.codes import ResponseCode


class SendStatus(Enum):
    """Outcome of a stored send (reference §1.4 mapping)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


#: Broker error codes after which a sync send is retried on another broker (reference §3.2).
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
        ResponseCode.GO_AWAY,
    }
)

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
    """One pull's outcome; ``messages`` is decoded (and decompressed) only when FOUND."""

    __slots__ = (
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
    ) -> None:
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
