"""ext_* helpers: accept native and string values, name the field on error."""

from __future__ import annotations

import pytest

from rocketpy.errors import HeaderError
from rocketpy.protocol.fields import ext_bool, ext_int, ext_opt_int, ext_opt_str, ext_str


def test_ext_int() -> None:
    assert ext_int({"queueId": 3}, "queueId") == 3
    assert ext_int({"queueId": " -12 "}, "queueId") == -12
    assert ext_int(None, "queueId", 7) == 7
    assert ext_int({"queueId": None}, "queueId", 0) == 0
    with pytest.raises(HeaderError, match="'queueId' is missing"):
        ext_int({}, "queueId")
    with pytest.raises(HeaderError, match="'queueId' must be an integer, got 'x1'"):
        ext_int({"queueId": "x1"}, "queueId")
    with pytest.raises(HeaderError, match="must be an integer"):
        ext_int({"queueId": True}, "queueId")


def test_ext_str() -> None:
    assert ext_str({"topic": "T"}, "topic") == "T"
    assert ext_str({"topic": 5}, "topic") == "5"
    assert ext_str(None, "topic", "") == ""
    with pytest.raises(HeaderError, match="'topic' is missing"):
        ext_str({"other": "x"}, "topic")
    with pytest.raises(HeaderError, match="'topic' must be a string"):
        ext_str({"topic": [1]}, "topic")


def test_ext_bool() -> None:
    assert ext_bool({"batch": True}, "batch") is True
    assert ext_bool({"batch": "FALSE"}, "batch") is False
    assert ext_bool({"batch": "true"}, "batch") is True
    assert ext_bool({"batch": "1"}, "batch") is True and ext_bool({"batch": "0"}, "batch") is False
    assert ext_bool({}, "batch", False) is False
    with pytest.raises(HeaderError, match="'batch' must be true or false, got 'yes'"):
        ext_bool({"batch": "yes"}, "batch")
    with pytest.raises(HeaderError, match="'batch' is missing"):
        ext_bool(None, "batch")


def test_optional_fields() -> None:
    assert ext_opt_int({}, "maxMsgBytes") is None
    assert ext_opt_int({"maxMsgBytes": "10"}, "maxMsgBytes") == 10
    assert ext_opt_str(None, "clusterName") is None
    assert ext_opt_str({"clusterName": "C"}, "clusterName") == "C"
    with pytest.raises(HeaderError):
        ext_opt_int({"maxMsgBytes": "ten"}, "maxMsgBytes")
