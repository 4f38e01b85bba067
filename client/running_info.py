"""What a consumer tells the admin about itself (RocketMQ's ConsumerRunningInfo), and its rates.

Owns ``ConsumeStatsTable`` (per topic: messages pulled and pull time, messages consumed, failed and
listener time; TPS over about the last minute from samples the consumer takes every offset-commit
period, ``SAMPLES`` of them) and the pieces of GET_CONSUMER_RUNNING_INFO's answer: the properties
(RocketMQ's ``PROP_*`` keys and the consumer's options), one ProcessQueueInfo per held queue, and
``stack_dump`` (every thread's and asyncio task's stack, bounded: RocketMQ's ``jstack``).
Counting is a few integer adds per pull and per listener call, on the loop.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from collections import deque
from typing import Any

from rocketpy.client.process_queue import ProcessQueue

#: Samples kept per consumer (one per offset-commit period: 13 x 5 s covers a minute).
SAMPLES = 13
#: At most this many asyncio tasks and this many characters in a stack dump.
MAX_DUMPED_TASKS = 200
MAX_STACK_DUMP_CHARS = 256 * 1024
_FIELDS = 6  # pulled, pull_ms, pulls, ok, failed, consume_ms


class ConsumeStatsTable:
    """Per-topic pull and consume counters of one consumer, and their rates."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}
        self.failed_in_hour: dict[str, deque[tuple[float, int]]] = {}
        self._samples: deque[tuple[float, dict[str, list[float]]]] = deque(maxlen=SAMPLES)
        self.sample()

    def _row(self, topic: str) -> list[float]:
        row = self.totals.get(topic)
        if row is None:
            row = self.totals[topic] = [0.0] * _FIELDS
        return row

    def on_pull(self, topic: str, found: int, rt_ms: float) -> None:
        """A pull answered after ``rt_ms`` with ``found`` messages."""
        row = self._row(topic)
        row[0] += found
        row[1] += rt_ms
        row[2] += 1

    def on_consume(self, topic: str, ok: int, failed: int, rt_ms: float) -> None:
        """A listener call (or a batch of them) took ``rt_ms``: ``ok`` consumed, ``failed`` not."""
        row = self._row(topic)
        row[3] += ok
        row[4] += failed
        row[5] += rt_ms
        if failed:
            hour = self.failed_in_hour.setdefault(topic, deque(maxlen=3600))
            hour.append((time.monotonic(), failed))

    def sample(self) -> None:
        """Remember the totals now (the consumer calls this every offset-commit period)."""
        self._samples.append((time.monotonic(), {t: list(r) for t, r in self.totals.items()}))

    def status(self, topic: str) -> dict[str, Any]:
        """RocketMQ's ConsumeStatus of ``topic`` over about the last minute."""
        now = time.monotonic()
        start_t, start = self._samples[0]
        elapsed = max(now - start_t, 1e-3)
        row = self.totals.get(topic, [0.0] * _FIELDS)
        was = start.get(topic, [0.0] * _FIELDS)
        d = [a - b for a, b in zip(row, was, strict=True)]
        hour = [n for t, n in self.failed_in_hour.get(topic, ()) if now - t <= 3600]
        return {
            "pullRT": d[1] / d[2] if d[2] else 0.0,
            "pullTPS": d[0] / elapsed,
            "consumeRT": d[5] / (d[3] + d[4]) if d[3] + d[4] else 0.0,
            "consumeOKTPS": d[3] / elapsed,
            "consumeFailedTPS": d[4] / elapsed,
            "consumeFailedMsgs": sum(hour),
        }


def process_queue_info(pq: ProcessQueue, commit_offset: int | None) -> dict[str, Any]:
    """RocketMQ's ProcessQueueInfo of one held queue (timestamps in ms since the epoch)."""
    wall = time.time() - time.monotonic()  # monotonic -> wall clock
    lo, hi = pq.offset_range()
    return {
        "commitOffset": commit_offset if commit_offset is not None else -1,
        "cachedMsgMinOffset": lo,
        "cachedMsgMaxOffset": hi,
        "cachedMsgCount": pq.msg_count,
        "cachedMsgSizeInMiB": pq.msg_bytes // (1024 * 1024),
        "locked": pq.locked,
        "lastLockTimestamp": int((wall + pq.last_lock_time) * 1000) if pq.last_lock_time else 0,
        "droped": pq.dropped,
        "lastPullTimestamp": int((wall + pq.last_pull_time) * 1000),
        "lastConsumeTimestamp": int((wall + pq.last_consume_time) * 1000),
    }


def stack_dump() -> str:
    """Every thread's stack and every asyncio task's (at most ``MAX_DUMPED_TASKS``), as text."""
    parts: list[str] = []
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
        parts.append(f'"{thread.name}" daemon={thread.daemon}\n{stack}')
    try:
        tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())[:MAX_DUMPED_TASKS]
    except RuntimeError:  # no running loop
        tasks = []
    for task in tasks:
        summary = traceback.StackSummary.extract((f, f.f_lineno) for f in task.get_stack(limit=8))
        parts.append(f"task {task.get_name()} {task.get_coro()!r}\n" + "".join(summary.format()))
    text = "\n".join(parts)
    return text if len(text) <= MAX_STACK_DUMP_CHARS else text[:MAX_STACK_DUMP_CHARS] + "\n... (cut)"
