"""The coalescing producer (client/coalesce.py) through the public send methods over a fake remoting
client: grouping per queue and per tick, the in-flight rule, the byte bounds, back-pressure,
per-message results and errors (a refused batch is split), retries and each message's deadline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rocketpy.client.producer import Producer
from rocketpy.client.results import SendResult
from rocketpy.errors import MessageIllegalError, MQClientError, RemotingTimeoutError
from rocketpy.message import Message, MessageQueue
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.record import decode_batch
from rocketpy.remoting.command import RemotingCommand
from tests.unit.test_client_send_path import ADDRS, FakeInstance
from tests.waiting import wait_until_async

A, B = ADDRS["a"], ADDRS["b"]


class BatchRemoting:
    """A fake broker pair that stores what it is sent: a batch answers with one offset id per
    message; a request holding a body ``b"bad"`` is refused MESSAGE_ILLEGAL (the whole batch, as the
    real broker does); ``codes`` forces a code per address; ``hold`` keeps answers until ``release``;
    addresses in ``silent`` never answer."""

    def __init__(
        self, codes: dict[str, int] | None = None, hold: bool = False, silent: set[str] | None = None
    ) -> None:
        self.codes = codes or {}
        self.hold = hold
        self.silent = silent or set()
        self.held: list[tuple[asyncio.Future[RemotingCommand], RemotingCommand]] = []
        self.sent: list[tuple[str, RemotingCommand]] = []
        self.offsets: dict[tuple[str, int], int] = {}

    def bodies(self, cmd: RemotingCommand) -> list[bytes]:
        if cmd.code == RequestCode.SEND_BATCH_MESSAGE:
            return [body for body, _, _ in decode_batch(cmd.body)]
        return [bytes(cmd.body)]

    def _answer(self, addr: str, cmd: RemotingCommand) -> RemotingCommand:
        assert cmd.ext is not None
        bodies = self.bodies(cmd)
        code = self.codes.get(addr, 0)
        if b"bad" in bodies:
            code = ResponseCode.MESSAGE_ILLEGAL
        if code:
            return RemotingCommand(code, cmd.opaque, 1, f"refused by {addr}", {}, b"")
        key = (addr, int(cmd.ext["e"]))
        base = self.offsets.get(key, 0)
        self.offsets[key] = base + len(bodies)
        ids = ",".join(f"{addr}/{cmd.ext['e']}/{base + i}" for i in range(len(bodies)))
        ext = {"msgId": ids, "queueId": cmd.ext["e"], "queueOffset": base}
        return RemotingCommand(0, cmd.opaque, 1, None, ext, b"")

    def invoke_future(self, addr: str, cmd: RemotingCommand, timeout: float) -> asyncio.Future[Any]:
        self.sent.append((addr, cmd))
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if addr in self.silent:
            error = RemotingTimeoutError(f"no answer from {addr}")
            loop.call_later(timeout, lambda: fut.done() or fut.set_exception(error))
        elif self.hold:
            self.held.append((fut, self._answer(addr, cmd)))
        else:
            loop.call_soon(fut.set_result, self._answer(addr, cmd))
        return fut

    def release(self) -> None:
        held, self.held = self.held, []
        for fut, resp in held:
            if not fut.done():
                fut.set_result(resp)

    def codes_sent(self) -> list[int]:
        return [cmd.code for _, cmd in self.sent]


def producer_with(remoting: BatchRemoting, **kw: Any) -> Producer:
    p = Producer("pg", "127.0.0.1:9", **kw)
    p._instance = FakeInstance(remoting)  # type: ignore[assignment]
    return p


def on_queue(n: int) -> Any:
    """A selector sending to queue ``n`` of the sorted route (a, 0), (a, 1), (b, 0), (b, 1)."""
    return lambda mqs, msg, arg: mqs[n]


async def test_sends_of_one_tick_leave_as_one_batch() -> None:
    # sends with no queue of their own join the queue whose batch is still filling: one full
    # request a tick, however many queues the topic has (the round robin moves on per batch)
    remoting = BatchRemoting(hold=True)
    p = producer_with(remoting)
    futs = [p.send_async(Message("T", b"m%d" % i)) for i in range(20)]
    assert remoting.sent == []  # nothing written before the tick ends
    await asyncio.sleep(0)
    assert remoting.codes_sent() == [RequestCode.SEND_BATCH_MESSAGE]
    assert [len(remoting.bodies(cmd)) for _, cmd in remoting.sent] == [20]
    remoting.release()
    results = await asyncio.gather(*futs)
    assert len({r.msg_id for r in results}) == 20
    assert len({r.offset_msg_id for r in results}) == 20
    assert len({r.message_queue for r in results}) == 1
    for r in results:  # each message's own offset id and queue offset
        mq = r.message_queue
        assert r.offset_msg_id == f"{ADDRS[mq.broker_name]}/{mq.queue_id}/{r.queue_offset}"
    stats = p.coalesce_stats
    assert stats is not None and (stats.requests, stats.messages, stats.batches) == (1, 20, 1)
    assert p._async.pending == 0


async def test_the_next_batch_goes_to_the_next_queue() -> None:
    remoting = BatchRemoting()
    p = producer_with(remoting)
    queues = []
    for _ in range(4):  # one tick's sends each, every batch settled before the next
        results = await asyncio.gather(*(p.send(Message("T", b"m%d" % i)) for i in range(5)))
        assert len({r.message_queue for r in results}) == 1
        queues.append(results[0].message_queue)
    assert len(set(queues)) == 4  # round robin per batch: 2 brokers x 2 queues


async def test_sends_to_chosen_queues_leave_as_one_batch_per_queue() -> None:
    remoting = BatchRemoting(hold=True)
    p = producer_with(remoting)
    futs = [p.send_async(Message("T", b"m%d" % i), selector=on_queue(i % 4)) for i in range(20)]
    await asyncio.sleep(0)
    assert remoting.codes_sent() == [RequestCode.SEND_BATCH_MESSAGE] * 4  # 2 brokers x 2 queues
    assert sorted(len(remoting.bodies(cmd)) for _, cmd in remoting.sent) == [5, 5, 5, 5]
    remoting.release()
    results = await asyncio.gather(*futs)
    assert sorted(r.message_queue.queue_id for r in results) == sorted((i % 4) % 2 for i in range(20))


async def test_a_lone_send_leaves_as_send_message_v2() -> None:
    remoting = BatchRemoting()
    p = producer_with(remoting)
    result = await p.send(Message("T", b"one"))
    assert remoting.codes_sent() == [RequestCode.SEND_MESSAGE_V2]
    assert result.queue_offset == 0 and result.msg_id


async def test_sends_wait_behind_the_request_in_flight_then_leave_together() -> None:
    remoting = BatchRemoting(hold=True)
    p = producer_with(remoting)
    first = p.send_async(Message("T", b"first"), selector=on_queue(0))
    await asyncio.sleep(0)
    assert len(remoting.sent) == 1
    later = [p.send_async(Message("T", b"later%d" % i), selector=on_queue(0)) for i in range(6)]
    await asyncio.sleep(0.01)
    assert len(remoting.sent) == 1  # queued behind the request in flight
    remoting.release()  # its response sends what waited, as one batch
    await first
    await asyncio.sleep(0)
    assert len(remoting.sent) == 2
    assert remoting.bodies(remoting.sent[1][1]) == [b"later%d" % i for i in range(6)]
    remoting.release()
    assert [r.queue_offset for r in await asyncio.gather(*later)] == [1, 2, 3, 4, 5, 6]


async def test_a_sequential_senders_sends_leave_at_once() -> None:
    # each send awaited before the next: after a lone request, a send that finds the producer idle
    # is written at once (no loop turn of latency); the first send still waits for the tick
    remoting = BatchRemoting()
    p = producer_with(remoting)
    first = p.send_async(Message("T", b"first"))
    assert remoting.sent == []  # a fresh producer waits for the tick (company may come)
    await first
    for i in range(3):
        fut = p.send_async(Message("T", b"s%d" % i))
        assert len(remoting.sent) == 2 + i  # written before this tick ends
        await fut
    assert remoting.codes_sent() == [RequestCode.SEND_MESSAGE_V2] * 4
    stats = p.coalesce_stats
    assert stats is not None and (stats.requests, stats.batches) == (4, 0)


async def after_a_lone_send(remoting: BatchRemoting) -> Producer:
    """A producer on ``remoting`` (holding answers) whose one send was answered: its last request
    carried one message, and it is idle."""
    p = producer_with(remoting)
    lone = p.send_async(Message("T", b"lone"))
    await asyncio.sleep(0)
    remoting.release()
    await lone
    return p


async def test_a_sequential_senders_send_wakes_with_its_response() -> None:
    # a send written at once awaits its request's own response future: the sender wakes in the loop
    # turn its response arrives (not a turn later, through a member future set by the settling) and
    # finds the producer idle again (the accumulator settled first)
    remoting = BatchRemoting(hold=True)
    p = await after_a_lone_send(remoting)
    co = p._path.coalescer
    assert co is not None
    held_when_woken: list[int] = []

    async def sender() -> SendResult:
        result = await p.send(Message("T", b"next"))
        held_when_woken.append(co.held_bytes)
        return result

    task = asyncio.create_task(sender())
    await asyncio.sleep(0)
    assert len(remoting.sent) == 2  # written at once
    remoting.release()
    await asyncio.sleep(0)
    assert task.done() and held_when_woken == [0]
    assert task.result().message_queue.queue_id == int(remoting.sent[1][1].ext["e"])  # type: ignore[index]


async def test_a_burst_after_sequential_sends_still_coalesces() -> None:
    # the burst's first send leaves at once (the producer was idle after a lone request); the rest
    # of the tick's sends coalesce into one batch, and the bursts after it (the last request a
    # batch) wait for the tick again: one request per burst
    remoting = BatchRemoting(hold=True)
    p = await after_a_lone_send(remoting)
    burst = [p.send_async(Message("T", b"b%d" % i)) for i in range(10)]
    assert len(remoting.sent) == 2  # the burst's first, at once
    await asyncio.sleep(0)
    assert [len(remoting.bodies(cmd)) for _, cmd in remoting.sent[1:]] == [1, 9]
    remoting.release()
    await asyncio.gather(*burst)
    again = [p.send_async(Message("T", b"c%d" % i)) for i in range(10)]
    assert len(remoting.sent) == 3  # nothing at once: the last request was a batch
    await asyncio.sleep(0)
    assert [len(remoting.bodies(cmd)) for _, cmd in remoting.sent[3:]] == [10]
    remoting.release()
    await asyncio.gather(*again)


async def test_concurrent_sync_sends_coalesce_too() -> None:
    remoting = BatchRemoting()
    p = producer_with(remoting)
    results = await asyncio.gather(
        *(p.send(Message("T", b"s%d" % i), selector=on_queue(2)) for i in range(8))
    )
    assert remoting.codes_sent() == [RequestCode.SEND_BATCH_MESSAGE]
    assert [r.queue_offset for r in results] == list(range(8))
    assert {r.message_queue for r in results} == {MessageQueue("T", "b", 0)}


async def test_batch_max_bytes_bounds_each_request() -> None:
    remoting = BatchRemoting(hold=True)
    p = producer_with(remoting, batch_max_bytes=3000, compress_over_bytes=10_000)
    futs = [p.send_async(Message("T", bytes([65 + i]) * 1000), selector=on_queue(0)) for i in range(7)]
    await asyncio.sleep(0)
    sizes = [len(cmd.body) for _, cmd in remoting.sent]
    assert all(size <= 3000 for size in sizes) and len(sizes) >= 3
    while not all(f.done() for f in futs):
        remoting.release()
        await asyncio.sleep(0)
    got = [body for _, cmd in remoting.sent for body in remoting.bodies(cmd)]
    assert got == [bytes([65 + i]) * 1000 for i in range(7)]  # order kept across requests
    assert all(f.result().queue_offset == i for i, f in enumerate(futs))


async def test_a_message_bigger_than_a_batch_goes_alone() -> None:
    remoting = BatchRemoting(hold=True)
    p = producer_with(remoting, batch_max_bytes=500)
    futs = [p.send_async(Message("T", b"x" * 600), selector=on_queue(0)) for _ in range(2)]
    assert remoting.codes_sent() == [RequestCode.SEND_MESSAGE_V2] * 2  # written at once, as before
    remoting.release()
    await asyncio.gather(*futs)


async def test_back_pressure_waits_for_room_and_gives_up_at_the_deadline() -> None:
    remoting = BatchRemoting(hold=True)
    p = producer_with(remoting, batch_max_bytes=1200, total_batch_max_bytes=2400)
    body = b"y" * 1000
    held = [p.send_async(Message("T", body), selector=on_queue(i)) for i in range(2)]  # 2 of ~1.1 KB
    waiting = p.send_async(Message("T", body), selector=on_queue(2))
    late = p.send(Message("T", body), selector=on_queue(3), timeout=0.05)
    with pytest.raises(MQClientError, match="total_batch_max_bytes=2400"):
        await late
    await asyncio.sleep(0)
    assert len(remoting.sent) == 2 and not waiting.done()  # no room until a batch settles
    remoting.release()
    await asyncio.gather(*held)
    while not waiting.done():
        remoting.release()
        await asyncio.sleep(0.001)
    assert waiting.result().message_queue == MessageQueue("T", "b", 0)
    co = p._path.coalescer
    assert co is not None and co.held_bytes == 0


async def test_a_refused_message_fails_alone() -> None:
    remoting = BatchRemoting()
    p = producer_with(remoting)
    calls: list[tuple[Any, Any]] = []
    bodies = [b"ok0", b"ok1", b"bad", b"ok2"]
    futs = [
        p.send_async(Message("T", body), lambda r, e: calls.append((r, e)), selector=on_queue(1))
        for body in bodies
    ]
    done = await asyncio.gather(*futs, return_exceptions=True)
    assert isinstance(done[2], MessageIllegalError)
    assert [r.queue_offset for i, r in enumerate(done) if i != 2] == [0, 1, 2]
    assert remoting.codes_sent() == [RequestCode.SEND_BATCH_MESSAGE] + [RequestCode.SEND_MESSAGE_V2] * 4
    stats = p.coalesce_stats
    assert stats is not None and stats.splits == 1
    await wait_until_async(lambda: len(calls) == 4, 5.0)  # callbacks run in their thread
    assert sum(e is not None for _, e in calls) == 1


async def test_a_broker_failure_retries_every_member_elsewhere_coalesced_again() -> None:
    remoting = BatchRemoting({A: ResponseCode.SYSTEM_BUSY})
    p = producer_with(remoting)
    futs = [p.send_async(Message("T", b"r%d" % i)) for i in range(12)]
    results = await asyncio.gather(*futs)
    assert {r.message_queue.broker_name for r in results} == {"b"}
    on_b = [cmd for addr, cmd in remoting.sent if addr == B]
    assert sum(len(remoting.bodies(cmd)) for cmd in on_b) == 12  # each stored once, on b
    assert len(on_b) <= 4  # retried members coalesced again
    assert len({r.msg_id for r in results}) == 12


async def test_each_member_keeps_its_own_deadline() -> None:
    remoting = BatchRemoting(silent={A, B})
    p = producer_with(remoting, retry_times=0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    short = p.send_async(Message("T", b"short"), selector=on_queue(0), timeout=0.05)
    long = p.send_async(Message("T", b"long"), selector=on_queue(0), timeout=1.0)
    with pytest.raises(MQClientError, match="no response") as info:
        await short
    assert isinstance(info.value.__cause__, RemotingTimeoutError)
    assert loop.time() - started < 0.9 and not long.done()
    with pytest.raises(MQClientError, match="failed after 1 attempt"):
        await long
    assert len(remoting.sent) == 1  # one batch for both


async def test_earlier_member_deadlines_fail_in_turn() -> None:
    remoting = BatchRemoting(silent={A, B})
    p = producer_with(remoting, retry_times=0)
    loop = asyncio.get_running_loop()
    timeouts = (0.05, 0.15, 0.15, 1.0)
    futs = [
        p.send_async(Message("T", b"m%d" % i), selector=on_queue(0), timeout=t)
        for i, t in enumerate(timeouts)
    ]
    await asyncio.sleep(0)
    started = loop.time()
    with pytest.raises(MQClientError, match="no response"):
        await futs[0]
    assert not any(f.done() for f in futs[1:])
    for f in futs[1:3]:
        with pytest.raises(MQClientError, match="no response"):
            await f
    assert loop.time() - started < 0.5 and not futs[3].done()
    with pytest.raises(MQClientError):
        await futs[3]
    assert len(remoting.sent) == 1  # one batch for all


async def test_keys_tags_and_unique_keys_travel_per_message() -> None:
    remoting = BatchRemoting()
    p = producer_with(remoting)
    msgs = [Message("T", b"k%d" % i, tags=f"tag{i}", keys=[f"key{i}"]) for i in range(3)]
    results = await asyncio.gather(*(p.send_async(m, selector=on_queue(0)) for m in msgs))
    ((_, cmd),) = remoting.sent
    props = [props for _, _, props in decode_batch(cmd.body)]
    for i, (prop, r) in enumerate(zip(props, results, strict=True)):
        assert f"TAGS\x01tag{i}\x02" in prop and f"KEYS\x01key{i}\x02" in prop
        assert f"UNIQ_KEY\x01{r.msg_id}\x02" in prop


async def test_messages_a_batch_cannot_carry_go_alone() -> None:
    remoting = BatchRemoting()
    p = producer_with(remoting, compress_over_bytes=100)
    sends = [
        Message("T", b"z" * 1000),  # compressed: a batch has one sys flag
        Message("T", b"d", delay_level=3),  # a delivery time: refused in a batch
        Message("T", b"p", properties={"TRAN_MSG": "true"}),
    ]
    await asyncio.gather(*(p.send_async(m, selector=on_queue(0)) for m in sends))
    assert remoting.codes_sent() == [RequestCode.SEND_MESSAGE_V2] * 3


async def test_auto_batch_off_sends_one_request_per_message() -> None:
    remoting = BatchRemoting()
    p = producer_with(remoting, auto_batch=False)
    await asyncio.gather(*(p.send_async(Message("T", b"o"), selector=on_queue(0)) for _ in range(5)))
    assert remoting.codes_sent() == [RequestCode.SEND_MESSAGE_V2] * 5 and p.coalesce_stats is None


async def test_batch_max_delay_waits_for_company() -> None:
    remoting = BatchRemoting()
    p = producer_with(remoting, batch_max_delay=0.5)
    first = p.send_async(Message("T", b"a"), selector=on_queue(0))
    for _ in range(3):
        await asyncio.sleep(0)  # ticks pass: without a delay the first send would have left
    assert remoting.sent == []
    second = p.send_async(Message("T", b"b"), selector=on_queue(0))
    await asyncio.gather(first, second)
    assert remoting.codes_sent() == [RequestCode.SEND_BATCH_MESSAGE]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"batch_max_bytes": 0}, "batch_max_bytes=0"),
        ({"batch_max_delay": -1}, "batch_max_delay=-1"),
        ({"total_batch_max_bytes": 10}, "total_batch_max_bytes=10"),
    ],
)
def test_bad_batch_options_are_refused(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(MQClientError, match=match):
        Producer("pg", "127.0.0.1:9", **kw)
