"""``serve_turn``'s twins (``rocketpy/remoting/turn.py`` and ``_turn.pyx``) leave a channel alike.

The same byte stream, cut at the same points, goes to two channels over recording transports, one
turn function each; the bytes written (write by write), the reading pauses, the request stats, the
backlog, the handler tasks, the completed calls and the close reason must be the same. The stream
mixes every kind of request the turn tells apart: inline answers, ``None``, handler failures and
header errors, a header shape the table refuses, an unsupported code, oneway requests, an
awaitable answer, a handler that writes a frame of its own, the run codes, responses to pending
and unknown calls, JSON headers, and a garbage tail (a protocol error). Loads the compiled module
itself, so it compares both in either mode of ``scripts/test``; skips when it is not built.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy import _accel
from rocketpy.errors import HeaderError
from rocketpy.remoting import connection
from rocketpy.remoting.codec import encode_frame_bytes
from rocketpy.remoting.command import SERIALIZE_JSON, SERIALIZE_MSGPACK, RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import ProcessorTable
from rocketpy.remoting.turn import serve_turn  # noqa: F401  (its twins join _accel.PURE)

try:
    _compiled = _accel.load_compiled()
    COMPILED: Any = (_compiled["receive"], _compiled["serve_turn"])
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    COMPILED = None
PURE = (_accel.PURE["receive"], _accel.PURE["serve_turn"])
pytestmark = pytest.mark.skipif(COMPILED is None, reason="the compiled core is not built")

ECHO, NONE, FAIL, BAD_HEADER, LATER, WRITES, RUN_A, RUN_B, GUARDED, UNKNOWN = 1, 2, 3, 4, 5, 6, 10, 11, 12, 99
RUN_CODES = frozenset({RUN_A, RUN_B})
CODES = (ECHO, NONE, FAIL, BAD_HEADER, LATER, WRITES, RUN_A, RUN_B, GUARDED, UNKNOWN)
PENDING = (1, 2, 3)  # opaques of calls this side has in flight


class Recorder:
    """A transport that records what the channel does to it."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def writelines(self, parts: list[Any]) -> None:
        self.events.append(b"".join(bytes(p) for p in parts))

    def write(self, data: bytes) -> None:
        self.events.append(bytes(data))

    def pause_reading(self) -> None:
        self.events.append("pause")

    def resume_reading(self) -> None:
        self.events.append("resume")

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 4321) if name == "peername" else default

    def abort(self) -> None:
        self.events.append("abort")

    def close(self) -> None:
        self.events.append("close")


def _answer(request: RemotingCommand, **ext: Any) -> RemotingCommand:
    body = bytes(request.body[::-1])
    return RemotingCommand.response(request, ext={"n": len(request.body), **ext}, body=body)


def _echo(channel: Channel, request: RemotingCommand) -> RemotingCommand:
    return _answer(request)


