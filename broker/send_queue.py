"""The broker's send queue: puts waiting for the disk, bounded, and fast failure when the disk lags.

Owns RocketMQ's ``BrokerFastFailure`` rules for this asyncio broker. A put that completes inline
(an ASYNC_FLUSH append) never waits; a put that suspends (SYNC_FLUSH group commit, the next
commitlog file, a SYNC_MASTER slave ack) sits in the queue until answered. A new send is answered
SYSTEM_BUSY at once, before anything is stored (so a retry on another broker never duplicates it),
when:

* the oldest put in the queue has waited longer than ``waitTimeMillsInSendQueue`` (200 ms): the
  disk is behind, and queueing more would only lengthen every wait (``[TIMEOUT_CLEAN_QUEUE]``);
* the running commitlog flush has taken longer than ``osPageCacheBusyTimeOutMills`` (1000 ms):
  the page cache cannot absorb writes (``[PCBUSY_CLEAN_QUEUE]``; RocketMQ reads its commitlog lock);
* ``sendThreadPoolQueueCapacity`` puts already wait (``[OVERLOAD]``).

Accepted puts therefore wait about ``waitTimeMillsInSendQueue`` plus one flush at most, instead of
queueing without end until FLUSH_DISK_TIMEOUT. Flow control is logged when it starts and, with the
number of sends refused, when it ends. Everything runs on the event loop.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

from rocketpy.config import BrokerConfig, StoreConfig

log = logging.getLogger("rocketpy.broker.send")

_START, _DONE = 0, 1


class SendQueue:
    """Puts in flight on one broker and the SYSTEM_BUSY rules.

    Args:
        broker_config: ``waitTimeMillsInSendQueue``, ``sendThreadPoolQueueCapacity`` (read live).
        store_config: ``osPageCacheBusyTimeOutMills``.
        flush_started: when the running commitlog flush began (``time.monotonic()``; 0: none runs).
        clock: ``time.monotonic`` (injected by tests).
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        flush_started: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bc = broker_config
        self._pc_busy_s = store_config.os_page_cache_busy_timeout_mills / 1000
        self._flush_started = flush_started
        self._clock = clock
        self._entries: deque[list[float]] = deque()  # [start, done] per waiting put, oldest first
        self.in_flight = 0
        self.busy_total = 0  # sends refused SYSTEM_BUSY since start
        self._busy_since = 0.0
        self._busy_at_start = 0

    def refusal(self) -> str | None:
        """The SYSTEM_BUSY remark for a new send now, or None when it may go ahead (hot path)."""
        flush_started = self._flush_started()
        if not self._entries and not flush_started:
            if self._busy_since:
                self._flow_control_ended()
            return None
        remark = self._check(self._clock(), flush_started)
        if remark is None:
            if self._busy_since:
                self._flow_control_ended()
            return None
        if not self._busy_since:
            self._busy_since, self._busy_at_start = self._clock(), self.busy_total
            log.warning("flow control started: %s", remark)
        self.busy_total += 1
        return remark

    def would_refuse(self) -> bool:
        """Whether ``refusal`` would refuse a send now, without counting or logging a refusal (for a
        caller that only picks a path; the path it picks asks ``refusal`` per send)."""
        flush_started = self._flush_started()
        if not self._entries and not flush_started:
            return False
        return self._check(self._clock(), flush_started) is not None

    def _check(self, now: float, flush_started: float) -> str | None:
        bc = self._bc
        n = self.in_flight
        if self._entries:
            waited_ms = (now - self._entries[0][_START]) * 1000
            if waited_ms > bc.wait_time_mills_in_send_queue:
                return (
                    f"[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "
                    f"{waited_ms:.0f}ms, size of queue: {n}; the disk is behind (the oldest put waited "
                    f"longer than waitTimeMillsInSendQueue={bc.wait_time_mills_in_send_queue}ms): "
                    f"retry later or send to another broker"
                )
        if n >= bc.send_thread_pool_queue_capacity:
            return (
                f"[OVERLOAD]broker busy, start flow control for a while: {n} puts wait for the disk "
                f"(sendThreadPoolQueueCapacity={bc.send_thread_pool_queue_capacity}); retry later or "
                f"send to another broker"
            )
        if flush_started and now - flush_started > self._pc_busy_s:
            return (
                f"[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, the commitlog flush "
                f"has run {(now - flush_started) * 1000:.0f}ms (osPageCacheBusyTimeOutMills="
                f"{self._pc_busy_s * 1000:.0f}ms), size of queue: {n}; retry later or send to another broker"
            )
        return None

    def _flow_control_ended(self) -> None:
        log.warning(
            "flow control ended after %.1f s: %d sends refused SYSTEM_BUSY",
            self._clock() - self._busy_since,
            self.busy_total - self._busy_at_start,
        )
        self._busy_since = 0.0

    def enter(self) -> list[float]:
        """A put starts waiting (it suspended); returns its ticket for ``leave``."""
        ticket = [self._clock(), 0.0]
        self._entries.append(ticket)
        self.in_flight += 1
        return ticket

    def leave(self, ticket: list[float]) -> None:
        """The put of ``ticket`` was answered."""
        ticket[_DONE] = 1.0
        self.in_flight -= 1
        entries = self._entries
        while entries and entries[0][_DONE]:
            entries.popleft()

    def runtime_info(self) -> dict[str, str]:
        """Figures for GET_BROKER_RUNTIME_INFO."""
        oldest_ms = (self._clock() - self._entries[0][_START]) * 1000 if self._entries else 0.0
        return {
            "sendQueueSize": str(self.in_flight),
            "sendQueueHeadWaitTimeMills": f"{oldest_ms:.0f}",
            "sendSystemBusyTotal": str(self.busy_total),
        }
