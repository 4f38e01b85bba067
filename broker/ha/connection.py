"""One slave's connection on the master's HA port (RocketMQ's ``HAConnection``).

Owns the handshake checks and the two halves of a session: reading the slave's 8-byte reports (its
max commitlog offset: the acknowledgement SYNC_MASTER waits for) and transferring the master's raw
commitlog from the slave's reported offset on, in chunks of at most ``haTransferBatchSize`` bytes
that never cross a file end, with an empty heartbeat chunk every ``haSendHeartbeatInterval`` when
idle. A session ends on any protocol error, a slave silent for ``haHousekeepingInterval``, or
shutdown; the error is logged once and the socket closed. Refusals are answered with a WELCOME
saying why, so the slave can log it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from rocketpy.broker.ha.protocol import (
    HELLO,
    MAX_NAME_BYTES,
    REPORT,
    STATUS_ACCEPTED,
    STATUS_REFUSED,
    TRANSFER,
    VERSION,
    HAProtocolError,
    HARefused,
    check_magic,
    describe_stream_error,
    encode_welcome,
)
from rocketpy.broker.store.replica import ReplicaError
from rocketpy.record import BLANK_MAGIC, MESSAGE_MAGIC

if TYPE_CHECKING:
    from rocketpy.broker.ha.service import HAService

log = logging.getLogger("rocketpy.broker.ha")

HANDSHAKE_TIMEOUT_S = 5.0


class HAConnection:
    """The master's side of one slave.

    Attributes:
        broker_id: the slave's brokerId (from HELLO).
        remote_addr: ``host:port`` of the slave's socket.
        acked_offset: the slave's last reported max commitlog offset.
        transferred_offset: where the next chunk to the slave starts.
        last_report_s: monotonic time of the last report.
    """

    def __init__(
        self, service: HAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._service = service
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self.remote_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker_id = -1
        self.acked_offset = 0
        self.transferred_offset = 0
        self.last_report_s = time.monotonic()
        self.wake = asyncio.Event()

    async def serve(self) -> None:
        """Run the session until it ends; never raises for the peer's faults (they are logged)."""
        try:
            await self._handshake()
        except HARefused as e:
            log.error("HA: refused slave at %s: %s", self.remote_addr, e)
            self._writer.write(encode_welcome(STATUS_REFUSED, str(e)))
            await self._close()
            return
        except (HAProtocolError, asyncio.IncompleteReadError, ConnectionError, TimeoutError) as e:
            log.warning("HA: closing %s during the handshake: %s", self.remote_addr, describe_stream_error(e))
            await self._close()
            return
        self._service.attach(self)
        if self._service.listeners:
            self._service.notify(self)
        log.info("HA: slave %d at %s connected, transfer from offset %d", self.broker_id, self.remote_addr,
                 self.transferred_offset)  # fmt: skip
        try:
            await self._run_halves()
        finally:
            self._service.detach(self)
            await self._close()

    async def _handshake(self) -> None:
        r, svc = self._reader, self._service
        async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
            fixed = await r.readexactly(HELLO.size)
        magic, version, broker_id, file_size, name_len = HELLO.unpack(fixed)
        check_magic(magic, f"the peer at {self.remote_addr}")
        if name_len > MAX_NAME_BYTES:
            raise HAProtocolError(f"broker name of {name_len} bytes in HELLO")
        async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
            name = (await r.readexactly(name_len)).decode(errors="replace")
            (offset,) = REPORT.unpack(await r.readexactly(REPORT.size))
        self.broker_id = broker_id
        if version != VERSION:
            raise HARefused(f"HA protocol version {version}; this master speaks {VERSION}")
        if name != svc.broker_name:
            raise HARefused(f"the slave belongs to brokerName {name} but this master is {svc.broker_name}")
        if broker_id <= 0:
            raise HARefused(f"brokerId {broker_id} is not a slave id (slaves use brokerId >= 1)")
        if file_size != svc.file_size:
            raise HARefused(
                f"mappedFileSizeCommitLog differs: slave {file_size}, master {svc.file_size}; "
                "use the master's value on the slave (with an empty slave store)"
            )
        refused = svc.refusal() if svc.refusal is not None else None
        if refused:
            raise HARefused(refused)
        other = svc.connections.get(broker_id)
        if other is not None and svc.replace_same_id:  # controller mode: the same replica reconnected
            log.info("HA: slave %d reconnected from %s; dropping its old session from %s", broker_id,
                     self.remote_addr, other.remote_addr)  # fmt: skip
            svc.detach(other)
            other.abort()
        elif other is not None:
            raise HARefused(f"another slave with brokerId {broker_id} is connected from {other.remote_addr}")
        self._check_start(offset)
        self.acked_offset = self.transferred_offset = offset
        self._writer.write(encode_welcome(STATUS_ACCEPTED, ""))
        await self._writer.drain()

    def _check_start(self, offset: int) -> None:
        """Refuse a slave whose log cannot continue from the master's at ``offset``."""
        store = self._service.store
        max_off, min_off = store.max_physical_offset, store.min_physical_offset
        if offset > max_off:
            raise HARefused(
                f"the slave's commitlog ends at {offset}, ahead of the master's ({max_off}): it diverged; "
                "move the slave's store aside and start it empty"
            )
        if offset < min_off:
            raise HARefused(
                f"the slave's commitlog ends at {offset} but the master keeps bytes from {min_off} on only; "
                "start the slave with an empty store copied from the master's newest files"
            )
        if offset == max_off:
            return
        head = store.read_commitlog(offset, 8)
        magic = int.from_bytes(head[4:8], "big") if head and len(head) == 8 else 0
        if magic not in (MESSAGE_MAGIC, BLANK_MAGIC):
            raise HARefused(
                f"the slave's commitlog ends at {offset}, which is not a record boundary of the master's: "
                "it diverged; move the slave's store aside and start it empty"
            )

    async def _run_halves(self) -> None:
        reports = asyncio.ensure_future(self._read_reports())
        transfer = asyncio.ensure_future(self._transfer())
        try:
            done, _ = await asyncio.wait((reports, transfer), return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                e = task.exception()
                if e is not None:
                    log.warning("HA: slave %d at %s disconnected: %s", self.broker_id, self.remote_addr,
                                describe_stream_error(e))  # fmt: skip
        finally:
            for task in (reports, transfer):
                task.cancel()
            await asyncio.gather(reports, transfer, return_exceptions=True)

    async def _read_reports(self) -> None:
        svc = self._service
        timeout_s = svc.config.ha_housekeeping_interval / 1000.0
        while True:
            async with asyncio.timeout(timeout_s):
                raw = await self._reader.readexactly(REPORT.size)
            (offset,) = REPORT.unpack(raw)
            if offset < self.acked_offset or offset > svc.store.max_physical_offset:
                raise HAProtocolError(f"garbled report: offset {offset} (last {self.acked_offset})")
            self.acked_offset = offset
            self.last_report_s = time.monotonic()
            svc.on_report()
            if svc.listeners:
                svc.notify(self)

    async def _transfer(self) -> None:
        svc, w = self._service, self._writer
        store, batch = svc.store, svc.config.ha_transfer_batch_size
        heartbeat_s = svc.config.ha_send_heartbeat_interval / 1000.0
        while True:
            off = self.transferred_offset
            try:
                data = store.read_commitlog(off, batch)
            except ReplicaError as e:
                raise HAProtocolError(str(e)) from e
            if data:
                w.write(TRANSFER.pack(off, len(data)))
                w.write(data)
                self.transferred_offset = off + len(data)
                await w.drain()
                continue
            self.wake.clear()
            if store.max_physical_offset > off:
                continue
            try:
                async with asyncio.timeout(heartbeat_s):
                    await self.wake.wait()
            except TimeoutError:
                w.write(TRANSFER.pack(off, 0))
                await w.drain()

    def abort(self) -> None:
        """Drop the connection at once (shutdown)."""
        self._writer.transport.abort()

    async def _close(self) -> None:
        self._writer.close()
        try:
            async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
                await self._writer.wait_closed()
        except (ConnectionError, TimeoutError):
            pass
