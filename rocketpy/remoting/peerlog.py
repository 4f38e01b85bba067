"""``PeerLog``: log lines about one peer's misbehaviour, rate-limited per peer address.

A peer that sends bad frames or bad requests as fast as it can would otherwise make the daemon
write one log line per frame (tens of thousands a minute) and fill the disk. Each peer IP address
gets ``lines_per_window`` lines per ``window_seconds``; the rest are counted, and one summary line
("peer X: N more protocol errors suppressed in the last W s") is written when its window ends
(at the peer's next line, or at the owner's periodic ``flush``).

Invariants: at most ``max_peers`` addresses are tracked (further ones share one entry, so the
table is bounded); every suppressed line is counted in exactly one summary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

#: Lines per peer per window, and the window.
LINES_PER_WINDOW = 5
WINDOW_SECONDS = 5.0
#: Peer addresses tracked at once; more share the entry ``OTHER_PEERS``.
MAX_PEERS = 4096
OTHER_PEERS = "other peers"


class _Window:
    __slots__ = ("lines", "start", "suppressed")

    def __init__(self, start: float) -> None:
        self.start = start
        self.lines = 0
        self.suppressed = 0


class PeerLog:
    """Rate-limited logging keyed by peer address.

    Args:
        logger: where lines and summaries go.
        lines_per_window: lines written per peer per window.
        window_seconds: the window.
        clock: monotonic seconds (tests pass a manual clock).
        max_peers: addresses tracked at once.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        lines_per_window: int = LINES_PER_WINDOW,
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        max_peers: int = MAX_PEERS,
    ) -> None:
        self._logger = logger
        self._lines = lines_per_window
        self._window = window_seconds
        self._clock = clock
        self._max_peers = max_peers
        self._peers: dict[str, _Window] = {}
        #: Lines suppressed since start (all peers), for tests and statistics.
        self.suppressed_total = 0

    def log(self, peer: str, level: int, msg: str, *args: Any, exc_info: BaseException | None = None) -> None:
        """Log ``msg % args`` about ``peer`` unless its budget for this window is spent."""
        now = self._clock()
        window = self._window_of(peer, now)
        if window.lines < self._lines:
            window.lines += 1
            self._logger.log(level, msg, *args, exc_info=exc_info)
        else:
            window.suppressed += 1
            self.suppressed_total += 1

    def flush(self) -> None:
        """Write the summary of every window that has ended, and forget quiet peers."""
        now = self._clock()
        for peer, window in list(self._peers.items()):
            if now - window.start >= self._window:
                self._summarise(peer, window)
                del self._peers[peer]

    def _window_of(self, peer: str, now: float) -> _Window:
        window = self._peers.get(peer)
        if window is None:
            if len(self._peers) >= self._max_peers:
                peer = OTHER_PEERS
                window = self._peers.get(peer)
            if window is None:
                window = self._peers[peer] = _Window(now)
                return window
        if now - window.start >= self._window:
            self._summarise(peer, window)
            window = self._peers[peer] = _Window(now)
        return window

    def _summarise(self, peer: str, window: _Window) -> None:
        if window.suppressed:
            self._logger.warning(
                "peer %s: %d more protocol errors suppressed in the last %.0f s",
                peer,
                window.suppressed,
                self._window,
            )
