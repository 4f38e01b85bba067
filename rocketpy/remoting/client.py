"""``RemotingClient``: one shared connection per address, pipelined calls, reconnect on demand.

The client owns a map address -> ``Channel`` and the connect attempts in progress. All callers
of one address share its connection; concurrent callers share one connect attempt. A dropped
connection is forgotten at once (its in-flight calls fail at once, see ``Channel``) and the next
call reconnects. A call's timeout covers connecting too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocketpy.addresses import parse_addr
from rocketpy.errors import MQClientError, RemotingConnectError, RemotingTimeoutError
from rocketpy.limits import MAX_FRAME_BYTES, MAX_HEADER_BYTES
from rocketpy.protocol.codes import code_name
from rocketpy.remoting.codec import header_codec
from rocketpy.remoting.command import SERIALIZE_MSGPACK, RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import Handler, ProcessorTable

log = logging.getLogger("rocketpy.remoting")

_CLOSE_WAIT_S = 1.0


class RemotingClient:
    """Sends requests to servers by address over shared, pipelined connections.

    Args:
        max_frame_bytes: larger incoming frames close the connection.
        max_header_bytes: larger incoming frame headers close the connection (by default only
            the 24-bit length field bounds them: a client trusts the servers it calls more than a
            daemon trusts its peers; the decode limits on maps and arrays apply all the same).
        connect_timeout: seconds one connect attempt may take (the call's timeout also applies).
        name: used in remarks and logs.
        serialize_type: the encoding of the requests sent (``SERIALIZE_MSGPACK``, or
            ``SERIALIZE_JSON`` as RocketMQ's own clients speak).
        signer: called with every request right before it is written (``rocketpy.acl``'s
            ``RequestSigner`` adds the ACL's AccessKey and Signature), or None.
    """

    def __init__(
        self,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_header_bytes: int = MAX_HEADER_BYTES,
        connect_timeout: float = 3.0,
        name: str = "client",
        serialize_type: int = SERIALIZE_MSGPACK,
        signer: Callable[[RemotingCommand], None] | None = None,
    ) -> None:
        if header_codec(serialize_type) is None:
            raise MQClientError(f"serialize type {serialize_type:#x} has no header codec")
        self.connect_timeout = connect_timeout
        self.serialize_type = serialize_type
        self.signer = signer
        self._max_frame_bytes = max_frame_bytes
        self._max_header_bytes = max_header_bytes
        self._processors = ProcessorTable(name)
        self._channels: dict[str, Channel] = {}
        self._connects: dict[str, asyncio.Task[Channel]] = {}
        self._closed = False

    def register_processor(self, code: int, handler: Handler) -> None:
        """Serve request ``code`` sent to us by a server (e.g. NOTIFY_CONSUMER_IDS_CHANGED)."""
        self._processors.register(code, handler)

    def served_codes(self) -> list[int]:
        """The request codes this client serves, sorted."""
        return self._processors.codes()

    def channel(self, addr: str) -> Channel | None:
        """Return the open connection to ``addr``, if any."""
        channel = self._channels.get(addr)
        return channel if channel is not None and not channel.closed else None

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        """Send request ``cmd`` to ``addr`` and return the response, whatever its code.

        Raises:
            RemotingTimeoutError: no response (or no connection) within ``timeout`` seconds.
            RemotingConnectError: cannot connect, or the connection dropped during the call.
            MQClientError: a bad address, or the client is closed.
        """
        channel = self._channels.get(addr)
        if channel is None or channel.closed:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            channel = await self._connected(addr, timeout, cmd.code)
            timeout = deadline - loop.time()
            if timeout <= 0:
                raise self._timeout_error(addr, cmd.code, "connecting used up the call's timeout")
        return await channel.invoke(cmd, timeout)

    def invoke_future(
        self, addr: str, cmd: RemotingCommand, timeout: float
    ) -> asyncio.Future[RemotingCommand]:
        """Like ``invoke``, but return a future of the response (no coroutine frame when connected).

        Errors arrive through the future, except those ``Channel.invoke_future`` raises at once on
        an open connection (too many pending requests).
        """
        channel = self._channels.get(addr)
        if channel is None or channel.closed:
            return asyncio.ensure_future(self.invoke(addr, cmd, timeout))
        return channel.invoke_future(cmd, timeout)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> None:  # noqa: ASYNC109
        """Send ``cmd`` to ``addr`` as a oneway request; returns once it is handed to the socket.

        Raises:
            RemotingTimeoutError: no connection, or the socket not writable, within ``timeout``.
            RemotingConnectError: cannot connect.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        channel = self.channel(addr) or await self._connected(addr, timeout, cmd.code)
        await channel.wait_writable(max(deadline - loop.time(), 0.0), cmd.code)
        channel.send_oneway(cmd)

    def close_channel(self, addr: str) -> None:
        """Close the connection to ``addr`` (its in-flight calls fail at once)."""
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close("closed by the client")

    async def close(self) -> None:
        """Close every connection and cancel connect attempts; the client cannot be used again."""
        self._closed = True
        for task in list(self._connects.values()):
            task.cancel()
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            channel.close("client closed")
        await asyncio.gather(*(channel.wait_closed(_CLOSE_WAIT_S) for channel in channels))

    async def _connected(self, addr: str, timeout: float, code: int) -> Channel:  # noqa: ASYNC109
        if self._closed:
            raise MQClientError(f"cannot send {code_name(code)} to {addr}: the client is closed")
        task = self._connects.get(addr)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(addr))
            self._connects[addr] = task
            task.add_done_callback(lambda t: self._connect_done(addr, t))
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                return await asyncio.shield(task)
        except TimeoutError:
            raise self._timeout_error(addr, code, "connecting took longer than the call's timeout") from None

    def _connect_done(self, addr: str, task: asyncio.Task[Channel]) -> None:
        if self._connects.get(addr) is task:
            del self._connects[addr]
        if not task.cancelled():
            task.exception()  # retrieved: every waiter already got it

    async def _connect(self, addr: str) -> Channel:

        host, port = parse_addr(addr)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, channel = await loop.create_connection(lambda: self._new_channel(addr), host, port)
        except TimeoutError:
            raise RemotingConnectError(
                f"connecting to {addr} timed out after {self.connect_timeout:.1f}s; "
                "check the address and that the server is up"
            ) from None
        except OSError as exc:
            raise RemotingConnectError(
                f"cannot connect to {addr}: {exc.strerror or exc}; check that the server is running "
                "and the address is right"
            ) from exc
        if self._closed:
            channel.close("client closed")
            raise MQClientError(f"cannot use {addr}: the client is closed")
        self._channels[addr] = channel
        log.info("connected to %s", addr)
        return channel

    def _new_channel(self, addr: str) -> Channel:
        channel = Channel(
            self._processors,
            max_frame_bytes=self._max_frame_bytes,
            max_header_bytes=self._max_header_bytes,
            pause_reading_on_write_pressure=False,
            on_close=self._channel_closed,
            remote_addr=addr,
            drop_when_silent=True,
        )
        channel.serialize_type = self.serialize_type
        channel.signer = self.signer
        return channel

    def _channel_closed(self, channel: Channel) -> None:
        if self._channels.get(channel.remote_addr) is channel:
            del self._channels[channel.remote_addr]

    @staticmethod
    def _timeout_error(addr: str, code: int, why: str) -> RemotingTimeoutError:
        return RemotingTimeoutError(
            f"{code_name(code)} to {addr} timed out: {why}; check that the server is up, or raise the timeout"
        )
