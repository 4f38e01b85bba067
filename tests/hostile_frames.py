"""Hostile input for the fuzz tests: frames and request documents a protocol fuzz sends.

``frame_of_kind`` builds one input of each kind in ``KINDS``: random bytes, mutated and truncated
valid frames, oversized length prefixes and undecodable headers (``MUST_CLOSE``: the kinds a server
must answer by closing the connection), well-framed requests of every request code with random
header fields and bodies (``malformed``; the server must answer them, never raise), and cheap
valid requests meant to be pipelined by the thousand (``flood``). ``RawMap`` and ``pack`` build
msgpack maps Python dicts cannot hold (array, map or nil keys).

``EXPENSIVE_KINDS`` are legal frames that are costly to take in: 1-8 MiB remarks, 200,000-entry ext
maps, 1,000,000-element arrays, nesting 64 to 100,000 deep (in headers and in structured bodies,
msgpack and JSON) and a 15 MiB frame (``big_frame``, sent every ``EXPENSIVE_PAUSE_S`` seconds). A
daemon answers them or closes the connection, and no one of them may hold its loop for long.
They are built once per process (``expensive_frame``) and sent one at a time.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable
from typing import Any

import msgpack

from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.codec import encode_frame_bytes
from rocketpy.remoting.command import SERIALIZE_JSON, SERIALIZE_MSGPACK, RemotingCommand

#: Kinds of hostile input, and those after which the server must close the connection.
KINDS = ("random", "mutated", "truncated", "oversized", "bad_header", "malformed", "flood")
MUST_CLOSE = ("oversized", "bad_header")
#: Legal-but-expensive kinds (``expensive_frame``), and the pause after each frame of a kind.
EXPENSIVE_KINDS = ("big_remark", "wide_ext", "long_array", "deep_nesting", "big_body", "big_frame")
EXPENSIVE_PAUSE_S = {"big_frame": 3.0}

#: Field names the daemons read from headers and bodies (so random documents reach the handlers'
#: checks, not only the "missing field" path), plus SEND_MESSAGE_V2's one-letter names.
VOCABULARY = (
    "topic consumerGroup clientId clientID mqSet brokerName queueId groupName consumerDataSet "
    "producerDataSet subscriptionDataSet subString expressionType topicConfigTable offsetTable "
    "dataVersion counter timestamp brokerAddr brokerId clusterName haServerAddr perm readQueueNums "
    "writeQueueNums commitOffset queueOffset maxMsgNums sysFlag subVersion suspendTimeoutMillis "
    "producerGroup transactionId commitOrRollback msgId offsetMsgId key value namespace properties "
    "delayLevel originMsgId originTopic maxReconsumeTimes unitMode batch bornTimestamp flag "
    "defaultTopic defaultTopicQueueNums consumeFromWhere consumeType messageModel filterServerList "
    "a b c d e f g h i j k l m n"
).split()

REQUEST_CODES = tuple(int(code) for code in RequestCode)


class RawMap:
    """A msgpack map whose keys may be anything (arrays, maps, nil): Python dicts cannot hold them."""

    def __init__(self, pairs: list[tuple[Any, Any]]) -> None:
        self.pairs = pairs


def pack(obj: Any) -> bytes:
    """msgpack ``obj``; ``RawMap`` anywhere inside becomes a map with its keys as given."""
    if isinstance(obj, RawMap):
        n = len(obj.pairs)
        head = bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)
        return head + b"".join(pack(k) + pack(v) for k, v in obj.pairs)
    if isinstance(obj, list):
        n = len(obj)
        head = bytes([0x90 | n]) if n < 16 else b"\xdc" + struct.pack(">H", n)
        return head + b"".join(pack(item) for item in obj)
    if isinstance(obj, dict):
        return pack(RawMap(list(obj.items())))
    return msgpack.packb(obj, use_bin_type=True)


def random_scalar(rng: random.Random) -> Any:
    """An int (small, huge, negative), str, bool, nil, float or bytes."""
    choice = rng.randrange(9)
    if choice == 0:
        return rng.randrange(-(2**63), 2**64)
    if choice == 1:
        return rng.randrange(-3, 20)
    if choice == 2:
        return rng.choice(VOCABULARY)
    if choice == 3:
        return "".join(chr(rng.randrange(32, 0x2FF)) for _ in range(rng.randrange(0, 40)))
    if choice == 4:
        return rng.random() < 0.5
    if choice == 5:
        return None
    if choice == 6:
        return rng.uniform(-1e9, 1e9)
    if choice == 7:
        return rng.randbytes(rng.randrange(0, 20))
    return str(rng.randrange(-5, 100))


def random_doc(rng: random.Random, depth: int = 0) -> Any:
    """A random document: scalars, lists, maps with known field names, maps with unhashable keys."""
    roll = rng.random()
    if depth > 4 or roll < 0.35:
        return random_scalar(rng)
    if roll < 0.55:
        return [random_doc(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    if roll < 0.92:
        return {rng.choice(VOCABULARY): random_doc(rng, depth + 1) for _ in range(rng.randrange(0, 6))}
    odd_keys = ([1, 2], {"k": 1}, None, 1.5, b"\x00", True)
    return RawMap([(rng.choice(odd_keys), random_doc(rng, depth + 1)) for _ in range(rng.randrange(1, 3))])


def random_body(rng: random.Random) -> bytes:
    """A request body: a random document, a deep nesting, a wrong container, or raw garbage."""
    roll = rng.random()
    if roll < 0.65:
        return pack(random_doc(rng))
    if roll < 0.75:
        return b"\x91" * rng.choice((33, 200, 2000, 100_000)) + b"\x01"
    if roll < 0.85:  # a map of the right fields with lists where maps and strings belong
        return pack({name: [[random_scalar(rng)]] for name in rng.sample(VOCABULARY, 6)})
    if roll < 0.92:
        doc = {rng.choice(VOCABULARY): random_scalar(rng) if rng.random() < 0.5 else [1]}
        return json.dumps(doc, default=repr).encode()
    return rng.randbytes(rng.randrange(0, 64))


def random_ext(rng: random.Random) -> dict[str, Any]:
    """Header fields with known names and values of random types (maps and lists included)."""
    ext: dict[str, Any] = {}
    for _ in range(rng.randrange(0, 8)):
        value = random_scalar(rng) if rng.random() < 0.8 else random_doc(rng, 3)
        if isinstance(value, RawMap):
            value = {"x": 1}
        ext[rng.choice(VOCABULARY)] = value
    return ext


def malformed_request(rng: random.Random, code: int | None = None) -> bytes:
    """A well-framed request of ``code`` (random when None) with random header fields and body."""
    code = rng.choice(REQUEST_CODES) if code is None else code
    body = random_body(rng) if rng.random() < 0.8 else b""
    if rng.random() < 0.2:  # RocketMQ's JSON clients: string-valued extFields
        ext = {k: str(v) for k, v in random_ext(rng).items()}
        cmd = RemotingCommand(code, rng.randrange(1 << 31), 0, None, ext, body, SERIALIZE_JSON)
    else:
        ext = {k: v for k, v in random_ext(rng).items() if not isinstance(v, RawMap)}
        cmd = RemotingCommand(code, rng.randrange(1 << 31), 0, None, ext, body, SERIALIZE_MSGPACK)
    try:
        return encode_frame_bytes(cmd)
    except (ValueError, TypeError, OverflowError):  # e.g. an int msgpack cannot hold
        return encode_frame_bytes(RemotingCommand(code, 1, 0, None, None, body))


def oversized_frame(rng: random.Random) -> bytes:
    """A length prefix over every daemon's maxFrameBytes (16 MiB), then a little of its promise."""
    length = rng.choice((16 * 1024 * 1024 + 1, 1 << 30, 0xFFFFFFFF, rng.randrange(17 << 20, 1 << 32)))
    return struct.pack(">II", length, (SERIALIZE_MSGPACK << 24) | 5) + rng.randbytes(rng.randrange(0, 64))


