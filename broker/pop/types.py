"""What the POP service takes and answers: requests, results and refusals (no wire format here).

``PopError`` carries a RocketMQ response code and a remark that says what to do; the remoting
processors answer with them as they are, the gRPC API maps the codes to its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum

from rocketpy.errors import RocketpyError
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.pop import ConsumeInitMode
from rocketpy.protocol.receipt import (
    POP_ORDER_REVIVE_QUEUE,
    ReceiptHandle,
    format_msg_offsets,
    format_order_counts,
    format_start_offsets,
)
from rocketpy.subscription import ExpressionType


class PopError(RocketpyError):
    """A POP request refused: ``code`` (a ``ResponseCode``) and a remark saying what to do."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(slots=True)
class PopRequest:
    """One pop (or peek).

    Attributes:
        group, topic: who pops what.
        queue_id: one queue, or -1 for every read queue of the topic on this broker.
        max_msgs: 1..32.
        invisible_ms: how long the messages stay invisible (1 ms .. 12 h).
        poll_ms: how long to wait when there is nothing (0: answer at once).
        expression_type, expression: the subscription (None: every message).
        order: an orderly pop (one batch per queue in flight; no retry topic).
        init_mode: where a group without an offset in a queue starts.
    """

    group: str
    topic: str
    queue_id: int = -1
    max_msgs: int = 32
    invisible_ms: int = 60_000
    poll_ms: int = 0
    expression_type: str = ExpressionType.TAG.value
    expression: str | None = None
    order: bool = False
    init_mode: int = ConsumeInitMode.MAX


@dataclass(slots=True)
class PoppedQueue:
    """What a pop took from one queue: where it read from and which offsets it handed out.

    Attributes:
        kind: ``"0"`` the topic, ``"1"`` its POP retry topic.
        queue_id: the queue of that topic.
        start_offset: the offset the read started at (the receipt handles' checkpoint offset).
        offsets: the offsets handed out, in the order of the answer's messages.
        counts: orderly only: times each was handed out before.
    """

    kind: str
    queue_id: int
    start_offset: int
    offsets: list[int]
    counts: list[int] | None = None


class PopStatus(Enum):
    """How a pop ended."""

    FOUND = "FOUND"
    NO_MESSAGE = "NO_MESSAGE"  # nothing before the poll time ended (POLLING_TIMEOUT)
    POLLING_FULL = "POLLING_FULL"  # nothing, and no room to wait


@dataclass(slots=True)
class PopResult:
    """A pop's answer: the stored records back to back and how to build each one's receipt handle."""

    status: PopStatus
    broker_name: str
    pop_time: int = 0
    invisible_ms: int = 0
    order: bool = False
    rest_num: int = 0
    parts: list[bytes | memoryview] = field(default_factory=list)
    queues: list[PoppedQueue] = field(default_factory=list)
    size: int = 0
    count: int = 0  # messages in the answer

    @property
    def revive_qid(self) -> int:
        """The revive queue the handles name (999: orderly)."""
        return POP_ORDER_REVIVE_QUEUE if self.order else 0

    def add(self, popped: PoppedQueue, parts: Sequence[bytes | memoryview]) -> None:
        """Add what a pop took from one queue (its records, back to back, in ``parts``)."""
        self.queues.append(popped)
        self.parts.extend(parts)
        self.size += sum(map(len, parts))
        self.count += len(popped.offsets)

    def body(self) -> bytes:
        """The records back to back (a POP_MESSAGE answer body)."""
        return b"".join(self.parts)

    def start_offset_info(self) -> str:
        """``startOffsetInfo`` of the answer header."""
        return format_start_offsets([(pq.kind, pq.queue_id, pq.start_offset) for pq in self.queues])

    def msg_offset_info(self) -> str:
        """``msgOffsetInfo`` of the answer header."""
        return format_msg_offsets([(pq.kind, pq.queue_id, pq.offsets) for pq in self.queues])

    def order_count_info(self) -> str | None:
        """``orderCountInfo`` (orderly pops only)."""
        if not self.order:
            return None
        return format_order_counts(
            [
                (pq.kind, pq.queue_id, o, c)
                for pq in self.queues
                for o, c in zip(pq.offsets, pq.counts or (), strict=True)
            ]
        )

    def handles(self) -> Iterator[ReceiptHandle]:
        """Each message's receipt handle, in the order of the answer's messages."""
        for pq in self.queues:
            for o in pq.offsets:
                yield ReceiptHandle(
                    pq.start_offset,
                    self.pop_time,
                    self.invisible_ms,
                    self.revive_qid,
                    pq.kind,
                    self.broker_name,
                    pq.queue_id,
                    o,
                )


@dataclass(frozen=True, slots=True)
class AckResult:
    """An ack's (or an invisible-time change's) outcome: done, or why nothing changed.

    Attributes:
        done: the message was in flight and is acknowledged (changed) now.
        remark: why not (already acked, redelivered, a handle superseded by a change).
        pop_time, invisible_ms, revive_qid: an invisible-time change's new values (its new handle).
    """

    done: bool
    remark: str = ""
    pop_time: int = 0
    invisible_ms: int = 0
    revive_qid: int = 0
