"""The per-daemon table of request handlers, and how a handler's outcome becomes a response.

A handler takes ``(channel, request)`` and returns a ``RemotingCommand`` (answered inline), ``None``
(nothing is sent) or an awaitable of either (run as a task tracked by the connection). Handler
failures become error responses here: ``HeaderError`` -> INVALID_PARAMETER with its message, any
other exception -> SYSTEM_ERROR with the exception text (logged with its traceback).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Union

from rocketpy.remoting.codes import ResponseCode, code_name
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.headers import HeaderError
from rocketpy.remoting.request_stats import RequestStats

if TYPE_CHECKING:
    from rocketpy.remoting.connection import Channel

log = logging.getLogger("rocketpy.remoting")

HandlerResult = Union[RemotingCommand, None, Awaitable[Union[RemotingCommand, None]]]  # noqa: UP007
Handler = Callable[["Channel", RemotingCommand], HandlerResult]
#: A check run before dispatch (e.g. the ACL): a refusal response, or None to go on.
Guard = Callable[["Channel", RemotingCommand], Union[RemotingCommand, None]]  # noqa: UP007


class ProcessorTable:
    """Maps request codes to handlers for one server or client.

    Args:
        owner: a name for remarks and logs (e.g. ``"namesrv"``).
    """

    __slots__ = ("_guard", "_handlers", "dispatch", "owner", "stats")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._handlers: dict[int, Handler] = {}
        #: responses and latency of the requests served (read by the metrics endpoint)
        self.stats = RequestStats()
        self._guard: Guard | None = None
        #: What a ``Channel`` calls for every request: ``handle``, or the guarded path once a guard
        #: is installed (no cost at all without one).
        self.dispatch: Callable[[Channel, RemotingCommand], HandlerResult] = self.handle

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
        assert self._guard is not None
        try:
            refusal = self._guard(channel, request)
        except Exception as exc:
            return self.error_response(channel, request, exc)
        return refusal if refusal is not None else self.handle(channel, request)

    def codes(self) -> list[int]:
        """Return the registered request codes, sorted."""
        return sorted(self._handlers)

    def handle(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        """Run the handler for ``request`` and return its result or an error response.

        The one dispatch of every request a ``Channel`` reads (a response returned here is
        written inline, an awaitable runs as the connection's task).
        """
        handler = self._handlers.get(request.code)
        if handler is None:
            remark = f"request code {code_name(request.code)} is not supported by {self.owner}"
            log.warning("%s from %s", remark, channel.remote_addr)
            return RemotingCommand.response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark)
        try:
            return handler(channel, request)
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
            log.info("%s from %s: %s", code_name(request.code), channel.remote_addr, exc)
            return RemotingCommand.response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        log.error(
            "%s: processor for %s from %s failed",
            self.owner,
            code_name(request.code),
            channel.remote_addr,
            exc_info=exc,
        )
        remark = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return RemotingCommand.response(request, ResponseCode.SYSTEM_ERROR, f"{self.owner} failed: {remark}")
