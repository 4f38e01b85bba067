"""Dispatch: after records are appended, write each one's consume-queue unit and index entries, then
tell the listeners (long polling). Also owns the table of consume queues (property reading: ``props``).

``Dispatcher.dispatch`` is the one way queues and the index learn of a record: live puts (single and
batch) and recovery's re-dispatch alike (RocketMQ's ``doDispatch``). A record a queue already holds
writes no unit again; the index skips records it holds by itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.broker.store.consume_queue import ConsumeQueue
from rocketpy.broker.store.index import IndexService
from rocketpy.broker.store.message import BrokerMessage
from rocketpy.broker.store.props import index_keys, tags_hash
from rocketpy.config import parse_delay_levels  # one parser: the config validates with it
from rocketpy.message_props import DELAY_SEP, get_property
from rocketpy.topic import SCHEDULE_TOPIC

log = logging.getLogger("rocketpy.store")

Listener = Callable[[str, int, int, int, int], None]
__all__ = ["Dispatcher", "Listener", "dispatch_run", "index_keys", "parse_delay_levels"]


class Dispatcher:
    """Consume queues by (topic, queue id), the index, and dispatch listeners.

    Args:
        cq_root: the consumequeue directory.
        cq_file_size: bytes per consume-queue file.
        index: the index service, or None when indexing is disabled.
        delay_levels_ms: delay per level, for the delivery time of SCHEDULE_TOPIC_XXXX units.
    """

    def __init__(
        self, cq_root: str, cq_file_size: int, index: IndexService | None, delay_levels_ms: list[int]
    ) -> None:
        self.cq_root = cq_root
        self.cq_file_size = cq_file_size
        self.index = index
        self.delay_levels_ms = delay_levels_ms
        self.cqs: dict[tuple[str, int], ConsumeQueue] = {}
        #: called after each dispatched record; a tuple replaced on change (``listen``), so a
        #: listener may stop listening from inside its call
        self.listeners: tuple[Listener, ...] = ()
        self.dirty_cqs: set[ConsumeQueue] = set()
        self.allocator = None
        self.rebuild_from = 1 << 62  # recovery: a torn queue lowers where re-dispatch must start
        # Crash-safe dispatch point (see ``watermark``): units waiting in memory for a file are lost
        # by a crash, so recovery must re-dispatch from before the earliest of them.
        self.dispatched_to = 0
        self.pending_count = 0
        self.pending_floor = 0

    def cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue of (topic, queue id), created empty when new."""
        key = (topic, queue_id)
        cq = self.cqs.get(key)
        if cq is None:
            cq = self.cqs[key] = ConsumeQueue(self.cq_root, topic, queue_id, self.cq_file_size)
            if self.allocator is not None:
                cq.attach_allocator(self.allocator, self)
        return cq

    def pending_started(self, phys: int) -> None:
        """A consume queue holds units in memory from commitlog offset ``phys`` on (loop)."""
        if self.pending_count == 0:
            self.pending_floor = phys
        self.pending_count += 1

    def pending_ended(self) -> None:
        """A consume queue wrote its waiting units to its file (loop)."""
        self.pending_count -= 1
        assert self.pending_count >= 0

    def watermark(self) -> int:
        """Commitlog offset before which every record's unit is in a file (any thread).

        Reads ``dispatched_to`` first, then the pending state: a unit still in memory with a smaller
        offset keeps ``pending_count`` above zero and ``pending_floor`` at or below it.
        """
        point = self.dispatched_to
        if self.pending_count:
            point = min(point, self.pending_floor)
        return point

    def tags_code(self, topic: str, props: str, store_ts: int) -> int:
        """The unit's tag field: TAGS hash code, or the delivery time for the schedule topic."""
        if topic == SCHEDULE_TOPIC:
            level = get_property(props, DELAY_SEP)
            if level and level.isdigit() and self.delay_levels_ms:
                lvl = min(max(int(level), 1), len(self.delay_levels_ms))
                return store_ts + self.delay_levels_ms[lvl - 1]
        return tags_hash(props)

    def dispatch(
        self,
        cq: ConsumeQueue,
        queue_offset: int,
        phys: int,
        size: int,
        tags_code: int | None,
        props: str,
        store_ts: int,
    ) -> None:
        """Make one appended record known to its queue, the index and the listeners (hot path).

        ``tags_code`` None: derived from the properties (TAGS hash, or the delivery time of a
        SCHEDULE_TOPIC_XXXX record). Listeners are called on the loop only: recovery runs before
        any is added.
        """
        if (queue_offset == cq.next_offset and phys >= cq.max_phys_end) or _rebuilds(cq, queue_offset, phys):
            if tags_code is None:  # an ordinary topic's tag code without the method call (hot path)
                is_schedule = cq.topic == SCHEDULE_TOPIC
                tags_code = self.tags_code(cq.topic, props, store_ts) if is_schedule else tags_hash(props)
            cq.put(phys, size, tags_code, queue_offset)
            self.dirty_cqs.add(cq)
            if self.listeners:
                self.notify(cq, queue_offset, tags_code, store_ts)
        if self.index is not None:  # also without keys: the index header tracks the last record
            self.index.put_props(cq.topic, props, phys, store_ts)
        self.dispatched_to = phys + size

    def listen(self, fn: Listener, on: bool = True) -> None:
        """Call ``fn`` after each dispatched record from now on (``on``), or no longer.

        A listener costs a call per stored message, so the broker's services listen only while
        something waits for a message (a held pull, a waiting POP, a slave session).
        """
        if on != (fn in self.listeners):
            self.listeners = (*self.listeners, fn) if on else tuple(f for f in self.listeners if f != fn)

    def notify(self, cq: ConsumeQueue, queue_offset: int, tags_code: int, store_ts: int) -> None:
        """Call the listeners for one dispatched message; a failing listener is logged, not fatal."""
        for fn in self.listeners:
            try:
                fn(cq.topic, cq.queue_id, queue_offset, tags_code, store_ts)
            except Exception:
                log.exception("dispatch listener %r failed", fn)

    def remove_topics(self, topics: set[str]) -> list[ConsumeQueue]:
        """Drop the consume queues of ``topics`` from the table; returns them (to delete in a thread)."""
        removed = [cq for key, cq in self.cqs.items() if key[0] in topics]
        for cq in removed:
            del self.cqs[(cq.topic, cq.queue_id)]
            self.dirty_cqs.discard(cq)
        return removed

    def topic_dir(self, topic: str) -> str:
        """Directory of a topic's consume queues."""
        return os.path.join(self.cq_root, topic)


