"""Services that run only on a broker group's master, started and stopped as one set.

Owns the list of master-only services and their order: delay-level and timer delivery and the
transaction check service today, and any service that must run on exactly one broker of a group
(POP's revive service joins with one ``register`` call in ``BrokerController``). A plain master
starts them once at boot; in controller mode the role change (``broker/failover/replicas.py``)
starts them when this broker becomes master and stops them, in reverse order, when it stops being
master, so a group never runs two of them against one logical log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("rocketpy.broker")

Step = Callable[[], Awaitable[None]]


class MasterOnlyServices:
    """Named start/stop pairs run while this broker is its group's master."""

    def __init__(self) -> None:
        self._services: list[tuple[str, Step, Step]] = []
        self.running = False
        self._lock = asyncio.Lock()  # a start and a stop never interleave

    def register(self, name: str, start: Step, stop: Step) -> None:
        """Add a service (started after the ones registered before it, stopped before them)."""
        assert not self.running, f"register {name} before the services start"
        self._services.append((name, start, stop))

    @property
    def names(self) -> list[str]:
        """The services, in start order."""
        return [name for name, _, _ in self._services]

    async def start_all(self) -> None:
        """Start every service (this broker is master now)."""
        async with self._lock:
            if self.running:
                return
            self.running = True
            for name, start, _ in self._services:
                await start()
                log.info("master-only service started: %s", name)

    async def stop_all(self) -> None:
        """Stop every service, last started first (this broker is no longer master)."""
        async with self._lock:
            if not self.running:
                return
            self.running = False
            for name, _, stop in reversed(self._services):
                await stop()
                log.info("master-only service stopped: %s", name)
