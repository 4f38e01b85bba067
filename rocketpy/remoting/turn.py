"""``serve_turn``: one read turn of a ``Channel``, from the bytes read to the responses written.

The per-request loop every request of every daemon passes: the turn's frames are decoded (at most
the channel's frames per turn), responses complete their pending calls, requests of the run codes
go to the run handler together (``_dispatch_runs``), the others to their handler one by one (or to
the backlog while the handler bound, a body decoded in slices or an earlier backlog blocks the
connection), every answer that is ready is counted in the request stats and encoded into the
channel's write buffer, and the buffer leaves in one ``writelines`` at the end of the turn. A
handler's awaitable runs as the connection's task (``Channel._start_task``). The turn's handler time
adapts the frames per turn (``Channel._adapt_turn``); frames left in the decoder, a backlog or
write pressure pause reading (``Channel._update_reading``). An undecodable stream closes the channel.

``flush_later`` is the callback a held write schedules (``Channel.send``, a turn that woke several
callers). ``serve_turn`` and ``flush_later`` have compiled twins (``_turn.pyx``) that run the same
steps without a Python frame per request: the handler table is read and the handler called from C
(the guarded path, a ``REQUEST_CODE_NOT_SUPPORTED`` answer and the run handler's refusals go
through ``ProcessorTable`` as here), the stats and the response fields are written in C. The pure twin is
the reference: both leave the channel, the processor table's stats and the bytes written the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from time import perf_counter
from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.remoting.codec import FrameError
from rocketpy.remoting.command import FLAG_RESPONSE, RemotingCommand

if TYPE_CHECKING:
    from rocketpy.remoting.connection import Channel


@twin
def flush_later(channel: Channel) -> None:
    """The flush a write scheduled (``Channel.send``, a turn that woke several callers): what the
    loop iteration added to the channel's write buffer leaves in one ``writelines``."""
    channel._flush_scheduled = False
    channel._flush()


@twin
def receive(channel: Channel, data: bytes | bytearray | memoryview) -> None:
    """``Channel.data_received``: note the read's time (the idle deadline's clock), serve the turn."""
    channel.last_read_time = channel._loop.time()
    serve_turn(channel, data)


@twin
def serve_turn(channel: Channel, data: bytes | bytearray | memoryview) -> None:
    """Decode and process at most the channel's frames per turn from ``data`` (may be empty: the
    frames already buffered) and write the answers that are ready; leave the rest for the next turn.
    """
    limit = channel._turn_frames
    try:
        commands = channel._decoder.feed(data, limit)
    except FrameError as exc:
        channel._protocol_error(exc.reason)
        return
    except Exception as exc:  # a header codec's bug must still close only this connection
        channel._protocol_error(f"undecodable frame: {type(exc).__name__}: {exc}")
        return
    more = len(commands) >= limit
    channel._track_partial(more, bool(commands))
    if commands:
        started = perf_counter()
        _process(channel, commands)
        channel._adapt_turn(perf_counter() - started)
    if more or channel._more_frames:  # schedule the next turn, or resume reading after the last
        channel._more_frames = more
        channel._update_reading()


def _process(channel: Channel, commands: Iterable[RemotingCommand]) -> None:
    """Handle ``commands`` in order; requests past the handler bound wait in the backlog."""
    backlog = channel._backlog
    if channel._run_codes and not backlog:
        commands = _dispatch_runs(channel, commands)
    responses = 0
    channel._batching = True
    try:
        for cmd in commands:
            if channel.closed:
                break
            if cmd.flag & FLAG_RESPONSE:
                channel._complete(cmd)
                responses += 1
            elif backlog or len(channel._tasks) >= channel._max_inflight or channel.decoding:
                backlog.append(cmd)
            else:
                channel._dispatch(cmd)
    finally:
        channel._batching = False
        channel._flush()
    if responses > 1 and not channel._flush_scheduled:
        # The callers just woken will send their next requests in the coming loop iteration;
        # hold those writes and send them together after all of them ran. One response wakes one
        # caller (a coalesced batch's members send through their coalescer): its write leaves at once.
        channel._flush_scheduled = True
        channel._loop.call_soon(flush_later, channel)
    if backlog:
        channel._update_reading()


def _dispatch_runs(channel: Channel, commands: Iterable[RemotingCommand]) -> Iterable[RemotingCommand]:
    """Hand this read's requests of ``run_codes`` (the broker's sends) to the run handler at once,
    in their order, and return the other commands (handled after them, as RocketMQ handles
    each request code in its own executor). Answers join this read's one write; the run is
    left to the normal path when it would take the handler tasks past their bound."""
    codes = channel._run_codes
    commands = list(commands)
    run = [c for c in commands if c.code in codes and not c.flag & FLAG_RESPONSE]
    if not run or len(channel._tasks) + len(run) > channel._max_inflight:
        return commands
    channel._batching = True  # _process writes the answers with the rest of this read's
    started = perf_counter()
    respond, answer = channel._respond, channel._answer
    try:
        for request, result in zip(run, channel._processors.handle_run(channel, run), strict=True):
            if type(result) is RemotingCommand:  # _answer's common case without its call
                respond(request, result, started)
            else:
                answer(request, result, started)
    finally:
        channel._batching = False
    return [c for c in commands if c.code not in codes or c.flag & FLAG_RESPONSE]


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.remoting import _turn

    same_signature(serve_turn)(_turn.serve_turn)
    same_signature(_turn.serve_turn)(serve_turn)
    same_signature(receive)(_turn.receive)
    same_signature(_turn.receive)(receive)
    same_signature(flush_later)(_turn.flush_later)
    same_signature(_turn.flush_later)(flush_later)
