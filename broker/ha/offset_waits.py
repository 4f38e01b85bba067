"""Sends held until replicas hold their bytes: futures keyed by the commitlog offset they need.

Both SYNC_MASTER forms hold a send this way: a master waiting for its slave's acknowledgement
(``HAService``) and controller mode waiting for every SyncStateSet member (``InSyncReplicas``). A
wait is a future, answered True once ``release`` reaches its end offset and False at its deadline,
so the send processor can answer from the future's callback (no task, no timer per send): one timer
serves every deadline, armed for the earliest (a second heap; waits share ``syncFlushTimeout``, so
deadlines arrive in order and released waits leave from its front).

Bounds: at most ``limit`` waits; past it a new wait is answered False at once (its send gets
FLUSH_SLAVE_TIMEOUT, as one that waited too long).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

#: Sends waiting for a replica at most, per broker.
MAX_WAITS = 65_536
#: Deadlines this close count as passed: loop timers have millisecond resolution, and re-arming for
#: a sub-millisecond remainder would spin the loop.
_TIMER_SLACK_S = 0.001


class OffsetWaits:
    """Futures of sends waiting for an offset to be replicated."""

    def __init__(self, limit: int = MAX_WAITS) -> None:
        self.limit = limit
        self._by_end: list[tuple[int, int, asyncio.Future[bool]]] = []  # heap on the end offset
        self._by_deadline: list[tuple[float, int, asyncio.Future[bool]]] = []  # heap on the deadline
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __len__(self) -> int:
        return len(self._by_end)

    def future(self, end: int, timeout_s: float) -> asyncio.Future[bool]:
        """A future answered True once ``release`` covers ``end``, False after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if len(self._by_end) >= self.limit:
            self._compact()
            if len(self._by_end) >= self.limit:
                fut.set_result(False)
                return fut
        seq = next(self._seq)
        heapq.heappush(self._by_end, (end, seq, fut))
        deadlines = self._by_deadline
        while deadlines and deadlines[0][2].done():  # released ones, mostly in arrival order
            heapq.heappop(deadlines)
        deadline = loop.time() + timeout_s
        heapq.heappush(deadlines, (deadline, seq, fut))
        if self._timer is None or deadline < self._timer_at:
            self._arm(loop, deadline)
        return fut

    def release(self, point: int) -> int:
        """Answer True to every wait for an offset up to ``point``; the largest such offset (-1: none)."""
        heap, released = self._by_end, -1
        while heap and heap[0][0] <= point:
            end, _, fut = heapq.heappop(heap)
            if not fut.done():
                fut.set_result(True)
                released = max(released, end)
        return released

    def end_all(self) -> None:
        """Answer True to every wait (the broker stopped being master; its gate answers the sends)."""
        for _, _, fut in self._by_end:
            if not fut.done():
                fut.set_result(True)
        self._by_end.clear()
        self._by_deadline.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now, deadlines = loop.time() + _TIMER_SLACK_S, self._by_deadline
        while deadlines and (deadlines[0][0] <= now or deadlines[0][2].done()):
            fut = heapq.heappop(deadlines)[2]
            if not fut.done():
                fut.set_result(False)
        if deadlines:
            self._arm(loop, deadlines[0][0])
        if len(self._by_end) > 2 * len(deadlines) + 1024:  # expired ones left in the heap
            self._compact()

    def _compact(self) -> None:
        self._by_end = [w for w in self._by_end if not w[2].done()]
        heapq.heapify(self._by_end)
