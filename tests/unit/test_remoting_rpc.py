"""RemotingServer + RemotingClient in one process over 127.0.0.1 (uvloop)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from rocketpy.errors import MQClientError, RemotingConnectError, RemotingTimeoutError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.fields import ext_int, ext_str
from rocketpy.remoting import Channel, Handler, RemotingClient, RemotingCommand, RemotingServer
from tests.waiting import wait_until_async

NOOP = 900
ECHO = 901
SLOW = 902
BOOM = 903
BAD_HEADER = 904
HOLD = 905
ONEWAY = 906


async def wait_until(predicate: Callable[[], object], timeout: float = 5.0) -> None:  # noqa: ASYNC109
    """Poll ``predicate`` until true (the shared helper, at a test-friendly interval)."""
    await wait_until_async(predicate, timeout, interval=0.005)


class Fixture:
    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0, name="testsrv")
        self.client = RemotingClient(connect_timeout=2.0)
        self.hold = asyncio.Event()
        self.oneways: list[RemotingCommand] = []
        self.closed: list[Channel] = []
        self.server.add_close_listener(self.closed.append)
        handlers: dict[int, Handler] = {
            NOOP: lambda ch, req: RemotingCommand.response(req),
            ECHO: self._echo,
            SLOW: self._slow,
            BOOM: self._boom,
            BAD_HEADER: lambda ch, req: RemotingCommand.response(req, ext={"n": ext_int(req.ext, "n")}),
            HOLD: self._hold,
            ONEWAY: self._oneway,
        }
        for code, handler in handlers.items():
            self.server.register_processor(code, handler)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def _echo(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response(req, remark=req.remark, ext=req.ext, body=req.body)

    async def _slow(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(ext_int(req.ext, "delay_ms") / 1000)
        return RemotingCommand.response(req, ext=req.ext)

    def _boom(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        raise ValueError("disk on fire")

    async def _hold(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        await self.hold.wait()
        return RemotingCommand.response(req)

    def _oneway(self, ch: Channel, req: RemotingCommand) -> None:
        self.oneways.append(req)

    async def call(
        self,
        code: int,
        ext: dict[str, Any] | None = None,
        body: bytes = b"",
        timeout: float = 3.0,  # noqa: ASYNC109
    ) -> RemotingCommand:
        return await self.client.invoke(self.addr, RemotingCommand.request(code, ext, body), timeout)


@pytest.fixture
async def rpc() -> AsyncIterator[Fixture]:
    fx = Fixture()
    await fx.server.start()
    yield fx
    fx.hold.set()
    await fx.client.close()
    await fx.server.shutdown(timeout=2.0)


async def test_start_returns_bound_port(rpc: Fixture) -> None:
    assert rpc.server.port > 0
    resp = await rpc.call(ECHO, {"a": 1, "b": "x", "c": True}, b"payload")
    assert resp.is_response and resp.code == ResponseCode.SUCCESS
    assert (resp.ext, resp.body) == ({"a": 1, "b": "x", "c": True}, b"payload")


async def test_channel_peer_is_the_socket_peer(rpc: Fixture) -> None:
    assert (await rpc.call(NOOP)).code == ResponseCode.SUCCESS
    (server_side,) = rpc.server.channels
    client_side = rpc.client.channel(rpc.addr)
    assert client_side is not None and client_side.peer == ("127.0.0.1", rpc.server.port)
    assert server_side.peer is not None and server_side.peer[0] == "127.0.0.1"
    assert server_side.remote_addr == f"127.0.0.1:{server_side.peer[1]}"


async def test_hundreds_pipelined_on_one_connection(rpc: Fixture) -> None:
    results = await asyncio.gather(*(rpc.call(ECHO, {"i": i}, b"%d" % i) for i in range(500)))
    assert [ext_int(r.ext, "i") for r in results] == list(range(500))
    assert [r.body for r in results] == [b"%d" % i for i in range(500)]
    assert len(rpc.server.channels) == 1


async def test_out_of_order_responses(rpc: Fixture) -> None:
    order: list[str] = []

    async def tagged(name: str, call: Awaitable[RemotingCommand]) -> RemotingCommand:
        resp = await call
        order.append(name)
        return resp

    slow = asyncio.ensure_future(tagged("slow", rpc.call(SLOW, {"delay_ms": 300})))
    await wait_until(lambda: any(ch.tasks for ch in rpc.server.channels))
    fast = await tagged("fast", rpc.call(NOOP))
    assert fast.code == ResponseCode.SUCCESS and not slow.done()
    assert (await slow).ext == {"delay_ms": 300}
    assert order == ["fast", "slow"]


async def test_large_body_round_trip(rpc: Fixture) -> None:
    body = bytes(range(256)) * (3 * 4096)  # 3 MiB
    resp = await rpc.call(ECHO, body=body, timeout=10.0)
    assert resp.body == body


async def test_client_reads_an_answer_header_past_the_daemons_cap(rpc: Fixture) -> None:
    """maxHeaderBytes (64 KiB) guards a daemon from its peers; a client takes longer answers."""
    remark = "r" * (200 * 1024)
    rpc.server.register_processor(907, lambda ch, req: RemotingCommand.response(req, remark=remark))
    assert (await rpc.call(907)).remark == remark


async def test_timeout_names_address_and_code(rpc: Fixture) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(RemotingTimeoutError) as info:
        await rpc.call(HOLD, timeout=0.2)
    assert 0.15 < loop.time() - start < 2.0
    assert rpc.addr in str(info.value) and "905" in str(info.value)
    assert isinstance(info.value, MQClientError)
    rpc.hold.set()  # the late response is dropped; the connection keeps working
    assert (await rpc.call(NOOP)).code == ResponseCode.SUCCESS
    channel = rpc.client.channel(rpc.addr)
    assert channel is not None and channel.pending_count == 0


async def test_timeout_message_uses_code_name(rpc: Fixture) -> None:
    rpc.server.register_processor(RequestCode.PULL_MESSAGE, lambda ch, req: rpc._hold(ch, req))
    with pytest.raises(RemotingTimeoutError, match=r"PULL_MESSAGE\(11\) to 127\.0\.0\.1:\d+ got no response"):
        await rpc.call(RequestCode.PULL_MESSAGE, timeout=0.1)


async def test_oneway_gets_no_response(rpc: Fixture) -> None:
    await rpc.client.invoke_oneway(rpc.addr, RemotingCommand.request(ONEWAY, {"k": "v"}))
    await rpc.client.invoke_oneway(rpc.addr, RemotingCommand.request(BOOM))  # error: still no response
    await rpc.client.invoke_oneway(rpc.addr, RemotingCommand.request(4242))  # unknown: still no response
    await wait_until(lambda: rpc.oneways)
    assert rpc.oneways[0].ext == {"k": "v"} and rpc.oneways[0].is_oneway
    assert (await rpc.call(NOOP)).code == ResponseCode.SUCCESS  # nothing stray arrived in between


async def test_unknown_code_answered(rpc: Fixture) -> None:
    resp = await rpc.call(4242)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "4242" in str(resp.remark) and "testsrv" in str(resp.remark)


async def test_handler_exception_answered(rpc: Fixture, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="rocketpy.remoting"):
        resp = await rpc.call(BOOM)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "ValueError: disk on fire" in str(resp.remark)
    assert any(r.exc_info for r in caplog.records)


async def test_async_handler_exception_answered(rpc: Fixture) -> None:
    resp = await rpc.call(SLOW, {"delay_ms": "soon"})
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert "'delay_ms' must be an integer" in str(resp.remark)


async def test_header_error_is_invalid_parameter(rpc: Fixture) -> None:
    resp = await rpc.call(BAD_HEADER, {})
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert "'n' is missing" in str(resp.remark)
    assert (await rpc.call(BAD_HEADER, {"n": "12"})).ext == {"n": 12}


async def test_reconnect_after_server_drops_connection(rpc: Fixture) -> None:
    assert (await rpc.call(NOOP)).code == ResponseCode.SUCCESS
    (server_side,) = rpc.server.channels
    server_side.close("test drop")
    await wait_until(lambda: rpc.client.channel(rpc.addr) is None)
    assert (await rpc.call(NOOP)).code == ResponseCode.SUCCESS
    await wait_until(lambda: len(rpc.server.channels) == 1 and server_side not in rpc.server.channels)


async def test_in_flight_calls_fail_at_once_on_drop(rpc: Fixture) -> None:
    calls = [asyncio.ensure_future(rpc.call(HOLD, timeout=30.0)) for _ in range(20)]
    await wait_until(lambda: sum(len(ch.tasks) for ch in rpc.server.channels) == 20)
    loop = asyncio.get_running_loop()
    start = loop.time()
    for channel in rpc.server.channels:
        channel.close("test drop")
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert loop.time() - start < 2.0
    assert all(isinstance(r, RemotingConnectError) for r in results), results
    assert rpc.addr in str(results[0]) and "905" in str(results[0])


async def test_server_cancels_tasks_of_closed_connection(rpc: Fixture) -> None:
    call = asyncio.ensure_future(rpc.call(HOLD, timeout=30.0))
    await wait_until(lambda: any(ch.tasks for ch in rpc.server.channels))
    (channel,) = rpc.server.channels
    (task,) = channel.tasks
    rpc.client.close_channel(rpc.addr)
    with pytest.raises(RemotingConnectError):
        await call
    await wait_until(task.cancelled)


async def test_concurrent_callers_share_one_connect(rpc: Fixture) -> None:
    results = await asyncio.gather(*(rpc.call(NOOP) for _ in range(50)))
    assert all(r.code == ResponseCode.SUCCESS for r in results)
    assert len(rpc.server.channels) == 1


async def test_server_to_client_invoke(rpc: Fixture) -> None:
    seen: list[RemotingCommand] = []

    def on_notify(ch: Channel, req: RemotingCommand) -> RemotingCommand:
        seen.append(req)
        return RemotingCommand.response(req, ext={"ack": ext_str(req.ext, "consumerGroup")})

    rpc.client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    await rpc.call(NOOP)
    (channel,) = rpc.server.channels
    req = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "cg"})
    resp = await channel.invoke(req, timeout=2.0)
    assert resp.ext == {"ack": "cg"}
    channel.send_oneway(
        RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "x"})
    )
    await wait_until(lambda: len(seen) == 2)
    assert seen[1].is_oneway
    unknown = await channel.invoke(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE), timeout=2.0)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_close_listeners_called_once(rpc: Fixture) -> None:
    await rpc.call(NOOP)
    (channel,) = rpc.server.channels
    rpc.client.close_channel(rpc.addr)
    await wait_until(lambda: rpc.closed)
    assert rpc.closed == [channel] and channel.closed
    assert rpc.server.channels == frozenset()


async def test_connect_refused_names_address() -> None:
    server = RemotingServer("127.0.0.1", 0)
    await server.start()
    port = server.port
    await server.shutdown()
    client = RemotingClient()
    with pytest.raises(RemotingConnectError, match=f"127.0.0.1:{port}"):
        await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(NOOP), 2.0)
    with pytest.raises(MQClientError, match="'localhost' is not HOST:PORT"):
        await client.invoke("localhost", RemotingCommand.request(NOOP), 2.0)
    await client.close()


async def test_port_in_use_is_one_clear_error(rpc: Fixture) -> None:
    other = RemotingServer("127.0.0.1", rpc.server.port, name="second")
    with pytest.raises(OSError, match="choose another listenPort"):
        await other.start()


async def test_duplicate_processor_rejected(rpc: Fixture) -> None:
    with pytest.raises(ValueError, match="already registered"):
        rpc.server.register_processor(NOOP, lambda ch, req: None)


async def test_shutdown_waits_for_running_handlers() -> None:
    server = RemotingServer("127.0.0.1", 0)

    async def slow(ch: Channel, req: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0.2)
        return RemotingCommand.response(req)

    server.register_processor(SLOW, slow)
    await server.start()
    client = RemotingClient()
    call = asyncio.ensure_future(
        client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(SLOW, {"delay_ms": 200}), 5.0)
    )
    await wait_until(lambda: any(ch.tasks for ch in server.channels))
    await server.shutdown(timeout=3.0)
    assert (await call).code == ResponseCode.SUCCESS
    await client.close()


async def test_response_then_close_still_delivers_response(rpc: Fixture) -> None:
    def answer_and_close(ch: Channel, req: RemotingCommand) -> None:
        ch.send(RemotingCommand.response(req, remark="bye"))
        ch.close("handler closed it")

    rpc.server.register_processor(907, answer_and_close)
    resp = await rpc.call(907)
    assert resp.remark == "bye"
    await wait_until(lambda: rpc.client.channel(rpc.addr) is None)


async def test_async_handler_returning_wrong_type_is_system_error(rpc: Fixture) -> None:
    async def wrong(ch: Channel, req: RemotingCommand) -> Any:
        return "not a command"

    rpc.server.register_processor(908, wrong)
    resp = await rpc.call(908)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "processor returned str" in str(resp.remark)


async def test_invoke_future_is_a_plain_future_in_order(rpc: Fixture) -> None:
    await rpc.call(NOOP)  # connected: the fast path returns the pending future itself
    futures = [
        rpc.client.invoke_future(rpc.addr, RemotingCommand.request(ECHO, {"i": i}), 3.0) for i in range(100)
    ]
    assert all(type(f) is asyncio.Future for f in futures)  # not a Task: no coroutine frame
    results = await asyncio.gather(*futures)
    assert [ext_int(r.ext, "i") for r in results] == list(range(100))
    channel = rpc.client.channel(rpc.addr)
    assert channel is not None and channel.pending_count == 0


async def test_invoke_future_connects_when_needed(rpc: Fixture) -> None:
    future = rpc.client.invoke_future(rpc.addr, RemotingCommand.request(ECHO, {"k": "v"}), 3.0)
    assert (await future).ext == {"k": "v"}


async def test_invoke_future_times_out_and_fails_on_close(rpc: Fixture) -> None:
    await rpc.call(NOOP)
    channel = rpc.client.channel(rpc.addr)
    assert channel is not None
    with pytest.raises(RemotingTimeoutError, match="905"):
        await channel.invoke_future(RemotingCommand.request(HOLD), 0.1)
    assert channel.pending_count == 0
    assert channel.closed  # the peer sent nothing while the call waited: the client dropped the link
    await rpc.call(NOOP)
    channel = rpc.client.channel(rpc.addr)
    assert channel is not None
    held = channel.invoke_future(RemotingCommand.request(HOLD), 30.0)
    await wait_until(lambda: sum(len(ch.tasks) for ch in rpc.server.channels) >= 1)
    channel.close("test drop")
    with pytest.raises(RemotingConnectError):
        await held
    with pytest.raises(RemotingConnectError):
        channel.invoke_future(RemotingCommand.request(NOOP), 1.0)


async def test_calls_to_a_peer_that_does_not_read_wait_then_time_out() -> None:
    """``invoke`` and ``invoke_future`` under write pressure: both wait for the peer inside one call
    path, time out with the same error and leave no table entry behind."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        held.append(w)  # never reads

    # Small, fixed kernel buffers on both ends: with the kernel's autotuning, a loaded machine can
    # grow them while a call waits, take in what the transport holds and resume writing early.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # inherited by accepted sockets
    listener.bind(("127.0.0.1", 0))
    server = await asyncio.start_server(accept, sock=listener)
    addr = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    client = RemotingClient()
    try:
        await client.invoke_oneway(addr, RemotingCommand.request(NOOP), 2.0)
        channel = client.channel(addr)
        assert channel is not None
        assert channel._transport is not None
        channel._transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        body = b"x" * (1 << 20)
        for _ in range(64):  # fill the socket buffers until the transport pauses writing
            if channel._write_paused:
                break
            channel.invoke_future(RemotingCommand.request(NOOP, body=body), 30.0).add_done_callback(
                lambda f: f.cancelled() or f.exception()
            )
            await asyncio.sleep(0)
        assert channel._write_paused
        pending = len(channel._pending)
        with pytest.raises(RemotingTimeoutError, match=r"could not be written within 0\.200s"):
            await channel.invoke(RemotingCommand.request(NOOP), 0.2)
        future = channel.invoke_future(RemotingCommand.request(NOOP), 0.2)
        with pytest.raises(RemotingTimeoutError, match=r"could not be written within 0\.200s"):
            await future
        waiting = asyncio.ensure_future(channel.invoke(RemotingCommand.request(NOOP), 30.0))
        await asyncio.sleep(0.05)
        waiting.cancel()  # the caller gives up while the call waits for the peer
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert len(channel._pending) == pending  # none of the three calls got an entry
    finally:
        await client.close()
        for w in held:
            w.close()
        server.close()
        await server.wait_closed()
