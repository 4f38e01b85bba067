"""Where POP bookkeeping survives a restart: the revive log's records and ``config/popState.json``.

Owns ``ReviveLog`` (appends ck and ack records to queue 0 of ``rmq_sys_REVIVE_LOG_<cluster>``
through ``MessageStore.put_messages``, and reads them back at start) and ``PopStateFile``
(``{"reviveOffset", "nextCkSeq", "queues": [[group, topic, queueId, committed, next], ...]}``,
written atomically in a thread by ``JsonTable`` every ``flushConsumerOffsetInterval`` and at
shutdown). The snapshot is taken in one loop step, so its committed offsets and its replay start
agree: every record about an offset still in flight then lies at or after ``reviveOffset``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from rocketpy.broker.persistence import JsonTable
from rocketpy.broker.pop.revive_log import Record, ReviveLogError, decode
from rocketpy.broker.store import BrokerMessage, GetMessageStatus, MessageStore, PutMessageResult
from rocketpy.record import decode_records

log = logging.getLogger("rocketpy.broker.pop")

REVIVE_QUEUE_ID = 0
#: Records read per step of the replay (the loop is yielded between steps).
REPLAY_BATCH = 256
#: Revive-log bytes read per step.
REPLAY_BATCH_BYTES = 4 * 1024 * 1024


class ReviveLog:
    """The revive topic's queue 0, written and read through the store.

    Args:
        store: the broker's store.
        topic: ``rmq_sys_REVIVE_LOG_<cluster>``.
        born_host: the broker's address, written as the records' born host.
        clock_ms: wall clock in ms (records' born time).
    """

    def __init__(
        self,
        store: MessageStore,
        topic: str,
        born_host: Callable[[], tuple[str, int]],
        clock_ms: Callable[[], int],
    ) -> None:
        self.store = store
        self.topic = topic
        self._born_host = born_host
        self._clock_ms = clock_ms
        self.records_written = 0

    def floor(self) -> int:
        """The queue offset the next record will get (a lower bound of every later record's)."""
        return self.store.get_max_offset_in_queue(self.topic, REVIVE_QUEUE_ID)

    async def append(self, bodies: list[bytes], properties: str | list[str]) -> PutMessageResult:
        """Append ``bodies`` as one batch (one commitlog append, made before this first suspends);
        await it for durability. ``properties``: of every record, or of each (the first record's
        ``WAIT`` decides whether the batch waits for the flush under SYNC_FLUSH)."""
        now = self._clock_ms()
        host = self._born_host()
        topic = self.topic
        props = [properties] * len(bodies) if isinstance(properties, str) else properties
        assert len(props) == len(bodies)
        msgs = [
            BrokerMessage(topic, REVIVE_QUEUE_ID, b, p, 0, 0, now, host)
            for b, p in zip(bodies, props, strict=True)
        ]
        self.records_written += len(msgs)
        stored = self.store.put_now(msgs)  # the common case without the put's coroutine (compiled)
        if stored is not None:
            return stored
        return await self.store.put_messages(msgs)

    def read_from(self, offset: int) -> Iterator[tuple[int, Record]]:
        """``(queue offset, record)`` of every record from ``offset`` on (undecodable ones logged
        and skipped; an offset before the queue's first is moved up to it)."""
        while True:
            r = self.store.get_message(
                "", self.topic, REVIVE_QUEUE_ID, offset, REPLAY_BATCH, REPLAY_BATCH_BYTES
            )
            if r.status is not GetMessageStatus.FOUND:
                if r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset > offset:
                    log.warning(
                        "revive log: records %d..%d were cleaned up; replaying from %d",
                        offset,
                        r.next_begin_offset,
                        r.next_begin_offset,
                    )
                    offset = r.next_begin_offset
                    continue
                return
            body = r.join()
            r.release()
            for queue_offset, msg in zip(r.queue_offsets, decode_records(body), strict=True):
                try:
                    yield queue_offset, decode(msg.body)
                except ReviveLogError as e:
                    log.error("revive log record at queue offset %d skipped: %s", queue_offset, e)
            offset = r.next_begin_offset


class PopStateFile:
    """``config/popState.json``: the POP queues' committed offsets and where replay starts.

    Args:
        path: the file.
        snapshot: returns the document (called on the loop, in one step).
    """

    def __init__(self, path: str, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.file = JsonTable(path, snapshot)

    def load(self) -> dict[str, Any]:
        """The last written document (``{}`` when none; call from a thread)."""
        doc = self.file.load()
        return doc if isinstance(doc, dict) else {}

    async def persist(self, force: bool = False) -> None:
        """Write the snapshot now (in a thread)."""
        self.file.mark_dirty()
        await self.file.persist(force)
