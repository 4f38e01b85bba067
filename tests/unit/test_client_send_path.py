"""The producer's one send path (client/send_path.py), driven through the public send methods over a
fake remoting client: attempts written through invoke_future, send_async settled in the response's
done callback (no task), retries on another broker for retriable errors under one deadline, and the
same loop for send, send_async and send_batch."""

from __future__ import annotations

import asyncio
import itertools
import zlib
from typing import Any

import pytest

from rocketpy.client.producer import Producer
from rocketpy.client.route import TopicPublishInfo
from rocketpy.errors import (
    MessageIllegalError,
    MQBrokerError,
    MQClientError,
    RemotingTimeoutError,
    ServiceNotAvailableError,
    SystemBusyError,
)
from rocketpy.message import Message, MessageQueue
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.record import COMPRESSED_FLAG
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicRouteData

ADDRS = {"a": "127.0.0.1:1", "b": "127.0.0.1:2"}
A, B = ADDRS["a"], ADDRS["b"]


class FakeRemoting:
    """Answers requests on the next loop turn; ``codes`` picks the response code per address, and
    addresses in ``silent`` never answer (their futures time out as the real client's do)."""

    def __init__(
        self, codes: dict[str, int] | None = None, hold: bool = False, silent: set[str] | None = None
    ) -> None:
        self.codes = codes or {}
        self.hold = hold
        self.silent = silent or set()
        self.held: list[tuple[asyncio.Future[RemotingCommand], RemotingCommand]] = []
        self.sent: list[tuple[str, RemotingCommand]] = []
        self.oneway: list[tuple[str, RemotingCommand]] = []

    @property
    def addrs(self) -> list[str]:
        return [addr for addr, _ in self.sent]

    def _answer(self, addr: str, cmd: RemotingCommand) -> RemotingCommand:
        assert cmd.ext is not None
        offset_ids = ",".join(f"off-{addr}-{i}" for i in range(3)) if cmd.code == 320 else f"off-{addr}"
        ext = {"msgId": offset_ids, "queueId": cmd.ext["e"], "queueOffset": 7}
        return RemotingCommand(self.codes.get(addr, 0), cmd.opaque, 1, "busy", ext, b"")

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

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand, timeout: float) -> None:  # noqa: ASYNC109
        self.oneway.append((addr, cmd))

    def release(self) -> None:
        for fut, resp in self.held:
            fut.set_result(resp)
        self.held.clear()


