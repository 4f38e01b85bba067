"""Consumer offset stores: in the broker (CLUSTERING) or in a local file (BROADCASTING).

Both keep an in-memory table ``MessageQueue -> next offset to consume`` that the consumer updates
as messages are acknowledged, and persist it every ``persist_consumer_offset_interval``, when a
queue is released and at shutdown.

The local file lives at ``{root}/{ip}@{instance_name}/{group}/offsets.json`` where ``root`` is
``$ROCKETPY_OFFSETS_DIR`` or ``~/.rocketpy_offsets``. It is read and written in a worker thread
(temp file + rename, so a crash leaves the old or the new file, never half of one). Two
broadcasting consumers of one group in one process must have distinct instance names, since they
would otherwise share (and overwrite) one file; the ``claim`` registry enforces that.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading

from rocketpy.client.instance import MQClientInstance
from rocketpy.errors import MQClientError, RocketpyError
from rocketpy.message import MessageQueue

log = logging.getLogger("rocketpy.client.offset")

QUERY_TIMEOUT_S = 3.0
_claimed: set[str] = set()
_claim_lock = threading.Lock()


def _mq_key(mq: MessageQueue) -> tuple[str, str, int]:
    return (mq.topic, mq.broker_name, mq.queue_id)


class OffsetStore:
    """The in-memory table shared by both stores."""

    def __init__(self, group: str) -> None:
        self.group = group
        self._table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        """Record ``offset`` as the next offset to consume of ``mq``."""
        if offset < 0:
            return
        old = self._table.get(mq)
        if increase_only and old is not None and old >= offset:
            return
        self._table[mq] = offset

    def cached(self, mq: MessageQueue) -> int | None:
        """The offset in memory, if any."""
        return self._table.get(mq)

    def remove(self, mq: MessageQueue) -> None:
        """Forget a released queue (after it was persisted)."""
        self._table.pop(mq, None)

    async def load(self) -> None:
        """Load persisted offsets (local store only)."""

    async def read(self, mq: MessageQueue, *, zero_if_young: bool = False) -> int | None:
        """The stored offset of ``mq`` (memory first), or None when the group has none.

        ``zero_if_young``: a broker answers 0 instead of "none" while the queue still starts at
        offset 0 (RocketMQ's rule for CONSUME_FROM_LAST_OFFSET; a local store ignores it).
        """
        raise NotImplementedError

    async def fetch(self, mq: MessageQueue, *, zero_if_young: bool = False) -> int | None:
        """The persisted offset of ``mq`` (ignoring memory)."""
        return await self.read(mq, zero_if_young=zero_if_young)

    async def persist(self, mqs: list[MessageQueue], *, oneway: bool = True) -> None:
        """Persist the offsets of ``mqs`` (``oneway=False`` waits for the broker's acknowledgement)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release resources (local store: the instance-name claim)."""


class RemoteOffsetStore(OffsetStore):
    """CLUSTERING: offsets live in the broker that owns the queue."""

    def __init__(self, group: str, instance: MQClientInstance) -> None:
        super().__init__(group)
        self._instance = instance

    async def _broker_addr(self, mq: MessageQueue) -> str:
        return await self._instance.queue_broker_addr(mq)

    async def read(self, mq: MessageQueue, *, zero_if_young: bool = False) -> int | None:
        """Memory first, else QUERY_CONSUMER_OFFSET (None when the broker has none)."""
        if mq in self._table:
            return self._table[mq]
        offset = await self.fetch(mq, zero_if_young=zero_if_young)
        if offset is not None:
            self._table[mq] = offset
        return offset

    async def fetch(self, mq: MessageQueue, *, zero_if_young: bool = False) -> int | None:
        """QUERY_CONSUMER_OFFSET: the broker's stored offset (None when it has none)."""
        addr = await self._broker_addr(mq)
        offset = await self._instance.api.query_consumer_offset(
            addr, self.group, mq.topic, mq.queue_id, QUERY_TIMEOUT_S, zero_if_not_found=zero_if_young
        )
        return int(offset) if offset is not None and offset >= 0 else None

    async def persist(self, mqs: list[MessageQueue], *, oneway: bool = True) -> None:
        """UPDATE_CONSUMER_OFFSET for each queue with a known offset; errors are logged."""
        for mq in mqs:
            offset = self._table.get(mq)
            if offset is None:
                continue
            try:
                addr = await self._broker_addr(mq)
                await self._instance.api.update_consumer_offset(
                    addr, self.group, mq.topic, mq.queue_id, offset, oneway=oneway
                )
            except RocketpyError as exc:
                log.warning("could not commit offset %d of %s for %s: %s", offset, mq, self.group, exc)


def offsets_root() -> str:
    """The root directory of local offset files (``$ROCKETPY_OFFSETS_DIR`` or ``~/.rocketpy_offsets``)."""
    root = os.environ.get("ROCKETPY_OFFSETS_DIR")
    return root or os.path.join(os.path.expanduser("~"), ".rocketpy_offsets")


def _write_atomic(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_file(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


class LocalFileOffsetStore(OffsetStore):
    """BROADCASTING: offsets in a JSON file next to the client, keyed by ``{ip}@{instance_name}``."""

    def __init__(self, group: str, client_key: str) -> None:
        """Claim the file; ``client_key`` is ``{ip}@{instance_name}``.

        Raises:
            MQClientError: another broadcasting consumer of this group in this process uses the key.
        """
        super().__init__(group)
        self.path = os.path.join(offsets_root(), client_key, group, "offsets.json")
        self._write_lock = asyncio.Lock()
        with _claim_lock:
            if self.path in _claimed:
                raise MQClientError(
                    f"two broadcasting consumers of group {group!r} in one process share instance name "
                    f"{client_key.split('@', 1)[-1]!r}: give each a distinct instance_name=..."
                )
            _claimed.add(self.path)

    async def load(self) -> None:
        """Read the file (in a thread); a corrupt file is an error that names it."""
        raw = await asyncio.to_thread(_read_file, self.path)
        if raw is None:
            return
        try:
            doc = json.loads(raw)
            for row in doc["offsetTable"]:
                mq = MessageQueue(row["topic"], row["brokerName"], int(row["queueId"]))
                self._table[mq] = int(row["offset"])
        except (ValueError, KeyError, TypeError) as exc:
            raise MQClientError(f"offset file {self.path} is corrupt ({exc}): fix or delete it") from exc

    async def read(self, mq: MessageQueue, *, zero_if_young: bool = False) -> int | None:
        """The offset from memory (loaded from the file at start)."""
        return self._table.get(mq)

    async def persist(self, mqs: list[MessageQueue], *, oneway: bool = True) -> None:
        """Write the whole table to the file (in a thread), keeping rows of queues not in ``mqs``."""
        rows = [
            {"topic": t, "brokerName": b, "queueId": q, "offset": off}
            for (t, b, q), off in sorted((_mq_key(mq), off) for mq, off in self._table.items())
        ]
        data = json.dumps({"group": self.group, "offsetTable": rows}, indent=1).encode()
        async with self._write_lock:
            try:
                await asyncio.to_thread(_write_atomic, self.path, data)
            except OSError as exc:
                log.warning("could not write offsets to %s: %s", self.path, exc)

    def remove(self, mq: MessageQueue) -> None:
        """Broadcasting keeps the offsets of released queues, so a restart resumes them."""

    async def close(self) -> None:
        """Release the instance-name claim."""
        with _claim_lock:
            _claimed.discard(self.path)