def bad_header_frame(rng: random.Random) -> bytes:
    """A frame whose header cannot be decoded: garbage msgpack/JSON, unknown serialize type, bad shape."""
    roll = rng.randrange(5)
    if roll == 0:
        header, stype = b"\xc1" + rng.randbytes(rng.randrange(0, 30)), SERIALIZE_MSGPACK
    elif roll == 1:
        header, stype = msgpack.packb([1, 2, 3]), SERIALIZE_MSGPACK  # wrong arity
    elif roll == 2:
        header, stype = b"{not json" + rng.randbytes(8), SERIALIZE_JSON
    elif roll == 3:
        header, stype = b"\x95\xa1x\x01\x00\xc0\xc0", SERIALIZE_MSGPACK  # code is a string
    else:
        header, stype = b"\x00\x00", rng.choice((0x01, 0x7F, 0xFF))  # unknown serialize type
    body = rng.randbytes(rng.randrange(0, 32))
    return struct.pack(">II", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def mutated_frame(rng: random.Random) -> bytes:
    """A malformed request with a few random bytes flipped (the length prefix included)."""
    frame = bytearray(malformed_request(rng))
    for _ in range(rng.randrange(1, 4)):
        frame[rng.randrange(len(frame))] = rng.randrange(256)
    return bytes(frame)


def truncated_frame(rng: random.Random) -> bytes:
    """The first part of a malformed request (the stream continues with the next frame)."""
    frame = malformed_request(rng)
    return frame[: rng.randrange(1, len(frame))]


def flood_request(rng: random.Random) -> bytes:
    """A small well-formed request answered at once (sent in thousands per write: a pipelining flood)."""
    code = rng.choice(
        (RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 9999)
    )
    return encode_frame_bytes(RemotingCommand(int(code), rng.randrange(1 << 31), 0, None, None, b""))


def frame_of_kind(rng: random.Random, kind: str) -> bytes:
    """One input of ``kind`` (see ``KINDS``)."""
    return _MAKERS[kind](rng)


_MAKERS: dict[str, Callable[[random.Random], bytes]] = {
    "random": lambda rng: rng.randbytes(rng.randrange(1, 200)),
    "mutated": mutated_frame,
    "truncated": truncated_frame,
    "oversized": oversized_frame,
    "bad_header": bad_header_frame,
    "malformed": malformed_request,
    "flood": flood_request,
}

#: Frames per write for each kind (a flood pipelines many; the others come in small bursts).
BURST = {"flood": 2000}


def _msgpack_frame(header: bytes, body: bytes = b"") -> bytes:
    return (
        struct.pack(">II", 4 + len(header) + len(body), (SERIALIZE_MSGPACK << 24) | len(header))
        + header
        + body
    )


def _json_frame(header: bytes, body: bytes = b"") -> bytes:
    return (
        struct.pack(">II", 4 + len(header) + len(body), (SERIALIZE_JSON << 24) | len(header)) + header + body
    )


def _header(code: int, remark: Any = None, ext: Any = None) -> bytes:
    return msgpack.packb([code, 7, 0, remark, ext], use_bin_type=True)


def _json_header(code: int, remark: str | None = None, ext_raw: bytes = b"{}") -> bytes:
    head = b'{"code":%d,"flag":0,"language":"JAVA","opaque":7,"version":479' % code
    if remark is not None:
        head += b',"remark":' + json.dumps(remark).encode()
    return head + b',"extFields":' + ext_raw + b"}"


#: Codes the daemons serve whose requests carry a structured body (decoded by the daemon).
_BODY_CODES = (RequestCode.HEART_BEAT, RequestCode.LOCK_BATCH_MQ, RequestCode.REGISTER_BROKER,
               RequestCode.QUERY_DATA_VERSION)  # fmt: skip
_ROUTE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)
_OFFSET = int(RequestCode.GET_MAX_OFFSET)
_DEPTHS = (64, 1000, 100_000)


