"""Transaction headers: END_TRANSACTION (producer -> broker) and CHECK_TRANSACTION_STATE (broker ->
producer), RocketMQ's field names, plus the commit-or-rollback values both ends agree on.

Owns both headers' fields, the sender's map (``to_ext``) and the receiver's reading (``from_ext``,
which checks the offsets and the decision value).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any

from rocketpy.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from rocketpy.remoting.headers import HeaderError, ext_bool, ext_int, ext_opt_str, ext_str


class TransactionDecision(IntEnum):
    """END_TRANSACTION's ``commitOrRollback`` (the record's transaction sys-flag values)."""

    UNKNOW = TRANSACTION_NOT_TYPE
    COMMIT = TRANSACTION_COMMIT_TYPE
    ROLLBACK = TRANSACTION_ROLLBACK_TYPE


def _decision(ext: dict[str, Any] | None) -> TransactionDecision:
    raw = ext_int(ext, "commitOrRollback")
    try:
        return TransactionDecision(raw)
    except ValueError:
        raise HeaderError(
            f"request header field 'commitOrRollback' must be 8 (commit), 12 (rollback) or 0 "
            f"(unknown), got {raw}"
        ) from None


def _offset(ext: dict[str, Any] | None, name: str) -> int:
    value = ext_int(ext, name)
    if value < 0:
        raise HeaderError(f"request header field {name!r} must be >= 0, got {value}")
    return value


class EndTransactionRequestHeader:
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

    __slots__ = (
        "commit_log_offset",
        "decision",
        "from_transaction_check",
        "msg_id",
        "producer_group",
        "tran_state_table_offset",
        "transaction_id",
    )

    def __init__(
        self,
        producer_group: str,
        tran_state_table_offset: int,
        commit_log_offset: int,
        decision: TransactionDecision,
        from_transaction_check: bool = False,
        msg_id: str = "",
        transaction_id: str = "",
    ) -> None:
        self.producer_group = producer_group
        self.tran_state_table_offset = tran_state_table_offset
        self.commit_log_offset = commit_log_offset
        self.decision = decision
        self.from_transaction_check = from_transaction_check
        self.msg_id = msg_id
        self.transaction_id = transaction_id

    def to_ext(self) -> dict[str, Any]:
        """The ``ext`` map."""
        return {
            "producerGroup": self.producer_group,
            "tranStateTableOffset": self.tran_state_table_offset,
            "commitLogOffset": self.commit_log_offset,
            "commitOrRollback": int(self.decision),
            "fromTransactionCheck": self.from_transaction_check,
            "msgId": self.msg_id,
            "transactionId": self.transaction_id,
        }

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None) -> EndTransactionRequestHeader:
        """Read the header.

        Raises:
            HeaderError: a missing or malformed field, a negative offset, an unknown decision.
        """
        return cls(
            ext_str(ext, "producerGroup"),
            _offset(ext, "tranStateTableOffset"),
            _offset(ext, "commitLogOffset"),
            _decision(ext),
            ext_bool(ext, "fromTransactionCheck", False),
            ext_opt_str(ext, "msgId") or "",
            ext_opt_str(ext, "transactionId") or "",
        )


class CheckTransactionStateRequestHeader:
    """The broker asks a producer of the group for the state of one half message (body: the record).

    Attributes:
        topic: the message's real topic.
        tran_state_table_offset: the half message's queue offset in the half topic.
        commit_log_offset: the half message's commitlog offset.
        msg_id: the message's unique id.
        transaction_id: the transaction id.
        offset_msg_id: the half message's offset msg id.
    """

    __slots__ = (
        "commit_log_offset",
        "msg_id",
        "offset_msg_id",
        "topic",
        "tran_state_table_offset",
        "transaction_id",
    )

    def __init__(
        self,
        topic: str,
        tran_state_table_offset: int,
        commit_log_offset: int,
        msg_id: str = "",
        transaction_id: str = "",
        offset_msg_id: str = "",
    ) -> None:
        self.topic = topic
        self.tran_state_table_offset = tran_state_table_offset
        self.commit_log_offset = commit_log_offset
        self.msg_id = msg_id
        self.transaction_id = transaction_id
        self.offset_msg_id = offset_msg_id

    def to_ext(self) -> dict[str, Any]:
        """The ``ext`` map."""
        return {
            "topic": self.topic,
            "tranStateTableOffset": self.tran_state_table_offset,
            "commitLogOffset": self.commit_log_offset,
            "msgId": self.msg_id,
            "transactionId": self.transaction_id,
            "offsetMsgId": self.offset_msg_id,
        }

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None) -> CheckTransactionStateRequestHeader:
        """Read the header.

        Raises:
            HeaderError: a missing or malformed field, a negative offset.
        """
        return cls(
            ext_opt_str(ext, "topic") or "",
            _offset(ext, "tranStateTableOffset"),
            _offset(ext, "commitLogOffset"),
            ext_opt_str(ext, "msgId") or "",
            ext_opt_str(ext, "transactionId") or "",
            ext_opt_str(ext, "offsetMsgId") or "",
        )


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
        return {"producerGroup": self.producer_group, "commitOrRollback": int(self.decision)}

    def to_body(self) -> bytes:
        return b"".join(_PAIR.pack(c, h) for c, h in self.pairs)

    @classmethod
    def from_request(
        cls, ext: dict[str, Any] | None, body: bytes | bytearray | memoryview
    ) -> EndTransactionBatch:
        """Read the request.

        Raises:
            HeaderError: a malformed header, a body that is not whole pairs, too many, a negative offset.
        """
        group, decision = ext_str(ext, "producerGroup"), _decision(ext)
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
        return cls(group, decision, pairs)