class FakeInstance:
    """The parts of MQClientInstance the send path uses: route cache, addresses, remoting."""

    def __init__(self, remoting: FakeRemoting) -> None:
        route = TopicRouteData.from_wire(
            {
                "queueDatas": [
                    {"brokerName": n, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicSysFlag": 0}
                    for n in ADDRS
                ],
                "brokerDatas": [
                    {"cluster": "c", "brokerName": n, "brokerAddrs": {0: a}} for n, a in ADDRS.items()
                ],
            }
        )
        self.remoting = remoting
        self.tp = TopicPublishInfo("T", route)
        self.refreshes: list[str] = []  # routes a failed attempt asked to refresh at once

    def refresh_route_soon(self, topic: str) -> None:
        self.refreshes.append(topic)

    def publish_info(self, topic: str) -> TopicPublishInfo:
        return self.tp

    def find_broker_addr(self, broker_name: str, *, master_only: bool = True) -> str:
        return ADDRS[broker_name]

    async def queue_broker_addr(self, mq: Any) -> str:
        return ADDRS[mq.broker_name]


def producer_with(remoting: FakeRemoting, **kw: Any) -> Producer:
    """A producer over ``remoting``; one request per message unless ``auto_batch=True`` is given
    (the coalescer's own tests are in test_client_coalesce.py)."""
    kw.setdefault("auto_batch", False)
    p = Producer("pg", "127.0.0.1:9", **kw)
    p._instance = FakeInstance(remoting)  # type: ignore[assignment]
    return p


async def test_send_async_is_settled_in_the_done_callback_without_a_task() -> None:
    remoting = FakeRemoting(hold=True)
    p = producer_with(remoting)
    futs = [p.send_async(Message("T", b"%d" % i)) for i in range(20)]
    assert len(remoting.sent) == 20 and not p._async._tasks  # written at once, no task per send
    remoting.release()
    results = await asyncio.gather(*futs)
    assert len({r.msg_id for r in results}) == 20
    assert {r.message_queue.broker_name for r in results} == {"a", "b"}
    assert all(r.offset_msg_id == f"off-{ADDRS[r.message_queue.broker_name]}" for r in results)
    assert all(r.queue_offset == 7 for r in results)
    assert p._async.pending == 0


@pytest.mark.parametrize("mode", ["send", "send_async"])
async def test_retriable_failure_retries_on_the_other_broker(mode: str) -> None:
    remoting = FakeRemoting({A: ResponseCode.SYSTEM_BUSY})
    p = producer_with(remoting)
    if mode == "send":
        results = [await p.send(Message("T", b"x")) for _ in range(8)]
    else:
        results = await asyncio.gather(*(p.send_async(Message("T", b"x")) for _ in range(8)))
    assert {r.message_queue.broker_name for r in results} == {"b"}
    assert A in remoting.addrs  # first attempts that failed ...
    assert remoting.addrs.count(B) == 8  # ... each retried once, on the healthy broker
    assert not p.fault.is_available("a")
    assert p._async.pending == 0
    assert set(p._instance.refreshes) == {"T"}  # type: ignore[union-attr]  # each failure asked at once


@pytest.mark.parametrize("mode", ["send", "send_async"])
async def test_non_retriable_refusal_is_raised_after_one_attempt(mode: str) -> None:
    code = ResponseCode.MESSAGE_ILLEGAL
    remoting = FakeRemoting({A: code, B: code})
    p = producer_with(remoting)
    with pytest.raises(MessageIllegalError) as info:
        await (p.send(Message("T", b"x")) if mode == "send" else p.send_async(Message("T", b"x")))
    assert info.value.code == code and len(remoting.sent) == 1


async def test_every_attempt_failing_raises_client_error_with_the_last_cause() -> None:
    remoting = FakeRemoting({A: ResponseCode.SYSTEM_BUSY, B: ResponseCode.SYSTEM_BUSY})
    p = producer_with(remoting, retry_times=2)
    with pytest.raises(MQClientError, match=r"failed after 3 attempt\(s\)") as info:
        await p.send(Message("T", b"x"))
    assert isinstance(info.value.__cause__, SystemBusyError)
    addrs = remoting.addrs
    assert len(addrs) == 3 and all(x != y for x, y in itertools.pairwise(addrs))


class RefusingFirst(FakeRemoting):
    """Refuses the first ``n`` requests with SERVICE_NOT_AVAILABLE (a switchover in progress)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    def _answer(self, addr: str, cmd: RemotingCommand) -> RemotingCommand:
        out = super()._answer(addr, cmd)
        if self.left > 0:
            self.left -= 1
            out.code = ResponseCode.SERVICE_NOT_AVAILABLE
        return out


@pytest.mark.parametrize("mode", ["send", "send_async", "selector", "coalesced"])
async def test_service_not_available_does_not_use_up_attempts(mode: str) -> None:
    remoting = RefusingFirst(0 if mode == "coalesced" else 5)  # more refusals than attempts allowed
    p = producer_with(remoting, retry_times=2, auto_batch=mode == "coalesced")
    msg = Message("T", b"x")
    if mode == "coalesced":  # the usual message's one-step start (client/send_core.py)
        await p.send(Message("T", b"first"), timeout=5.0)  # a topic's first send takes the full path
        remoting.left = 5
        result = await p.send(msg, timeout=5.0)
        assert len(remoting.sent) == 7
        return
    if mode == "selector":
        result = await p.send(msg, selector=lambda mqs, msg, arg: mqs[0], arg=None)
    else:
        result = await (p.send(msg, timeout=5.0) if mode == "send" else p.send_async(msg, timeout=5.0))
    assert result.msg_id and len(remoting.sent) == 6


async def test_service_not_available_is_retried_with_pauses_until_the_timeout() -> None:
    remoting = FakeRemoting({A: ResponseCode.SERVICE_NOT_AVAILABLE, B: ResponseCode.SERVICE_NOT_AVAILABLE})
    p = producer_with(remoting, retry_times=2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(MQClientError, match=r"failed after \d+ attempt\(s\)") as info:
        await p.send(Message("T", b"x"), timeout=0.6)
    assert isinstance(info.value.__cause__, ServiceNotAvailableError)
    # past the 3 attempts that retry_times allows, but paused between them, and within the timeout
    assert 3 < len(remoting.sent) < 12 and loop.time() - started < 3.0


async def test_selector_send_is_not_retried_and_raises_the_broker_error() -> None:
    remoting = FakeRemoting({A: ResponseCode.SYSTEM_BUSY})
    p = producer_with(remoting)
    with pytest.raises(SystemBusyError):
        await p.send(Message("T", b"x"), selector=lambda mqs, msg, arg: mqs[0], arg=None)
    assert remoting.addrs == [A]
    ok = await p.send_async(Message("T", b"y"), selector=lambda mqs, msg, arg: mqs[arg], arg=3)
    assert ok.message_queue == MessageQueue("T", "b", 1) and remoting.addrs == [A, B]


async def test_one_deadline_covers_every_attempt() -> None:
    remoting = FakeRemoting(silent={A, B})
    p = producer_with(remoting, retry_times=5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(MQClientError, match=r"failed after 1 attempt\(s\)") as info:
        await p.send(Message("T", b"x"), timeout=0.05)
    assert isinstance(info.value.__cause__, RemotingTimeoutError)
    assert loop.time() - started < 1.0 and len(remoting.sent) == 1


async def test_async_send_compresses_before_its_first_attempt() -> None:
    remoting = FakeRemoting()
    p = producer_with(remoting, compress_over_bytes=100)
    body = b"abc" * 1000
    result = await p.send_async(Message("T", body))
    ((_, cmd),) = remoting.sent
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.ext is not None
    assert cmd.ext["f"] & COMPRESSED_FLAG and zlib.decompress(bytes(cmd.body)) == body
    assert result.msg_id in cmd.ext["i"]


async def test_batch_takes_the_same_path_with_retries() -> None:
    remoting = FakeRemoting({A: ResponseCode.SYSTEM_BUSY})
    p = producer_with(remoting)
    results = await p.send_batch([Message("T", b"%d" % i) for i in range(3)])
    assert [r.message_queue.broker_name for r in results] == ["b"] * 3
    assert [r.queue_offset for r in results] == [7, 8, 9]
    assert [r.offset_msg_id for r in results] == [f"off-{B}-{i}" for i in range(3)]
    assert remoting.sent[-1][1].code == RequestCode.SEND_BATCH_MESSAGE
    assert remoting.addrs.count(B) == 1


async def test_oneway_writes_one_request_without_waiting() -> None:
    remoting = FakeRemoting()
    p = producer_with(remoting)
    await p.send_oneway(Message("T", b"x"), selector=lambda mqs, msg, arg: mqs[-1])
    ((addr, cmd),) = remoting.oneway
    assert addr == B and cmd.code == RequestCode.SEND_MESSAGE_V2 and remoting.sent == []


async def test_async_sends_respect_max_senders() -> None:
    remoting = FakeRemoting(hold=True)
    p = producer_with(remoting)
    p._async.max_senders = 3
    futs = [p.send_async(Message("T", b"x")) for _ in range(7)]
    assert len(remoting.sent) == 3 and p._async.pending == 7
    while not all(f.done() for f in futs):
        remoting.release()
        await asyncio.sleep(0)
        assert len(remoting.held) <= 3
    assert len(remoting.sent) == 7
    await p._async.close(1.0)


async def test_broker_error_stays_an_mq_broker_error() -> None:
    remoting = FakeRemoting({A: ResponseCode.NO_PERMISSION, B: ResponseCode.TOPIC_EXIST_ALREADY})
    p = producer_with(remoting, retry_times=1)
    with pytest.raises(MQBrokerError) as info:
        await p.send(Message("T", b"x"), selector=lambda mqs, msg, arg: mqs[-1])
    assert info.value.code == ResponseCode.TOPIC_EXIST_ALREADY
