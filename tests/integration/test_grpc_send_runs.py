"""Concurrent SendMessage calls share store appends (``broker/grpc/sendrun.py``): a broker in this
process (its store's appends counted) under many raw ``grpc.aio`` SendMessage calls at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rocketpy.broker.controller import BrokerController
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb
from rocketpy.record import decode_record
from rocketpy.route import TopicConfig
from tests.integration.test_grpc_endpoint import Client, message
from tests.waiting import wait_until_async

Code = pb.Code
TOPIC = "GrpcRuns"
QUEUES = 4


class Broker:
    """A broker of this process, with its store's appends counted."""

    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        self.appends: list[int] = []  # messages per append, in order
        store = controller.store
        put_now, put_messages, put_message = store.put_now, store.put_messages, store.put_message
        put_then_flush = store.put_then_flush

        def counted_then_flush(msgs: list[Any]) -> Any:
            result = put_then_flush(msgs)
            if result is not None:
                self.appends.append(len(msgs))
            return result

        def counted_now(msgs: list[Any]) -> Any:
            result = put_now(msgs)
            if result is not None:
                self.appends.append(len(msgs))
            return result

        def counted_messages(msgs: list[Any]) -> Any:
            self.appends.append(len(msgs))
            return put_messages(msgs)

        def counted_message(msg: Any) -> Any:
            self.appends.append(1)
            return put_message(msg)

        store.put_now = counted_now  # type: ignore[method-assign]
        store.put_messages = counted_messages  # type: ignore[method-assign]
        store.put_message = counted_message  # type: ignore[method-assign]
        store.put_then_flush = counted_then_flush  # type: ignore[method-assign]

    @property
    def grpc_addr(self) -> str:
        assert self.controller.grpc is not None
        return f"127.0.0.1:{self.controller.grpc.port}"

    async def dispatched(self, count: int) -> None:
        """Wait until the topic's queues hold ``count`` messages."""
        store = self.controller.store

        def total() -> bool:
            return sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES)) >= count

        await wait_until_async(total, 10.0, message=f"{count} messages dispatched")

    def find(self, offset: int, message_id: str) -> tuple[int, bytes] | None:
        """(queue id, body) of the message ``message_id`` at ``offset`` of one of the queues."""
        store = self.controller.store
        for q in range(QUEUES):
            if store.get_max_offset_in_queue(TOPIC, q) <= offset:
                continue
            raw = store.lookup_message_by_offset(store.get_commit_log_offset_in_queue(TOPIC, q, offset))
            assert raw is not None
            record = decode_record(raw)
            if record.properties.get("UNIQ_KEY") == message_id:
                return q, bytes(record.body)
        return None


@pytest.fixture(params=["ASYNC_FLUSH", "SYNC_FLUSH"])
async def broker(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Broker]:
    bc = BrokerConfig(brokerName="runs", bindAddress="127.0.0.1", listenPort=0, grpcServerPort=0)
    sc = StoreConfig(storePathRootDir=str(tmp_path), flushDiskType=request.param)
    controller = BrokerController(bc, sc)
    await controller.start()
    try:
        tc = TopicConfig(topicName=TOPIC, readQueueNums=QUEUES, writeQueueNums=QUEUES)
        controller.topic_config.update(tc)
        yield Broker(controller)
    finally:
        await controller.shutdown()


async def _send(client: Client, *messages: pb.Message) -> Any:
    return await client.unary("SendMessage", spb.SendMessageRequest(messages=list(messages)))


