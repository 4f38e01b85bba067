"""QUERY_CONSUMER_OFFSET without a committed offset (RocketMQ's min-offset-0 rule) and the
broker's open-files limit."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.processors.consumer_manage import ConsumerManageProcessor
from rocketpy.broker.queue_locks import RebalanceLockManager
from rocketpy.broker.startup import raise_nofile_limit
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import RemotingCommand


class FakeStore:
    def __init__(self, min_offsets: dict[tuple[str, int], int]) -> None:
        self.min_offsets = min_offsets

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.min_offsets.get((topic, queue_id), 0)


def _processor(tmp_path: Path, min_offsets: dict[tuple[str, int], int]) -> ConsumerManageProcessor:
    offsets = ConsumerOffsetManager(str(tmp_path / "consumerOffset.json"))
    consumers = ConsumerManager(lambda group, channels: None, 120_000)
    store = FakeStore(min_offsets)
    return ConsumerManageProcessor(consumers, offsets, RebalanceLockManager(), store)  # type: ignore[arg-type]


def _query(p: ConsumerManageProcessor, topic: str, queue_id: int, **extra: object) -> RemotingCommand:
    ext = {"consumerGroup": "g", "topic": topic, "queueId": queue_id, **extra}
    return p.query_consumer_offset(None, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, ext))


def test_no_offset_and_queue_still_holds_offset_0_answers_0(tmp_path: Path) -> None:
    r = _query(_processor(tmp_path, {("T", 0): 0}), "T", 0)
    assert r.code == ResponseCode.SUCCESS and r.ext == {"offset": 0}


def test_young_queue_rule_off_when_the_client_says_so(tmp_path: Path) -> None:
    p = _processor(tmp_path, {("T", 0): 0})
    assert _query(p, "T", 0, setZeroIfNotFound=False).code == ResponseCode.QUERY_NOT_FOUND
    assert _query(p, "T", 0, setZeroIfNotFound="false").code == ResponseCode.QUERY_NOT_FOUND
    assert _query(p, "T", 0, setZeroIfNotFound=True).ext == {"offset": 0}


def test_no_offset_and_head_of_queue_cleaned_answers_not_found(tmp_path: Path) -> None:
    r = _query(_processor(tmp_path, {("T", 0): 7}), "T", 0)
    assert r.code == ResponseCode.QUERY_NOT_FOUND
    assert r.remark and "no committed offset" in r.remark


def test_committed_offset_wins(tmp_path: Path) -> None:
    p = _processor(tmp_path, {("T", 0): 7})
    p.offsets.commit_offset("g", "T", 0, 9)
    r = _query(p, "T", 0)
    assert r.code == ResponseCode.SUCCESS and r.ext == {"offset": 9}


def test_raise_nofile_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 524288))
    monkeypatch.setattr(resource, "setrlimit", lambda _, v: calls.append(v))
    assert raise_nofile_limit(65536) == 65536
    assert calls == [(65536, 524288)]


def test_raise_nofile_limit_capped_by_hard_and_never_lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "setrlimit", lambda _, v: calls.append(v))
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 4096))
    assert raise_nofile_limit(65536) == 4096
    monkeypatch.setattr(resource, "getrlimit", lambda _: (100_000, 200_000))
    assert raise_nofile_limit(65536) == 100_000
    assert calls == [(4096, 4096)]
