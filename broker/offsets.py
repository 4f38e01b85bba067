"""Cluster-mode consumer offsets (``config/consumerOffset.json``).

Owns the ``"topic@group" -> {queueId: offset}`` table (RocketMQ's ConsumerOffsetManager). Offsets
are committed by UPDATE_CONSUMER_OFFSET and by pulls carrying a commit offset; the controller
persists the table in a worker thread every ``flushConsumerOffsetInterval`` ms and at shutdown.
Invariant: stored offsets are >= 0.
"""

from __future__ import annotations

import logging
from typing import Any

from rocketpy.broker.persistence import JsonTable

log = logging.getLogger("rocketpy.broker.offsets")

TOPIC_GROUP_SEPARATOR = "@"
MAX_OFFSET_KEYS = 1_000_000


class ConsumerOffsetManager:
    """Consumer group offsets per topic and queue.

    Args:
        path: the consumerOffset.json path.
    """

    def __init__(self, path: str) -> None:
        self.table: dict[str, dict[int, int]] = {}
        self.file = JsonTable(path, self.snapshot)

    @staticmethod
    def key(topic: str, group: str) -> str:
        """The table key ``topic@group``."""
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def load(self) -> None:
        """Load consumerOffset.json (sync; call before serving or from a thread)."""
        doc = self.file.load()
        if not doc:
            return
        for key, queues in (doc.get("offsetTable") or {}).items():
            self.table[key] = {int(q): int(off) for q, off in queues.items()}

    def snapshot(self) -> dict[str, Any]:
        """The consumerOffset.json document (fresh dicts, str queue ids as JSON needs)."""
        return {
            "offsetTable": {
                key: {str(q): off for q, off in queues.items()} for key, queues in self.table.items()
            }
        }

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Store ``offset`` as the group's next offset to consume in (topic, queue_id)."""
        assert offset >= 0, offset
        key = self.key(topic, group)
        queues = self.table.get(key)
        if queues is None:
            if len(self.table) >= MAX_OFFSET_KEYS:
                log.warning("offset table full (%d keys); dropping commit for %s", MAX_OFFSET_KEYS, key)
                return
            queues = self.table[key] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.file.mark_dirty()

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group has none for that queue."""
        queues = self.table.get(self.key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        """All committed offsets of a group in a topic (a copy)."""
        return dict(self.table.get(self.key(topic, group), {}))

    def topics_of_group(self, group: str) -> set[str]:
        """Topics the group has offsets for."""
        out = set()
        for key in self.table:
            topic, _, g = key.rpartition(TOPIC_GROUP_SEPARATOR)
            if g == group:
                out.add(topic)
        return out

    def groups_of_topic(self, topic: str) -> set[str]:
        """Groups with offsets in ``topic``."""
        out = set()
        for key in self.table:
            t, _, g = key.rpartition(TOPIC_GROUP_SEPARATOR)
            if t == topic:
                out.add(g)
        return out

    def remove_topic(self, topic: str) -> None:
        """Forget every group's offsets in ``topic`` (topic deleted)."""
        for key in [k for k in self.table if k.rpartition(TOPIC_GROUP_SEPARATOR)[0] == topic]:
            del self.table[key]
            self.file.mark_dirty()

    def remove_group(self, group: str) -> None:
        """Forget every offset of ``group`` (subscription group deleted)."""
        for key in [k for k in self.table if k.rpartition(TOPIC_GROUP_SEPARATOR)[2] == group]:
            del self.table[key]
            self.file.mark_dirty()
