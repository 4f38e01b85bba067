"""Queue allocation strategies as pure functions (RocketMQ's AllocateMessageQueue* family).

Every strategy takes the consumer's own client id, the sorted list of all queues of a topic
(``mq_all``) and the sorted list of all client ids of the group (``cid_all``), and returns the
queues this consumer owns. Consistency relies on every consumer seeing the same two lists;
a consumer absent from ``cid_all`` gets nothing (it is not yet registered).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence

from rocketpy.allocate import AllocateFn, Q, QueueLike, allocate_averagely, allocate_averagely_by_circle
from rocketpy.client.consumer_types import AllocateStrategy
from rocketpy.errors import MQClientError

VIRTUAL_NODE_COUNT = 10


def _md5_hash(key: str) -> int:
    digest = hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big")


def queue_key(mq: QueueLike) -> str:
    """RocketMQ's ``MessageQueue.toString()``, the key hashed onto the ring."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def allocate_consistent_hash(
    me: str,
    mq_all: Sequence[Q],
    cid_all: Sequence[str],
    virtual_node_count: int = VIRTUAL_NODE_COUNT,
) -> list[Q]:
    """Consistent-hash ring of ``virtual_node_count`` nodes per client; minimal movement on change."""
    if me not in cid_all:
        return []
    ring = sorted((_md5_hash(f"{cid}-{i}"), cid) for cid in cid_all for i in range(virtual_node_count))
    hashes = [h for h, _ in ring]
    mine = []
    for mq in mq_all:
        pos = bisect.bisect_left(hashes, _md5_hash(queue_key(mq)))
        owner = ring[pos % len(ring)][1]
        if owner == me:
            mine.append(mq)
    return mine


def allocate_by_config(configured: Sequence[Q]) -> AllocateFn[Q]:
    """A strategy that always returns the user's fixed queue list (restricted to queues that exist)."""

    def allocate(me: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> list[Q]:
        """The configured queues that exist in ``mq_all``."""
        present = set(mq_all)
        return [mq for mq in configured if mq in present]

    return allocate


def strategy_fn(strategy: AllocateStrategy, configured: Sequence[Q] | None = None) -> AllocateFn[Q]:
    """Return the allocation function for a strategy.

    Raises:
        MQClientError: BY_CONFIG without a queue list.
    """
    if strategy is AllocateStrategy.AVERAGELY:
        return allocate_averagely
    if strategy is AllocateStrategy.AVERAGELY_BY_CIRCLE:
        return allocate_averagely_by_circle
    if strategy is AllocateStrategy.CONSISTENT_HASH:
        return allocate_consistent_hash
    if not configured:
        raise MQClientError(
            "allocate_strategy=AllocateStrategy.BY_CONFIG needs allocate_queues=[MessageQueue(...), ...]"
        )
    return allocate_by_config(configured)
