"""Server-side message trace (``traceTopicEnable=true``): what the broker itself saw of a message.

Owns ``BrokerTracer``: the broker creates the trace topic (``msgTraceTopicName``, one queue, as
RocketMQ's ``traceTopicEnable`` does) and writes two record kinds of its own
(``rocketpy.trace``), which RocketMQ's decoders skip and rocketpy's timeline shows:

* ``Deliver``: a pull handed the message to a consumer group (time, group, client, queue, offset,
  reconsume times), one record per delivered message;
* ``SendBack``: a consumer gave the message back and the broker stored it in the group's retry
  topic or dead-letter queue.

The message's store time and host need no record: the timeline reads them from the stored message.

Cost bound: the pull path only appends the answer's body (bytes it already built) to a queue,
bounded by ``MAX_PENDING_BYTES``; past it the delivery is not traced and counted as dropped. A
routine decodes the queued bodies every ``FLUSH_INTERVAL_S`` and stores the records as trace
messages of at most ``BATCH_RECORDS`` through the broker's own store (no network). A slave writes
nothing (it stores only what it replicates).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

from rocketpy.broker.processors.send import STORED_STATUSES
from rocketpy.broker.store import BrokerMessage
from rocketpy.message import MessageConst, properties_to_string
from rocketpy.perm import PERM_RW
from rocketpy.record import decode_records
from rocketpy.topic import is_system_topic
from rocketpy.trace import NULL

if TYPE_CHECKING:
    from rocketpy.broker.store import Store
    from rocketpy.broker.topic_config import TopicConfigManager
    from rocketpy.config import BrokerConfig

log = logging.getLogger("rocketpy.broker.trace")

#: Pull answers waiting to be turned into Deliver records, in bytes; past it deliveries are dropped.
MAX_PENDING_BYTES = 16 * 1024 * 1024
#: Send-back records waiting; past it they are dropped.
MAX_PENDING_RECORDS = 10_000
BATCH_RECORDS = 512
FLUSH_INTERVAL_S = 0.2


class BrokerTracer:
    """The broker's trace writer (one per broker, only with ``traceTopicEnable``).

    Args:
        broker_config: ``brokerName``, ``msgTraceTopicName``.
        store: where trace messages are put.
        topics: where the trace topic is created.
    """

    def __init__(self, broker_config: BrokerConfig, store: Store, topics: TopicConfigManager) -> None:
        self.broker_name = broker_config.broker_name
        self.topic = broker_config.msg_trace_topic_name
        self.store = store
        self.topics = topics
        self._deliveries: deque[tuple[int, str, str, bytes]] = deque()
        self._pending_bytes = 0
        self._records: deque[tuple[str, str]] = deque()
        self.written_records = 0
        self.dropped = 0
        self.enabled = True  # False on a slave

    def ensure_topic(self) -> None:
        """Create the trace topic (one queue, read+write) when this broker has none."""
        if self.topics.get(self.topic) is None:
            self.topics.create_system_group_topic(self.topic, 1, PERM_RW)

    def on_delivered(self, group: str, topic: str, body: bytes, client: str) -> None:
        """A pull answered ``group`` with ``body`` (stored records); O(1), may drop."""
        if not self.enabled or topic == self.topic or is_system_topic(topic):
            return
        if self._pending_bytes + len(body) > MAX_PENDING_BYTES:
            self.dropped += 1
            return
        self._pending_bytes += len(body)
        self._deliveries.append((int(time.time() * 1000), group, client, body))

    def on_sent_back(self, group: str, msg_id: str, retry_times: int, target_topic: str) -> None:
        """The broker stored ``msg_id`` of ``group`` in ``target_topic`` (retry or DLQ)."""
        if not self.enabled or not msg_id:
            return
        if len(self._records) >= MAX_PENDING_RECORDS:
            self.dropped += 1
            return
        record = (
            f"SendBack\x01{int(time.time() * 1000)}\x01{self.broker_name}\x01{group}\x01{msg_id}\x01"
            f"{retry_times}\x01{target_topic}\x02"
        )
        self._records.append((record, msg_id))

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO fields."""
        return {
            "traceRecordsWritten": str(self.written_records),
            "traceRecordsDropped": str(self.dropped),
        }

    async def run_routine(self) -> None:
        """Turn queued deliveries into records and store them, every ``FLUSH_INTERVAL_S``."""
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            await self.flush()

    async def flush(self) -> None:
        """Store everything queued now."""
        self._decode_deliveries()
        while self._records:
            batch = [self._records.popleft() for _ in range(min(BATCH_RECORDS, len(self._records)))]
            await self._put(batch)

    def _decode_deliveries(self) -> None:
        records = self._records
        while self._deliveries:
            ts, group, client, body = self._deliveries.popleft()
            self._pending_bytes -= len(body)
            for m in decode_records(body):
                msg_id = m.msg_id
                records.append(
                    (
                        f"Deliver\x01{ts}\x01{self.broker_name}\x01{group}\x01{m.topic}\x01{m.queue_id}\x01"
                        f"{m.queue_offset}\x01{msg_id}\x01{client or NULL}\x01{m.reconsume_times}\x02",
                        msg_id,
                    )
                )

    async def _put(self, batch: list[tuple[str, str]]) -> None:
        keys = " ".join(sorted({k for _, k in batch}))
        props = properties_to_string({MessageConst.KEYS: keys, MessageConst.TRACE_SWITCH: "false"})
        body = "".join(r for r, _ in batch).encode()
        msg = BrokerMessage(self.topic, 0, body, props, 0, 0, int(time.time() * 1000))
        try:
            result = await self.store.put_message(msg)
        except Exception as e:  # the store refuses (disk full, shutting down): count, never fail a pull
            self.dropped += len(batch)
            log.warning("trace: %d broker record(s) not stored: %s", len(batch), e)
            return
        if result.status in STORED_STATUSES:
            self.written_records += len(batch)
        else:
            self.dropped += len(batch)