def _table(guard: bool) -> ProcessorTable:
    table = ProcessorTable("twins")

    def fail(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        raise RuntimeError(f"boom {request.opaque}")

    def bad_header(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        raise HeaderError(f"'field' of {request.opaque} is missing")

    async def later(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return _answer(request)

    def writes(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        channel.send(RemotingCommand(77, request.opaque + 1000, 2, "note", None, b"x"))
        return _answer(request)

    def run(channel: Channel, requests: list[RemotingCommand]) -> list[Any]:
        if any(r.body == b"fail" for r in requests):
            raise RuntimeError("the run failed")
        n = len(requests)
        return [None if r.flag & 2 and i % 2 else _answer(r, i=i, of=n) for i, r in enumerate(requests)]

    table.register(ECHO, _echo)
    table.register(NONE, lambda channel, request: None)
    table.register(FAIL, fail)
    table.register(BAD_HEADER, bad_header)
    table.register(LATER, later)
    table.register(WRITES, writes)
    table.register(RUN_A, _echo)
    table.register(RUN_B, _echo)
    table.register(GUARDED, _echo)
    table.register_run(RUN_CODES, run)
    if guard:

        def refuse(channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
            if request.code in (GUARDED, RUN_B) and request.body[:1] == b"d":
                return RemotingCommand.response(request, 16, "denied")
            return None

        table.set_guard(refuse)
    return table


EXTS = st.sampled_from([None, {}, {"k": 1}, {"topic": "T", "queueId": 3, "flag": True}, {"bad": [1, 2]}])
FRAME = st.builds(
    lambda code, flag, opaque, ext, body, json: RemotingCommand(
        code, opaque, flag, None, None if json else ext, body, SERIALIZE_JSON if json else SERIALIZE_MSGPACK
    ),
    st.sampled_from(CODES),
    st.sampled_from([0, 0, 0, 2, 1]),
    st.integers(0, 5),
    EXTS,
    st.sampled_from([b"", b"ab", b"d", b"fail", b"x" * 40]),
    st.sampled_from([False, False, False, True]),
)


async def _drive(
    twins: Any, stream: bytes, cuts: list[int], guard: bool, frames_per_turn: int, inflight: int
) -> dict[str, Any]:
    table = _table(guard)
    channel = Channel(table, max_frames_per_turn=frames_per_turn, max_inflight_handlers=inflight)
    transport = Recorder()
    channel.connection_made(transport)  # type: ignore[arg-type]
    channel._next_turn = lambda: None  # type: ignore[method-assign]  # turns are run below, with fn
    loop = asyncio.get_running_loop()
    futures = {}
    for opaque in PENDING:
        futures[opaque] = loop.create_future()
        channel._pending.add(opaque, futures[opaque], ECHO, 60.0)
    receive, fn = twins  # a read, then the turns of what it left buffered
    start = 0
    for cut in [*cuts, len(stream)]:
        receive(channel, stream[start:cut])
        start = cut
        while channel._more_frames and not channel.closed and not channel._handlers_blocked():
            fn(channel, b"")
    state = {
        "events": transport.events,
        "responses": dict(table.stats.responses),
        "latency_counts": {code: sum(h.buckets) for code, h in table.stats.latency.items()},
        "closed": channel.closed,
        "close_reason": channel.close_reason,
        "backlog": [(c.code, c.opaque) for c in channel._backlog],
        "tasks": len(channel._tasks),
        "turn_frames": channel._turn_frames,
        "partial": channel.partial_since is not None,
        "buffered": channel._decoder.buffered_bytes,
        "reading_paused": channel.reading_paused,
        "completed": {o: f.result().code for o, f in futures.items() if f.done() and not f.exception()},
        "out": channel._out,
        "writes_held": channel._flush_scheduled,
    }
    channel.abort("end of the example")
    for _ in range(3):
        await asyncio.sleep(0)
    return state


def _run(twins: Any, *args: Any) -> dict[str, Any]:
    return asyncio.run(_drive(twins, *args))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(FRAME, max_size=24),
    st.lists(st.integers(0, 4000), max_size=5),
    st.booleans(),
    st.integers(1, 8),
    st.sampled_from([1, 3, 4096]),
    st.sampled_from([b"", b"", b"\x00\x00\x00\x09\x77\x00\x00\x01\xc1junk"]),
)
def test_twins_leave_the_channel_alike(
    frames: list[RemotingCommand],
    cuts: list[int],
    guard: bool,
    frames_per_turn: int,
    inflight: int,
    tail: bytes,
) -> None:
    stream = b"".join(encode_frame_bytes(f) for f in frames) + tail
    cuts = sorted(c % (len(stream) + 1) for c in cuts)
    budget = connection.TURN_BUDGET_SECONDS
    connection.TURN_BUDGET_SECONDS = 1e9  # type: ignore[misc]  # no turn is slow: the cuts alone decide
    try:
        pure = _run(PURE, stream, cuts, guard, frames_per_turn, inflight)
        compiled = _run(COMPILED, stream, cuts, guard, frames_per_turn, inflight)
    finally:
        connection.TURN_BUDGET_SECONDS = budget  # type: ignore[misc]
    assert compiled == pure


def test_the_stream_reaches_every_path() -> None:
    """One stream of every kind, pure twin: each path the equality test relies on is taken."""
    frames = [
        RemotingCommand(ECHO, 1, 0, None, {"k": 1}, b"ab"),
        RemotingCommand(NONE, 2, 0),
        RemotingCommand(FAIL, 3, 0),
        RemotingCommand(BAD_HEADER, 4, 0),
        RemotingCommand(ECHO, 5, 0, None, {"bad": [1]}),
        RemotingCommand(UNKNOWN, 6, 0),
        RemotingCommand(ECHO, 7, 2),
        RemotingCommand(LATER, 8, 0),
        RemotingCommand(WRITES, 9, 0),
        RemotingCommand(RUN_A, 10, 0),
        RemotingCommand(RUN_B, 11, 0, None, {"bad": [1]}),
        RemotingCommand(ECHO, 1, 1),
        RemotingCommand(ECHO, 4, 1),
        RemotingCommand(ECHO, 12, 0, serialize_type=SERIALIZE_JSON),
    ]
    stream = b"".join(encode_frame_bytes(f) for f in frames)
    for twins in (PURE, COMPILED):
        state = _run(twins, stream, [], False, 32, 4096)
        codes = state["responses"]
        assert codes[(ECHO, 0)] == 3 and codes[(FAIL, 1)] == 1 and codes[(BAD_HEADER, 29)] == 1, codes
        assert codes[(ECHO, 29)] == 1 and codes[(-1, 3)] == 1 and codes[(RUN_A, 0)] == 1, codes
        assert codes[(RUN_B, 29)] == 1 and codes[(WRITES, 0)] == 1, codes
        assert state["tasks"] == 1 and state["completed"] == {1: 1} and not state["closed"], state
        assert len([e for e in state["events"] if isinstance(e, bytes)]) == 1, state["events"]


@pytest.mark.parametrize("twins", ["pure", "compiled"])
def test_writes_are_held_for_a_turn_only_when_it_woke_several_callers(twins: str) -> None:
    """Two responses in a read wake two callers: their next requests are held to leave in one write.
    One response wakes one (a sequential caller): its next request is written at once."""
    fns = PURE if twins == "pure" else COMPILED
    one = encode_frame_bytes(RemotingCommand(ECHO, 1, 1))
    two = one + encode_frame_bytes(RemotingCommand(ECHO, 2, 1))
    assert _run(fns, one, [], False, 32, 4096)["writes_held"] is False
    assert _run(fns, two, [], False, 32, 4096)["writes_held"] is True
