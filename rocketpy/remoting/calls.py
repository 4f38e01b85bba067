"""Outgoing calls of a ``Channel``: requests with a response future, oneway requests, write waits.

``CallsMixin`` owns request numbering (opaque), the per-connection bound on pending calls and the
wait for a peer that does not read; ``Channel`` (connection.py) supplies the state it uses. Kept
apart so the connection module stays about receiving, dispatching and closing.

``start_call`` (a call numbered, written and tracked: every request a client makes) has a compiled
twin in ``_turn.pyx``, beside the read turn that completes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.errors import MQClientError, RemotingConnectError, RemotingTimeoutError
from rocketpy.limits import MAX_OPAQUE, MAX_PENDING_REQUESTS_PER_CONNECTION
from rocketpy.protocol.codes import code_name
from rocketpy.remoting.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand

if TYPE_CHECKING:
    from rocketpy.remoting.pending import PendingRequests


@twin
def start_call(channel: CallsMixin, cmd: RemotingCommand, timeout: float) -> asyncio.Future[RemotingCommand]:
    """Number ``cmd``, write it on ``channel`` (``Channel.send``) and track its response future until
    ``timeout`` seconds (``PendingRequests.add``)."""
    opaque = cmd.opaque = channel._new_opaque()
    cmd.flag &= ~(FLAG_RESPONSE | FLAG_ONEWAY)
    cmd.serialize_type = channel.serialize_type
    if channel.signer is not None:
        channel.signer(cmd)
    future: asyncio.Future[RemotingCommand] = channel._loop.create_future()
    channel.send(cmd)
    if channel.closed:  # the write itself can close the connection (peer not reading)
        channel._check_open(cmd)
    channel._pending.add(opaque, future, cmd.code, timeout)
    return future


class CallsMixin:
    """The calling side of a connection (mixed into ``Channel``)."""

    remote_addr: str
    closed: bool
    close_reason: str | None
    _loop: asyncio.AbstractEventLoop
    _pending: PendingRequests
    _next_opaque: int
    serialize_type: int
    signer: Callable[[RemotingCommand], None] | None
    _write_paused: bool
    _drain_waiters: list[asyncio.Future[None]]

    def send(self, cmd: RemotingCommand) -> None:
        """Write ``cmd`` without waiting (``Channel.send``)."""
        raise NotImplementedError

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """Send ``cmd`` as a oneway request (no response expected).

        Raises:
            RemotingConnectError: the connection is closed.
        """
        self._check_open(cmd)
        cmd.opaque = self._new_opaque()
        cmd.flag = (cmd.flag & ~FLAG_RESPONSE) | FLAG_ONEWAY
        cmd.serialize_type = self.serialize_type
        if self.signer is not None:
            self.signer(cmd)
        self.send(cmd)

    def invoke_future(self, cmd: RemotingCommand, timeout: float) -> asyncio.Future[RemotingCommand]:
        """Send request ``cmd`` now and return a future of its response (no coroutine frame).

        The future fails with ``RemotingTimeoutError`` after ``timeout`` seconds, or with
        ``RemotingConnectError`` when the connection closes first. A cancelled future's table
        entry is dropped by its response or its deadline, whichever comes first. When the peer is
        not reading (write pressure), the call waits for it inside a task (``_call_when_writable``).

        Raises:
            RemotingConnectError: the connection is closed.
            MQClientError: too many requests are already pending on this connection.
        """
        if self.closed:
            self._check_open(cmd)
        if len(self._pending) >= MAX_PENDING_REQUESTS_PER_CONNECTION:
            self._refuse(cmd)
        if self._write_paused:
            return asyncio.ensure_future(self._call_when_writable(cmd, timeout))
        return start_call(self, cmd, timeout)

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        """Send request ``cmd`` (``invoke_future``) and return its response, whatever its code; the
        call's table entry is dropped when this returns or is cancelled.

        Raises:
            RemotingTimeoutError: no response within ``timeout`` seconds.
            RemotingConnectError: the connection is closed, or closes before the response.
            MQClientError: too many requests are already pending on this connection.
        """
        future = self.invoke_future(cmd, timeout)
        try:
            return await future
        finally:
            self._pending.discard(cmd.opaque)

    async def _call_when_writable(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        """``invoke_future``'s call under write pressure: made once the peer reads, within ``timeout``."""
        timeout = await self.wait_writable(timeout, cmd.code)
        future = start_call(self, cmd, timeout)
        try:
            return await future
        finally:
            self._pending.discard(cmd.opaque)

    def _refuse(self, cmd: RemotingCommand) -> None:
        raise MQClientError(
            f"{len(self._pending)} requests are already pending on {self.remote_addr}; "
            f"{code_name(cmd.code)} refused — slow down or wait for responses"
        )

    async def wait_writable(self, timeout: float, code: int) -> float:  # noqa: ASYNC109
        """Wait until the peer reads what we wrote; return the time left of ``timeout``.

        Raises:
            RemotingTimeoutError: still not writable after ``timeout`` seconds.
            RemotingConnectError: the connection closed meanwhile.
        """
        start = self._loop.time()
        while self._write_paused:
            self._check_open(code=code)
            if len(self._drain_waiters) >= MAX_PENDING_REQUESTS_PER_CONNECTION:
                raise MQClientError(f"too many writers waiting for {self.remote_addr}; slow down")
            waiter: asyncio.Future[None] = self._loop.create_future()
            self._drain_waiters.append(waiter)
            left = timeout - (self._loop.time() - start)
            try:
                async with asyncio.timeout(max(left, 0)):
                    await waiter
            except TimeoutError:
                raise RemotingTimeoutError(
                    f"{code_name(code)} to {self.remote_addr} could not be written within {timeout:.3f}s: "
                    "the peer is not reading; check that it is alive, or raise the timeout"
                ) from None
        return max(timeout - (self._loop.time() - start), 0.0)

    def _check_open(self, cmd: RemotingCommand | None = None, code: int | None = None) -> None:
        if self.closed:
            what = code_name(cmd.code if cmd is not None else code or 0)
            raise RemotingConnectError(
                f"cannot send {what} to {self.remote_addr}: connection closed ({self.close_reason})"
            )

    def _new_opaque(self) -> int:
        opaque = self._next_opaque + 1
        if opaque > MAX_OPAQUE:
            opaque = 1
        self._next_opaque = opaque
        return opaque


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.remoting import _turn

    same_signature(start_call)(_turn.start_call)
    same_signature(_turn.start_call)(start_call)
