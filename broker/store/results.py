"""Result types of the message store: put/get statuses and results, query results, store errors.

Owns the status enums (RocketMQ's names) and the small ``__slots__`` result classes the broker maps
to response codes. Results carry raw record bytes or views; nothing here touches files.
"""

from __future__ import annotations

from enum import Enum
from itertools import accumulate
from typing import Protocol

from rocketpy.errors import RocketpyError


class StoreError(RocketpyError):
    """The store cannot start or run (bad directory, configuration mismatch)."""


class StoreLockedError(StoreError):
    """Another store (broker) already holds the store directory's lock file."""


class PutMessageStatus(Enum):
    """Outcome of a put (RocketMQ ``PutMessageStatus``)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetMessageStatus(Enum):
    """Outcome of a get (RocketMQ ``GetMessageStatus``)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class PutMessageResult:
    """Result of ``put_message`` / ``put_messages``.

    Attributes:
        status: the outcome; ``remark`` says why when it is not PUT_OK.
        wrote_offset: commitlog offset of the (first) record.
        wrote_bytes: bytes appended (all records of a batch).
        queue_offset: consume-queue offset of the (first) message.
        store_timestamp: store time in ms.
        msg_num: number of messages stored.
        offset_msg_ids: the offset msg id of each stored message.
        offset_msg_id: the single id, or the ids comma-joined for a batch.
        sizes: bytes of each record, in order (record ``i`` starts where record ``i - 1`` ends);
            None when nothing was stored.

    The commitlog's append builds the one result of a put (RocketMQ's ``AppendMessageResult``
    and ``PutMessageResult`` in one object); the put path only changes its status on a flush timeout.
    """

    __slots__ = (
        "_host8",
        "msg_num",
        "queue_offset",
        "remark",
        "sizes",
        "status",
        "store_timestamp",
        "wrote_bytes",
        "wrote_offset",
    )

    def __init__(
        self,
        status: PutMessageStatus,
        remark: str = "",
        wrote_offset: int = -1,
        wrote_bytes: int = 0,
        queue_offset: int = -1,
        store_timestamp: int = 0,
        msg_num: int = 0,
        host8: bytes = b"",
        sizes: list[int] | None = None,
    ) -> None:
        self.status = status
        self.remark = remark
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self.queue_offset = queue_offset
        self.store_timestamp = store_timestamp
        self.msg_num = msg_num
        self._host8 = host8
        self.sizes = sizes

    @property
    def ok(self) -> bool:
        """True when the message(s) are stored (PUT_OK or a flush/slave timeout)."""
        return self.status in _STORED

    @property
    def offset_msg_ids(self) -> list[str]:
        """Offset msg id of each stored message, in order."""
        if self.wrote_offset < 0:
            return []
        prefix = _host_hex.get(self._host8) or _cache_host_hex(self._host8)  # offset_msg_id_from_packed's
        return [f"{prefix}{o:016X}" for o in self.offsets]  # text, with the host's hex computed once

    @property
    def offsets(self) -> list[int]:
        """Commitlog offset of each stored record, in order."""
        if self.wrote_offset < 0:
            return []
        if not self.sizes:
            return [self.wrote_offset]
        return list(accumulate(self.sizes[:-1], initial=self.wrote_offset))

    def per_record(self) -> list[PutMessageResult]:
        """One result per record of a stored put, as if each had been put alone (the broker answers
        SEND_MESSAGE_V2 requests stored by one append this way)."""
        sizes = self.sizes or [self.wrote_bytes]
        status, remark, base, ts, host8 = (
            self.status, self.remark, self.queue_offset, self.store_timestamp, self._host8
        )  # fmt: skip
        return [
            PutMessageResult(status, remark, offset, size, base + i, ts, 1, host8, [size])
            for i, (offset, size) in enumerate(zip(self.offsets, sizes, strict=True))
        ]

    @property
    def host_hex(self) -> str:
        """The store host part of this put's offset msg ids (16 hex digits)."""
        return _host_hex.get(self._host8) or _cache_host_hex(self._host8)

    @property
    def offset_msg_id(self) -> str:
        """The offset msg id (comma-joined for a batch); "" when nothing was stored."""
        if self.msg_num <= 1:  # a single message: the cached host hex + the offset's 16 hex digits
            if self.wrote_offset < 0:
                return ""
            prefix = _host_hex.get(self._host8) or _cache_host_hex(self._host8)
            return f"{prefix}{self.wrote_offset:016X}"
        return ",".join(self.offset_msg_ids)

    def __repr__(self) -> str:
        return (
            f"PutMessageResult({self.status.name}, wrote_offset={self.wrote_offset}, "
            f"queue_offset={self.queue_offset}, msg_num={self.msg_num}, remark={self.remark!r})"
        )


_host_hex: dict[bytes, str] = {}  # packed store host -> its 16 hex chars (one host per broker)


def _cache_host_hex(host8: bytes) -> str:
    prefix = host8.hex().upper()
    if len(_host_hex) < 64:
        _host_hex[host8] = prefix
    return prefix


_STORED = {
    PutMessageStatus.PUT_OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE,
}


class GetMessageResult:
    """Result of ``get_message``: status, offsets and the raw records (views into the commitlog).

    ``buffers`` hold whole records as stored (one view may cover several records back to back; count
    them with ``message_count``); call ``release()`` when done with them if the
    views should not pin a file that cleanup wants to delete.
    """

    __slots__ = (
        "buffer_total_size",
        "buffers",
        "max_offset",
        "message_count",
        "min_offset",
        "next_begin_offset",
        "queue_offsets",
        "status",
        "suggest_pulling_from_slave",
    )

    def __init__(
        self, status: GetMessageStatus, next_begin_offset: int, min_offset: int, max_offset: int
    ) -> None:
        self.status = status
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.buffers: list[memoryview | bytes] = []
        self.queue_offsets: list[int] = []
        self.buffer_total_size = 0
        self.message_count = 0
        self.suggest_pulling_from_slave = False

    def join(self) -> bytes:
        """All records back to back (a pull response body)."""
        return b"".join(self.buffers)

    def release(self) -> None:
        """Release the memory views (lets cleanup unmap their file sooner)."""
        for b in self.buffers:
            if isinstance(b, memoryview):
                b.release()
        self.buffers = []

    def __repr__(self) -> str:
        return (
            f"GetMessageResult({self.status.name}, next={self.next_begin_offset}, min={self.min_offset}, "
            f"max={self.max_offset}, count={self.message_count})"
        )


class QueryMessageResult:
    """Result of ``query_message``: raw records plus the index's last update point."""

    __slots__ = ("buffers", "index_last_update_phyoffset", "index_last_update_timestamp")

    def __init__(self) -> None:
        self.buffers: list[bytes] = []
        self.index_last_update_timestamp = 0
        self.index_last_update_phyoffset = 0

    def join(self) -> bytes:
        """All records back to back (a QUERY_MESSAGE response body)."""
        return b"".join(self.buffers)


class MessageFilter(Protocol):
    """Server-side filter: first by the consume-queue tag code, then (optionally) by the record.

    Optional hints the store reads (``getattr``) to skip the per-message calls: ``matches_all``
    (True: every message matches, e.g. subscription ``"*"``) and ``tag_codes`` (a frozenset of
    32-bit tag hash codes: a unit matches when ``tags_code & 0xFFFFFFFF`` is in it, and the
    commitlog check always passes).
    """

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """True when a unit with ``tags_code`` may match."""
        ...

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        """True when the raw record matches (SQL92 filters read its properties)."""
        ...