@twin
def dispatch_run(
    d: Dispatcher,
    cq: ConsumeQueue,
    queue_offset: int,
    phys: int,
    sizes: list[int],
    msgs: list[BrokerMessage],
    store_ts: int,
) -> int:
    """Dispatch the records of one put, appended contiguously from ``phys`` with these ``sizes``:
    ``Dispatcher.dispatch`` of each, in order (the put path's inner loop). Returns where they end.

    The compiled twin in ``_speedups`` takes the common case in C: the queue at its end with room
    in its last file for every unit, no tag code given, an ordinary topic, Latin-1 properties; it
    writes the same units and index entries, makes the same listener calls and leaves the same
    state, and hands any other run to this function.
    """
    for i, m in enumerate(msgs):  # enumerate, not zip(strict=True): no keyword parsing per put
        size = sizes[i]
        d.dispatch(cq, queue_offset + i, phys, size, m.tags_code, m.properties, store_ts)
        phys += size
    return phys


def _rebuilds(cq: ConsumeQueue, queue_offset: int, phys: int) -> bool:
    """Recovery re-dispatching past a queue's end: False for a record the queue already holds.

    A record further on than the queue's next offset is taken (the queue jumps; an empty queue
    starts there), as RocketMQ's consume queue does after its files were cut.
    """
    if queue_offset < cq.next_offset or phys < cq.max_phys_end:
        return False
    if cq.next_offset == cq.min_offset:
        cq.min_offset = queue_offset
    elif queue_offset > cq.next_offset:
        log.warning("consume queue %s/%d jumps from %d to %d while rebuilding", cq.topic, cq.queue_id,
                    cq.next_offset, queue_offset)  # fmt: skip
    return True


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.store import _speedups

    same_signature(dispatch_run)(_speedups.dispatch_run)
    same_signature(_speedups.dispatch_run)(dispatch_run)
