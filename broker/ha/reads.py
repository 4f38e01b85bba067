"""Reads from slaves: the master's ``suggestWhichBrokerId`` rule (RocketMQ's memory-ratio rule).

With ``slaveReadEnable`` a master answers a pull with broker id 1 when the consumer reads far
behind: more than ``accessMessageInMemoryMaxRatio`` % of the machine's memory between the last
record it pulled and the commitlog's end (those bytes are likely not in the page cache, so the
slave serves them instead), else the master (0). A slave with ``slaveReadEnable`` applies the same
rule to its own log (the consumer stays while it is behind); without it, a broker always suggests
the master, as RocketMQ does.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from rocketpy.broker.store import Store

SLAVE_ID = 1


def physical_memory_bytes() -> int:
    """Total RAM of this machine."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def slave_read_rule(store: Store, ratio_percent: int, memory_bytes: int) -> Callable[[str, int, int], int]:
    """``(topic, queue_id, next_offset) -> broker id`` to suggest after a successful pull."""
    limit = memory_bytes * ratio_percent // 100

    def suggest(topic: str, queue_id: int, next_offset: int) -> int:
        last = store.get_commit_log_offset_in_queue(topic, queue_id, next_offset - 1)
        if last < 0:
            return 0
        return SLAVE_ID if store.max_physical_offset - last > limit else 0

    return suggest
