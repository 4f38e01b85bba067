"""The send processor answers inline when the store's put does not suspend, and through an
awaitable (same response) when it does (SYNC_FLUSH wait, next commitlog file)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rocketpy.broker.processors.guard import Guard
from rocketpy.broker.processors.send import SendMessageProcessor
from rocketpy.broker.send_queue import SendQueue
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import PutMessageResult, PutMessageStatus
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.message import properties_to_string
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicConfig

HOST8 = bytes([127, 0, 0, 1, 0, 0, 0x27, 0x0F])


class FakeStore:
    """A store whose put completes at once, after ``gate`` (the coroutine way), or (``flush`` set,
    SYNC_FLUSH) at once with the future of its flush (``put_then_flush``)."""

    def __init__(self) -> None:
        self.gate: asyncio.Future[None] | None = None
        self.flush: asyncio.Future[bool] | None = None
        self.msgs: list[Any] = []

    async def put_message(self, msg: Any) -> PutMessageResult:
        self.msgs.append(msg)
        if self.gate is not None:
            await self.gate
        return PutMessageResult(PutMessageStatus.PUT_OK, "", 4096, 100, 7, 0, 1, HOST8)

    def put_then_flush(self, msgs: list[Any]) -> tuple[PutMessageResult, asyncio.Future[bool]] | None:
        if self.flush is None:
            return None
        self.msgs += msgs
        return PutMessageResult(PutMessageStatus.PUT_OK, "", 4096, 100, 7, 0, 1, HOST8), self.flush

    def put_now(self, msgs: list[Any]) -> PutMessageResult | None:
        if self.gate is not None or self.flush is not None:
            return None  # the put would suspend: nothing written
        self.msgs += msgs
        return PutMessageResult(PutMessageStatus.PUT_OK, "", 4096, 100, 7, 0, 1, HOST8)

    def flush_outcome(self, result: PutMessageResult, flushed: bool) -> PutMessageResult:
        if not flushed:
            result.status, result.remark = PutMessageStatus.FLUSH_DISK_TIMEOUT, "not flushed"
        return result


def _processor(store: FakeStore) -> SendMessageProcessor:
    guard = Guard(
        SimpleNamespace(broker_permission=6, broker_name="b", broker_cluster_name="c"),  # type: ignore[arg-type]
        SimpleNamespace(  # type: ignore[arg-type]
            get=lambda topic: TopicConfig(topic_name=topic, read_queue_nums=4, write_queue_nums=4)
        ),
        SimpleNamespace(),  # type: ignore[arg-type]  # sends check no group
    )
    return SendMessageProcessor(
        guard,
        SimpleNamespace(max_message_size=4 << 20, sync_flush_timeout=5000),  # type: ignore[arg-type]
        store,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]  # no delayed messages in these tests
        BrokerStats(),
        None,
        SendQueue(BrokerConfig(brokerName="b"), StoreConfig(), lambda: 0.0),
    )


def _channel(peer: tuple[str, int] | None = ("127.0.0.1", 9)) -> Any:
    addr = f"{peer[0]}:{peer[1]}" if peer else "?"
    return SimpleNamespace(attrs={}, remote_addr=addr, peer=peer)


def _request() -> RemotingCommand:
    props = properties_to_string({"UNIQ_KEY": "U1", "TAGS": "t"})
    ext = {"a": "pg", "b": "T", "e": 2, "i": props}
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, 41, 0, None, ext, b"body")


def _check(resp: Any, store: FakeStore, p: SendMessageProcessor) -> None:
    assert type(resp) is RemotingCommand
    assert (resp.code, resp.opaque, resp.flag, resp.body) == (ResponseCode.SUCCESS, 41, 1, b"")
    assert resp.ext == {
        "msgId": "7F0000010000270F" + "0000000000001000",
        "queueId": 2,
        "queueOffset": 7,
        "transactionId": "U1",
    }
    assert store.msgs[-1].body == b"body" and store.msgs[-1].queue_id == 2
    assert p.stats.put_msgs_total == 1 and p.stats.put_bytes_total == 4


async def test_put_that_does_not_suspend_is_answered_inline() -> None:
    store = FakeStore()
    p = _processor(store)
    resp = p.handle(_channel(), _request())
    _check(resp, store, p)


async def test_put_that_suspends_is_answered_by_the_awaitable() -> None:
    store = FakeStore()
    store.gate = asyncio.get_running_loop().create_future()
    p = _processor(store)
    pending = p.handle(_channel(), _request())
    assert not isinstance(pending, RemotingCommand)
    task = asyncio.ensure_future(pending)
    await asyncio.sleep(0)
    assert not task.done() and p.stats.put_msgs_total == 0
    assert p.send_queue.in_flight == 1  # waits in the broker's send queue until answered
    store.gate.set_result(None)
    _check(await task, store, p)
    assert p.send_queue.in_flight == 0


async def test_sync_flush_send_is_answered_from_its_flush_without_a_task() -> None:
    """SYNC_FLUSH: the answer is a future (not a task) completed by the flush's own completion,
    holding a place in the send queue until then; a flush that timed out answers
    FLUSH_DISK_TIMEOUT; an answer cancelled meanwhile (connection closed) gives its place back."""
    loop = asyncio.get_running_loop()
    store = FakeStore()
    p = _processor(store)
    store.flush = loop.create_future()
    pending = p.handle(_channel(), _request())
    assert type(pending) is asyncio.Future and not pending.done()  # not a Task: nothing to resume
    assert p.send_queue.in_flight == 1 and p.stats.put_msgs_total == 0
    store.flush.set_result(True)
    await asyncio.sleep(0)
    assert pending.done() and p.send_queue.in_flight == 0
    _check(pending.result(), store, p)

    store.flush = loop.create_future()
    timed_out = p.handle(_channel(), _request())
    store.flush.set_result(False)
    await asyncio.sleep(0)
    assert timed_out.result().code == ResponseCode.FLUSH_DISK_TIMEOUT and p.send_queue.in_flight == 0

    store.flush = loop.create_future()
    closed = p.handle(_channel(), _request())
    closed.cancel()
    store.flush.set_result(True)
    await asyncio.sleep(0)
    assert p.send_queue.in_flight == 0

    store.flush = loop.create_future()
    store.flush.set_result(True)  # flushed already (another put's sync covered it): answered inline
    assert type(p.handle(_channel(), _request())) is RemotingCommand


def _handle(p: SendMessageProcessor, **ext: Any) -> Any:
    req = _request()
    assert req.ext is not None
    req.ext.update(ext)
    return p.handle(_channel(), req)


async def test_check_fast_path_falls_back_to_the_detailed_refusals() -> None:
    store = FakeStore()
    p = _processor(store)
    assert _handle(p, e=3).code == ResponseCode.SUCCESS  # last queue of 4
    r = _handle(p, e=4)
    assert r.code == ResponseCode.INVALID_PARAMETER and "queueId 4" in r.remark
    assert _handle(p, b="bad topic!").code == ResponseCode.MESSAGE_ILLEGAL
    assert _handle(p, b="TBW102").code == ResponseCode.NO_PERMISSION
    p.topic_config.get = lambda topic: TopicConfig(  # type: ignore[method-assign]
        topic_name=topic, read_queue_nums=4, write_queue_nums=4, perm=4
    )
    r = _handle(p)
    assert r.code == ResponseCode.NO_PERMISSION and "not writable" in r.remark
    p.topic_config.get = lambda topic: TopicConfig(  # type: ignore[method-assign]
        topic_name=topic, read_queue_nums=4, write_queue_nums=4
    )
    p.broker_config.broker_permission = 4
    r = _handle(p)
    assert r.code == ResponseCode.NO_PERMISSION and "write permission is wiped" in r.remark
    assert len(store.msgs) == 1


async def test_born_host_is_the_peer_address_ipv4_mapped_unwrapped() -> None:
    store = FakeStore()
    p = _processor(store)
    assert p.handle(_channel(("10.1.2.3", 5000)), _request()).code == ResponseCode.SUCCESS
    assert store.msgs[-1].born_host == ("10.1.2.3", 5000)
    assert p.handle(_channel(("::ffff:10.1.2.4", 5001)), _request()).code == ResponseCode.SUCCESS
    assert store.msgs[-1].born_host == ("10.1.2.4", 5001)


async def test_send_from_a_peer_that_cannot_be_the_born_host_is_refused() -> None:
    store = FakeStore()
    p = _processor(store)
    for peer in (None, ("::1", 5002), ("fe80::1%eth0", 5003)):
        r = p.handle(_channel(peer), _request())
        assert r.code == ResponseCode.SYSTEM_ERROR and "born host" in r.remark, peer
    assert store.msgs == []  # nothing stored with a made-up address


class FakeReplicas:
    """SYNC_MASTER's replica wait: each stored send gets the next future handed out (or None)."""

    def __init__(self) -> None:
        self.next: asyncio.Future[bool] | None = None
        self.asked: list[tuple[int, bool]] = []

    def __call__(self, result: PutMessageResult, wait: bool) -> asyncio.Future[bool] | None:
        self.asked.append((result.wrote_offset + result.wrote_bytes, wait))
        return self.next


