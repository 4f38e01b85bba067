"""The broker's send queue: SYSTEM_BUSY once a put waited too long, the queue is full or a flush hangs."""

from __future__ import annotations

import logging

import pytest

from rocketpy.broker.send_queue import SendQueue
from rocketpy.config import BrokerConfig, StoreConfig
from tests.clock import ManualClock


def make(clock: ManualClock, flush: dict[str, float], **broker: int) -> SendQueue:
    bc = BrokerConfig(brokerName="b", waitTimeMillsInSendQueue=200, sendThreadPoolQueueCapacity=3, **broker)
    sc = StoreConfig(osPageCacheBusyTimeOutMills=1000)
    return SendQueue(bc, sc, lambda: flush["started"], clock)


def test_busy_once_the_oldest_put_waited_too_long(caplog: pytest.LogCaptureFixture) -> None:
    clock, flush = ManualClock(100.0), {"started": 0.0}
    q = make(clock, flush)
    assert q.refusal() is None
    first = q.enter()
    clock.t += 0.15
    second = q.enter()
    assert q.refusal() is None  # 150 ms: within waitTimeMillsInSendQueue
    clock.t += 0.1
    with caplog.at_level(logging.WARNING, "rocketpy.broker.send"):
        remark = q.refusal()
        assert remark is not None and remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")
        assert "period in queue: 250ms, size of queue: 2" in remark
        assert "waitTimeMillsInSendQueue=200ms" in remark
        assert q.refusal() is not None
        q.leave(first)  # the head is answered: the next one waited 100 ms only
        assert q.refusal() is None
        q.leave(second)
    assert q.busy_total == 2 and q.in_flight == 0
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("flow control started") and len(lines) == 2
    assert lines[1] == "flow control ended after 0.0 s: 2 sends refused SYSTEM_BUSY"


def test_answered_out_of_order_puts_leave_the_queue() -> None:
    clock, flush = ManualClock(1.0), {"started": 0.0}
    q = make(clock, flush)
    a, b, c = q.enter(), q.enter(), q.enter()
    q.leave(b)
    assert q.in_flight == 2 and q.runtime_info()["sendQueueSize"] == "2"
    q.leave(a)
    clock.t += 0.3
    assert q.refusal() is not None  # c is the head now and waited 300 ms
    q.leave(c)
    assert q.refusal() is None and q.runtime_info()["sendQueueHeadWaitTimeMills"] == "0"


def test_busy_when_the_queue_is_full() -> None:
    clock, flush = ManualClock(1.0), {"started": 0.0}
    q = make(clock, flush)
    tickets = [q.enter() for _ in range(3)]
    remark = q.refusal()
    assert remark is not None and remark.startswith("[OVERLOAD]")
    assert "sendThreadPoolQueueCapacity=3" in remark
    q.leave(tickets[0])
    assert q.refusal() is None


def test_busy_while_a_flush_runs_too_long() -> None:
    clock, flush = ManualClock(50.0), {"started": 0.0}
    q = make(clock, flush)
    flush["started"] = 49.5
    assert q.refusal() is None  # a 500 ms flush is slow but allowed
    flush["started"] = 48.8
    remark = q.refusal()
    assert remark is not None and remark.startswith("[PCBUSY_CLEAN_QUEUE]")
    assert "has run 1200ms (osPageCacheBusyTimeOutMills=1000ms)" in remark
    flush["started"] = 0.0
    assert q.refusal() is None
