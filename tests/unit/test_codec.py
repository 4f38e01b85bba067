"""Frame codec: round trips, split feeding, and rejection of malformed streams."""

from __future__ import annotations

import resource
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy.limits import MAX_HEADER_ITEMS
from rocketpy.remoting.codec import (
    ASSEMBLE_BODY_BYTES,
    FrameDecoder,
    FrameError,
    encode_frame,
    encode_frame_bytes,
)
from rocketpy.remoting.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_MSGPACK,
    RemotingCommand,
)

ext_values = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1), st.text(max_size=40), st.booleans()
)
ext_maps: st.SearchStrategy[dict[str, Any] | None] = st.one_of(
    st.none(), st.just({}), st.dictionaries(st.text(max_size=20), ext_values, max_size=12)
)
bodies = st.one_of(
    st.just(b""),
    st.binary(max_size=2048),
    st.integers(min_value=1, max_value=4 * 1024 * 1024).map(lambda n: bytes([n % 251]) * n),
)
commands = st.builds(
    RemotingCommand,
    code=st.integers(min_value=0, max_value=65535),
    opaque=st.integers(min_value=0, max_value=2**31 - 1),
    flag=st.sampled_from([0, FLAG_RESPONSE, FLAG_ONEWAY, FLAG_RESPONSE | FLAG_ONEWAY]),
    remark=st.one_of(st.none(), st.text(max_size=200)),
    ext=ext_maps,
    body=bodies,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cmd=commands)
def test_round_trip(cmd: RemotingCommand) -> None:
    decoded = FrameDecoder().feed(encode_frame_bytes(cmd))
    assert decoded == [cmd]
    assert decoded[0].ext == cmd.ext  # nil stays nil, empty stays empty


@settings(max_examples=80, deadline=None)
@given(cmds=st.lists(commands.filter(lambda c: len(c.body) < 4096), min_size=1, max_size=8), data=st.data())
def test_split_feeding_at_arbitrary_boundaries(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    stream = b"".join(encode_frame_bytes(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=12)))
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        out.extend(decoder.feed(stream[start:cut]))
        start = cut
    assert out == cmds
    assert decoder.buffered_bytes == 0


def test_byte_at_a_time() -> None:
    cmd = RemotingCommand.request(105, {"topic": "TopicA", "n": 3, "ok": True}, b"hello")
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for byte in encode_frame_bytes(cmd):
        out.extend(decoder.feed(bytes([byte])))
    assert out == [cmd]


def test_large_body_is_not_copied_on_encode() -> None:
    body = bytearray(1024 * 1024)
    parts = encode_frame(RemotingCommand.request(10, {"topic": "T"}, body))
    assert len(parts) == 2
    assert isinstance(parts[1], memoryview) and parts[1].obj is body


def test_small_frame_is_one_buffer_with_rocketmq_prefix() -> None:
    cmd = RemotingCommand.request(105, {"topic": "T"}, b"abc")
    parts = encode_frame(cmd)
    assert len(parts) == 1
    frame = bytes(parts[0])
    length, type_and_len = struct.unpack_from(">II", frame)
    assert length == len(frame) - 4
    assert type_and_len >> 24 == SERIALIZE_MSGPACK
    header = frame[8 : 8 + (type_and_len & 0xFFFFFF)]
    assert msgpack.unpackb(header) == [105, 0, 0, None, {"topic": "T"}]
    assert frame.endswith(b"abc")


def _max_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


@pytest.mark.parametrize("fed", [4, 8, 64])
def test_oversize_length_prefix_rejected_without_allocating(fed: int) -> None:
    before = _max_rss_kib()
    prefix = struct.pack(">II", 2 * 1024**3, (SERIALIZE_MSGPACK << 24) | 3)
    decoder = FrameDecoder(max_frame_bytes=16 * 1024 * 1024)
    with pytest.raises(FrameError, match="exceeds maxFrameBytes"):
        decoder.feed((prefix + b"\x00" * 64)[:fed])
    assert decoder.buffered_bytes == 0
    assert _max_rss_kib() - before < 64 * 1024  # far below the announced 2 GiB


def test_oversize_detected_after_split_prefix() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    assert decoder.feed(b"\x00\x00") == []
    with pytest.raises(FrameError):
        decoder.feed(b"\x10\x00")


def test_unknown_serialize_type() -> None:
    frame = bytearray(encode_frame_bytes(RemotingCommand.request(105)))
    frame[4] = 0x7F
    with pytest.raises(FrameError, match="unknown serialize type 0x7f"):
        FrameDecoder().feed(bytes(frame))


@pytest.mark.parametrize(
    "header",
    [
        b"\xc1\xc1\xc1",  # reserved msgpack byte
        msgpack.packb([1, 2, 3]),  # wrong arity
        msgpack.packb("hello"),
        msgpack.packb(["x", 0, 0, None, None]),  # code not an int
        msgpack.packb([1, 0, 0, 5, None]),  # remark not a string
        msgpack.packb([1, 0, 0, None, [1]]),  # ext not a map
        msgpack.packb([1, 0, 0, None, {1: 2}]),  # non-str key
        msgpack.packb([1, 0, 0, None, None]) + b"\x00",  # trailing bytes
    ],
)
def test_garbage_header(header: bytes) -> None:
    frame = struct.pack(">II", 4 + len(header), (SERIALIZE_MSGPACK << 24) | len(header)) + header
    decoder = FrameDecoder()
    with pytest.raises(FrameError):
        decoder.feed(frame)
    with pytest.raises(FrameError, match="already failed"):
        decoder.feed(b"")


