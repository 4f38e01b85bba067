"""rocketpy.errors: the response code -> exception registry, retriable flags, and that every error
class of the package is a RocketpyError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import rocketpy
from rocketpy.errors import (
    MQBrokerError,
    MQClientError,
    RemotingConnectError,
    RemotingTimeoutError,
    RocketpyError,
    SystemBusyError,
    TopicNotExistError,
    broker_error,
    error_class,
)
from rocketpy.protocol.codes import ResponseCode

#: RocketMQ's DefaultMQProducer.retryResponseCodes (reference §3.2).
ROCKETMQ_RETRY_CODES = {
    ResponseCode.TOPIC_NOT_EXIST,
    ResponseCode.SERVICE_NOT_AVAILABLE,
    ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY,
    ResponseCode.NO_PERMISSION,
    ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT,
    ResponseCode.GO_AWAY,
}
ERROR_CODES = [c for c in ResponseCode if c is not ResponseCode.SUCCESS]


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: c.name)
def test_every_error_code_has_its_own_class(code: ResponseCode) -> None:
    err = broker_error(code, "why", "10.0.0.1:10911")
    cls = type(err)
    assert cls is error_class(code) and cls is not MQBrokerError
    assert cls.response_code == code
    assert isinstance(err, MQBrokerError) and isinstance(err, RocketpyError)
    assert (err.code, err.remark, err.addr) == (int(code), "why", "10.0.0.1:10911")
    assert str(err) == f"{code.name}({int(code)}) from 10.0.0.1:10911: why"


def test_classes_are_distinct_per_code() -> None:
    classes = [error_class(c) for c in ERROR_CODES]
    assert len(set(classes)) == len(ERROR_CODES)


def test_retriable_codes_are_rocketmqs_producer_retry_codes() -> None:
    assert {c for c in ERROR_CODES if error_class(c).retriable} == ROCKETMQ_RETRY_CODES
    assert broker_error(ResponseCode.SYSTEM_BUSY, "busy").retriable
    assert not broker_error(ResponseCode.MESSAGE_ILLEGAL, "too big").retriable


def test_unknown_code_is_a_plain_broker_error() -> None:
    for code in (ResponseCode.SUCCESS, 999, -1):
        err = broker_error(code, None)
        assert type(err) is MQBrokerError and not err.retriable
        assert err.code == code and err.remark == "" and err.addr is None


def test_named_classes_catch_and_still_are_broker_errors() -> None:
    with pytest.raises(SystemBusyError):
        raise broker_error(ResponseCode.SYSTEM_BUSY, "[TIMEOUT_CLEAN_QUEUE]")
    with pytest.raises(MQBrokerError) as info:
        raise broker_error(ResponseCode.TOPIC_NOT_EXIST, "no topic")
    assert isinstance(info.value, TopicNotExistError) and info.value.code == 17


def test_client_errors_retriable_only_for_the_network() -> None:
    assert RemotingTimeoutError("t").retriable and RemotingConnectError("c").retriable
    assert not MQClientError("bad argument").retriable
    assert not RocketpyError("x").retriable


def _package_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(rocketpy.__path__, "rocketpy."):
        if ".tests" not in info.name:
            names.append(info.name)
    return names


def test_every_exception_class_of_the_package_is_a_rocketpy_error() -> None:
    """FrameError, HeaderError, TopicLimitError, KVConfigError, RecordError ... included."""
    found: dict[str, type[BaseException]] = {}
    for name in _package_modules():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:  # an optional extra not installed (rocketpy[spark]): skip
            if e.name is None or e.name.split(".")[0] == "rocketpy":
                raise
            continue
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == name:
                found[f"{name}.{cls_name}"] = cls
    assert {"FrameError", "HeaderError", "TopicLimitError", "KVConfigError"} <= {
        key.rsplit(".", 1)[1] for key in found
    }
    outside = sorted(key for key, cls in found.items() if not issubclass(cls, RocketpyError))
    assert outside == []
