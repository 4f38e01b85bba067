"""Long polling: pulls that found nothing wait here until a message lands or their time is up.

Owns the held pulls, keyed by (topic, queue id), with per-connection and total bounds
(``MAX_HELD_PULLS_PER_CHANNEL``, ``MAX_HELD_PULLS_TOTAL``). A hold ends exactly once, by one of:
- the store's dispatch listener reports a message at or past the held offset whose tag hash
  matches (any message for a SQL92 filter; the re-run tests its properties): the pull is re-run
  (without suspending) on the next loop turn and answered;
- its deadline (a loop timer): the pull is re-run and answered (PULL_NOT_FOUND normally);
- its connection closes: dropped without an answer;
- shutdown: every held pull is re-run and answered.
Everything runs on the event loop; the re-run callback must be synchronous and quick.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocketpy.broker.store.dispatch import Listener
from rocketpy.broker.subscription import MessageFilter
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel

log = logging.getLogger("rocketpy.broker.long_polling")

MAX_HELD_PULLS_TOTAL = 50_000
MAX_HELD_PULLS_PER_CHANNEL = 4_096
MAX_SUSPEND_MS = 120_000

#: Re-runs a pull without suspending: (channel, request) -> the response, or None (nothing to send).
RunPull = Callable[[Channel, RemotingCommand], RemotingCommand | None]


class HeldPull:
    """One suspended pull request."""

    __slots__ = ("channel", "key", "message_filter", "queue_offset", "request", "timer")

    def __init__(
        self,
        channel: Channel,
        request: RemotingCommand,
        key: tuple[str, int],
        queue_offset: int,
        message_filter: MessageFilter | None,
    ) -> None:
        self.channel = channel
        self.request = request
        self.key = key
        self.queue_offset = queue_offset
        self.message_filter = message_filter
        self.timer: asyncio.TimerHandle | None = None


class PullRequestHoldService:
    """The table of held pulls.

    Args:
        run_pull: re-runs a pull without suspending and returns the response to send (or None).
        max_total: bound on held pulls in total.
        max_per_channel: bound on held pulls of one connection.
    """

    def __init__(
        self,
        run_pull: RunPull,
        max_total: int = MAX_HELD_PULLS_TOTAL,
        max_per_channel: int = MAX_HELD_PULLS_PER_CHANNEL,
    ) -> None:
        self._run_pull = run_pull
        self.max_total = max_total
        self.max_per_channel = max_per_channel
        self._by_queue: dict[tuple[str, int], set[HeldPull]] = {}
        self._by_channel: dict[Channel, set[HeldPull]] = {}
        self._count = 0
        self._closed = False
        self._listen: Callable[[Listener, bool], None] | None = None  # see listen_with
        self.held_total = 0  # pulls ever held
        self.woken_count = 0
        self.expired_count = 0

    def listen_with(self, listen: Callable[[Listener, bool], None]) -> None:
        """Have ``listen`` (the store's ``listen_to_dispatches``) call ``notify_message_arriving``
        while a pull is held, and only then: a dispatch listener costs a call per stored message."""
        self._listen = listen
        listen(self.notify_message_arriving, self._count > 0)

    @property
    def held_count(self) -> int:
        """How many pulls are held now."""
        return self._count

    def hold(
        self,
        channel: Channel,
        request: RemotingCommand,
        topic: str,
        queue_id: int,
        queue_offset: int,
        timeout_ms: int,
        message_filter: MessageFilter | None,
    ) -> str | None:
        """Suspend a pull; returns None when held, or the reason it was refused (bounds, shutdown)."""
        if self._closed:
            return "the broker is shutting down"
        if self._count >= self.max_total:
            return f"the broker holds {self.max_total} pulls already; retry later"
        per_channel = self._by_channel.get(channel)
        if per_channel is not None and len(per_channel) >= self.max_per_channel:
            return (
                f"this connection has {self.max_per_channel} held pulls already; "
                "use fewer queues per connection"
            )
        key = (topic, queue_id)
        held = HeldPull(channel, request, key, queue_offset, message_filter)
        delay_s = max(0, min(timeout_ms, MAX_SUSPEND_MS)) / 1000.0
        held.timer = asyncio.get_running_loop().call_later(delay_s, self._expire, held)
        self._by_queue.setdefault(key, set()).add(held)
        if per_channel is None:
            per_channel = self._by_channel[channel] = set()
        per_channel.add(held)
        self._count += 1
        if self._count == 1 and self._listen is not None:
            self._listen(self.notify_message_arriving, True)
        self.held_total += 1
        return None

    def _remove(self, held: HeldPull) -> None:
        assert held.timer is not None
        held.timer.cancel()
        held.timer = None
        queue_set = self._by_queue.get(held.key)
        assert queue_set is not None and held in queue_set
        queue_set.discard(held)
        if not queue_set:
            del self._by_queue[held.key]
        chan_set = self._by_channel[held.channel]
        chan_set.discard(held)
        if not chan_set:
            del self._by_channel[held.channel]
        self._count -= 1
        if not self._count and self._listen is not None:
            self._listen(self.notify_message_arriving, False)

    def notify_message_arriving(
        self, topic: str, queue_id: int, queue_offset: int, tags_code: int | None, store_ts: int = 0
    ) -> None:
        """Dispatch listener: wake holds of (topic, queue) at or below ``queue_offset`` that match."""
        waiting = self._by_queue.get((topic, queue_id))
        if not waiting:
            return
        woken = [
            h
            for h in waiting
            if h.queue_offset <= queue_offset
            and (h.message_filter is None or h.message_filter.is_matched_by_consume_queue(tags_code))
        ]
        if not woken:
            return
        for h in woken:
            self._remove(h)
        self.woken_count += len(woken)
        asyncio.get_running_loop().call_soon(self._answer_all, woken)

    def _expire(self, held: HeldPull) -> None:
        if held.timer is None:  # already removed
            return
        self._remove(held)
        self.expired_count += 1
        self._answer_all([held])

    def _answer_all(self, helds: list[HeldPull]) -> None:
        for h in helds:
            if h.channel.closed:
                continue
            try:
                response = self._run_pull(h.channel, h.request)
            except Exception:
                log.exception("re-running a held pull failed; the client will retry after its timeout")
                continue
            if response is not None:
                h.channel.count_response(h.request, response)
                h.channel.send(response)

    def on_channel_close(self, channel: Channel) -> None:
        """Drop every pull held for a closed connection (no answer is possible)."""
        for h in list(self._by_channel.get(channel, ())):
            self._remove(h)

    def shutdown(self) -> int:
        """Refuse new holds and answer every held pull now; returns how many were answered."""
        self._closed = True
        all_held = [h for s in self._by_queue.values() for h in s]
        for h in all_held:
            self._remove(h)
        self._answer_all(all_held)
        return len(all_held)