def _build_expensive(kind: str) -> list[bytes]:
    """Every frame of an expensive kind (a few variants each)."""
    mib = 1 << 20
    if kind == "big_remark":
        return [_msgpack_frame(_header(code, "r" * (n * mib), {"topic": "T"})) for n, code in
                ((1, _ROUTE), (2, _OFFSET), (4, _ROUTE), (8, _OFFSET))] + [
            _json_frame(_json_header(_ROUTE, "r" * mib, b'{"topic":"T"}'))]  # fmt: skip
    if kind == "wide_ext":
        wide = {f"k{i}": f"v{i}" for i in range(200_000)}
        wide_json = b"{" + b",".join(b'"k%d":"v%d"' % (i, i) for i in range(200_000)) + b"}"
        return [_msgpack_frame(_header(_ROUTE, None, wide)), _msgpack_frame(_header(_OFFSET, None, wide)),
                _json_frame(_json_header(_ROUTE, None, wide_json))]  # fmt: skip
    if kind == "long_array":
        million = [None] * 1_000_000
        frames = [
            _msgpack_frame(_header(_ROUTE, None, {"topic": million})),
            _msgpack_frame(msgpack.packb([_OFFSET] * 1_000_000)),
            _json_frame(_json_header(_ROUTE, None, b'{"topic":[' + b",".join([b"0"] * 1_000_000) + b"]}")),
        ]
        frames += [_msgpack_frame(_header(int(code)), msgpack.packb(million)) for code in _BODY_CODES]
        return frames + [
            _json_frame(_json_header(int(code)), json.dumps(million).encode()) for code in _BODY_CODES
        ]
    if kind == "deep_nesting":
        frames = []
        for depth in _DEPTHS:
            nested = b"\x91" * depth + b"\xc0"
            frames.append(_msgpack_frame(b"\x95" + msgpack.packb(_ROUTE) + b"\x07\x00\xc0\x81\xa1k" + nested))
            frames.append(
                _json_frame(_json_header(_ROUTE, None, b'{"k":' + b"[" * depth + b"]" * depth + b"}"))
            )
            for code in _BODY_CODES:
                frames.append(_msgpack_frame(_header(int(code)), nested))
                frames.append(_json_frame(_json_header(int(code)), b"[" * depth + b"]" * depth))
        return frames
    if kind == "big_body":
        wide_map = {f"k{i}": i for i in range(200_000)}
        frames = [_msgpack_frame(_header(int(code)), msgpack.packb(wide_map)) for code in _BODY_CODES]
        return frames + [
            _json_frame(_json_header(int(code)), json.dumps(wide_map).encode()) for code in _BODY_CODES
        ]
    if kind == "big_frame":
        body = b"b" * (15 * mib)
        return [_msgpack_frame(_header(_ROUTE, None, {"topic": "T"}), body),
                _msgpack_frame(_header(_OFFSET, None, {"topic": "T", "queueId": 0}), body)]  # fmt: skip
    raise ValueError(f"not an expensive kind: {kind}")


_EXPENSIVE: dict[str, list[bytes]] = {}


def expensive_frame(rng: random.Random, kind: str) -> bytes:
    """One legal-but-expensive frame of ``kind`` (see ``EXPENSIVE_KINDS``)."""
    frames = _EXPENSIVE.get(kind)
    if frames is None:
        frames = _EXPENSIVE[kind] = _build_expensive(kind)
    return rng.choice(frames)
