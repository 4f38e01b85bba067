"""JSON headers (serialize type 0x00): RocketMQ's clients' frames, decoded and answered."""

from __future__ import annotations

import json
import struct

import pytest

from rocketpy.limits import DEFAULT_MAX_HEADER_BYTES
from rocketpy.remoting.codec import FrameDecoder, FrameError, encode_frame_bytes
from rocketpy.remoting.command import FLAG_RESPONSE, SERIALIZE_JSON, SERIALIZE_MSGPACK, RemotingCommand


def json_frame(header: bytes, body: bytes = b"", serialize_type: int = SERIALIZE_JSON) -> bytes:
    return (
        struct.pack(">II", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body
    )


#: A SEND_MESSAGE header as rocketmq-client-cpp 1.2 writes it (jsoncpp FastWriter, trailing newline).
CPP_SEND = (
    b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"c2ln",'
    b'"batch":"0","bornTimestamp":"1700000000000","defaultTopic":"TBW102","defaultTopicQueueNums":4,'
    b'"flag":0,"producerGroup":"pg","properties":"TAGS\\u0001a\\u0002","queueId":3,'
    b'"reconsumeTimes":"0","sysFlag":0,"topic":"caf\xc3\xa9 \xe2\x9c\x93","unitMode":"false"},'
    b'"flag":0,"language":"CPP","opaque":0,"remark":"","serializeTypeCurrentRPC":"JSON","version":63}\n'
)


def test_cpp_client_header_decodes() -> None:
    [cmd] = FrameDecoder().feed(json_frame(CPP_SEND, b"hello"))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.serialize_type) == (10, 0, 0, "", SERIALIZE_JSON)
    assert cmd.body == b"hello"
    assert cmd.ext is not None
    assert cmd.ext["queueId"] == 3 and cmd.ext["bornTimestamp"] == "1700000000000"
    assert cmd.ext["topic"] == "café ✓" and cmd.ext["properties"] == "TAGS\x01a\x02"


def test_answer_is_json_with_string_ext_values() -> None:
    [req] = FrameDecoder().feed(json_frame(CPP_SEND))
    resp = RemotingCommand.response(req, ext={"queueId": 3, "queueOffset": 12, "msgId": "AB", "ok": True})
    frame = encode_frame_bytes(resp)
    assert frame[4] == SERIALIZE_JSON
    header_len = struct.unpack(">I", frame[4:8])[0] & 0xFFFFFF
    doc = json.loads(frame[8 : 8 + header_len])
    assert list(doc) == sorted(doc)
    assert doc["extFields"] == {"queueId": "3", "queueOffset": "12", "msgId": "AB", "ok": "true"}
    assert (doc["code"], doc["flag"], doc["opaque"]) == (0, FLAG_RESPONSE, 0)
    [back] = FrameDecoder().feed(frame)
    assert back.serialize_type == SERIALIZE_JSON and back.ext == doc["extFields"]


def test_answer_without_ext_still_has_ext_fields() -> None:
    frame = encode_frame_bytes(RemotingCommand(1, 5, FLAG_RESPONSE, None, None, b"x", SERIALIZE_JSON))
    header_len = struct.unpack(">I", frame[4:8])[0] & 0xFFFFFF
    doc = json.loads(frame[8 : 8 + header_len])
    assert doc["extFields"] == {} and "remark" not in doc
    assert frame[8 + header_len :] == b"x"


def test_unknown_keys_ignored_and_null_ext_values_absent() -> None:
    header = json.dumps(
        {"code": 105, "opaque": 7, "extFields": {"topic": "T", "gone": None}, "whatever": [1, {"a": 2}]}
    ).encode()
    [cmd] = FrameDecoder().feed(json_frame(header))
    assert cmd.ext == {"topic": "T"} and cmd.flag == 0 and cmd.remark is None


def test_json_and_msgpack_frames_interleave_on_one_stream() -> None:
    mp = encode_frame_bytes(RemotingCommand(105, 1, 0, None, {"topic": "A"}))
    js = encode_frame_bytes(RemotingCommand(105, 2, 0, None, {"topic": "B"}, b"", SERIALIZE_JSON))
    decoder = FrameDecoder()
    stream = mp + js + mp
    out = [c for i in range(0, len(stream), 7) for c in decoder.feed(stream[i : i + 7])]
    assert [(c.opaque, c.serialize_type, c.ext) for c in out] == [
        (1, SERIALIZE_MSGPACK, {"topic": "A"}),
        (2, SERIALIZE_JSON, {"topic": "B"}),
        (1, SERIALIZE_MSGPACK, {"topic": "A"}),
    ]


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (b"{not json", "undecodable JSON header"),
        (b"\xff\xfe{}", "undecodable JSON header"),
        (b"[1,2]", "must be an object"),
        (b'{"opaque":1}', "'code' must be a 32-bit integer"),
        (b'{"code":"10"}', "'code' must be a 32-bit integer"),
        (b'{"code":true}', "'code' must be a 32-bit integer"),
        (b'{"code":1,"opaque":1.5}', "'opaque' must be"),
        (b'{"code":1,"remark":3}', "'remark' must be a string"),
        (b'{"code":1,"extFields":[1]}', "'extFields' must be an object"),
        (b'{"code":1,"extFields":{"a":{"b":1}}}', "must be a string or integer"),
        (b'{"code":1,"extFields":{"a":1.5}}', "must be a string or integer"),
        (b"[" * 100_000 + b"]" * 100_000, "exceeds maxHeaderBytes"),
        (b'{"code":1,"remark":"' + b"x" * DEFAULT_MAX_HEADER_BYTES + b'"}', "exceeds maxHeaderBytes"),
        (b'{"code":1,"x":[' + b"1," * 3000 + b"1]}", "has 3001 items; the limit is 2048"),
        (b'{"code":1,"x":' + b"[" * 17 + b"]" * 17 + b"}", "holds 18 objects and arrays; the limit is 16"),
        (b'{"code":1,"opaque":' + b"9" * 5000 + b"}", "undecodable JSON header"),
    ],
)
def test_malformed_json_header_is_one_frame_error(header: bytes, reason: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError, match=reason) as info:
        decoder.feed(json_frame(header))
    assert len(info.value.reason) < 300


def test_deeply_nested_header_within_size_limit() -> None:
    header = b'{"code":1,"x":' + b"[" * 30_000 + b"]" * 30_000 + b"}"
    with pytest.raises(FrameError, match=r"holds 30001 objects and arrays"):
        FrameDecoder().feed(json_frame(header))