def test_header_length_beyond_frame() -> None:
    with pytest.raises(FrameError, match="header length"):
        FrameDecoder().feed(struct.pack(">II", 6, (SERIALIZE_MSGPACK << 24) | 100) + b"\x90\x90")


def test_length_shorter_than_type_field() -> None:
    with pytest.raises(FrameError, match="shorter"):
        FrameDecoder().feed(struct.pack(">I", 2))


def test_truncated_frame_is_buffered_not_decoded() -> None:
    frame = encode_frame_bytes(RemotingCommand.request(105, body=b"x" * 100))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:-1]) == []
    assert decoder.buffered_bytes == len(frame) - 1
    assert len(decoder.feed(frame[-1:])) == 1


def test_response_helpers() -> None:
    req = RemotingCommand(105, opaque=77)
    resp = RemotingCommand.response(req, 17, "no topic")
    assert resp.is_response and not resp.is_oneway
    assert (resp.opaque, resp.code, resp.remark, resp.serialize_type) == (
        77,
        17,
        "no topic",
        req.serialize_type,
    )
    assert RemotingCommand.request(34, oneway=True).is_oneway


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ([1, 2, 3, None], "5-element array"),
        ([1, 2, 3, None, None, 6], "5-element array"),
        ({"a": 1}, "5-element array"),
        (["1", 2, 0, None, None], "must be ints"),
        ([1, 2.5, 0, None, None], "must be ints"),
        ([1, 2, 0, 7, None], "remark must be a string"),
        ([1, 2, 0, None, [1]], "ext must be a map"),
    ],
)
def test_inline_header_checks_reject_bad_fields(fields: object, match: str) -> None:
    header = msgpack.packb(fields)
    frame = struct.pack(">II", 4 + len(header), (0x10 << 24) | len(header)) + header
    with pytest.raises(FrameError, match=match):
        FrameDecoder().feed(frame)


def test_inline_header_decode_builds_full_command() -> None:
    frame = encode_frame_bytes(RemotingCommand(310, 7, 2, "r", {"a": 1}, b"xyz"))
    (cmd,) = FrameDecoder().feed(frame + frame[:5])
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext, cmd.body) == (
        310,
        7,
        2,
        "r",
        {"a": 1},
        b"xyz",
    )
    assert cmd.serialize_type == 0x10 and cmd.is_oneway


def _msgpack_frame(fields: object, body: bytes = b"") -> bytes:
    header = msgpack.packb(fields)
    return struct.pack(">II", 4 + len(header) + len(body), (0x10 << 24) | len(header)) + header + body


def test_header_over_max_header_bytes_closes_at_its_prefix() -> None:
    frame = _msgpack_frame([105, 1, 0, "r" * 5000, None])
    decoder = FrameDecoder(max_header_bytes=4096)
    with pytest.raises(FrameError, match=r"header of 50\d\d bytes exceeds maxHeaderBytes=4096"):
        decoder.feed(frame[:8])  # the 8-byte prefix is enough: nothing of the header is buffered
    assert FrameDecoder(max_header_bytes=8192).feed(frame)[0].remark == "r" * 5000
    with pytest.raises(ValueError, match="max_header_bytes"):
        FrameDecoder(max_header_bytes=1 << 24)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ([105, 1, 0, None, {f"k{i}": i for i in range(MAX_HEADER_ITEMS + 1)}], "exceeds max_map_len"),
        ([105, 1, 0, None, {"k": [0] * (MAX_HEADER_ITEMS + 1)}], "exceeds max_array_len"),
        ([105] * 1_000_000, "exceeds max_array_len"),
    ],
)
def test_header_items_are_bounded_before_they_are_decoded(fields: object, match: str) -> None:
    with pytest.raises(FrameError, match=match) as info:
        FrameDecoder(max_header_bytes=1 << 23).feed(_msgpack_frame(fields))
    assert len(info.value.reason) < 300  # never the header itself


def test_a_header_of_max_items_fields_is_decoded_for_its_handler_to_answer() -> None:
    ext = {f"k{i}": i for i in range(MAX_HEADER_ITEMS)}  # past check_ext's 256: INVALID_PARAMETER
    (cmd,) = FrameDecoder().feed(_msgpack_frame([105, 1, 0, None, ext]))
    assert cmd.ext == ext


@pytest.mark.parametrize("step", [1, 4096, 300_000, 1 << 22])
def test_a_large_body_is_assembled_in_place(step: int) -> None:
    body = bytes(range(256)) * (ASSEMBLE_BODY_BYTES // 256 + 3)
    first = encode_frame_bytes(RemotingCommand(10, 1, 0, None, {"a": 1}, body))
    second = encode_frame_bytes(RemotingCommand(11, 2, 0, None, None, b"tail"))
    data = first + second + second[:5]
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    for pos in range(0, len(data), step):
        got += decoder.feed(data[pos : pos + step], max_frames=1)
        assert decoder.buffered_bytes <= len(first) + len(second)
    got += decoder.feed(b"", max_frames=1)
    assert [(c.code, c.ext, c.body) for c in got] == [(10, {"a": 1}, body), (11, None, b"tail")]
    assert type(got[0].body) is bytes and decoder.buffered_bytes == 5
