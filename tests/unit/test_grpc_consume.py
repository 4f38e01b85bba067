"""The gRPC endpoint's POP parts without a broker: acks grouped into BatchAcks, the attempt table,
the refusal mapping and auto-renew (with a fake POP service and a fake clock)."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.broker.grpc.consumers import batch_acks
from rocketpy.broker.grpc.receipts import parse_handle, rpc_error
from rocketpy.broker.grpc.receive import Attempts, Delivered, check_names
from rocketpy.broker.grpc.renew import RENEW_STEPS_MS, Held, RenewTable, retry_delay_ms
from rocketpy.broker.grpc.status import Code, RpcError
from rocketpy.broker.pop.types import AckResult, PopError
from rocketpy.config import BrokerConfig, parse_delay_levels
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.pop import MAX_BATCH_ACK_BITS
from rocketpy.protocol.receipt import ReceiptHandle

LEVELS = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")


def handle(offset: int, pop_time: int = 1000, kind: str = "0", queue_id: int = 0) -> ReceiptHandle:
    return ReceiptHandle(0, pop_time, 30_000, 0, kind, "broker-a", queue_id, offset)


def test_batch_acks_group_by_pop_and_queue_and_bound_their_width() -> None:
    hs = [handle(5), handle(3), handle(4, pop_time=2000), handle(7, kind="1"), handle(3, queue_id=1)]
    acks = batch_acks("g", "T", hs)
    got = sorted((a.retry, a.queue_id, a.pop_time, a.start_offset, a.offsets()) for a in acks)
    assert got == [
        (False, 0, 1000, 3, [3, 5]),
        (False, 0, 2000, 4, [4]),
        (False, 1, 1000, 3, [3]),
        (True, 0, 1000, 7, [7]),
    ]
    wide = batch_acks("g", "T", [handle(0), handle(MAX_BATCH_ACK_BITS), handle(MAX_BATCH_ACK_BITS + 1)])
    assert [a.offsets() for a in wide] == [[0], [MAX_BATCH_ACK_BITS, MAX_BATCH_ACK_BITS + 1]]


def test_attempts_expire_and_are_bounded() -> None:
    table = Attempts(max_attempts=2)
    items = [Delivered(handle(1), 0)]
    table.put(("c", "g", "a1"), "T", 100, items)
    assert table.get(("c", "g", "a1"), 99) == ("T", items)
    assert table.get(("c", "g", "a1"), 100) is None, "its invisible time ended"
    for n in range(3):
        table.put(("c", "g", f"b{n}"), "T", 1000, items)
    assert len(table) == 2 and table.get(("c", "g", "b0"), 0) is None


def test_handles_and_refusals_map_to_the_apis_codes() -> None:
    assert parse_handle(handle(3).encode(), "broker-a").queue_offset == 3
    for text in ("", "x" * 600, "1 2 3", handle(3).encode().replace("broker-a", "broker-b")):
        with pytest.raises(RpcError) as e:
            parse_handle(text, "broker-a")
        assert e.value.code == Code.INVALID_RECEIPT_HANDLE
    gone = PopError(ResponseCode.NO_MESSAGE, "not in flight")
    assert rpc_error(gone, handle=True).code == Code.INVALID_RECEIPT_HANDLE
    assert rpc_error(PopError(ResponseCode.TOPIC_NOT_EXIST, "t")).code == Code.TOPIC_NOT_FOUND
    assert (
        rpc_error(PopError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "g")).code
        == Code.CONSUMER_GROUP_NOT_FOUND
    )
    assert (
        rpc_error(PopError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "s")).code
        == Code.ILLEGAL_FILTER_EXPRESSION
    )
    with pytest.raises(RpcError) as e:
        check_names("T", "")
    assert e.value.code == Code.ILLEGAL_CONSUMER_GROUP


class FakePop:
    """``PopService.change_invisible`` over a set of offsets in flight."""

    def __init__(self, clock: list[int]) -> None:
        self.clock = clock
        self.inflight = {1, 2}
        self.changes: list[tuple[int, int]] = []
        self.gate: asyncio.Event | None = None

    async def change_invisible(
        self, group: str, topic: str, queue_id: int, offset: int, extra_info: str, invisible_ms: int
    ) -> AckResult:
        if self.gate is not None:
            await self.gate.wait()
        if offset not in self.inflight:
            raise PopError(ResponseCode.NO_MESSAGE, "not in flight")
        self.changes.append((offset, invisible_ms))
        return AckResult(True, pop_time=self.clock[0], invisible_ms=invisible_ms, revive_qid=0)


def renew_table(clients: set[str]) -> tuple[RenewTable, FakePop, list[int]]:
    clock = [10_000]
    config = BrokerConfig.model_validate({"brokerName": "broker-a"})
    pop = FakePop(clock)
    table = RenewTable(config, pop, clients.__contains__, LEVELS, lambda: clock[0])  # type: ignore[arg-type]
    return table, pop, clock


def held(offset: int, pop_time: int = 10_000) -> Held:
    h = ReceiptHandle(0, pop_time, 60_000, 0, "0", "broker-a", 0, offset)
    return Held("g", "T", h.encode(), h, pop_time, 0)


async def test_renewal_follows_the_proxys_steps_and_take_answers_the_latest_handle() -> None:
    table, pop, clock = renew_table({"c1"})
    first = held(1)
    assert table.hold("c1", "m1", first)
    assert await table.renew_due() == 0, "not due while more than renewAheadTimeMillis is left"
    clock[0] = 10_000 + 60_000 - 10_000
    assert await table.renew_due() == 1
    assert pop.changes == [(1, RENEW_STEPS_MS[0])]
    current = table.current("c1", "g", "m1")
    assert current is not None and current.pop_time == clock[0]
    clock[0] += RENEW_STEPS_MS[0]
    await table.renew_due()
    assert pop.changes[-1] == (1, RENEW_STEPS_MS[1])
    assert await table.take("c1", "g", "m1", "some other handle") == "some other handle"
    taken = await table.take("c1", "g", "m1", first.original)
    assert taken == table_handle(clock[0], RENEW_STEPS_MS[1]) and table.count == 0


def table_handle(pop_time: int, invisible_ms: int) -> str:
    return ReceiptHandle(0, pop_time, invisible_ms, 0, "0", "broker-a", 0, 1).encode()


async def test_renewal_stops_for_gone_clients_old_messages_and_acked_ones() -> None:
    table, pop, clock = renew_table({"alive"})
    table.hold("gone", "m1", held(1))
    table.hold("alive", "m2", held(2, pop_time=0))
    table.hold("alive", "m3", held(3))  # not in flight any more
    clock[0] = 3 * 3600 * 1000 + 1  # past renewMaxTimeMillis for m2, and m3 is due
    assert await table.renew_due() == 3
    assert sorted(pop.changes) == [(1, 1000), (2, retry_delay_ms(LEVELS, 0))]
    assert table.count == 0, "let go: cleared, past the renew time, or no longer in flight"


async def test_take_waits_for_a_renewal_in_progress() -> None:
    table, pop, clock = renew_table({"c1"})
    first = held(1)
    table.hold("c1", "m1", first)
    clock[0] = 70_000
    pop.gate = asyncio.Event()
    renewing = asyncio.ensure_future(table.renew_due())
    await asyncio.sleep(0)
    taking = asyncio.ensure_future(table.take("c1", "g", "m1", first.original))
    await asyncio.sleep(0)
    assert not taking.done()
    pop.gate.set()
    await renewing
    assert await taking == table_handle(70_000, RENEW_STEPS_MS[0])
