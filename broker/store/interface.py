"""``Store``: what the broker's parts may ask of the message store (RocketMQ's ``MessageStore``
interface, which ``DefaultMessageStore`` implements).

Exactly the members that code outside ``broker/store`` uses: the processors, the schedule and timer
services, transactions, replication and the metrics collector are typed against this protocol, so
they reach no further than it (no ``store.commitlog``, ``store.dispatcher.cqs``); ``MessageStore``
implements it, and the controller, which builds and runs the store, holds the concrete class
(lifecycle, fault injection). A new need outside the store is a new member here and a public
method there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from rocketpy.broker.store.dispatch import Listener
from rocketpy.broker.store.message import BrokerMessage
from rocketpy.broker.store.results import (
    GetMessageResult,
    MessageFilter,
    PutMessageResult,
    QueryMessageResult,
)
from rocketpy.latency import LatencyHistogram


class Store(Protocol):
    """The message store as the rest of the broker sees it (see the module docstring).

    Attributes:
        clock: the store's seconds clock (store timestamps; delivery times are reckoned by it).
        flush_started: when the running commitlog flush began (``time.monotonic()``; 0: none runs).
    """

    clock: Callable[[], float]
    flush_started: Callable[[], float]

    # -- identity and state ----------------------------------------------------------------------
    @property
    def store_host(self) -> tuple[str, int]:
        """``(ipv4, port)`` written into every record (part of the offset msg id)."""

    @property
    def read_only_remark(self) -> str:
        """Why writes are refused after a disk error ("" when they are accepted)."""

    @property
    def flush_latency(self) -> LatencyHistogram | None:
        """Durations of the commitlog flushes that wrote something (None before ``start``)."""

    @property
    def disk_ratio(self) -> float:
        """Used fraction (0..1) of the commitlog's disk."""

    def runtime_info(self) -> dict[str, str]:
        """Store figures for GET_BROKER_RUNTIME_INFO."""

    # -- put ---------------------------------------------------------------------------------------
    def put_message(self, msg: BrokerMessage) -> Coroutine[Any, Any, PutMessageResult]:
        """Append one message, dispatch it and (SYNC_FLUSH) wait for the flush (await it)."""

    def put_messages(self, msgs: list[BrokerMessage]) -> Coroutine[Any, Any, PutMessageResult]:
        """Append a batch of one topic and queue, all or nothing (await it)."""

    def put_now(self, msgs: list[BrokerMessage]) -> PutMessageResult | None:
        """``put_messages`` at once when it would not suspend; None (nothing written) when it would."""

    def put_then_flush(
        self, msgs: list[BrokerMessage]
    ) -> tuple[PutMessageResult, asyncio.Future[bool]] | None:
        """``put_messages`` of messages that wait for their flush, without its coroutine: the result
        and the flush's future; None (nothing written) when ``put_messages`` must do it."""

    def flush_outcome(self, result: PutMessageResult, flushed: bool) -> PutMessageResult:
        """``result`` once its flush wait ended: FLUSH_DISK_TIMEOUT when it timed out."""

    def listen_to_dispatches(self, fn: Listener, on: bool = True) -> None:
        """Call ``fn(topic, queue_id, queue_offset, tags_code, store_timestamp)`` after each dispatch
        from now on (``on``), or no longer."""

    def delete_topics(self, topics: set[str]) -> None:
        """Drop the consume queues of ``topics``."""

    async def clean_expired_consume_queues(self, retain: Callable[[str], bool]) -> int:
        """Delete consume-queue files wholly before the commitlog's start (and the wholly expired
        queues of topics ``retain`` rejects); returns the files deleted."""

    async def clean_unused_topics(self, retain: Callable[[str], bool]) -> list[str]:
        """Delete the consume queues of every topic ``retain`` rejects; returns those topics."""

    async def delete_expired_commitlog(self) -> int:
        """Delete the commitlog files past ``fileReservedTime`` now, whatever ``deleteWhen`` says (and
        the queue and index files that only point before them); returns the files deleted."""

    # -- raw commitlog (replication) -----------------------------------------------------------------
    @property
    def max_physical_offset(self) -> int:
        """Commitlog offset where the next record goes."""

    @property
    def min_physical_offset(self) -> int:
        """Commitlog offset of the oldest stored byte."""

    async def append_replica(self, offset: int, data: bytes | memoryview) -> int:
        """Append a master's raw commitlog bytes at ``offset``; returns the new max offset."""

    def read_commitlog(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` raw commitlog bytes at ``offset`` within one file."""

    # -- queues and records ------------------------------------------------------------------------
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int,
        max_bytes: int | None = None,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Up to ``max_msgs`` raw records of a queue from ``offset`` (views of the commitlog)."""

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's next offset (0 for an unknown queue)."""

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's first offset still stored (0 for an unknown queue)."""

    def queue_max_offsets(self) -> list[tuple[str, int, int]]:
        """``(topic, queue_id, next offset)`` of every consume queue that exists."""

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose store time is >= ``timestamp_ms``."""

    def get_message_store_time(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time (ms) of the message at ``queue_offset``, -1 when it is not stored."""

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the queue's first stored message, -1 when none."""

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Commitlog offset of a queue unit, -1 when not stored."""

    def read_queue_units(self, topic: str, queue_id: int, offset: int, max_count: int) -> tuple[int, ...]:
        """Up to ``max_count`` units from ``offset``: ``(commitlog offset, size, tag code)`` each."""

    def record_view(self, commitlog_offset: int) -> memoryview | None:
        """A view of the record at ``commitlog_offset``, or None."""

    def lookup_message_by_offset(self, commitlog_offset: int) -> bytes | None:
        """A copy of the record at ``commitlog_offset``, or None."""

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> QueryMessageResult:
        """Records of ``topic`` whose KEYS or UNIQ_KEY equal ``key``, stored in [begin_ts, end_ts]."""
