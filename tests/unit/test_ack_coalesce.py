"""The SDK's ack coalescer (``client/ack_coalesce.py``): acks of one tick, or behind an unanswered
ack request to the same broker, leave together; each caller gets its own outcome."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.client.ack_coalesce import MAX_ACKS_PER_REQUEST, AckCoalescer
from rocketpy.errors import MQBrokerError
from rocketpy.protocol.headers.pop import BatchAck


def _ack(i: int) -> BatchAck:
    return BatchAck("g", "T", False, i * 32, i % 8, 0, 1000 + i, 30_000, (0, 1, 2))


class Broker:
    """Records each request; answers when released (or fails with ``error``)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, list[BatchAck]]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.error: Exception | None = None

    async def send(self, addr: str, name: str, acks: list[BatchAck]) -> None:
        self.requests.append((addr, name, acks))
        await self.gate.wait()
        if self.error is not None:
            raise self.error


async def test_acks_of_one_tick_share_a_request_per_broker() -> None:
    b = Broker()
    c = AckCoalescer(b.send)
    futures = [c.add("a:1", "broker-a", [_ack(i)]) for i in range(5)]
    futures.append(c.add("b:1", "broker-b", [_ack(9)]))
    await asyncio.gather(*futures)
    assert sorted((name, len(acks)) for _, name, acks in b.requests) == [("broker-a", 5), ("broker-b", 1)]
    assert c.requests == 2


async def test_acks_wait_behind_an_unanswered_request_then_leave_together() -> None:
    b = Broker()
    c = AckCoalescer(b.send)
    b.gate.clear()
    first = c.add("a:1", "broker-a", [_ack(0)])
    await asyncio.sleep(0.01)
    assert len(b.requests) == 1
    later = [c.add("a:1", "broker-a", [_ack(i)]) for i in range(1, 4)]
    await asyncio.sleep(0.01)
    assert len(b.requests) == 1 and not first.done()  # held behind the first
    b.gate.set()
    await asyncio.gather(first, *later)
    assert [len(acks) for _, _, acks in b.requests] == [1, 3]


async def test_a_refusal_reaches_every_caller_of_that_request_only() -> None:
    b = Broker()
    c = AckCoalescer(b.send)
    b.error = MQBrokerError(1, "store refused", "a:1")
    refused = [c.add("a:1", "broker-a", [_ack(i)]) for i in range(2)]
    for f in refused:
        with pytest.raises(MQBrokerError, match="store refused"):
            await f
    b.error = None
    await c.add("a:1", "broker-a", [_ack(5)])  # the next request is fine


async def test_a_request_carries_at_most_the_bound_unless_one_caller_brought_more() -> None:
    b = Broker()
    c = AckCoalescer(b.send)
    half = MAX_ACKS_PER_REQUEST // 2 + 1
    big = c.add("a:1", "broker-a", [_ack(i) for i in range(MAX_ACKS_PER_REQUEST + 5)])
    two = [c.add("a:1", "broker-a", [_ack(i) for i in range(half)]) for _ in range(2)]
    await asyncio.gather(big, *two)
    assert [len(acks) for _, _, acks in b.requests] == [MAX_ACKS_PER_REQUEST + 5, half, half]


async def test_close_sends_what_is_held() -> None:
    b = Broker()
    c = AckCoalescer(b.send)
    f = c.add("a:1", "broker-a", [_ack(1)])
    await c.close()
    assert f.done() and f.exception() is None and len(b.requests) == 1


async def test_a_cancelled_caller_still_acks_and_the_others_are_answered() -> None:
    b = Broker()
    c = AckCoalescer(b.send)
    gone = c.add("a:1", "broker-a", [_ack(1)])
    kept = c.add("a:1", "broker-a", [_ack(2)])
    gone.cancel()
    await kept
    assert [len(acks) for _, _, acks in b.requests] == [2]
