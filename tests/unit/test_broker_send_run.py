"""The broker's sends of one read (SendMessageProcessor.handle_run) over a real in-process store:
plain messages to one queue are stored by one append and answered each with its own record, a
refused message fails alone, batches and timed messages keep their own path in arrival order, and
a SYNC_FLUSH group waits for one flush; the channel hands a read's sends over together."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rocketpy import _accel
from rocketpy.broker.processors.guard import Guard
from rocketpy.broker.processors.send import MAX_RUN_GROUP, SendMessageProcessor
from rocketpy.broker.send_queue import SendQueue
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import MessageStore
from rocketpy.broker.store.flush import FlushService
from rocketpy.config import BrokerConfig, FlushDiskType, StoreConfig
from rocketpy.errors import HeaderError
from rocketpy.message import properties_to_string
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.record import decode_record
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicConfig
from tests.unit.test_store_helpers import tiny_config


class CountingStore:
    """A real store that counts the appends it was asked for."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.appends: list[int] = []

    def put_message(self, msg: Any) -> Any:
        self.appends.append(1)
        return self.store.put_message(msg)

    def put_messages(self, msgs: list[Any]) -> Any:
        self.appends.append(len(msgs))
        return self.store.put_messages(msgs)

    def put_now(self, msgs: list[Any]) -> Any:
        put = self.store.put_now(msgs)
        if put is not None:
            self.appends.append(len(msgs))
        return put

    def put_then_flush(self, msgs: list[Any]) -> Any:
        put = self.store.put_then_flush(msgs)
        if put is not None:
            self.appends.append(len(msgs))
        return put

    def flush_outcome(self, result: Any, flushed: bool) -> Any:
        return self.store.flush_outcome(result, flushed)

    @property
    def read_only_remark(self) -> str:
        return self.store.read_only_remark


def _processor(store: CountingStore) -> SendMessageProcessor:
    guard = Guard(
        SimpleNamespace(broker_permission=6, broker_name="b", broker_cluster_name="c"),  # type: ignore[arg-type]
        SimpleNamespace(  # type: ignore[arg-type]
            get=lambda topic: TopicConfig(topic_name=topic, read_queue_nums=4, write_queue_nums=4)
        ),
        SimpleNamespace(),  # type: ignore[arg-type]  # sends check no group
    )
    return SendMessageProcessor(
        guard,
        SimpleNamespace(max_message_size=2048, sync_flush_timeout=5000),  # type: ignore[arg-type]
        store,  # type: ignore[arg-type]
        SimpleNamespace(put=None),  # type: ignore[arg-type]  # timed messages are not sent here
        BrokerStats(),
        None,
        SendQueue(BrokerConfig(brokerName="b"), StoreConfig(), lambda: 0.0),
    )


CHANNEL = SimpleNamespace(attrs={}, remote_addr="127.0.0.1:9", peer=("127.0.0.1", 9))


def v2(opaque: int, body: bytes, queue_id: int = 1, **props: str) -> RemotingCommand:
    ext = {"a": "pg", "b": "T", "e": queue_id, "i": properties_to_string({"UNIQ_KEY": f"U{opaque}", **props})}
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque, 0, None, ext, body)


async def _store(tmp_path: Path, **kw: Any) -> MessageStore:
    store = MessageStore(tiny_config(str(tmp_path), mapped_file_size_commit_log=1 << 20, **kw))
    await store.start()
    store.store_host = ("127.0.0.1", 10911)
    return store


def _stored(store: MessageStore, resp: RemotingCommand) -> Any:
    assert resp.ext is not None
    _, _, offset = decode_offset_msg_id(resp.ext["msgId"])
    raw = store.lookup_message_by_offset(offset)
    assert raw is not None
    return decode_record(raw)


