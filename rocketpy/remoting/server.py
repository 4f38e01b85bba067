"""``RemotingServer``: listens on one TCP port and serves requests by code.

The server owns its listener, the set of open ``Channel`` objects and the processor table. Staged
shutdown: stop accepting, let running handler tasks finish up to a timeout, then close every
connection (aborting those that do not finish closing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocketpy.errors import RemotingBindError
from rocketpy.limits import MAX_FRAME_BYTES, MAX_INFLIGHT_HANDLERS_PER_CONNECTION, MAX_WRITE_BUFFER_BYTES
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import Guard, Handler, ProcessorTable
from rocketpy.remoting.request_stats import RequestStats

__all__ = ["Channel", "Handler", "RemotingServer"]

log = logging.getLogger("rocketpy.remoting")

_LISTEN_BACKLOG = 1024


class RemotingServer:
    """A TCP server dispatching frames to handlers registered per request code.

    Args:
        host: address to bind (``"127.0.0.1"``, ``"0.0.0.0"``).
        port: port to bind; 0 picks a free one (see ``start``'s result or ``port``).
        name: used in remarks and logs (e.g. ``"namesrv"``).
        max_frame_bytes: larger frames close the offending connection.
        max_inflight_handlers: asynchronous handlers per connection before reading pauses.
        max_write_buffer_bytes: unsent bytes to a peer that does not read before its connection
            is closed.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        name: str = "server",
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_inflight_handlers: int = MAX_INFLIGHT_HANDLERS_PER_CONNECTION,
        max_write_buffer_bytes: int = MAX_WRITE_BUFFER_BYTES,
    ) -> None:
        self.host = host
        self.name = name
        self._requested_port = port
        self._port: int | None = None
        self._max_frame_bytes = max_frame_bytes
        self._max_inflight = max_inflight_handlers
        self._max_write_buffer = max_write_buffer_bytes
        self._processors = ProcessorTable(name)
        self._close_listeners: list[Callable[[Channel], None]] = []
        self._channels: set[Channel] = set()
        self._server: asyncio.Server | None = None

    def register_processor(self, code: int, handler: Handler) -> None:
        """Serve request ``code`` with ``handler`` (see ``rocketpy.remoting.processor``)."""
        self._processors.register(code, handler)

    def set_guard(self, guard: Guard | None) -> None:
        """Check every request with ``guard`` before its handler (e.g. the ACL); call before ``start``."""
        self._processors.set_guard(guard)

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
        log.info("%s listening on %s:%d", self.name, self.host, self._port)
        return self.host, self._port

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Stop accepting, let running handlers finish up to ``timeout`` s, then close connections."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
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
                await asyncio.wait_for(self._server.wait_closed(), max(deadline - loop.time(), 0.1))
            except TimeoutError:
                log.warning("%s: listener did not close within %.1fs", self.name, timeout)
            self._server = None
        log.info("%s stopped", self.name)

    def _new_channel(self) -> Channel:
        channel = Channel(
            self._processors,
            max_frame_bytes=self._max_frame_bytes,
            max_inflight_handlers=self._max_inflight,
            max_write_buffer_bytes=self._max_write_buffer,
            pause_reading_on_write_pressure=True,
            on_close=self._channel_closed,
        )
        self._channels.add(channel)
        return channel

    def _channel_closed(self, channel: Channel) -> None:
        self._channels.discard(channel)
        for listener in self._close_listeners:
            try:
                listener(channel)
            except Exception:
                log.exception("%s: close listener %r failed for %s", self.name, listener, channel.remote_addr)
