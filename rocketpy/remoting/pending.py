"""Requests awaiting a response on one connection, with their deadlines.

``PendingRequests`` maps opaque -> (future, request code, timeout) and ends every entry exactly once:
with its response (``complete``), with a ``RemotingTimeoutError`` at its deadline, or with the error
given to ``fail_all`` when the connection closes. A caller that stops waiting removes its entry
(``discard``).

Deadlines live in one min-heap served by ONE loop timer, re-armed for the earliest live deadline.
A per-call ``loop.call_later`` + ``cancel`` costs more than encoding the request (measured with
uvloop); the shared timer costs a heap push per call. Completed entries leave the heap lazily; the
heap is rebuilt when stale entries outnumber live ones, so its size stays bounded by twice the
pending count (plus a constant).

``on_expired``, when set, hears of each timer run that timed calls out: when the newest of them was
sent, and its timeout (a client connection uses it to drop a link that went silent).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable

from rocketpy.errors import RemotingTimeoutError
from rocketpy.protocol.codes import code_name
from rocketpy.remoting.command import RemotingCommand

_STALE_SLACK = 1024
#: Deadlines this close are treated as due: loop timers have millisecond resolution, and re-arming
#: for a sub-millisecond remainder would spin the loop.
_TIMER_SLACK_S = 0.001
#: A timer that fires this late ran after the loop itself was held up: the peer's answers may be
#: waiting unread in the socket, so such a run tells ``on_expired`` nothing.
_LATE_TIMER_S = 0.1

_Entry = tuple["asyncio.Future[RemotingCommand]", int, float]


class PendingRequests:
    """The pending-request table of one connection.

    Args:
        loop: the event loop the futures belong to.
        remote_addr: named in timeout messages.
    """

    __slots__ = ("_entries", "_heap", "_loop", "_timer", "_timer_at", "on_expired", "remote_addr")

    def __init__(self, loop: asyncio.AbstractEventLoop, remote_addr: str) -> None:
        self._loop = loop
        self.remote_addr = remote_addr
        self._entries: dict[int, _Entry] = {}
        self._heap: list[tuple[float, int]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.on_expired: Callable[[float, float], None] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, opaque: int, future: asyncio.Future[RemotingCommand], code: int, timeout: float) -> None:
        """Track ``future`` until the response for ``opaque`` arrives or ``timeout`` s pass."""
        assert opaque not in self._entries, f"opaque {opaque} reused while pending"
        deadline = self._loop.time() + timeout
        self._entries[opaque] = (future, code, timeout)
        heap = self._heap
        heapq.heappush(heap, (deadline, opaque))
        if self._timer is None or deadline < self._timer_at:
            self._arm(deadline)
        if len(heap) > 2 * len(self._entries) + _STALE_SLACK:
            self._rebuild()

    def complete(self, response: RemotingCommand) -> bool:
        """Resolve the call waiting for ``response``; False if none waits (late or unknown)."""
        entry = self._entries.pop(response.opaque, None)
        if entry is None:
            return False
        if not entry[0].done():
            entry[0].set_result(response)
        return True

    def discard(self, opaque: int) -> None:
        """Forget ``opaque`` (its caller stopped waiting)."""
        self._entries.pop(opaque, None)

    def fail_all(self, make_error: Callable[[int], Exception]) -> None:
        """Fail every pending call with ``make_error(request_code)`` and stop the timer."""
        entries, self._entries = self._entries, {}
        self._heap = []
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for future, code, _ in entries.values():
            if not future.done():
                future.set_exception(make_error(code))

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = self._loop.time()
        on_time = now - self._timer_at < _LATE_TIMER_S
        now += _TIMER_SLACK_S
        heap, entries = self._heap, self._entries
        newest_sent, its_timeout = -1.0, 0.0
        while heap and heap[0][0] <= now:
            deadline, opaque = heapq.heappop(heap)
            entry = entries.pop(opaque, None)
            if entry is not None and not entry[0].done():
                entry[0].set_exception(self._timeout_error(entry[1], entry[2]))
                if deadline - entry[2] > newest_sent:
                    newest_sent, its_timeout = deadline - entry[2], entry[2]
        while heap and heap[0][1] not in entries:
            heapq.heappop(heap)
        if heap:
            self._arm(heap[0][0])
        if newest_sent >= 0 and on_time and self.on_expired is not None:
            self.on_expired(newest_sent, its_timeout)

    def _rebuild(self) -> None:
        entries = self._entries
        self._heap = [item for item in self._heap if item[1] in entries]
        heapq.heapify(self._heap)

    def _timeout_error(self, code: int, timeout: float) -> RemotingTimeoutError:
        return RemotingTimeoutError(
            f"{code_name(code)} to {self.remote_addr} got no response within {timeout:.3f}s; "
            "check that the server is up and not overloaded, or raise the timeout"
        )
