"""The per-daemon table of request handlers, and how a handler's outcome becomes a response.

A handler takes ``(channel, request)`` and returns a ``RemotingCommand`` (answered inline), ``None``
(nothing is sent) or an awaitable of either (run as a task tracked by the connection). Handler
failures become error responses here: ``HeaderError`` -> INVALID_PARAMETER with its message, any
other exception -> SYSTEM_ERROR with the exception text (logged with its traceback). Every request's
header ``ext`` is checked (``shape.check_ext``) before its handler sees it. Lines about a peer's bad
requests go through the owner's ``PeerLog`` when it has one (rate-limited per peer address).

A handler (or the guard) that asks for a body too long to decode at once (``body.DecodeInSlices``)
gets it decoded a slice at a time in a task (``slices.decode_in_slices``), the connection reading
nothing more meanwhile (``Channel.decoding``), and is run again with the document at hand.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Union

from rocketpy.errors import HeaderError
from rocketpy.protocol.codes import ResponseCode, code_name
from rocketpy.protocol.shape import check_ext
from rocketpy.remoting.body import SLICES, DecodeInSlices
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.peerlog import PeerLog
from rocketpy.remoting.request_stats import RequestStats
from rocketpy.remoting.slices import decode_in_slices

if TYPE_CHECKING:
    from rocketpy.remoting.connection import Channel

log = logging.getLogger("rocketpy.remoting")

HandlerResult = Union[RemotingCommand, None, Awaitable[Union[RemotingCommand, None]]]  # noqa: UP007
Handler = Callable[["Channel", RemotingCommand], HandlerResult]
#: A check run before dispatch (e.g. the ACL): a refusal response, or None to go on.
Guard = Callable[["Channel", RemotingCommand], Union[RemotingCommand, None]]  # noqa: UP007
#: Handles the requests of one read together (one result per request, in order).
RunHandler = Callable[["Channel", list[RemotingCommand]], list[HandlerResult]]


class ProcessorTable:
    """Maps request codes to handlers for one server or client.

    Args:
        owner: a name for remarks and logs (e.g. ``"namesrv"``).
    """

    __slots__ = ("_guard", "_handlers", "_run_handler", "dispatch", "owner", "peer_log", "run_codes", "stats")

    def __init__(self, owner: str, peer_log: PeerLog | None = None) -> None:
        self.owner = owner
        self.peer_log = peer_log
        self._handlers: dict[int, Handler] = {}
        #: responses and latency of the requests served (read by the metrics endpoint)
        self.stats = RequestStats()
        self._guard: Guard | None = None
        #: What a ``Channel`` calls for every request: ``handle``, or the guarded path once a guard
        #: is installed (no cost at all without one).
        self.dispatch: Callable[[Channel, RemotingCommand], HandlerResult] = self.handle
        #: codes whose requests of one read go to ``_run_handler`` together (``handle_run``)
        self.run_codes: frozenset[int] = frozenset()
        self._run_handler: RunHandler | None = None

    def register(self, code: int, handler: Handler) -> None:
        """Register ``handler`` for request ``code``.

        Raises:
            ValueError: a handler is already registered for ``code``.
        """
        code = int(code)
        if code in self._handlers:
            raise ValueError(f"{self.owner}: a processor for {code_name(code)} is already registered")
        self._handlers[code] = handler

    def set_guard(self, guard: Guard | None) -> None:
        """Run ``guard`` before every request's handler (install it before connections open)."""
        self._guard = guard
        self.dispatch = self.handle if guard is None else self._guarded

    def _guarded(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        try:
            refusal = self._refusal(channel, request)  # the header shape is checked there
        except DecodeInSlices as pending:
            return self._in_slices(channel, pending, lambda: self._guarded_again(channel, request))
        return refusal if refusal is not None else self._handle(channel, request, None)

    def _guarded_again(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        refusal = self._refusal(channel, request)
        return refusal if refusal is not None else self._handle(channel, request, None)

    def _refusal(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Why ``request`` goes no further: a bad header shape or the guard's answer (None: it goes on).

        Raises:
            DecodeInSlices: the guard reads a body to be decoded in slices first.
        """
        try:
            if request.ext:
                check_ext(request.ext)
            if self._guard is None:
                return None
            SLICES.allowed = True
            try:
                return self._guard(channel, request)
            finally:
                SLICES.allowed = False
        except DecodeInSlices:
            raise
        except Exception as exc:
            return self.error_response(channel, request, exc)

    def _in_slices(
        self, channel: Channel, pending: DecodeInSlices, again: Callable[[], HandlerResult]
    ) -> Awaitable[RemotingCommand | None]:
        """A task's work: decode ``pending``'s body a slice at a time, then run ``again`` (the guard
        and handler) with the document at hand. The connection starts nothing else and reads
        nothing more until it ends (``Channel.decoding``, counted from now: requests after this one
        in the same read wait)."""
        channel.decoding += 1
        return self._decode_then(channel, pending, again)

    async def _decode_then(
        self, channel: Channel, pending: DecodeInSlices, again: Callable[[], HandlerResult]
    ) -> RemotingCommand | None:
        try:
            doc = await decode_in_slices(pending.body, pending.serialize_type, pending.what)
            SLICES.predecoded = (pending.body, pending.serialize_type, doc)
            try:
                result = again()
            finally:
                SLICES.predecoded = None
        finally:
            channel.decoding -= 1
        if inspect.isawaitable(result):
            result = await result
        return result

    def register_run(self, codes: frozenset[int], handler: RunHandler) -> None:
        """Have ``handler`` take the requests of ``codes`` that one read brought, all at once (the
        broker's sends: one store append per queue). Each code keeps its single handler too."""
        assert self._run_handler is None and codes <= self._handlers.keys(), "register the codes first"
        self.run_codes = frozenset(int(c) for c in codes)
        self._run_handler = handler

    def handle_run(self, channel: Channel, requests: list[RemotingCommand]) -> list[HandlerResult]:
        """Results of ``requests`` (all of ``run_codes``, in arrival order) from the run handler; if
        it fails, every request gets the error response. A request with a bad header shape or
        refused by the guard gets that answer, and the others go to the run handler."""
        refusals = [self._refusal(channel, r) for r in requests]
        admitted = [r for r, no in zip(requests, refusals, strict=True) if no is None]
        results = iter(self._run(channel, admitted))
        return [no if no is not None else next(results) for no in refusals]

    def _run(self, channel: Channel, requests: list[RemotingCommand]) -> list[HandlerResult]:
        assert self._run_handler is not None
        if not requests:
            return []
        try:
            return self._run_handler(channel, requests)
        except Exception as exc:
            return [self.error_response(channel, r, exc) for r in requests]

    def codes(self) -> list[int]:
        """Return the registered request codes, sorted."""
        return sorted(self._handlers)

    def handle(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        """Run the handler for ``request`` and return its result or an error response.

        The one dispatch of every request a ``Channel`` reads (a response returned here is
        written inline, an awaitable runs as the connection's task).
        """
        return self._handle(channel, request, request.ext)

    def _handle(
        self, channel: Channel, request: RemotingCommand, unchecked_ext: dict[str, Any] | None
    ) -> HandlerResult:
        """``handle``, checking the shape of ``unchecked_ext`` first (None: already checked)."""
        handler = self._handlers.get(request.code)
        if handler is None:
            remark = f"request code {code_name(request.code)} is not supported by {self.owner}"
            self._log(channel, logging.WARNING, "%s from %s", remark, channel.remote_addr)
            return RemotingCommand.response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark)
        try:
            if unchecked_ext:
                check_ext(unchecked_ext)
            SLICES.allowed = True
            try:
                return handler(channel, request)
            finally:
                SLICES.allowed = False
        except DecodeInSlices as pending:
            return self._in_slices(channel, pending, lambda: handler(channel, request))
        except Exception as exc:
            return self.error_response(channel, request, exc)

    def task_response(
        self, channel: Channel, request: RemotingCommand, task: asyncio.Future[Any]
    ) -> RemotingCommand | None:
        """Return the response for a finished (not cancelled) handler task."""
        exc = task.exception()
        if exc is not None:
            return self.error_response(channel, request, exc)
        result = task.result()
        if result is not None and not isinstance(result, RemotingCommand):
            bad = TypeError(f"processor returned {type(result).__name__}, not RemotingCommand")
            return self.error_response(channel, request, bad)
        return result

    def error_response(
        self, channel: Channel, request: RemotingCommand, exc: BaseException
    ) -> RemotingCommand:
        """Return the response for a handler that raised ``exc`` (logging unexpected errors)."""
        if isinstance(exc, HeaderError):
            self._log(
                channel, logging.INFO, "%s from %s: %s", code_name(request.code), channel.remote_addr, exc
            )
            return RemotingCommand.response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        self._log(
            channel,
            logging.ERROR,
            "%s: processor for %s from %s failed",
            self.owner,
            code_name(request.code),
            channel.remote_addr,
            exc_info=exc,
        )
        remark = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return RemotingCommand.response(request, ResponseCode.SYSTEM_ERROR, f"{self.owner} failed: {remark}")

    def _log(
        self, channel: Channel, level: int, msg: str, *args: Any, exc_info: BaseException | None = None
    ) -> None:
        peer = channel.peer
        if self.peer_log is not None and peer is not None:
            self.peer_log.log(peer[0], level, msg, *args, exc_info=exc_info)
        else:
            log.log(level, msg, *args, exc_info=exc_info)
