"""Transaction headers: END_TRANSACTION (producer -> broker) and CHECK_TRANSACTION_STATE (broker ->
producer), RocketMQ's field names, plus the commit-or-rollback values both ends agree on.

Owns the headers' fields and END_TRANSACTION_BATCH's body (a rocketpy extension).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any

from rocketpy.errors import HeaderError
from rocketpy.protocol.header import Header, wire
from rocketpy.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE


class TransactionDecision(IntEnum):
    """END_TRANSACTION's ``commitOrRollback`` (the record's transaction sys-flag values)."""

    UNKNOW = TRANSACTION_NOT_TYPE
    COMMIT = TRANSACTION_COMMIT_TYPE
    ROLLBACK = TRANSACTION_ROLLBACK_TYPE


class EndTransactionRequestHeader(Header):
    """A producer's decision on one half message.

    Attributes:
        producer_group: the group that sent the half message.
        tran_state_table_offset: the half message's queue offset in the half topic.
        commit_log_offset: the half message's commitlog offset.
        decision: commit, roll back, or unknown (left to the check).
        from_transaction_check: True when answering CHECK_TRANSACTION_STATE.
        msg_id: the message's unique id (UNIQ_KEY).
        transaction_id: the transaction id (UNIQ_KEY unless the producer set one).
    """

    producer_group: str = wire("producerGroup")
    tran_state_table_offset: int = wire("tranStateTableOffset", lo=0)
    commit_log_offset: int = wire("commitLogOffset", lo=0)
    decision: TransactionDecision = wire("commitOrRollback", enum=TransactionDecision)
    from_transaction_check: bool = wire("fromTransactionCheck", default=False)
    msg_id: str = wire("msgId", default="")
    transaction_id: str = wire("transactionId", default="")


class CheckTransactionStateRequestHeader(Header):
    """The broker asks a producer of the group for the state of one half message (body: the record).

    Attributes:
        topic: the message's real topic.
        tran_state_table_offset: the half message's queue offset in the half topic.
        commit_log_offset: the half message's commitlog offset.
        msg_id: the message's unique id.
        transaction_id: the transaction id.
        offset_msg_id: the half message's offset msg id.
    """

    topic: str = wire("topic", default="")
    tran_state_table_offset: int = wire("tranStateTableOffset", lo=0, default=0)
    commit_log_offset: int = wire("commitLogOffset", lo=0, default=0)
    msg_id: str = wire("msgId", default="")
    transaction_id: str = wire("transactionId", default="")
    offset_msg_id: str = wire("offsetMsgId", default="")


class EndTransactionBatchRequestHeader(Header):
    """END_TRANSACTION_BATCH's header: the group and the one decision for every pair of the body."""

    producer_group: str = wire("producerGroup")
    decision: TransactionDecision = wire("commitOrRollback", enum=TransactionDecision)


class EndTransactionBatchResponseHeader(Header):
    """END_TRANSACTION_BATCH's answer: how many decisions were refused (the remark says why the first)."""

    failed: int = wire("failed", default=0)


#: Decisions one END_TRANSACTION_BATCH request may carry.
MAX_BATCH_DECISIONS = 1024
#: A decision in END_TRANSACTION_BATCH's body: commitlog offset, half-queue offset (big-endian).
_PAIR = struct.Struct(">qq")


class EndTransactionBatch:
    """END_TRANSACTION_BATCH (a rocketpy extension): one decision on many half messages of a group.

    Header ``producerGroup`` and ``commitOrRollback`` as END_TRANSACTION's; the body packs each
    half message as (commitlog offset, half-queue offset), 16 bytes big-endian. The answer's
    ``failed`` ext field counts the refused ones, its remark says why the first was.
    """

    __slots__ = ("decision", "pairs", "producer_group")

    def __init__(
        self, producer_group: str, decision: TransactionDecision, pairs: list[tuple[int, int]]
    ) -> None:
        self.producer_group, self.decision, self.pairs = producer_group, decision, pairs

    def to_ext(self) -> dict[str, Any]:
        """The request's ``ext`` map."""
        return EndTransactionBatchRequestHeader.pack(self.producer_group, self.decision)

    def to_body(self) -> bytes:
        """The request's body: the (commitlog offset, half-queue offset) pairs."""
        return b"".join(_PAIR.pack(c, h) for c, h in self.pairs)

    @classmethod
    def from_request(
        cls, ext: dict[str, Any] | None, body: bytes | bytearray | memoryview
    ) -> EndTransactionBatch:
        """Read the request.

        Raises:
            HeaderError: a malformed header, a body that is not whole pairs, too many, a negative offset.
        """
        header = EndTransactionBatchRequestHeader.from_ext(ext)
        if len(body) % _PAIR.size or not body:
            raise HeaderError(
                "the body must be 16-byte (commitLogOffset, tranStateTableOffset) pairs, "
                f"got {len(body)} bytes"
            )
        count = len(body) // _PAIR.size
        if count > MAX_BATCH_DECISIONS:
            raise HeaderError(f"at most {MAX_BATCH_DECISIONS} decisions per request, got {count}")
        pairs = list(_PAIR.iter_unpack(body))
        if any(c < 0 or h < 0 for c, h in pairs):
            raise HeaderError("offsets in the body must be >= 0")
        return cls(header.producer_group, header.decision, pairs)
