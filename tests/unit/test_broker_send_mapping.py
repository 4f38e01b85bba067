"""Unit tests of the send path's pure parts: send header reading, UNIQ_KEY lookup, status mapping."""

from __future__ import annotations

import pytest

from rocketpy.broker.processors.send import PUT_RESPONSES, put_status_to_response
from rocketpy.broker.store import PutMessageResult, PutMessageStatus
from rocketpy.errors import HeaderError
from rocketpy.message import properties_to_string
from rocketpy.message_props import UNIQ_SEP, get_property
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.send import V1_NAMES, V2_NAMES, SendMessageRequestHeader, read_typical_v2


def test_unique_key_lookup() -> None:
    props = properties_to_string({"TAGS": "A", "UNIQ_KEY": "ABC123", "KEYS": "k"})
    assert get_property(props, UNIQ_SEP) == "ABC123"
    assert get_property(properties_to_string({"UNIQ_KEY": "X"}), UNIQ_SEP) == "X"
    assert get_property(properties_to_string({"NOT_UNIQ_KEY": "X"}), UNIQ_SEP) is None
    assert get_property("", UNIQ_SEP) is None


def test_send_header_v1_v2_and_errors() -> None:
    v2 = SendMessageRequestHeader.from_ext({"a": "pg", "b": "T", "e": "3", "i": "", "f": 0}, v2=True)
    assert (v2.topic, v2.queue_id, v2.default_topic, v2.default_topic_queue_nums) == ("T", 3, "TBW102", 4)
    v1 = SendMessageRequestHeader.from_ext(
        {"producerGroup": "pg", "topic": "T", "queueId": 1, "defaultTopicQueueNums": 8}, v2=False
    )
    assert (v1.topic, v1.queue_id, v1.default_topic_queue_nums) == ("T", 1, 8)
    with pytest.raises(HeaderError, match="'b'"):
        SendMessageRequestHeader.from_ext({"a": "pg", "e": 0}, v2=True)
    with pytest.raises(HeaderError, match="int32"):
        SendMessageRequestHeader.from_ext({"b": "T", "e": 1 << 40}, v2=True)
    with pytest.raises(HeaderError, match="integer"):
        SendMessageRequestHeader.from_ext({"b": "T", "e": "zero"}, v2=True)


@pytest.mark.parametrize(
    ("status", "code", "words"),
    [
        (PutMessageStatus.PUT_OK, ResponseCode.SUCCESS, None),
        (PutMessageStatus.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_DISK_TIMEOUT, "syncFlushTimeout=5000"),
        (PutMessageStatus.SERVICE_NOT_AVAILABLE, ResponseCode.SERVICE_NOT_AVAILABLE, "free disk space"),
        (PutMessageStatus.MESSAGE_ILLEGAL, ResponseCode.MESSAGE_ILLEGAL, "fix the message"),
        (PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, ResponseCode.MESSAGE_ILLEGAL, "fix the message"),
        (PutMessageStatus.FLUSH_SLAVE_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT, "syncFlushTimeout=5000"),
        (PutMessageStatus.SLAVE_NOT_AVAILABLE, ResponseCode.SLAVE_NOT_AVAILABLE, "no slave"),
        (PutMessageStatus.CREATE_MAPPED_FILE_FAILED, ResponseCode.SYSTEM_ERROR, "broker log"),
        (PutMessageStatus.UNKNOWN_ERROR, ResponseCode.SYSTEM_ERROR, "broker log"),
    ],
)
def test_put_status_mapping(status: PutMessageStatus, code: int, words: str | None) -> None:
    got_code, remark = put_status_to_response(PutMessageResult(status, "disk 91% full"), 5000)
    assert got_code == code
    if words is None:
        assert remark is None
    else:
        assert remark is not None and words in remark


def test_every_put_status_has_a_response() -> None:
    assert set(PUT_RESPONSES) == set(PutMessageStatus)
    no_remark = put_status_to_response(PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), 5000)[1]
    assert no_remark is not None and "(disk full or shutting down)" in no_remark


def _fields(h: SendMessageRequestHeader) -> tuple[object, ...]:
    return tuple(getattr(h, name) for name in SendMessageRequestHeader.__slots__)


def _generic(ext: dict[str, object], v2: bool = True) -> SendMessageRequestHeader:
    h = SendMessageRequestHeader.__new__(SendMessageRequestHeader)
    h._read_generic(ext, V2_NAMES if v2 else V1_NAMES)
    return h


@pytest.mark.parametrize(
    "ext",
    [
        {"a": "pg", "b": "T", "c": "TBW102", "d": 8, "e": 3, "f": 4, "g": 17, "h": 1, "i": "K\x01v", "j": 2},
        {"b": "T", "e": -1},  # defaults for every optional field
        {"b": "T", "e": 0, "k": False, "m": True},  # fields the broker does not read
    ],
)
def test_typical_v2_header_reads_like_the_generic_path(ext: dict[str, object]) -> None:
    fast = SendMessageRequestHeader.__new__(SendMessageRequestHeader)
    assert read_typical_v2(fast, ext)
    assert _fields(fast) == _fields(_generic(ext)) == _fields(SendMessageRequestHeader.from_ext(ext, v2=True))


@pytest.mark.parametrize(
    "ext",
    [
        {"b": "T", "e": "3"},  # decimal string
        {"b": "T", "e": 0, "i": None},  # nil properties
        {"b": "T", "e": True},  # bool is not an int here
        {"b": "T", "e": 0, "f": 1 << 31},  # out of int32: the generic path raises
        {"b": 7, "e": 0},  # int topic: converted to text
    ],
)
def test_atypical_v2_header_takes_the_generic_path(ext: dict[str, object]) -> None:
    fast = SendMessageRequestHeader.__new__(SendMessageRequestHeader)
    assert not read_typical_v2(fast, ext)
    try:
        expected: tuple[object, ...] | type[HeaderError] = _fields(_generic(ext))
    except HeaderError:
        expected = HeaderError
    if expected is HeaderError:
        with pytest.raises(HeaderError):
            SendMessageRequestHeader.from_ext(ext, v2=True)
    else:
        assert _fields(SendMessageRequestHeader.from_ext(ext, v2=True)) == expected