async def test_sync_master_send_is_answered_when_its_replicas_hold_it_without_a_task() -> None:
    """SYNC_MASTER: the answer is a future (not a task) completed by the replica wait's own
    completion, holding a place in the send queue until then; a wait that timed out answers
    FLUSH_SLAVE_TIMEOUT; nothing to wait for (no slave: the status says so) answers at once."""
    loop = asyncio.get_running_loop()
    store = FakeStore()
    p = _processor(store)
    replicas = p.replica_future = FakeReplicas()
    replicas.next = loop.create_future()
    pending = p.handle(_channel(), _request())
    assert type(pending) is asyncio.Future and not pending.done()
    assert replicas.asked == [(4196, True)]  # the stored record's end offset
    assert p.send_queue.in_flight == 1 and p.stats.put_msgs_total == 0
    replicas.next.set_result(True)
    await asyncio.sleep(0)
    assert pending.done() and p.send_queue.in_flight == 0
    _check(pending.result(), store, p)

    replicas.next = loop.create_future()
    timed_out = p.handle(_channel(), _request())
    replicas.next.set_result(False)
    await asyncio.sleep(0)
    assert timed_out.result().code == ResponseCode.FLUSH_SLAVE_TIMEOUT and p.send_queue.in_flight == 0

    replicas.next = None
    assert type(p.handle(_channel(), _request())) is RemotingCommand


async def test_sync_master_send_whose_put_suspends_waits_for_replicas_on_the_coroutine_path() -> None:
    loop = asyncio.get_running_loop()
    store = FakeStore()
    store.gate = loop.create_future()  # the next commitlog file (or a SYNC_FLUSH store)
    p = _processor(store)
    replicas = p.replica_future = FakeReplicas()
    replicas.next = loop.create_future()
    task = asyncio.ensure_future(p.handle(_channel(), _request()))
    store.gate.set_result(None)
    await asyncio.sleep(0.01)
    assert not task.done() and replicas.asked == [(4196, True)]
    replicas.next.set_result(False)
    assert (await task).code == ResponseCode.FLUSH_SLAVE_TIMEOUT
    assert p.send_queue.in_flight == 0
