"""Malformed streams, flow control and handler bounds: only the offending connection suffers."""

from __future__ import annotations

import asyncio
import resource
import struct
from collections.abc import AsyncIterator, Callable

import pytest

from rocketpy.errors import RemotingTimeoutError
from rocketpy.protocol.codes import ResponseCode
from rocketpy.remoting import Channel, RemotingClient, RemotingCommand, RemotingServer, pending
from rocketpy.remoting.codec import FrameDecoder, encode_frame_bytes
from tests.waiting import wait_until_async

ECHO = 901
HOLD = 905


async def wait_until(predicate: Callable[[], object], timeout: float = 5.0) -> None:  # noqa: ASYNC109
    """Poll ``predicate`` until true (the shared helper, at a test-friendly interval)."""
    await wait_until_async(predicate, timeout, interval=0.005)


class Env:
    def __init__(self, max_inflight_handlers: int = 4096) -> None:
        self.server = RemotingServer(
            "127.0.0.1", 0, name="faultsrv", max_inflight_handlers=max_inflight_handlers
        )
        self.client = RemotingClient()
        self.release = asyncio.Event()
        self.server.register_processor(ECHO, lambda ch, req: RemotingCommand.response(req, body=req.body))
        self.server.register_processor(HOLD, self._hold)

    async def _hold(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        await self.release.wait()
        return RemotingCommand.response(req)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def good_call(self) -> None:
        resp = await self.client.invoke(self.addr, RemotingCommand.request(ECHO, body=b"ok"), 3.0)
        assert (resp.code, resp.body) == (ResponseCode.SUCCESS, b"ok")


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    e = Env()
    await e.server.start()
    yield e
    e.release.set()
    await e.client.close()
    await e.server.shutdown(2.0)


async def _raw_send_expect_close(env: Env, data: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", env.server.port)
    await wait_until(lambda: len(env.server.channels) == 2)
    writer.write(data)
    assert await asyncio.wait_for(reader.read(), 5.0) == b""  # server closed it, answered nothing
    writer.close()
    await wait_until(lambda: len(env.server.channels) == 1)


GARBAGE = [
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http"),
    pytest.param(struct.pack(">II", 2 * 1024**3, (0x10 << 24) | 10), id="2GiB-prefix"),
    pytest.param(struct.pack(">II", 20, (0x55 << 24) | 4) + b"x" * 16, id="unknown-type"),
    pytest.param(struct.pack(">II", 9, (0x10 << 24) | 5) + b"\xc1\xc1\xc1\xc1\xc1", id="bad-header"),
]


@pytest.mark.parametrize("data", GARBAGE)
async def test_bad_stream_closes_only_that_connection(env: Env, data: bytes) -> None:
    await env.good_call()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    await _raw_send_expect_close(env, data)
    await env.good_call()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 256 * 1024  # KiB


async def test_truncated_frame_then_disconnect(env: Env) -> None:
    await env.good_call()
    frame = encode_frame_bytes(RemotingCommand.request(ECHO, body=b"x" * 1000))
    reader, writer = await asyncio.open_connection("127.0.0.1", env.server.port)
    writer.write(frame + frame[:500])
    decoder = FrameDecoder()
    frames: list[RemotingCommand] = []
    while not frames:
        frames += decoder.feed(await asyncio.wait_for(reader.read(65536), 5.0))
    assert frames[0].body == b"x" * 1000  # the complete frame was served
    writer.close()
    await wait_until(lambda: len(env.server.channels) == 1)
    await env.good_call()


async def test_handler_bound_pauses_reading() -> None:
    env = Env(max_inflight_handlers=4)
    await env.server.start()
    calls = [
        asyncio.ensure_future(env.client.invoke(env.addr, RemotingCommand.request(HOLD), 10.0))
        for _ in range(10)
    ]
    await wait_until(lambda: sum(len(ch.tasks) for ch in env.server.channels) == 4)
    other = RemotingClient()
    await other.invoke(env.addr, RemotingCommand.request(ECHO), 3.0)  # other connections are served
    (held,) = [ch for ch in env.server.channels if ch.tasks]
    assert len(held.tasks) == 4 and held.reading_paused and not any(c.done() for c in calls)
    env.release.set()
    results = await asyncio.gather(*calls)
    assert all(r.code == ResponseCode.SUCCESS for r in results)
    await other.close()
    await env.client.close()
    await env.server.shutdown(2.0)


async def test_peer_not_reading_pauses_server(env: Env) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", env.server.port)
    body = b"b" * (256 * 1024)
    frame = encode_frame_bytes(RemotingCommand.request(ECHO, body=body))
    sent = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10.0
    while loop.time() < deadline:  # write until the server stops reading (our buffer stays full)
        writer.write(frame)
        sent += 1
        try:
            await asyncio.wait_for(writer.drain(), 0.3)
        except TimeoutError:
            break
    else:
        raise AssertionError("server kept reading although we never read its responses")
    local_port = writer.get_extra_info("sockname")[1]
    (server_side,) = [ch for ch in env.server.channels if ch.remote_addr.endswith(f":{local_port}")]
    assert server_side.reading_paused
    assert sent * len(body) > 8 * 1024 * 1024  # more answers than the bound below could hold
    assert server_side.write_buffer_bytes < 8 * 1024 * 1024  # bounded, not `sent` responses
    await env.good_call()  # other connections are still served
    decoder = FrameDecoder()
    got = 0
    while got < sent:  # now read: every request is answered
        got += len(decoder.feed(await asyncio.wait_for(reader.read(1 << 20), 5.0)))
    assert got == sent
    writer.close()


async def test_peer_that_never_reads_is_disconnected_at_write_bound() -> None:
    server = RemotingServer("127.0.0.1", 0, max_write_buffer_bytes=2 * 1024 * 1024)
    closed: list[Channel] = []
    server.add_close_listener(closed.append)
    await server.start()
    _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    await wait_until(lambda: server.channels)
    (channel,) = server.channels
    notice = RemotingCommand.request(40, {"consumerGroup": "g"}, b"n" * 65536)
    for _ in range(2000):  # 128 MiB of oneway notifications the peer never reads
        if channel.closed:
            break
        channel.send_oneway(notice)
        await asyncio.sleep(0)  # let the transport flush what the socket takes
    assert channel.closed and closed == [channel]
    assert "does not read" in str(channel.close_reason)
    writer.close()
    await server.shutdown(1.0)


async def test_a_call_timed_out_on_a_silent_connection_drops_it(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing came back while the call waited: the link is presumed lost (a partition leaves what
    was written stuck behind the kernel's resend backoff), so the next call connects again."""
    # a loaded machine can fire the timer late, which the table rightly ignores (its own test):
    # here lateness must not decide the outcome
    monkeypatch.setattr(pending, "_LATE_TIMER_S", 60.0)
    await env.good_call()
    before = env.client.channel(env.addr)
    assert before is not None
    with pytest.raises(RemotingTimeoutError):
        await env.client.invoke(env.addr, RemotingCommand.request(HOLD), 0.1)
    assert before.closed and "sent nothing for 0.100s" in (before.close_reason or "")
    assert env.client.channel(env.addr) is None
    await env.good_call()
    assert env.client.channel(env.addr) not in (None, before)


async def test_a_call_timed_out_on_a_talking_connection_keeps_it(env: Env) -> None:
    """A slow handler on a live connection: only the slow call fails."""
    await env.good_call()
    channel = env.client.channel(env.addr)
    held = asyncio.ensure_future(env.client.invoke(env.addr, RemotingCommand.request(HOLD), 0.3))
    while not held.done():
        await env.good_call()  # answers keep arriving while the held call waits
        await asyncio.sleep(0.02)
    with pytest.raises(RemotingTimeoutError):
        held.result()
    assert env.client.channel(env.addr) is channel and channel is not None and not channel.closed
