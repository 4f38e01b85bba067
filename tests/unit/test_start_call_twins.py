"""``start_call``'s twins (``rocketpy/remoting/calls.py`` and ``_turn.pyx``) start a call alike.

Two channels over recording transports, one twin each, make the same calls (a first call written
at once, a second in the same loop iteration held for the scheduled flush, a signed call, a call
whose opaque wraps, a call on a closed channel, a call whose opaque is still pending, a call under
write pressure): the bytes written, the opaques, the pending entries and their timer, the signer's
calls and the errors must be the same. Loads the compiled module itself, so it compares both in
either mode of ``scripts/test``; skips when it is not built.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rocketpy import _accel
from rocketpy.limits import MAX_OPAQUE
from rocketpy.remoting import calls  # noqa: F401  (its twin joins _accel.PURE)
from rocketpy.remoting.command import FLAG_RESPONSE, SERIALIZE_JSON, RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import ProcessorTable
from tests.unit.test_turn_twins import Recorder

try:
    COMPILED: Any = _accel.load_compiled()["start_call"]
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    COMPILED = None
pytestmark = pytest.mark.skipif(COMPILED is None, reason="the compiled core is not built")


def _channel(serialize_type: int = 0x10) -> tuple[Channel, Recorder]:
    channel = Channel(ProcessorTable("twins"))
    channel.serialize_type = serialize_type
    transport = Recorder()
    channel.connection_made(transport)  # type: ignore[arg-type]
    return channel, transport


def _request(code: int, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code, 0, FLAG_RESPONSE, None, {"k": code}, body)  # a stale response flag


def _state(channel: Channel, transport: Recorder, futures: list[Any], errors: list[str]) -> Any:
    entries = {k: (v[1], v[2]) for k, v in channel._pending._entries.items()}
    heap = sorted(o for _, o in channel._pending._heap)
    return (
        list(transport.events), list(channel._out), channel._next_opaque, entries, heap,
        channel._pending._timer is not None, [f.done() for f in futures], errors,
    )  # fmt: skip


async def _calls(start_call: Any) -> Any:
    out = []
    for case in ("plain", "signed", "wrap", "closed", "reused", "paused"):
        channel, transport = _channel(SERIALIZE_JSON if case == "signed" else 0x10)
        futures: list[Any] = []
        errors: list[str] = []
        signed: list[int] = []
        if case == "signed":
            channel.signer = lambda cmd, signed=signed: signed.append(cmd.opaque)
        if case == "wrap":
            channel._next_opaque = MAX_OPAQUE
        if case == "reused":
            channel._pending.add(1, asyncio.get_running_loop().create_future(), 7, 3.0)
        if case == "paused":
            channel._write_paused = True
            channel._max_write_buffer = -1  # past it: the write closes the channel
        if case == "closed":
            channel.close("closed by the test")
        for code, body in ((10, b"first"), (11, b"second"), (12, b"x" * 300)):
            try:
                futures.append(start_call(channel, _request(code, body), 3.0))
            except (Exception, AssertionError) as e:
                errors.append(f"{type(e).__name__}: {str(e).splitlines()[0]}")  # (not pytest's detail)
        out.append((case, _state(channel, transport, futures, errors), signed))
        await asyncio.sleep(0)  # the scheduled flush
        out.append((case, transport.events, channel._out))
        for f in futures:
            f.cancel()
        for entry in channel._pending._entries.values():
            entry[0].cancel()
        channel._pending.fail_all(lambda code: ConnectionError(code))
    return out


async def test_start_call_twins_write_and_track_alike() -> None:
    pure = await _calls(_accel.PURE["start_call"])
    compiled = await _calls(COMPILED)
    assert pure == compiled
    events, out, opaque = pure[0][1][:3]  # the plain case, right after its calls
    assert len(events) == 1 and out and opaque == 3  # the first written at once, the rest held
    assert pure[1][1] == [events[0], b"".join(bytes(p) for p in out)]  # the flush writes them
