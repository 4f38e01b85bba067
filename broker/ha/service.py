"""The master's HA service: the HA port, its slave connections, and group transfer for SYNC_MASTER.

Owns the listener on ``haListenPort`` (one ``HAConnection`` per slave, at most one per brokerId,
at most ``MAX_SLAVES``), the wake-up of idle transfers when the store dispatches a record, and the
acknowledged offset (RocketMQ's ``push2SlaveMaxOffset``: the highest offset a slave reported). A
SYNC_MASTER send waits on ``slave_future(end_offset, timeout)``, answered by the report that reaches
it (RocketMQ's ``GroupTransferService``; ``offset_waits.py``); ``is_slave_ok`` is RocketMQ's rule: a
slave is connected and no more than ``haMaxGapNotInSync`` bytes behind.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from rocketpy.broker.ha.connection import HAConnection
from rocketpy.broker.ha.offset_waits import OffsetWaits
from rocketpy.broker.store import Store
from rocketpy.config import StoreConfig
from rocketpy.waits import answered

log = logging.getLogger("rocketpy.broker.ha")

MAX_SLAVES = 16
SHUTDOWN_WAIT_S = 5.0


class HAService:
    """HA listener and slave bookkeeping of one master.

    Args:
        store: the started store (read for transfers).
        config: the store settings (``haListenPort`` and the ``ha*`` intervals and sizes).
        broker_name: slaves must belong to this brokerName.
    """

    def __init__(self, store: Store, config: StoreConfig, broker_name: str) -> None:
        self.store = store
        self.config = config
        self.broker_name = broker_name
        self.file_size = config.mapped_file_size_commit_log
        self.connections: dict[int, HAConnection] = {}
        self.push2slave_max_offset = 0
        self._server: asyncio.Server | None = None
        self._sessions: dict[asyncio.Task[None], HAConnection] = {}
        self.waits = OffsetWaits()
        # controller mode (broker/failover/role.py): why a slave is refused now (None: accepted),
        # whether a slave reconnecting with a connected brokerId replaces its old session, and
        # who hears of each report ``(brokerId, acked offset)`` and session end ``(brokerId, None)``
        self.refusal: Callable[[], str | None] | None = None
        self.replace_same_id = False
        self.listeners: list[Callable[[int, int | None], None]] = []

    async def start(self, bind_address: str, port: int) -> int:
        """Listen on ``bind_address:port`` (0: a free port); returns the bound port."""
        self._server = await asyncio.start_server(self._accept, bind_address, port)
        bound = int(self._server.sockets[0].getsockname()[1])
        log.info("HA service of %s listening on %s:%d", self.broker_name, bind_address, bound)
        return bound

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._sessions) >= MAX_SLAVES:
            log.warning("HA: refusing a connection: %d sessions already", MAX_SLAVES)
            writer.close()
            return
        task: Any = asyncio.current_task()
        conn = self._sessions[task] = HAConnection(self, reader, writer)
        try:
            await conn.serve()
        finally:
            del self._sessions[task]

    def attach(self, conn: HAConnection) -> None:
        """A slave passed the handshake (its session wakes on each dispatch from now on)."""
        self.connections[conn.broker_id] = conn
        self.store.listen_to_dispatches(self._on_dispatch, True)
        self.on_report()

    def detach(self, conn: HAConnection) -> None:
        """A slave's session ended."""
        if self.connections.get(conn.broker_id) is conn:
            del self.connections[conn.broker_id]
            if not self.connections:  # a dispatch listener costs a call per stored message
                self.store.listen_to_dispatches(self._on_dispatch, False)
            for listener in self.listeners:
                listener(conn.broker_id, None)

    def notify(self, conn: HAConnection) -> None:
        """A slave reported (controller mode's listeners learn its acknowledged offset)."""
        for listener in self.listeners:
            listener(conn.broker_id, conn.acked_offset)

    def abort_sessions(self) -> None:
        """Drop every slave session (this broker stopped being master)."""
        for conn in list(self._sessions.values()):
            conn.abort()

    def _on_dispatch(
        self, topic: str, queue_id: int, queue_offset: int, tags_code: int, store_ts: int
    ) -> None:
        for conn in self.connections.values():
            conn.wake.set()

    # -- group transfer (SYNC_MASTER) -------------------------------------------------------------
    def on_report(self) -> None:
        """A slave reported: raise the acknowledged offset and release the sends it covers."""
        acked = max((c.acked_offset for c in self.connections.values()), default=0)
        if acked > self.push2slave_max_offset:
            self.push2slave_max_offset = acked
        self.waits.release(self.push2slave_max_offset)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and within ``haMaxGapNotInSync`` of ``master_put_where``."""
        if not self.connections:
            return False
        return master_put_where - self.push2slave_max_offset < self.config.ha_max_gap_not_in_sync

    def slave_future(self, end_offset: int, timeout_s: float) -> asyncio.Future[bool]:
        """A future: True once a slave reported ``end_offset`` or more, False after ``timeout_s``."""
        if self.push2slave_max_offset >= end_offset:
            return answered(True)
        return self.waits.future(end_offset, timeout_s)

    # -- status and lifecycle ---------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        """Per slave: id, address, acknowledged offset, bytes behind, seconds since its last report."""
        now, max_off = time.monotonic(), self.store.max_physical_offset
        return [
            {
                "brokerId": c.broker_id,
                "addr": c.remote_addr,
                "ackOffset": c.acked_offset,
                "bytesBehind": max(0, max_off - c.acked_offset),
                "secondsSinceReport": round(now - c.last_report_s, 3),
            }
            for c in sorted(self.connections.values(), key=lambda c: c.broker_id)
        ]

    async def shutdown(self) -> None:
        """Close the listener and every slave session (sends still waiting end by their timeout)."""
        if self._server is not None:
            self._server.close()
        for conn in self._sessions.values():
            conn.abort()  # the session's reads fail and it ends by itself
        if self._sessions:
            await asyncio.wait(list(self._sessions), timeout=SHUTDOWN_WAIT_S)
        if self._server is not None:
            await self._server.wait_closed()
