"""This broker's etcd lease and the fencing deadline derived from it (controller mode).

Owns one lease (``controllerLeaseTtlSeconds``): granted at join, renewed every ``ttl / 5`` seconds,
and the **fence deadline**: ``sent + ttl - margin`` on this host's boot clock, where ``sent`` is
when the last successful renewal was *sent*. etcd started that renewal's TTL no earlier than it
received the request, so the lease cannot end in etcd before ``sent + ttl`` in real time: a master
that stops acknowledging at the fence deadline stops ``margin`` seconds before any other broker
can win the next epoch, whatever the hosts' wall clocks say (only clock *rates* matter, and
``margin`` is 20 % of the TTL, at least half a second). The boot clock (``CLOCK_BOOTTIME``) runs
through a suspended or SIGSTOPped process, so a broker that wakes up late sees its deadline gone
before it answers anything.

A renewal answered with TTL 0 means etcd already dropped the lease (``lost`` is set); renewals
that fail only let the deadline pass. Every renewal's wait ends by the deadline or the request
timeout, whichever comes first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from rocketpy.broker.failover.etcd import EtcdClient, EtcdError, EtcdUnavailable

log = logging.getLogger("rocketpy.broker.failover")

MIN_MARGIN_S = 0.5
MARGIN_RATIO = 0.2
RENEWALS_PER_TTL = 5


def boot_clock() -> float:
    """Seconds on a clock that never jumps and keeps counting while the process is stopped."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return time.monotonic()


def fence_margin_s(ttl_s: float) -> float:
    """How long before etcd could end the lease its holder stops acknowledging."""
    return max(MIN_MARGIN_S, MARGIN_RATIO * ttl_s)


class Lease:
    """One etcd lease kept alive, with its fence deadline.

    Args:
        etcd: the client.
        ttl_s: the TTL asked for.
        clock: seconds (the boot clock; tests pass a fake).
    """

    def __init__(self, etcd: EtcdClient, ttl_s: int, clock: Callable[[], float] = boot_clock) -> None:
        self.etcd = etcd
        self.ttl_s = ttl_s
        self.clock = clock
        self.lease_id = 0
        self.granted_ttl_s = ttl_s
        self.deadline = 0.0  # fence deadline on ``clock``
        self.lost = asyncio.Event()
        self.renewals_failed = 0

    @property
    def margin_s(self) -> float:
        """The fence margin for the granted TTL."""
        return fence_margin_s(self.granted_ttl_s)

    def valid(self) -> bool:
        """True until the fence deadline (the lease surely still holds in etcd)."""
        return self.lease_id != 0 and not self.lost.is_set() and self.clock() < self.deadline

    def remaining_s(self) -> float:
        """Seconds left before the fence deadline (<= 0: passed)."""
        return self.deadline - self.clock() if self.lease_id else 0.0

    async def grant(self) -> int:
        """A new lease (the old one, if any, is forgotten); returns its id.

        Raises:
            EtcdUnavailable / EtcdError: etcd did not grant it.
        """
        sent = self.clock()
        lease_id, ttl = await self.etcd.grant(self.ttl_s)
        self.lease_id, self.granted_ttl_s = lease_id, ttl
        self.deadline = sent + ttl - fence_margin_s(ttl)
        self.lost.clear()
        self.renewals_failed = 0
        return lease_id

    async def renew(self) -> bool:
        """One renewal; True when etcd renewed the lease (the deadline moves on)."""
        sent = self.clock()
        timeout_s = max(0.05, min(self.etcd.request_timeout_s, self.deadline - sent))
        try:
            async with asyncio.timeout(timeout_s):
                ttl = await self.etcd.keepalive(self.lease_id)
        except (EtcdUnavailable, EtcdError, TimeoutError) as e:
            self.renewals_failed += 1
            if self.renewals_failed in (1, 10) or self.renewals_failed % 50 == 0:
                log.warning(
                    "lease %x: renewal failed (%d in a row; %.1fs to the fence deadline): %s",
                    self.lease_id,
                    self.renewals_failed,
                    self.remaining_s(),
                    f"{type(e).__name__}: {e}" if str(e) else type(e).__name__,
                )
            return False
        if ttl <= 0:
            log.error("lease %x: etcd no longer knows it (expired)", self.lease_id)
            self.lost.set()
            return False
        if self.renewals_failed:
            log.info("lease %x: renewed again after %d failures", self.lease_id, self.renewals_failed)
        self.renewals_failed = 0
        self.granted_ttl_s = ttl
        self.deadline = max(self.deadline, sent + ttl - fence_margin_s(ttl))
        return True

    async def keep_routine(self) -> None:
        """Renew every ``ttl / 5`` seconds until cancelled or the lease is lost."""
        interval_s = self.ttl_s / RENEWALS_PER_TTL
        while not self.lost.is_set():
            started = self.clock()
            await self.renew()
            await asyncio.sleep(max(0.0, interval_s - (self.clock() - started)))

    async def revoke(self) -> None:
        """End the lease now (a clean shutdown: its keys go at once); errors are logged."""
        if not self.lease_id:
            return
        try:
            await self.etcd.revoke(self.lease_id)
        except (EtcdUnavailable, EtcdError) as e:
            log.warning("lease %x: revoke failed (it ends by its TTL): %s", self.lease_id, e)
        self.lease_id = 0
