"""A 5.x client as the broker's processors see it: one stand-in ``Channel`` per gRPC client.

The endpoint answers RPCs by calling the broker's own request processors, as RocketMQ's proxy
does in its "local" mode: each RPC becomes the remoting command the processor already serves
(SEND_MESSAGE_V2, PULL_MESSAGE, END_TRANSACTION, ...), so a message sent over gRPC takes the one
send path, and groups, offsets, holds and transaction checks are the same objects whichever
protocol a client speaks. The processors, the consumer and producer tables and long polling keep
a ``Channel`` per client; ``GrpcChannel`` is that channel for a gRPC client:

* ``call(handler, request)`` runs a processor and returns its answer, also when the processor
  holds the request and answers later through ``send`` (a long-polling pull);
* ``send_oneway`` is how the broker talks to the client unasked (the transaction check): it goes
  to the client's Telemetry stream through ``on_oneway``;
* ``close`` ends every call still waiting; the tables drop the channel as for a closed connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from rocketpy.errors import RemotingConnectError
from rocketpy.protocol.codes import ResponseCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import Handler, HandlerResult, ProcessorTable, RunHandler

#: A held request (long polling) of one client waits at most this many in total.
MAX_WAITING_PER_CLIENT = 4096


class GrpcChannel(Channel):
    """The channel of one gRPC client (one ``x-mq-client-id``).

    Args:
        processors: counts held requests' answers (``count_response``); the endpoint's own table.
        client_id: the client's id.
        peer: the client's ``(ip, port)`` (its last call's connection).
        language: ``x-mq-language`` (shown by the consumer-connection admin call and metrics).
        on_oneway: takes a command the broker sends the client unasked (CHECK_TRANSACTION_STATE).
        on_close: the broker's close listener (drops the client's held pulls and group entries).
    """

    def __init__(
        self,
        processors: ProcessorTable,
        client_id: str,
        peer: tuple[str, int],
        language: str,
        on_oneway: Callable[[GrpcChannel, RemotingCommand], None],
        on_close: Callable[[Channel], None] | None = None,
    ) -> None:
        super().__init__(processors, remote_addr=f"{peer[0]}:{peer[1]}", on_close=on_close)
        # No frame is ever read here: drop the decoder at once (its msgpack buffer held ~48 KiB
        # resident per client; 20,000 sessions would have kept a GiB)
        self._decoder = None  # type: ignore[assignment]
        self.peer = peer
        self.client_id = client_id
        self.language = language
        self.attrs["client_id"] = client_id
        self.attrs["protocol"] = "grpc"
        self._on_oneway = on_oneway
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}

    async def call(self, handler: Handler, request: RemotingCommand) -> RemotingCommand:
        """Run ``handler`` on ``request`` and return its answer (awaiting a held request's).

        Raises:
            RemotingConnectError: the client went away before a held request was answered.
        """
        self._check_open(request)
        if len(self._waiting) >= MAX_WAITING_PER_CLIENT:
            return RemotingCommand.response(
                request,
                ResponseCode.SYSTEM_BUSY,
                f"this client has {MAX_WAITING_PER_CLIENT} calls waiting already; retry later",
            )
        request.opaque = self._new_opaque()
        result: Any = handler(self, request)
        if isinstance(result, RemotingCommand):
            return result
        if result is not None:
            return await _awaited(result)
        waiter: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting[request.opaque] = waiter
        try:
            return await waiter
        finally:
            self._waiting.pop(request.opaque, None)

    def run(self, handler: RunHandler, requests: list[RemotingCommand]) -> list[HandlerResult]:
        """``handler``'s results for ``requests``, handled together (the sends of one tick).

        Raises:
            RemotingConnectError: the client went away.
        """
        for request in requests:
            self._check_open(request)
            request.opaque = self._new_opaque()
        return handler(self, requests)

    def send(self, cmd: RemotingCommand) -> None:
        """A held request's answer (the processor's later ``send``)."""
        waiter = self._waiting.get(cmd.opaque)
        if waiter is not None and not waiter.done():
            waiter.set_result(cmd)

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """Hand a request the broker sends unasked to the client's Telemetry stream.

        Raises:
            RemotingConnectError: the client is gone.
        """
        self._check_open(cmd)
        self._on_oneway(self, cmd)

    def close(self, reason: str) -> None:
        """The client went away: fail its waiting calls; later calls raise."""
        self._teardown(reason)
        error = RemotingConnectError(f"gRPC client {self.client_id} went away: {reason}")
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(error)
        self._waiting.clear()

    def abort(self, reason: str) -> None:
        """As ``close`` (there is no transport to abort)."""
        self.close(reason)


async def _awaited(result: Awaitable[RemotingCommand | None]) -> RemotingCommand:
    answer = await result
    assert answer is not None, "an awaitable handler answers with a command"
    return answer
