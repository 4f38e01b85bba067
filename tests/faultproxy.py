"""``FaultProxy``: an asyncio TCP proxy that injects network faults between a client and a daemon.

Modes (``proxy.mode``, switchable at any time, applied to every connection through the proxy):

- ``pass``: forward both ways;
- ``drop``: discard what the client sends (requests vanish, the connection stays up);
- ``stall``: hold what the client sends until the mode changes, then forward it in order;
- ``slow``: forward the client's bytes ``slow_chunk`` bytes at a time, ``slow_delay`` s apart;
- ``duplicate``: forward every complete frame from the client twice (the daemon sees each
  request twice with the same opaque, as after a retransmission by a middlebox).

``reset()`` aborts every connection through the proxy at once (both sides see a reset).

A broker behind a proxy: bind the broker to ``127.0.0.2`` with ``brokerIP1=127.0.0.1``; it
advertises ``127.0.0.1:PORT``, where ``FaultProxy.in_front_of`` listens and forwards to
``127.0.0.2:PORT`` (``start_broker_behind_proxy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from pathlib import Path
from typing import Any

from tests.daemons import Daemon, start_broker

MODES = ("pass", "drop", "stall", "slow", "duplicate")
_READ_BYTES = 65536


class FaultProxy:
    """Forwards ``listen`` -> ``target`` with the faults of ``mode``.

    Attributes:
        mode: one of ``MODES``.
        slow_chunk / slow_delay: the pace of ``slow``.
        connections: connections accepted so far.
        resets: connections aborted by ``reset``.
    """

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.listen = listen
        self.target = target
        self.mode = "pass"
        self.slow_chunk = 16
        self.slow_delay = 0.002
        self.connections = 0
        self.resets = 0
        self._server: asyncio.Server | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._mode_changed = asyncio.Event()

    @property
    def addr(self) -> str:
        """``"host:port"`` clients connect to."""
        return f"{self.listen[0]}:{self.listen[1]}"

    def set_mode(self, mode: str) -> None:
        """Switch every connection to ``mode``."""
        assert mode in MODES, mode
        self.mode = mode
        self._mode_changed.set()
        self._mode_changed = asyncio.Event()

    async def start(self) -> FaultProxy:
        """Listen (port 0 picks one; ``listen`` is updated)."""
        self._server = await asyncio.start_server(self._accept, self.listen[0], self.listen[1])
        self.listen = (self.listen[0], int(self._server.sockets[0].getsockname()[1]))
        return self

    def reset(self) -> None:
        """Abort every open connection through the proxy (client and daemon side)."""
        for client_w, server_w in list(self._pairs):
            client_w.transport.abort()
            server_w.transport.abort()
            self.resets += 1
        self._pairs.clear()

    async def close(self) -> None:
        """Stop listening and abort every connection."""
        if self._server is not None:
            self._server.close()
        self.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.transport.abort()
            return
        pair = (client_w, server_w)
        self._pairs.add(pair)
        upstream = asyncio.ensure_future(self._client_to_server(client_r, server_w))
        downstream = asyncio.ensure_future(self._pipe(server_r, client_w))
        for task in (upstream, downstream):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._pairs.discard(pair)
            for task in (upstream, downstream):
                task.cancel()
            client_w.transport.abort()
            server_w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(_READ_BYTES):
                writer.write(data)
                await writer.drain()

    async def _client_to_server(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        buf = bytearray()
        with contextlib.suppress(OSError):
            while data := await reader.read(_READ_BYTES):
                buf += data
                while frame := _take_frame(buf):
                    await self._forward(frame, writer)

    async def _forward(self, frame: bytes, writer: asyncio.StreamWriter) -> None:
        while self.mode == "stall":
            await self._mode_changed.wait()
        mode = self.mode
        if mode == "drop":
            return
        if mode == "slow":
            for i in range(0, len(frame), self.slow_chunk):
                writer.write(frame[i : i + self.slow_chunk])
                await writer.drain()
                await asyncio.sleep(self.slow_delay)
            return
        writer.write(frame * 2 if mode == "duplicate" else frame)
        await writer.drain()


def _take_frame(buf: bytearray) -> bytes | None:
    """Remove and return the first complete frame (4-byte length prefix) of ``buf``, if any."""
    if len(buf) < 4:
        return None
    end = 4 + struct.unpack_from(">I", buf)[0]
    if len(buf) < end:
        return None
    frame = bytes(buf[:end])
    del buf[:end]
    return frame


async def start_broker_behind_proxy(
    tmp_path: Path, namesrv_addr: str, **props: Any
) -> tuple[Daemon, FaultProxy]:
    """A broker bound to 127.0.0.2 advertising 127.0.0.1:PORT, where a ``FaultProxy`` forwards to it.

    The caller terminates the daemon and closes the proxy.
    """
    broker = await asyncio.to_thread(
        start_broker, tmp_path, namesrv_addr, bindAddress="127.0.0.2", brokerIP1="127.0.0.1", **props
    )
    proxy = FaultProxy(("127.0.0.1", broker.port), ("127.0.0.2", broker.port))
    try:
        await proxy.start()
    except BaseException:
        broker.terminate()
        raise
    return broker, proxy
