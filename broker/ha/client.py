"""The slave's replication client (RocketMQ's ``HAClient``).

Owns the slave's one connection to its master's HA port: HELLO plus its max commitlog offset, then
a loop that reads TRANSFER frames, checks each (its offset must be the slave's max offset, its size
at most ``MAX_TRANSFER_BODY``), appends the body byte for byte through
``MessageStore.append_replica`` (which dispatches consume queues and the index) and reports the new
max offset; a report also goes out every ``haSendHeartbeatInterval``. The master's HA address comes
from ``haMasterAddress`` or from the NameServer (the REGISTER_BROKER answer's ``haServerAddr``).
Any fault ends the session with one log line (an error when the master refused this slave or the
bytes were invalid: the store keeps only valid records) and a new attempt follows after
``RETRY_INTERVAL_S`` (or the heartbeat interval, if shorter).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from rocketpy.broker.ha.protocol import (
    MAX_TRANSFER_BODY,
    REPORT,
    STATUS_ACCEPTED,
    TRANSFER,
    WELCOME,
    HAProtocolError,
    HARefused,
    check_magic,
    describe_stream_error,
    encode_hello,
)
from rocketpy.broker.store import Store
from rocketpy.broker.store.replica import ReplicaError
from rocketpy.config import StoreConfig

log = logging.getLogger("rocketpy.broker.ha")

RETRY_INTERVAL_S = 5.0
CONNECT_TIMEOUT_S = 3.0


class HAClient:
    """Replicates the master's commitlog into this slave's store.

    Args:
        store: the slave's started store.
        config: store settings (file size, HA intervals).
        broker_name: this slave's brokerName (the master checks it).
        broker_id: this slave's brokerId.
        master_ha_addr: returns the master's HA ``host:port`` when known.

    Attributes:
        master_addr: the HA address of the current or last session.
        connected: a session is running.
        master_offset: the master offset of the last frame received (a heartbeat's is the master's
            transfer point).
        last_error: why the last session ended ("" when none did).
    """

    def __init__(
        self,
        store: Store,
        config: StoreConfig,
        broker_name: str,
        broker_id: int,
        master_ha_addr: Callable[[], str | None],
    ) -> None:
        self.store = store
        self.config = config
        self.broker_name = broker_name
        self.broker_id = broker_id
        self._master_ha_addr = master_ha_addr
        self.master_addr = ""
        self.connected = False
        self.master_offset = 0
        self.last_frame_s = 0.0
        self.last_error = ""
        self.wake = asyncio.Event()

    async def run_routine(self) -> None:
        """Connect, replicate, and reconnect after faults, until cancelled."""
        c = self.config
        retry_s = min(RETRY_INTERVAL_S, c.ha_send_heartbeat_interval / 1000.0)
        while True:
            addr = self._master_ha_addr()
            if addr:
                self.master_addr = addr
                await self._attempt(addr)
            self.wake.clear()
            try:
                async with asyncio.timeout(retry_s):
                    await self.wake.wait()
            except TimeoutError:
                pass

    async def _attempt(self, addr: str) -> None:
        try:
            await self._session(addr)
        except (HARefused, ReplicaError) as e:
            self._failed(logging.ERROR, addr, f"replication stopped: {e}")
        except (HAProtocolError, asyncio.IncompleteReadError, ConnectionError, TimeoutError, OSError) as e:
            self._failed(logging.WARNING, addr, f"connection ended: {describe_stream_error(e)}")
        finally:
            self.connected = False

    def _failed(self, level: int, addr: str, why: str) -> None:
        """Log why a session ended (once while the same reason repeats)."""
        if why != self.last_error:
            log.log(level, "HA: master %s: %s", addr, why)
        self.last_error = why

    async def _session(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(host, int(port))
        beat: asyncio.Task[None] | None = None
        try:
            start = self.store.max_physical_offset
            hello = encode_hello(self.broker_id, self.config.mapped_file_size_commit_log, self.broker_name)
            writer.write(hello + REPORT.pack(start))
            await writer.drain()
            await self._welcome(reader, addr)
            self.connected = True
            self.last_error = ""
            log.info("HA: replicating from master %s from offset %d", addr, start)
            beat = asyncio.ensure_future(self._heartbeat_routine(writer))
            await self._receive(reader, writer)
        finally:
            if beat is not None:
                beat.cancel()
                await asyncio.gather(beat, return_exceptions=True)
            writer.close()

    async def _welcome(self, reader: asyncio.StreamReader, addr: str) -> None:
        timeout_s = self.config.ha_housekeeping_interval / 1000.0
        async with asyncio.timeout(timeout_s):
            magic, status, text_len = WELCOME.unpack(await reader.readexactly(WELCOME.size))
        check_magic(magic, f"{addr} (is it the HA port of this slave's master?)")
        async with asyncio.timeout(timeout_s):
            text = (await reader.readexactly(text_len)).decode(errors="replace")
        if status != STATUS_ACCEPTED:
            raise HARefused(f"the master refused this slave: {text}")

    async def _receive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        timeout_s = self.config.ha_housekeeping_interval / 1000.0
        store = self.store
        while True:
            async with asyncio.timeout(timeout_s):
                head = await reader.readexactly(TRANSFER.size)
            offset, size = TRANSFER.unpack(head)
            if not 0 <= size <= MAX_TRANSFER_BODY:
                raise HAProtocolError(f"garbled transfer frame: body size {size}")
            mine = store.max_physical_offset
            if offset != mine:
                raise HAProtocolError(
                    f"the master sent bytes for offset {offset} but this slave is at {mine}"
                )
            self.master_offset = offset
            self.last_frame_s = time.monotonic()
            if size == 0:
                continue
            async with asyncio.timeout(timeout_s):
                body = await reader.readexactly(size)
            new_max = await store.append_replica(offset, body)
            self.master_offset = offset + size
            writer.write(REPORT.pack(new_max))
            if writer.transport.get_write_buffer_size() > 64 * REPORT.size:
                await writer.drain()

    async def _heartbeat_routine(self, writer: asyncio.StreamWriter) -> None:
        interval_s = self.config.ha_send_heartbeat_interval / 1000.0
        while True:
            await asyncio.sleep(interval_s)
            writer.write(REPORT.pack(self.store.max_physical_offset))
            await writer.drain()

    def status(self) -> dict[str, Any]:
        """Where replication stands (for runtime info and clusterList)."""
        return {
            "masterHaAddr": self.master_addr,
            "connected": self.connected,
            "slaveMaxOffset": self.store.max_physical_offset,
            "masterOffset": self.master_offset,
            "secondsSinceFrame": round(time.monotonic() - self.last_frame_s, 3) if self.last_frame_s else -1,
            "lastError": self.last_error,
        }
