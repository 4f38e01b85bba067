"""Queue allocation shared by the SDK's rebalance and the broker's QUERY_ASSIGNMENT (RocketMQ's
``AllocateMessageQueueAveragely`` and ``AllocateMessageQueueAveragelyByCircle``), as pure functions.

Every strategy takes the consumer's own client id, the sorted list of all queues of a topic
(``mq_all``) and the sorted list of all client ids of the group (``cid_all``), and returns the
queues this consumer owns. Consistency relies on every consumer seeing the same two lists; a
consumer absent from ``cid_all`` gets nothing (it is not yet registered). The SDK's other
strategies (consistent hash, by config) are ``rocketpy.client.allocate``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar


class QueueLike(Protocol):
    """What allocation needs of a queue (``rocketpy.message.MessageQueue`` has it)."""

    topic: str
    broker_name: str
    queue_id: int


Q = TypeVar("Q", bound=QueueLike)
AllocateFn = Callable[[str, Sequence[Q], Sequence[str]], list[Q]]


def allocate_averagely(me: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> list[Q]:
    """Contiguous blocks: 8 queues over 3 consumers -> [0,1,2], [3,4,5], [6,7]."""
    if me not in cid_all or not mq_all:
        return []
    index = cid_all.index(me)
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if (mod > 0 and index < mod) else index * average + mod
    size = min(average, n_mq - start)
    return list(mq_all[start : start + max(size, 0)])


def allocate_averagely_by_circle(me: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> list[Q]:
    """Round-robin deal: 8 queues over 3 consumers -> [0,3,6], [1,4,7], [2,5]."""
    if me not in cid_all:
        return []
    index = cid_all.index(me)
    return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]