async def test_a_reads_sends_to_one_queue_are_one_append_answered_each(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    counting = CountingStore(store)
    p = _processor(counting)
    requests = [v2(i, b"body%d" % i, queue_id=i % 2) for i in range(10)]
    out = p.handle_run(CHANNEL, requests)  # type: ignore[arg-type]
    assert sorted(counting.appends) == [5, 5]  # one append per queue
    for req, resp in zip(requests, out, strict=True):
        assert type(resp) is RemotingCommand and resp.code == ResponseCode.SUCCESS and resp.ext
        assert resp.opaque == req.opaque and resp.ext["transactionId"] == f"U{req.opaque}"
        m = _stored(store, resp)  # its own record: body, queue, queue offset
        assert m.body == req.body and m.queue_id == req.opaque % 2 and m.unique_key == f"U{req.opaque}"
        assert resp.ext["queueOffset"] == m.queue_offset == req.opaque // 2
    assert p.stats.put_msgs_total == 10
    await store.shutdown()


async def test_a_refused_send_fails_alone_and_the_others_are_stored(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    counting = CountingStore(store)
    p = _processor(counting)
    out = p.handle_run(CHANNEL, [v2(1, b"a"), v2(2, b"x" * 4000), v2(3, b"c")])  # type: ignore[arg-type]
    codes = [r.code for r in out]  # type: ignore[union-attr]
    assert codes == [ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL, ResponseCode.SUCCESS]
    assert counting.appends == [2]
    assert [_stored(store, out[i]).body for i in (0, 2)] == [b"a", b"c"]  # type: ignore[arg-type]
    await store.shutdown()


async def test_a_batch_between_sends_keeps_the_queue_order(tmp_path: Path) -> None:
    from rocketpy.message import Message
    from rocketpy.record import encode_batch

    store = await _store(tmp_path)
    counting = CountingStore(store)
    p = _processor(counting)
    batch_body = encode_batch([Message("T", b"b1"), Message("T", b"b2")])
    batch_ext = {"a": "pg", "b": "T", "e": 1, "i": "", "m": True}
    batch = RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, 9, 0, None, batch_ext, batch_body)
    out = p.handle_run(CHANNEL, [v2(1, b"a1"), v2(2, b"a2"), batch, v2(3, b"a3")])  # type: ignore[arg-type]
    results = [await r if not isinstance(r, RemotingCommand) else r for r in out]  # type: ignore[misc]
    assert all(r.code == ResponseCode.SUCCESS for r in results)
    assert counting.appends == [2, 2, 1]  # a1 a2 | b1 b2 | a3: stored in arrival order
    offsets = [r.ext["queueOffset"] for r in results]
    assert offsets == [0, 1, 2, 4]
    await store.shutdown()


async def test_a_sync_flush_group_waits_for_one_flush(tmp_path: Path) -> None:
    store = await _store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    counting = CountingStore(store)
    p = _processor(counting)
    out = p.handle_run(CHANNEL, [v2(i, b"s%d" % i) for i in range(6)])  # type: ignore[arg-type]
    assert counting.appends == [6]
    # each member's answer is a future of the group's flush, not a task; one place in the send queue
    assert all(type(r) is asyncio.Future for r in out) and p.send_queue.in_flight == 1
    results = [await r for r in out]  # type: ignore[misc]
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 6
    assert [r.ext["queueOffset"] for r in results] == list(range(6))
    assert store.commitlog.flushed_offset >= store.max_physical_offset
    assert p.send_queue.in_flight == 0
    await store.shutdown()


async def test_a_sync_flush_batch_request_is_answered_from_its_flush(tmp_path: Path) -> None:
    """A SEND_BATCH request under SYNC_FLUSH: one append, answered by a future of its flush (no
    task), with every message's id and the first offset, after the flush covered it."""
    from rocketpy.message import Message
    from rocketpy.record import encode_batch

    store = await _store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    counting = CountingStore(store)
    p = _processor(counting)
    msgs = [Message("T", b"b%d" % i) for i in range(3)]
    body = encode_batch(msgs)
    batch = RemotingCommand(
        RequestCode.SEND_BATCH_MESSAGE, 9, 0, None, {"a": "pg", "b": "T", "e": 1, "i": "", "m": True}, body
    )
    answer = p.handle(CHANNEL, batch)  # type: ignore[arg-type]
    assert type(answer) is asyncio.Future and counting.appends == [3]
    response = await answer
    assert response.code == ResponseCode.SUCCESS and response.ext["queueOffset"] == 0
    assert len(response.ext["msgId"].split(",")) == 3
    assert store.commitlog.flushed_offset >= store.max_physical_offset
    assert p.send_queue.in_flight == 0
    await store.shutdown()


async def test_a_sync_flush_group_that_times_out_answers_each_member_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's flush ends False (syncFlushTimeout passed): every member answers
    FLUSH_DISK_TIMEOUT, and a member whose connection closed meanwhile (its answer cancelled) is
    skipped while the others still answer."""
    store = await _store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    flush = asyncio.get_running_loop().create_future()
    monkeypatch.setattr(FlushService, "flushed_future", lambda self, end, timeout_s: flush)
    p = _processor(CountingStore(store))
    out = p.handle_run(CHANNEL, [v2(i, b"t%d" % i) for i in range(4)])  # type: ignore[arg-type]
    out[1].cancel()  # type: ignore[union-attr]
    flush.set_result(False)
    await asyncio.sleep(0)
    assert out[1].cancelled() and p.send_queue.in_flight == 0  # type: ignore[union-attr]
    codes = [out[i].result().code for i in (0, 2, 3)]  # type: ignore[union-attr]
    assert codes == [ResponseCode.FLUSH_DISK_TIMEOUT] * 3
    await store.shutdown()


async def test_the_channel_hands_a_reads_run_codes_over_together() -> None:
    import asyncio

    from rocketpy.remoting import RemotingServer
    from rocketpy.remoting.codec import FrameDecoder, encode_frame_bytes

    run_code, other = 951, 952
    runs: list[list[int]] = []
    order: list[int] = []

    def single(ch: Any, req: RemotingCommand) -> RemotingCommand:
        order.append(req.opaque)
        return RemotingCommand.response(req, body=b"one")

    def run(ch: Any, reqs: list[RemotingCommand]) -> list[Any]:
        runs.append([r.opaque for r in reqs])
        order.extend(r.opaque for r in reqs)
        return [RemotingCommand.response(r, body=b"run") for r in reqs]

    server = RemotingServer("127.0.0.1", 0, name="runsrv")
    server.register_processor(run_code, single)
    server.register_processor(other, single)
    server.register_run_processor(frozenset({run_code}), run)
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        codes = [run_code, other, run_code, run_code]
        frames = [RemotingCommand(c, i + 1, 0, None, {}, b"x") for i, c in enumerate(codes)]
        writer.write(b"".join(encode_frame_bytes(f) for f in frames))  # one write: one read
        decoder = FrameDecoder(1 << 20)
        got: list[RemotingCommand] = []
        while len(got) < 4:
            got += decoder.feed(await asyncio.wait_for(reader.read(65536), 5.0))
        # a lone send takes the run handler too (its compiled plain path), not the single handler
        writer.write(encode_frame_bytes(RemotingCommand(run_code, 5, 0, None, {}, b"x")))
        while len(got) < 5:
            got += decoder.feed(await asyncio.wait_for(reader.read(65536), 5.0))
        writer.close()
    finally:
        await server.shutdown(2.0)
    assert runs == [[1, 3, 4], [5]] and order == [1, 3, 4, 2, 5]  # the sends first, in order, then the rest
    assert {r.opaque: bytes(r.body) for r in got} == {1: b"run", 2: b"one", 3: b"run", 4: b"run", 5: b"run"}


async def test_a_bad_header_fails_only_its_own_request(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    p = _processor(CountingStore(store))
    bad = RemotingCommand(RequestCode.SEND_MESSAGE_V2, 5, 0, None, {"a": "pg"}, b"no topic")
    out = p.handle_run(CHANNEL, [v2(1, b"a"), bad, v2(2, b"b")])  # type: ignore[arg-type]
    assert [type(r) is RemotingCommand and r.code for r in (out[0], out[2])] == [ResponseCode.SUCCESS] * 2
    with pytest.raises(HeaderError):
        await out[1]  # type: ignore[misc]  # the channel answers it INVALID_PARAMETER
    await store.shutdown()


async def test_the_guard_checks_each_request_of_a_run() -> None:
    import asyncio

    from rocketpy.remoting import RemotingServer
    from rocketpy.remoting.codec import FrameDecoder, encode_frame_bytes

    run_code = 951
    runs: list[list[int]] = []

    def run(ch: Any, reqs: list[RemotingCommand]) -> list[Any]:
        runs.append([r.opaque for r in reqs])
        return [RemotingCommand.response(r, body=b"run") for r in reqs]

    def guard(ch: Any, req: RemotingCommand) -> RemotingCommand | None:
        if req.opaque % 2 == 0:
            return RemotingCommand.response(req, ResponseCode.NO_PERMISSION, "access denied: even")
        return None

    server = RemotingServer("127.0.0.1", 0, name="runsrv")
    server.register_processor(run_code, lambda ch, req: RemotingCommand.response(req, body=b"one"))
    server.register_run_processor(frozenset({run_code}), run)
    server.set_guard(guard)
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        frames = [RemotingCommand(run_code, i, 0, None, {}, b"x") for i in (1, 2, 3, 4)]
        writer.write(b"".join(encode_frame_bytes(f) for f in frames))  # one write: one read
        decoder = FrameDecoder(1 << 20)
        got: list[RemotingCommand] = []
        while len(got) < 4:
            got += decoder.feed(await asyncio.wait_for(reader.read(65536), 5.0))
        writer.close()
    finally:
        await server.shutdown(2.0)
    assert runs == [[1, 3]]  # the refused ones never reach the run handler
    assert {r.opaque: r.code for r in got} == {
        1: ResponseCode.SUCCESS,
        2: ResponseCode.NO_PERMISSION,
        3: ResponseCode.SUCCESS,
        4: ResponseCode.NO_PERMISSION,
    }


async def test_a_sync_master_group_and_batch_are_answered_when_the_replicas_hold_them(tmp_path: Path) -> None:
    """SYNC_MASTER (ASYNC_FLUSH store): a read's sends to one queue are one append whose members
    are answered, each with its own record, by one callback once a replica reported the group's
    end (``OffsetWaits``, as the HA service does); a SEND_BATCH request the same way; a wait that
    times out answers FLUSH_SLAVE_TIMEOUT to every member. No task anywhere."""
    from rocketpy.broker.ha.offset_waits import OffsetWaits
    from rocketpy.message import Message
    from rocketpy.record import encode_batch

    store = await _store(tmp_path)
    counting = CountingStore(store)
    p = _processor(counting)
    waits = OffsetWaits()
    timeout_s = [5.0]
    asked: list[int] = []

    def replica_future(result: Any, wait: bool) -> asyncio.Future[bool]:
        asked.append(result.wrote_offset + result.wrote_bytes)
        return waits.future(asked[-1], timeout_s[0])

    warm = p.handle(CHANNEL, v2(99, b"w", queue_id=1))  # type: ignore[arg-type]
    assert (warm if isinstance(warm, RemotingCommand) else await warm).code == ResponseCode.SUCCESS
    counting.appends.clear()  # the first put made the file and the queue (the coroutine path)
    p.replica_future = replica_future
    out = p.handle_run(CHANNEL, [v2(i, b"r%d" % i) for i in range(5)])  # type: ignore[arg-type]
    assert counting.appends == [5] and asked == [store.max_physical_offset]
    assert all(type(r) is asyncio.Future and not r.done() for r in out) and p.send_queue.in_flight == 1
    waits.release(store.max_physical_offset - 1)  # one byte short: nothing answered
    await asyncio.sleep(0)
    assert not any(r.done() for r in out)  # type: ignore[union-attr]
    waits.release(store.max_physical_offset)
    results = [await r for r in out]  # type: ignore[misc]
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 5
    assert [r.ext["queueOffset"] for r in results] == list(range(1, 6))
    assert [_stored(store, r).body for r in results] == [b"r%d" % i for i in range(5)]
    assert p.send_queue.in_flight == 0

    body = encode_batch([Message("T", b"b%d" % i) for i in range(3)])
    batch = RemotingCommand(
        RequestCode.SEND_BATCH_MESSAGE, 9, 0, None, {"a": "pg", "b": "T", "e": 1, "i": "", "m": True}, body
    )
    answer = p.handle(CHANNEL, batch)  # type: ignore[arg-type]
    assert type(answer) is asyncio.Future and counting.appends == [5, 3]
    waits.release(store.max_physical_offset)
    response = await answer
    assert response.code == ResponseCode.SUCCESS and response.ext["queueOffset"] == 6

    # a queue not seen yet: put_now declines, the coroutine put completes at once; still waits
    fresh = p.handle_run(CHANNEL, [v2(i, b"q%d" % i, queue_id=3) for i in range(2)])  # type: ignore[arg-type]
    assert not any(r.done() for r in fresh)  # type: ignore[union-attr]
    waits.release(store.max_physical_offset)
    assert [(await r).code for r in fresh] == [ResponseCode.SUCCESS] * 2  # type: ignore[misc]

    timeout_s[0] = 0.02
    late = p.handle_run(CHANNEL, [v2(i, b"t%d" % i) for i in range(3)])  # type: ignore[arg-type]
    codes = [(await r).code for r in late]  # type: ignore[misc]
    assert codes == [ResponseCode.FLUSH_SLAVE_TIMEOUT] * 3 and p.send_queue.in_flight == 0
    await store.shutdown()


# -- run_plain: the twins ---------------------------------------------------------------------------
BORN = SimpleNamespace(attrs={"born_host": ("10.0.0.7", 4321)}, remote_addr="10.0.0.7:4321", peer=None)
RUN_CASES = {
    "lone": [v2(1, b"only")],
    "two queues": [v2(i, b"m%d" % i, queue_id=i % 2) for i in range(5)],
    "a full group": [v2(i, b"f%d" % i) for i in range(MAX_RUN_GROUP + 3)],
    "no wait": [v2(1, b"a", WAIT="false"), v2(2, b"b")],
    "timed": [v2(1, b"a"), v2(2, b"b", DELAY="3")],
    "too big": [v2(1, b"a"), v2(2, b"x" * 4000)],
    "a batch code": [v2(1, b"a"), RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, 2, 0, None, {}, b"")],
    "queue out of range": [v2(1, b"a", queue_id=9)],
}


async def _run_plain_state(
    fn: Any, root: Path, requests: list[RemotingCommand], channel: Any, **kw: Any
) -> Any:
    """What the ``run_plain`` twin ``fn`` answers for ``requests`` on a fresh store, and leaves."""
    store = await _store(root, **kw.pop("store", {}))
    try:
        counting = CountingStore(store)
        p = _processor(counting)
        p._topic_problem("T")  # known sendable by name, as after the topic's first send
        for name, value in kw.items():
            setattr(p, name, value)
        out = fn(p, channel, requests)
        answers = None
        if out is not None:
            answers = [await r if inspect.isawaitable(r) else r for r in out]
            answers = [(r.code, r.opaque, r.flag, r.remark, r.ext, r.body) for r in answers]
        s = p.stats
        stats = (s.put_msgs_total, s.put_bytes_total, s.put_requests_total, dict(s.topic_puts))
        return answers, counting.appends, store.max_physical_offset, p.send_queue.in_flight, stats
    finally:
        await store.shutdown()


@pytest.mark.skipif(_accel.ACTIVE != "compiled", reason="the compiled core is not built")
@pytest.mark.parametrize("case", sorted(RUN_CASES))
@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
async def test_run_plain_twins_answer_and_store_alike(
    tmp_path: Path, case: str, flush: FlushDiskType
) -> None:
    # each twin on a fresh store: the same answers (or None, with nothing stored), appends and counts
    states = []
    for n, fn in enumerate((_accel.PURE["run_plain"], _accel.COMPILED["run_plain"])):
        states.append(
            await _run_plain_state(
                fn, tmp_path / str(n), RUN_CASES[case], BORN, store={"flush_disk_type": flush}
            )
        )
    assert states[0] == states[1]
    answers, appends = states[0][:2]
    plain = case in ("lone", "two queues", "a full group", "no wait")
    assert (answers is not None) == plain and (appends != []) == plain
    if plain:
        assert [a[0] for a in answers] == [ResponseCode.SUCCESS] * len(RUN_CASES[case])


@pytest.mark.skipif(_accel.ACTIVE != "compiled", reason="the compiled core is not built")
@pytest.mark.parametrize(
    "setup",
    [
        {"channel": SimpleNamespace(attrs={}, remote_addr="10.0.0.7:4321", peer=None)},  # no born host
        {"write_gate": lambda: None},
        {"ack_gate": lambda: None},
    ],
)
async def test_run_plain_twins_leave_a_run_to_the_general_path_alike(
    tmp_path: Path, setup: dict[str, Any]
) -> None:
    kw = dict(setup)
    channel = kw.pop("channel", BORN)
    for n, fn in enumerate((_accel.PURE["run_plain"], _accel.COMPILED["run_plain"])):
        assert await _run_plain_state(fn, tmp_path / str(n), [v2(1, b"a")], channel, **kw) == (
            None, [], 0, 0, (0, 0, 0, {})
        )  # fmt: skip


async def test_a_plain_run_is_answered_by_run_plain_with_the_general_paths_answers(tmp_path: Path) -> None:
    # handle_run of a plain run (born host known): the answers the general path gives the same run
    outs = []
    for n, path in enumerate(("run_plain", "general")):
        store = await _store(tmp_path / str(n))
        p = _processor(CountingStore(store))
        p._topic_problem("T")
        if path == "general":
            p._plain = lambda channel, requests: None  # type: ignore[method-assign]
        out = p.handle_run(BORN, [v2(i, b"g%d" % i, queue_id=i % 3) for i in range(7)])  # type: ignore[arg-type]
        outs.append([(r.code, r.opaque, r.ext) for r in out])
        await store.shutdown()
    assert outs[0] == outs[1]
