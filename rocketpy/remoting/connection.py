"""``Channel``: one TCP connection, used by both ``RemotingServer`` and ``RemotingClient``.

A channel owns the connection's frame decoder, its table of pending requests (opaque -> future
with a deadline, see ``pending.py``), the tasks of its asynchronous handlers,
and its flow-control state. Requests it receives go to a ``ProcessorTable``; a handler's inline
response is written before the next read (all responses of one read leave in one write), an
awaitable result runs as a task tracked here and cancelled when the connection closes. One read's
turn (decode, dispatch, answer, write) is ``turn.serve_turn``, compiled in ``_turn.pyx``.

Invariants: every pending request ends exactly once (response, timeout, or connection close — the
close fails all of them at once); the close listener runs once; a malformed stream aborts only this
connection; reading pauses while too many handler tasks run, and (on the server side) while the
peer is not reading what we write.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from time import perf_counter
from typing import Any, cast

from rocketpy.errors import RemotingConnectError
from rocketpy.limits import (
    DEFAULT_MAX_HEADER_BYTES,
    MAX_FRAME_BYTES,
    MAX_FRAMES_PER_TURN,
    MAX_INFLIGHT_HANDLERS_PER_CONNECTION,
    MAX_WRITE_BUFFER_BYTES,
    TURN_BUDGET_SECONDS,
)
from rocketpy.protocol.codes import code_name
from rocketpy.remoting.calls import CallsMixin
from rocketpy.remoting.codec import FrameDecoder, encode_frame
from rocketpy.remoting.command import FLAG_ONEWAY, FLAG_RESPONSE, SERIALIZE_MSGPACK, RemotingCommand
from rocketpy.remoting.peerlog import PeerLog
from rocketpy.remoting.pending import PendingRequests
from rocketpy.remoting.processor import ProcessorTable
from rocketpy.remoting.turn import flush_later, receive, serve_turn

log = logging.getLogger("rocketpy.remoting")


class Channel(CallsMixin, asyncio.Protocol):
    """One TCP connection carrying pipelined requests in both directions.

    Attributes:
        remote_addr: the peer as ``"ip:port"``.
        peer: the peer's ``(ip, port)`` as the socket reports it (None when it reports none).
        attrs: a free slot for the owner (e.g. a client id).
        closed: True once the connection is closing or closed.
        close_reason: why it closed (None while open).
    """

    def __init__(
        self,
        processors: ProcessorTable,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
        max_inflight_handlers: int = MAX_INFLIGHT_HANDLERS_PER_CONNECTION,
        max_write_buffer_bytes: int = MAX_WRITE_BUFFER_BYTES,
        pause_reading_on_write_pressure: bool = True,
        on_close: Callable[[Channel], None] | None = None,
        on_open: Callable[[Channel], None] | None = None,
        remote_addr: str | None = None,
        max_frames_per_turn: int = MAX_FRAMES_PER_TURN,
        peer_log: PeerLog | None = None,
        drop_when_silent: bool = False,
    ) -> None:
        self.remote_addr = remote_addr or "?"
        self.peer: tuple[str, int] | None = None
        self.attrs: dict[str, Any] = {}
        self.closed = False
        self.close_reason: str | None = None
        #: The serialize type of the requests this side sends (a server channel takes its peer's).
        self.serialize_type = SERIALIZE_MSGPACK
        self._processors = processors
        self._observe = processors.stats.observe  # counts every response (request metrics)
        self._handle = processors.dispatch  # bound once: called for every request
        #: Called with every request this side sends, right before it is written (ACL signing).
        self.signer: Callable[[RemotingCommand], None] | None = None
        self._run_codes = processors.run_codes  # requests of one read handled together (_dispatch_runs)
        self._decoder = FrameDecoder(max_frame_bytes, max_header_bytes)
        self._max_inflight = max_inflight_handlers
        self._max_write_buffer = max_write_buffer_bytes
        self._pause_on_write_pressure = pause_reading_on_write_pressure
        self._on_close = on_close
        self._on_open = on_open
        self._max_frames_per_turn = max_frames_per_turn
        self._turn_frames = max_frames_per_turn  # shrinks while this connection's turns run long
        self._peer_log = peer_log
        self._loop = asyncio.get_running_loop()
        #: loop time of the last read (idle deadline), and since when an incomplete frame is held.
        self.last_read_time = self._loop.time()
        self.partial_since: float | None = None
        self._more_frames = False  # complete frames left in the decoder for a later turn
        #: bodies being decoded in slices for this connection's requests (``ProcessorTable``): while
        #: one is, the connection starts no other request and reads nothing more
        self.decoding = 0
        self._turn_scheduled = False
        self._transport: asyncio.Transport | None = None
        self._pending = PendingRequests(self._loop, self.remote_addr)
        if drop_when_silent:
            self._pending.on_expired = self._drop_if_silent
        self._next_opaque = 0
        self._tasks: set[asyncio.Future[Any]] = set()
        self._write_paused = False
        self._reading_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._out: list[bytes | memoryview] = []  # frames waiting for the next write call
        self._batching = False  # inside data_received / backlog drain: write once at the end
        self._flush_scheduled = False  # a write went out this loop iteration; later ones coalesce
        self._backlog: deque[RemotingCommand] = deque()  # requests read past the handler bound
        self._lost = self._loop.create_future()

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Remember the transport and the peer address."""
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:  # AF_INET (ip, port), AF_INET6 (ip, port, ...)
            self.peer = (str(peer[0]), int(peer[1]))
        if self.remote_addr == "?" and self.peer is not None:
            self.remote_addr = f"{self.peer[0]}:{self.peer[1]}"
        self._pending.remote_addr = self.remote_addr
        if self._on_open is not None:
            self._on_open(self)  # may close the connection at once (connection limits)

    #: Decode frames; complete pending calls and dispatch requests; write responses at once
    #: (``turn.receive``: compiled, no Python frame per read).
    data_received = receive

    def _adapt_turn(self, elapsed: float) -> None:
        """Halve the frames per turn while a turn costs over the budget; double them while twice
        the turn would still fit in it.

        Frames differ in cost by orders of magnitude (a no-op vs a full route table), so a fixed
        count alone does not bound how long one connection holds the loop. The growth test is
        "double fits", not a smaller fraction of the budget: frames that each cost a good part of
        it (a 32-message batch send takes ~0.3 ms) must not stay at one per turn, where every
        frame costs a loop iteration and the broker's sends of one turn are no longer stored
        together (``_dispatch_runs``).
        """
        frames = self._turn_frames
        if elapsed > TURN_BUDGET_SECONDS:
            if frames > 1:
                self._turn_frames = frames // 2
        elif frames < self._max_frames_per_turn and elapsed * 2 < TURN_BUDGET_SECONDS:
            self._turn_frames = min(frames * 2, self._max_frames_per_turn)

    def _track_partial(self, more: bool, completed: bool) -> None:
        """Note since when an incomplete frame is held (the partial-frame deadline's clock).

        The clock restarts whenever a frame completes, so a busy stream whose reads end mid-frame
        is never mistaken for a slow-loris.
        """
        if more or not self._decoder.buffered_bytes:
            self.partial_since = None
        elif completed or self.partial_since is None:
            self.partial_since = self.last_read_time

    def _drop_if_silent(self, sent_at: float, timeout: float) -> None:
        """A call timed out; if the peer sent nothing at all since it was written, drop the link.

        What is written on a link that went down stays unacknowledged in the kernel, which resends
        it with exponential backoff; after the link comes back, every later request waits behind
        it until the next resend, seconds later. A new connection works at once.
        """
        if self.last_read_time <= sent_at:  # equal: the same loop tick (uvloop's clock is cached)
            self._teardown(
                f"{self.remote_addr} sent nothing for {timeout:.3f}s while a call waited; "
                "the link is presumed lost and the next call connects again",
                abort=True,
            )

    def _next_turn(self) -> None:
        self._turn_scheduled = False
        if not self.closed and not self._handlers_blocked():
            serve_turn(self, b"")

    def _protocol_error(self, reason: str) -> None:
        self._teardown(f"protocol error from {self.remote_addr}: {reason}", abort=True)

    def eof_received(self) -> bool | None:
        """The peer closed its side: close ours too."""
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail everything still pending and notify the owner."""
        self._teardown(f"connection lost: {exc}" if exc else "closed by peer")
        if not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        """The transport's write buffer is full: stop producing."""
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        """The write buffer drained: wake writers and maybe resume reading."""
        self._write_paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._update_reading()

    # -- public API ------------------------------------------------------------------------------

    @property
    def pending_count(self) -> int:
        """Requests sent on this connection still awaiting a response."""
        return len(self._pending)

    @property
    def reading_paused(self) -> bool:
        """True while reading is paused (handler bound reached, or the peer not reading)."""
        return self._reading_paused

    @property
    def write_buffer_bytes(self) -> int:
        """Bytes written but not yet accepted by the socket."""
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    @property
    def tasks(self) -> frozenset[asyncio.Future[Any]]:
        """The asynchronous handler tasks running for this connection."""
        return frozenset(self._tasks)

    def send(self, cmd: RemotingCommand) -> None:
        """Write ``cmd`` (a response or oneway frame) without waiting; a no-op once closed."""
        if self.closed:
            log.debug("dropping %r for closed connection %s", cmd, self.remote_addr)
            return
        parts = encode_frame(cmd)
        if self._write_paused and self.write_buffer_bytes > self._max_write_buffer:
            self._teardown(
                f"{self.remote_addr} does not read: over {self._max_write_buffer} bytes unsent", abort=True
            )
            return
        if self._batching or self._flush_scheduled:
            self._out.extend(parts)
            return
        assert self._transport is not None
        self._transport.writelines(parts)
        # Frames sent later in this loop iteration (e.g. by other callers woken by the same read)
        # are coalesced into one write by the callback queued here.
        self._flush_scheduled = True
        self._loop.call_soon(flush_later, self)

    def count_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Count a response sent later with ``send`` (e.g. a held pull's) in the request metrics."""
        self._processors.stats.count(request.code, response.code)

    def _flush(self) -> None:
        if self._out and not self.closed:
            out, self._out = self._out, []
            assert self._transport is not None
            self._transport.writelines(out)  # one writev; large bodies are not copied

    def close(self, reason: str) -> None:
        """Close the connection (buffered writes are flushed first); pending calls fail at once."""
        self._teardown(reason)

    def abort(self, reason: str) -> None:
        """Close the connection at once, dropping unsent writes; pending calls fail at once."""
        self._teardown(reason, abort=True)

    @property
    def tasks_running(self) -> int:
        """Asynchronous handler tasks running for this connection (e.g. held pulls)."""
        return len(self._tasks)

    async def wait_closed(self, timeout: float) -> None:  # noqa: ASYNC109
        """Wait up to ``timeout`` seconds for the transport to finish closing, then abort it."""
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._lost)
        except TimeoutError:
            if self._transport is not None:
                self._transport.abort()

    # -- internals -------------------------------------------------------------------------------

    def _complete(self, response: RemotingCommand) -> None:
        if not self._pending.complete(response):
            log.debug("late or unknown response opaque=%d from %s", response.opaque, self.remote_addr)

    def _dispatch(self, request: RemotingCommand) -> None:
        started = perf_counter()
        self._answer(request, self._handle(self, request), started)

    def _answer(self, request: RemotingCommand, result: Any, started: float) -> None:
        if result is None:
            return
        if type(result) is RemotingCommand:  # answered inline: written with this read's batch
            self._respond(request, result, started)
            return
        self._start_task(request, result, started)  # type: ignore[arg-type]

    def _respond(self, request: RemotingCommand, response: RemotingCommand, started: float) -> None:
        self._observe(request.code, response.code, started)
        if request.flag & FLAG_ONEWAY:
            return
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        response.serialize_type = request.serialize_type
        self.send(response)

    def _start_task(
        self, request: RemotingCommand, awaitable: Awaitable[RemotingCommand | None], started: float
    ) -> None:
        try:
            task = asyncio.ensure_future(awaitable)
        except TypeError as exc:
            self._respond(request, self._processors.error_response(self, request, exc), started)
            return
        self._tasks.add(task)
        task.add_done_callback(partial(self._task_done, request, started))
        self._update_reading()

    def _task_done(self, request: RemotingCommand, started: float, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if self.closed:
            if not task.cancelled():
                task.exception()  # mark retrieved; nobody is left to answer
            return
        result = None if task.cancelled() else self._processors.task_response(self, request, task)
        if result is not None:
            self._respond(request, result, started)
        if self._backlog:
            self._drain_backlog()
        else:
            self._update_reading()

    def _drain_backlog(self) -> None:
        backlog = self._backlog
        self._batching = True
        try:
            while backlog and len(self._tasks) < self._max_inflight and not self.decoding and not self.closed:
                self._dispatch(backlog.popleft())
        finally:
            self._batching = False
            self._flush()
        self._update_reading()

    def _handlers_blocked(self) -> bool:
        """True while this connection may not start more requests (handler bound, peer not reading)."""
        return (
            bool(self._backlog)
            or len(self._tasks) >= self._max_inflight
            or self.decoding > 0
            or (self._write_paused and self._pause_on_write_pressure)
        )

    def _update_reading(self) -> None:
        if self.closed or self._transport is None:
            return
        blocked = self._handlers_blocked()
        pause = blocked or self._more_frames
        if self._more_frames and not blocked and not self._turn_scheduled:
            # Frames already read wait in the decoder: decode them after the other connections.
            self._turn_scheduled = True
            self._loop.call_soon(self._next_turn)
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                self._transport.pause_reading()
            else:
                self._transport.resume_reading()

    def _teardown(self, reason: str, *, abort: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self._log_close(reason, abort)
        if self._transport is not None:
            if abort:
                self._transport.abort()
            else:
                if self._out:  # frames already sent by handlers still go out before the close
                    self._transport.writelines(self._out)
                self._transport.close()
        self._out = []
        self._fail_pending(reason)
        self._backlog.clear()
        for task in list(self._tasks):
            task.cancel()
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                log.exception("close listener of %s failed", self.remote_addr)

    def _log_close(self, reason: str, abort: bool) -> None:
        level = logging.WARNING if abort else logging.INFO
        if self._peer_log is not None and self.peer is not None:
            self._peer_log.log(self.peer[0], level, "closing connection %s: %s", self.remote_addr, reason)
        else:
            log.log(level, "closing connection %s: %s", self.remote_addr, reason)

    def _fail_pending(self, reason: str) -> None:
        def error(code: int) -> RemotingConnectError:
            return RemotingConnectError(
                f"connection to {self.remote_addr} closed ({reason}) while {code_name(code)} was in "
                "flight; it may or may not have been processed — retry if that is safe"
            )

        self._pending.fail_all(error)
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error(0))
