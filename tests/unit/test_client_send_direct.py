"""send_async's direct path (client/send_direct.py): written at once through invoke_future, finished
in the response's done callback, retried on another broker after a retryable failure."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rocketpy.client.api import MQClientAPI
from rocketpy.client.producer import Producer
from rocketpy.client.route import TopicPublishInfo
from rocketpy.errors import MQBrokerError
from rocketpy.message import Message
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicRouteData

ADDRS = {"a": "127.0.0.1:1", "b": "127.0.0.1:2"}


class FakeRemoting:
    """Answers sends on the next loop turn; ``codes`` picks the response code per address."""

    def __init__(self, codes: dict[str, int] | None = None, hold: bool = False) -> None:
        self.codes = codes or {}
        self.hold = hold
        self.held: list[tuple[asyncio.Future[RemotingCommand], RemotingCommand]] = []
        self.direct: list[str] = []
        self.coroutine: list[str] = []

    def channel(self, addr: str) -> object:
        return self

    def _answer(self, addr: str, cmd: RemotingCommand) -> RemotingCommand:
        assert cmd.ext is not None
        ext = {"msgId": f"off-{addr}", "queueId": cmd.ext["e"], "queueOffset": 7}
        return RemotingCommand(self.codes.get(addr, 0), cmd.opaque, 1, "busy", ext, b"")

    def invoke_future(self, addr: str, cmd: RemotingCommand, timeout: float) -> asyncio.Future[Any]:
        self.direct.append(addr)
        fut = asyncio.get_running_loop().create_future()
        if self.hold:
            self.held.append((fut, self._answer(addr, cmd)))
        else:
            asyncio.get_running_loop().call_soon(fut.set_result, self._answer(addr, cmd))
        return fut

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        self.coroutine.append(addr)
        return self._answer(addr, cmd)

    def release(self) -> None:
        for fut, resp in self.held:
            fut.set_result(resp)
        self.held.clear()


class FakeInstance:
    """The parts of MQClientInstance the send path uses: route cache, addresses, remoting, api."""

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
        self.api = MQClientAPI(remoting, ["127.0.0.1:9"])  # type: ignore[arg-type]
        self.tp = TopicPublishInfo("T", route)

    def publish_info(self, topic: str) -> TopicPublishInfo:
        return self.tp

    def find_broker_addr(self, broker_name: str, *, master_only: bool = True) -> str:
        return ADDRS[broker_name]

    async def queue_broker_addr(self, mq: Any) -> str:
        return ADDRS[mq.broker_name]


def producer_with(remoting: FakeRemoting, **kw: Any) -> Producer:
    p = Producer("pg", "127.0.0.1:9", **kw)
    p._instance = FakeInstance(remoting)  # type: ignore[assignment]
    return p


async def test_send_async_goes_direct_without_coroutine_path() -> None:
    remoting = FakeRemoting()
    p = producer_with(remoting)
    futs = [p.send_async(Message("T", b"%d" % i)) for i in range(20)]
    results = await asyncio.gather(*futs)
    assert len(remoting.direct) == 20 and remoting.coroutine == []
    assert len({r.msg_id for r in results}) == 20
    assert {r.message_queue.broker_name for r in results} == {"a", "b"}
    assert all(r.offset_msg_id == f"off-{ADDRS[r.message_queue.broker_name]}" for r in results)
    assert all(r.queue_offset == 7 for r in results)
    assert p._async.pending == 0


async def test_direct_failure_retries_on_the_other_broker() -> None:
    remoting = FakeRemoting({ADDRS["a"]: ResponseCode.SYSTEM_BUSY})
    p = producer_with(remoting)
    results = await asyncio.gather(*(p.send_async(Message("T", b"x")) for _ in range(8)))
    assert {r.message_queue.broker_name for r in results} == {"b"}
    assert ADDRS["a"] in remoting.direct  # first attempts that failed
    assert set(remoting.coroutine) <= {ADDRS["b"]}  # retries only went to the healthy broker
    assert not p.fault.is_available("a")
    assert p._async.pending == 0


async def test_direct_non_retryable_error_is_raised() -> None:
    code = ResponseCode.MESSAGE_ILLEGAL
    remoting = FakeRemoting({ADDRS["a"]: code, ADDRS["b"]: code})
    p = producer_with(remoting)
    with pytest.raises(MQBrokerError) as info:
        await p.send_async(Message("T", b"x"))
    assert info.value.code == code and remoting.coroutine == []


async def test_direct_sends_respect_max_senders() -> None:
    remoting = FakeRemoting(hold=True)
    p = producer_with(remoting)
    p._async.max_senders = 3
    futs = [p.send_async(Message("T", b"x")) for _ in range(7)]
    assert len(remoting.direct) == 3 and p._async.pending == 7
    while not all(f.done() for f in futs):
        remoting.release()
        await asyncio.sleep(0)
        assert len(remoting.held) <= 3
    assert len(remoting.direct) == 7
    await p._async.close(1.0)
