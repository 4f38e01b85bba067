"""Consume-queue cleaning on an operator's request: CLEAN_EXPIRED_CONSUMEQUEUE and CLEAN_UNUSED_TOPIC.

Owns choosing what goes (on the loop, where the queue table and file lists change, so reads and
dispatches never see a half-removed queue) and deleting it (in a thread). Two rules keep a store
recoverable when the broker dies mid-clean:

- A queue's files are deleted oldest first, each unlinked even while a read still holds a view of
  it (the mapping stays valid for that read; ``MappedFile.destroy(force=True)``), so what is left
  on disk is always a contiguous run of newer files, which recovery loads as it does after the
  time-based cleanup.
- A live topic's queue keeps its newest file, so its offsets continue where they were (RocketMQ
  drops a wholly expired queue, and its offsets restart at 0 under the group's committed offsets).
  Only queues of topics outside the caller's ``retain`` predicate are removed whole; a crash
  leaves some of their files, which recovery loads as an unused queue and the next clean removes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketpy.broker.store.consume_queue import UNIT, UNIT_SIZE, ConsumeQueue
from rocketpy.broker.store.dispatch import Dispatcher
from rocketpy.broker.store.mapped_file import MappedFile


@dataclass
class CleanPlan:
    """What one clean removes (chosen on the loop, deleted in a thread).

    Attributes:
        files: expired files of live queues, each queue's oldest first.
        queues: queues removed whole (already out of the dispatcher's table).
        dirs: their directories, and topic directories left without a queue.
    """

    files: list[MappedFile] = field(default_factory=list)
    queues: list[ConsumeQueue] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)


def _last_end(mf: MappedFile, count: int) -> int:
    """Commitlog offset one past the record the ``count``-th unit of ``mf`` points to."""
    phys, size, _ = UNIT.unpack_from(mf.mm, (count - 1) * UNIT_SIZE)
    return int(phys + size)


def _wholly_expired(cq: ConsumeQueue, commitlog_min: int) -> bool:
    """Every unit of the queue points before ``commitlog_min`` (an empty queue counts)."""
    last = cq.unit(cq.next_offset - 1) if cq.next_offset > cq.min_offset else None
    return last is None or last[0] + last[1] <= commitlog_min


def plan_expired(dispatcher: Dispatcher, commitlog_min: int, retain: Callable[[str], bool]) -> CleanPlan:
    """On the loop: detach the consume-queue files wholly before ``commitlog_min`` (a live
    queue keeps its newest file), and remove whole the wholly expired queues of topics ``retain``
    rejects. The caller deletes the plan's files (``delete_plan``, in a thread)."""
    plan = CleanPlan()
    gone: list[ConsumeQueue] = []
    for cq in list(dispatcher.cqs.values()):
        if not retain(cq.topic) and _wholly_expired(cq, commitlog_min):
            gone.append(cq)
            continue
        while len(cq.files) > 1 and _last_end(cq.files[0], cq.files[0].size // UNIT_SIZE) <= commitlog_min:
            plan.files.append(cq.files.pop(0))
        if cq.files:
            cq.min_offset = max(cq.min_offset, cq.files[0].base_offset // UNIT_SIZE)
    _remove_queues(dispatcher, gone, plan)
    return plan


def plan_unused(dispatcher: Dispatcher, on_disk: set[str], retain: Callable[[str], bool]) -> CleanPlan:
    """On the loop: remove every queue of the topics ``retain`` rejects, and their directories
    (also topic directories on disk with no queue loaded, ``on_disk``)."""
    plan = CleanPlan()
    gone = [cq for cq in dispatcher.cqs.values() if not retain(cq.topic)]
    _remove_queues(dispatcher, gone, plan)
    known = {cq.topic for cq in dispatcher.cqs.values()}
    for topic in sorted(on_disk - known):
        if not retain(topic):
            path = dispatcher.topic_dir(topic)
            if path not in plan.dirs:
                plan.dirs.append(path)
    return plan


def _remove_queues(dispatcher: Dispatcher, gone: list[ConsumeQueue], plan: CleanPlan) -> None:
    for cq in gone:
        del dispatcher.cqs[(cq.topic, cq.queue_id)]
        dispatcher.dirty_cqs.discard(cq)
        cq.deleted = True  # a file the allocator still creates for it is closed, not attached
        plan.queues.append(cq)
        plan.dirs.append(cq.directory)
    left = {cq.topic for cq in dispatcher.cqs.values()}
    for topic in sorted({cq.topic for cq in gone} - left):
        plan.dirs.append(dispatcher.topic_dir(topic))


def topic_dirs(cq_root: str) -> set[str]:
    """The topic directories under the consume-queue root (blocking: a thread)."""
    try:
        return {e.name for e in os.scandir(cq_root) if e.is_dir()}
    except FileNotFoundError:
        return set()


def delete_plan(plan: CleanPlan) -> int:
    """Delete what ``plan`` names (blocking: the consume-queue allocate thread, after any file
    creation queued before it). Returns the files deleted."""
    deleted = 0
    for mf in plan.files:  # each queue's oldest first: what is left stays contiguous
        mf.destroy(force=True)
        deleted += 1
    for cq in plan.queues:
        for mf in list(cq.files):
            mf.destroy(force=True)
            deleted += 1
    for d in plan.dirs:
        shutil.rmtree(d, ignore_errors=True)
    return deleted
