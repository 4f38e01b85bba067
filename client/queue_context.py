"""One assigned queue as its rebalancer, pull loop and consume service share it (RocketMQ's PullRequest).

Owns ``QueueContext``: the queue, its process queue (in-flight messages), the next offset to pull,
the topic's subscription and the group's offset store, plus the two ways consumed messages move
the stored offset (concurrent acknowledgement, orderly commit of the taken batch). The offset is
never moved past a message still held, and never after the queue was released: its final offset
was committed then, and the next owner starts from it.

The rebalancer creates a context when the consumer takes a queue and drops it when the queue goes;
the pull loop fills ``pq`` and advances ``next_offset``; the consume service acknowledges.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from rocketpy.client.consumer_types import SubscriptionData
from rocketpy.client.offset_store import OffsetStore
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.message import MessageExt, MessageQueue


@dataclass(eq=False, slots=True)
class QueueContext:
    """The shared state of one assigned queue.

    Attributes:
        mq: the queue.
        sub: its topic's subscription.
        next_offset: where the next pull starts.
        offsets: the group's offset store (what acknowledgements move).
        pq: the messages pulled and not yet consumed.
        released: set once the queue was given up and its offset committed; later
            acknowledgements (listener calls still running then) no longer move the offset.
        pull_task: the queue's pull loop (or None before it starts).
    """

    mq: MessageQueue
    sub: SubscriptionData
    next_offset: int
    offsets: OffsetStore
    pq: ProcessQueue = field(default_factory=ProcessQueue)
    released: bool = False
    pull_task: asyncio.Task[None] | None = None

    def acknowledge(self, msgs: list[MessageExt]) -> None:
        """Concurrent: consumed messages leave the process queue; the offset moves to the oldest held."""
        if self.released or not msgs:
            return
        offset = self.pq.remove(msgs)
        if offset >= 0:
            self.offsets.update(self.mq, offset)

    def commit_taken(self) -> None:
        """Orderly: the taken batch was consumed; the offset moves past it."""
        offset = self.pq.commit_taken()
        if offset >= 0 and not self.released:
            self.offsets.update(self.mq, offset)

    async def stop_pulling(self) -> None:
        """Drop the process queue (nothing more is pulled or handed out) and end the pull task."""
        self.pq.dropped = True
        task = self.pull_task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
