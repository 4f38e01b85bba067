"""Bodies too long to decode at once on the loop: ``slices.py`` and the processor table's path for them.

The stepwise decoder must give what ``msgpack.unpackb`` / ``json.loads`` give for every valid body
and a ``HeaderError`` for every bad one, and a handler asking for a long body must get it decoded a
slice at a time, with the loop (and every other connection) served in between.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any
from unittest import mock

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.errors import HeaderError
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.shape import Fields, ListOf, Scalar
from rocketpy.remoting import body as body_module
from rocketpy.remoting import slices
from rocketpy.remoting.body import BODY_INLINE_BYTES, SLICES, DecodeInSlices, decode_body
from rocketpy.remoting.command import SERIALIZE_JSON, SERIALIZE_MSGPACK, RemotingCommand
from rocketpy.remoting.processor import ProcessorTable
from tests.waiting import wait_until_async

SCALARS = (
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False)
)  # fmt: skip
DOCS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=60,
)


@settings(max_examples=300, deadline=None)
@given(DOCS)
def test_stepwise_decoding_gives_what_the_one_call_decoders_give(doc: Any) -> None:
    packed = msgpack.packb(doc)
    assert slices.decode_stepwise(packed, SERIALIZE_MSGPACK, "X") == msgpack.unpackb(packed, raw=False)
    for text in (json.dumps(doc), json.dumps(doc, indent=1, ensure_ascii=False)):
        assert slices.decode_stepwise(text.encode(), SERIALIZE_JSON, "X") == json.loads(text)


def test_json_constants_and_integer_keys() -> None:
    text = b"[NaN, Infinity, -Infinity, 1e3, -0.5, 12]"
    got = slices.decode_stepwise(text, SERIALIZE_JSON, "X")
    assert math.isnan(got[0]) and got[1:] == [math.inf, -math.inf, 1000.0, -0.5, 12]
    packed = msgpack.packb({1: "a", "b": {2: [3]}})
    assert slices.decode_stepwise(packed, SERIALIZE_MSGPACK, "X") == {1: "a", "b": {2: [3]}}


@pytest.mark.parametrize(
    ("body", "serialize_type", "match"),
    [
        (b"[1,2", SERIALIZE_JSON, "not a JSON X: expected ',' or ']'"),
        (b'{"a":}', SERIALIZE_JSON, "not a JSON X: unexpected '}'"),
        (b"[1]x", SERIALIZE_JSON, "extra data"),
        (b"{1:2}", SERIALIZE_JSON, "expected a key in quotes"),
        (b"\xff[]", SERIALIZE_JSON, "not a JSON X: 'utf-8' codec"),
        (b'["\\x"]', SERIALIZE_JSON, "not a JSON X: Invalid"),
        (b"[" * 40 + b"]" * 40, SERIALIZE_JSON, "nests deeper than 32 levels"),
        (b"\x92\x01", SERIALIZE_MSGPACK, "cut short"),
        (b"\x91\x01\x02", SERIALIZE_MSGPACK, "extra data"),
        (b"\x81\x91\x01\x02", SERIALIZE_MSGPACK, "map key that is a list"),
        (b"\x91" * 40 + b"\xc0", SERIALIZE_MSGPACK, "nests deeper than 32 levels"),
        (b"\xdd\xff\xff\xff\xff", SERIALIZE_MSGPACK, "cut short"),  # 4 billion elements announced
    ],
)
def test_a_bad_body_is_one_header_error(body: bytes, serialize_type: int, match: str) -> None:
    with pytest.raises(HeaderError, match=match) as info:
        slices.decode_stepwise(body, serialize_type, "X")
    assert len(str(info.value)) < 300


def test_the_containers_of_a_body_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slices, "MAX_BODY_CONTAINERS", 100)
    for body, kind in (
        (msgpack.packb([{}] * 101), SERIALIZE_MSGPACK),
        (json.dumps([[]] * 101).encode(), SERIALIZE_JSON),
    ):
        with pytest.raises(HeaderError, match="holds more than 100 maps and arrays"):
            slices.decode_stepwise(body, kind, "X")


@pytest.mark.parametrize("serialize_type", [SERIALIZE_MSGPACK, SERIALIZE_JSON])
async def test_decoding_in_slices_lets_the_loop_run(serialize_type: int) -> None:
    doc = {f"k{i}": [i, str(i)] for i in range(30_000)}
    body = msgpack.packb(doc) if serialize_type == SERIALIZE_MSGPACK else json.dumps(doc).encode()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    try:
        assert await slices.decode_in_slices(body, serialize_type, "X") == doc
    finally:
        task.cancel()
    assert ticks >= 3  # 120,000 values take several steps of about 1 ms


def test_decode_body_decodes_a_long_body_at_once_outside_a_handler() -> None:
    body = msgpack.packb(["x" * 100] * (BODY_INLINE_BYTES // 100 + 1))
    assert not SLICES.allowed
    assert len(decode_body(body, SERIALIZE_MSGPACK, "X")) == BODY_INLINE_BYTES // 100 + 1  # the SDK's reads


def test_decode_body_asks_a_handler_for_slices_and_then_checks_the_shape() -> None:
    body = msgpack.packb({"items": ["x" * 100] * (BODY_INLINE_BYTES // 100 + 1)})
    shape = Fields({"items": ListOf(Scalar((str,)), 10)})
    with mock.patch.object(SLICES, "allowed", True), pytest.raises(DecodeInSlices) as info:
        decode_body(body, SERIALIZE_MSGPACK, "X", shape)
    assert info.value.body is body and info.value.what == "X"
    doc = slices.decode_stepwise(body, SERIALIZE_MSGPACK, "X")
    with mock.patch.object(SLICES, "predecoded", (body, SERIALIZE_MSGPACK, doc)):
        with pytest.raises(HeaderError, match=r"'X.items' has \d+ entries; the limit is 10"):
            decode_body(body, SERIALIZE_MSGPACK, "X", shape)
        assert decode_body(body, SERIALIZE_MSGPACK, "X") is doc


class FakeChannel:
    remote_addr = "127.0.0.1:1"
    peer = ("127.0.0.1", 1)

    def __init__(self) -> None:
        self.decoding = 0


def _big_request(doc: Any, serialize_type: int = SERIALIZE_MSGPACK) -> RemotingCommand:
    body = msgpack.packb(doc) if serialize_type == SERIALIZE_MSGPACK else json.dumps(doc).encode()
    assert len(body) > BODY_INLINE_BYTES
    cmd = RemotingCommand.request(700, body=body)
    cmd.serialize_type = serialize_type
    return cmd


async def test_a_handler_gets_a_long_body_decoded_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    table = ProcessorTable("test")
    decodes: list[int] = []
    real = slices.decode_in_slices

    async def counted(body: Any, serialize_type: int, what: str) -> Any:
        decodes.append(len(body))
        return await real(body, serialize_type, what)

    monkeypatch.setattr("rocketpy.remoting.processor.decode_in_slices", counted)

    def handler(channel: Any, request: RemotingCommand) -> RemotingCommand:
        doc = body_module.decode_body_map(request.body, request.serialize_type, "Doc")
        return RemotingCommand.response(request, remark=str(len(doc["items"])))

    def guard(channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        body_module.decode_body_map(request.body, request.serialize_type, "Doc")  # the ACL reads it too
        return None

    table.register(700, handler)
    table.set_guard(guard)
    channel = FakeChannel()
    for serialize_type in (SERIALIZE_MSGPACK, SERIALIZE_JSON):
        request = _big_request({"items": ["x" * 50] * 1000}, serialize_type)
        pending = table.dispatch(channel, request)  # type: ignore[arg-type]
        assert asyncio.iscoroutine(pending) and channel.decoding == 1  # counted before the task runs
        response = await pending
        assert response.remark == "1000" and channel.decoding == 0
    assert len(decodes) == 2  # once per request: the guard and the handler share the document
    assert not SLICES.allowed and SLICES.predecoded is None


async def test_a_bad_long_body_is_answered_invalid_parameter() -> None:
    table = ProcessorTable("test")
    table.register(
        700, lambda ch, req: RemotingCommand.response(req, remark=str(decode_body(req.body, 16, "Doc")))
    )
    channel = FakeChannel()
    request = _big_request(["x" * 100] * 400)
    request.body = request.body + b"\xc1"  # trailing garbage
    task = asyncio.ensure_future(table.dispatch(channel, request))  # type: ignore[arg-type]
    await asyncio.wait([task])
    response = table.task_response(channel, request, task)  # type: ignore[arg-type]
    assert response is not None and response.code == ResponseCode.INVALID_PARAMETER
    assert "not a msgpack Doc" in (response.remark or "") and channel.decoding == 0


async def test_other_connections_are_served_while_a_long_body_is_decoded() -> None:
    from rocketpy.remoting import RemotingClient, RemotingServer

    server = RemotingServer("127.0.0.1", 0, name="slices")
    order: list[str] = []

    def big(channel: Any, request: RemotingCommand) -> RemotingCommand:
        doc = decode_body(request.body, request.serialize_type, "Doc")
        order.append("big")
        return RemotingCommand.response(request, remark=str(len(doc)))

    def noop(channel: Any, request: RemotingCommand) -> RemotingCommand:
        order.append(f"noop{request.ext['n'] if request.ext else ''}")
        return RemotingCommand.response(request)

    server.register_processor(700, big)
    server.register_processor(701, noop)
    await server.start()
    addr = f"127.0.0.1:{server.port}"
    heavy, polite = RemotingClient(), RemotingClient()
    try:
        await polite.invoke(addr, RemotingCommand.request(701), 5)  # connected
        order.clear()
        body = msgpack.packb(list(range(400_000)))  # several hundred ms of steps
        big_call = heavy.invoke_future(addr, RemotingCommand.request(700, body=body), 30)
        after_big = heavy.invoke_future(
            addr, RemotingCommand.request(701, ext={"n": 1}), 30
        )  # same connection
        await wait_until_async(lambda: any(ch.decoding for ch in server.channels), 10, interval=0.001)
        await polite.invoke(addr, RemotingCommand.request(701, ext={"n": 2}), 5)  # served meanwhile
        assert not big_call.done() and order == ["noop2"]
        assert (await big_call).remark == "400000"
        await after_big
        assert order.index("noop2") < order.index("big") < order.index("noop1")
    finally:
        await heavy.close()
        await polite.close()
        await server.shutdown(1)