async def test_concurrent_single_sends_share_appends(broker: Broker) -> None:
    client = Client(broker.grpc_addr, client_id="runs-producer")
    try:
        await _send(client, message(TOPIC, b"warm-up"))  # the client's session exists
        broker.appends.clear()
        n = 64
        sent = [message(TOPIC, f"m{i}".encode()) for i in range(n)]
        sent[17] = message(TOPIC, b"")  # a bad message (empty body) among them
        fifo = message(TOPIC, b"fifo", message_group="g1", message_type=pb.FIFO)
        answers = await asyncio.gather(*(_send(client, m) for m in [*sent, fifo]))
    finally:
        await client.close()
    bad = answers[17]
    assert bad.status.code == Code.MESSAGE_BODY_EMPTY, bad.status
    assert bad.entries[0].message_id == sent[17].system_properties.message_id
    good = [(m, a) for i, (m, a) in enumerate(zip(sent, answers, strict=False)) if i != 17]
    good.append((fifo, answers[-1]))
    for m, a in good:
        assert a.status.code == Code.OK, a.status
        assert [e.message_id for e in a.entries] == [m.system_properties.message_id]
    # every message stored once, where its answer says, under its id
    await broker.dispatched(n + 1)  # + the warm-up
    places = set()
    for m, a in good:
        found = broker.find(a.entries[0].offset, m.system_properties.message_id)
        assert found is not None and found[1] == m.body, (m, a)
        places.add((found[0], a.entries[0].offset))
    assert len(places) == n  # 63 plain + the FIFO one, each in its own place
    total = sum(broker.controller.store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES))
    assert total == n + 1
    # 63 plain messages in flight together went in fewer appends, not one each (+ the FIFO one):
    # ~8 a run on a quiet machine; a loaded one closes runs sooner (``WINDOW_MAX_S``), so at least
    # two a run on average is what is asserted (one each gives 64)
    assert sum(broker.appends) == n
    assert len(broker.appends) <= n // 2, broker.appends


async def test_one_request_of_many_messages_is_one_append(broker: Broker) -> None:
    client = Client(broker.grpc_addr, client_id="runs-batch")
    try:
        await _send(client, message(TOPIC, b"warm-up"))
        broker.appends.clear()
        msgs = [message(TOPIC, f"b{i}".encode()) for i in range(10)]
        msgs[3] = message(TOPIC, b"x", message_id="")  # refused alone: no message id
        answer = await _send(client, *msgs)
    finally:
        await client.close()
    assert answer.status.code == Code.ILLEGAL_MESSAGE_ID
    codes = [e.status.code for e in answer.entries]
    assert codes == [Code.OK] * 3 + [Code.ILLEGAL_MESSAGE_ID] + [Code.OK] * 6
    assert broker.appends == [9]
    offsets = [e.offset for i, e in enumerate(answer.entries) if i != 3]
    assert offsets == list(range(offsets[0], offsets[0] + 9))  # one queue, in the request's order
    await broker.dispatched(10)
    queues = set()
    for m, offset in zip([m for i, m in enumerate(msgs) if i != 3], offsets, strict=True):
        found = broker.find(offset, m.system_properties.message_id)
        assert found is not None and found[1] == m.body
        queues.add(found[0])
    assert len(queues) == 1


async def test_sync_master_sends_of_a_run_wait_for_a_slave_together(tmp_path: Path) -> None:
    bc = BrokerConfig(
        brokerName="runs-sm",
        bindAddress="127.0.0.1",
        listenPort=0,
        grpcServerPort=0,
    )
    controller = BrokerController(bc, StoreConfig(storePathRootDir=str(tmp_path), brokerRole="SYNC_MASTER"))
    await controller.start()
    try:
        controller.topic_config.update(
            TopicConfig(topicName=TOPIC, readQueueNums=QUEUES, writeQueueNums=QUEUES)
        )
        broker = Broker(controller)
        client = Client(broker.grpc_addr, client_id="runs-sync-master")
        try:
            answers = await asyncio.gather(
                *(_send(client, message(TOPIC, f"s{i}".encode())) for i in range(8))
            )
        finally:
            await client.close()
        # no slave: the run's sends are stored together, and each is answered that none holds it
        assert [a.status.code for a in answers] == [Code.HA_NOT_AVAILABLE] * 8, answers[0].status
        assert sum(broker.appends) == 8
        await broker.dispatched(8)
    finally:
        await controller.shutdown()
