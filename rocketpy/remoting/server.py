"""``RemotingServer``: listens on one TCP port and serves requests by code.

The server owns its listener, the set of open ``Channel`` objects and the processor table. Staged
shutdown: stop accepting, let running handler tasks finish up to a timeout, then close every
connection (aborting those that do not finish closing).

Defences against hostile or broken peers (docs/operations.md "Hostile traffic"): connections past
``max_connections`` in total or ``max_connections_per_address`` from one IP are closed at once; a
once-a-second sweep closes connections idle for ``idle_seconds`` (nothing read, nothing running)
and those holding an incomplete frame for ``partial_frame_seconds``; log lines about a peer's
misbehaviour go through one ``PeerLog`` (rate-limited per address).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocketpy.errors import RemotingBindError
from rocketpy.limits import (
    CHANNEL_IDLE_SECONDS,
    DEFAULT_MAX_HEADER_BYTES,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_ADDRESS,
    MAX_FRAME_BYTES,
    MAX_INFLIGHT_HANDLERS_PER_CONNECTION,
    MAX_WRITE_BUFFER_BYTES,
    PARTIAL_FRAME_SECONDS,
)
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.peerlog import PeerLog
from rocketpy.remoting.processor import Guard, Handler, ProcessorTable, RunHandler
from rocketpy.remoting.request_stats import RequestStats

__all__ = ["Channel", "Handler", "RemotingServer"]

log = logging.getLogger("rocketpy.remoting")

_LISTEN_BACKLOG = 1024
_SWEEP_INTERVAL_SECONDS = 1.0


class RemotingServer:
    """A TCP server dispatching frames to handlers registered per request code.

    Args:
        host: address to bind (``"127.0.0.1"``, ``"0.0.0.0"``).
        port: port to bind; 0 picks a free one (see ``start``'s result or ``port``).
        name: used in remarks and logs (e.g. ``"namesrv"``).
        max_frame_bytes: larger frames close the offending connection.
        max_header_bytes: larger frame headers close the offending connection.
        max_inflight_handlers: asynchronous handlers per connection before reading pauses.
        max_write_buffer_bytes: unsent bytes to a peer that does not read before its connection
            is closed.
        max_connections: open connections accepted in total; more are closed at once.
        max_connections_per_address: open connections accepted from one peer IP address.
        idle_seconds: a connection that sent nothing for this long with nothing running for it
            is closed (0: never).
        partial_frame_seconds: a connection holding an incomplete frame this long is closed
            (0: never).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        name: str = "server",
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
        max_inflight_handlers: int = MAX_INFLIGHT_HANDLERS_PER_CONNECTION,
        max_write_buffer_bytes: int = MAX_WRITE_BUFFER_BYTES,
        max_connections: int = MAX_CONNECTIONS,
        max_connections_per_address: int = MAX_CONNECTIONS_PER_ADDRESS,
        idle_seconds: float = CHANNEL_IDLE_SECONDS,
        partial_frame_seconds: float = PARTIAL_FRAME_SECONDS,
    ) -> None:
        self.host = host
        self.name = name
        self._requested_port = port
        self._port: int | None = None
        self._max_frame_bytes = max_frame_bytes
        self._max_header_bytes = max_header_bytes
        self._max_inflight = max_inflight_handlers
        self._max_write_buffer = max_write_buffer_bytes
        self._max_connections = max_connections
        self._max_per_address = max_connections_per_address
        self._idle_seconds = idle_seconds
        self._partial_frame_seconds = partial_frame_seconds
        #: Rate-limited lines about misbehaving peers (shared by every connection and handler).
        self.peer_log = PeerLog(log)
        self._processors = ProcessorTable(name, self.peer_log)
        self._close_listeners: list[Callable[[Channel], None]] = []
        self._channels: set[Channel] = set()
        self._per_address: dict[str, int] = {}
        self._server: asyncio.Server | None = None
        self._sweep_task: asyncio.Task[None] | None = None
        #: Connections closed by each defence ("max_connections", "per_address", "idle", "partial").
        self.refused: dict[str, int] = {"max_connections": 0, "per_address": 0, "idle": 0, "partial": 0}

    def register_processor(self, code: int, handler: Handler) -> None:
        """Serve request ``code`` with ``handler`` (see ``rocketpy.remoting.processor``)."""
        self._processors.register(code, handler)

    def served_codes(self) -> list[int]:
        """The request codes this server serves, sorted."""
        return self._processors.codes()

    def set_guard(self, guard: Guard | None) -> None:
        """Check every request with ``guard`` before its handler (e.g. the ACL); call before ``start``."""
        self._processors.set_guard(guard)

    def register_run_processor(self, codes: frozenset[int], handler: RunHandler) -> None:
        """Serve the requests of ``codes`` one read brought with ``handler``, together
        (``ProcessorTable.register_run``)."""
        self._processors.register_run(codes, handler)

    def add_close_listener(self, listener: Callable[[Channel], None]) -> None:
        """Call ``listener(channel)`` once for every connection that closes."""
        self._close_listeners.append(listener)

    @property
    def port(self) -> int:
        """The bound port (after ``start``)."""
        if self._port is None:
            raise RuntimeError(f"{self.name}: server not started")
        return self._port

    @property
    def request_stats(self) -> RequestStats:
        """Responses and latency of the requests this server answered (for the metrics endpoint)."""
        return self._processors.stats

    @property
    def channels(self) -> frozenset[Channel]:
        """The open connections."""
        return frozenset(self._channels)

    async def start(self) -> tuple[str, int]:
        """Bind and start accepting; return ``(host, port)`` actually bound.

        Raises:
            RemotingBindError: the address cannot be bound (port in use, bad host, no permission).
        """
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                self._new_channel,
                self.host,
                self._requested_port,
                reuse_address=True,
                backlog=_LISTEN_BACKLOG,
            )
        except OSError as exc:
            raise RemotingBindError(
                f"{self.name} cannot listen on {self.host}:{self._requested_port}: {exc.strerror or exc}; "
                "choose another listenPort or stop the process using it"
            ) from exc
        sockname = self._server.sockets[0].getsockname()
        self._port = int(sockname[1])
        self._sweep_task = loop.create_task(self._sweep_routine(), name=f"{self.name}-channel-sweep")
        log.info("%s listening on %s:%d", self.name, self.host, self._port)
        return self.host, self._port

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Stop accepting, let running handlers finish up to ``timeout`` s, then close connections."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._sweep_task is not None:
            self._sweep_task.cancel()
            await asyncio.gather(self._sweep_task, return_exceptions=True)
            self._sweep_task = None
        if self._server is not None:
            self._server.close()
        tasks = {task for channel in self._channels for task in channel.tasks}
        if tasks:
            await asyncio.wait(tasks, timeout=max(deadline - loop.time(), 0))
        channels = list(self._channels)
        for channel in channels:
            channel.close(f"{self.name} shutting down")
        left = max(deadline - loop.time(), 0.1)
        await asyncio.gather(*(channel.wait_closed(left) for channel in channels))
        if self._server is not None:
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0.1)):
                    await self._server.wait_closed()
            except TimeoutError:
                log.warning("%s: listener did not close within %.1fs", self.name, timeout)
            self._server = None
        log.info("%s stopped", self.name)

    def _new_channel(self) -> Channel:
        channel = Channel(
            self._processors,
            max_frame_bytes=self._max_frame_bytes,
            max_header_bytes=self._max_header_bytes,
            max_inflight_handlers=self._max_inflight,
            max_write_buffer_bytes=self._max_write_buffer,
            pause_reading_on_write_pressure=True,
            on_close=self._channel_closed,
            on_open=self._channel_opened,
            peer_log=self.peer_log,
        )
        self._channels.add(channel)
        return channel

    def _channel_opened(self, channel: Channel) -> None:
        ip = channel.peer[0] if channel.peer is not None else "?"
        count = self._per_address.get(ip, 0) + 1
        self._per_address[ip] = count
        channel.attrs["_counted_ip"] = ip
        if len(self._channels) > self._max_connections:
            self._refuse(channel, "max_connections", f"over maxConnections={self._max_connections}")
        elif count > self._max_per_address:
            self._refuse(
                channel, "per_address", f"over maxConnectionsPerAddress={self._max_per_address} from {ip}"
            )

    def _refuse(self, channel: Channel, defence: str, why: str) -> None:
        self.refused[defence] += 1
        channel.abort(f"{self.name} refuses the connection: {why}")

    async def _sweep_routine(self) -> None:
        """Once a second: close idle and slow-loris connections, write the peer log's summaries."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL_SECONDS)
            self._sweep(loop.time())
            self.peer_log.flush()

    def _sweep(self, now: float) -> None:
        partial_limit, idle_limit = self._partial_frame_seconds, self._idle_seconds
        for channel in list(self._channels):
            since = channel.partial_since
            if partial_limit and since is not None and now - since > partial_limit:
                self.refused["partial"] += 1
                channel.abort(
                    f"an incomplete frame waited over {partial_limit:g}s (partialFrameTimeoutSeconds)"
                )
            elif (
                idle_limit
                and now - channel.last_read_time > idle_limit
                and not channel.tasks_running
                and not channel.pending_count
            ):
                self.refused["idle"] += 1
                # abort, not close: a peer that stopped reading would hold a graceful close open
                channel.abort(f"idle for over {idle_limit:g}s (serverChannelMaxIdleTimeSeconds)")

    def _channel_closed(self, channel: Channel) -> None:
        self._channels.discard(channel)
        ip = channel.attrs.pop("_counted_ip", None)
        if ip is not None:
            left = self._per_address[ip] - 1
            if left:
                self._per_address[ip] = left
            else:
                del self._per_address[ip]
        for listener in self._close_listeners:
            try:
                listener(channel)
            except Exception:
                log.exception("%s: close listener %r failed for %s", self.name, listener, channel.remote_addr)
