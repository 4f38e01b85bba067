"""The awaited send's hot path (client/send_core.py) and its compiled twin (client/_speedups.pyx):
the same first attempt for the same message (or the same refusal to take it), the same batch body
as ``batch_item`` builds, the same results and ``settled`` marks; and what ``Producer.send`` returns
through it (a coalesced batch's member results, the general path for anything unusual)."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy import _accel
from rocketpy.client import send_core
from rocketpy.client.message_check import PreparedMessage, batch_item
from rocketpy.client.results import SendResult, SendStatus
from rocketpy.client.send_path import MessageJob
from rocketpy.message import Message, MessageQueue
from rocketpy.record import decode_batch
from tests.unit.test_client_coalesce import BatchRemoting, producer_with

try:
    compiled: Any = SimpleNamespace(**_accel.load_compiled())
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    compiled = None

PURE = _accel.PURE
TWINS = [pytest.param(PURE, id="pure")] + (
    [pytest.param(compiled.__dict__, id="compiled")] if compiled is not None else []
)


def job_of(body: bytes, flag: int, props: str, uniq: str = "U") -> MessageJob:
    p = PreparedMessage.__new__(PreparedMessage)
    p.body, p.flag, p.properties, p.uniq_key = body, flag, props, uniq
    job = MessageJob.__new__(MessageJob)
    job.prepared = p
    job.settled = False
    return job


ITEMS = st.lists(
    st.tuples(
        st.binary(min_size=1, max_size=64),
        st.integers(-(1 << 31), (1 << 31) - 1),
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
    ),
    min_size=1,
    max_size=8,
)


@pytest.mark.parametrize("twins", TWINS)
@settings(max_examples=60, deadline=None)
@given(items=ITEMS)
def test_batch_body_is_batch_item_of_each_member(twins: dict[str, Any], items: list[Any]) -> None:
    jobs = [job_of(b, f, s) for b, f, s in items]
    want = b"".join(b"".join(batch_item(b, f, s.encode())) for b, f, s in items)
    assert twins["batch_body"](jobs) == want
    assert [(b, f, s) for b, f, s in decode_batch(want)] == items


@pytest.mark.parametrize("twins", TWINS)
def test_batch_body_refuses_what_batch_item_refuses(twins: dict[str, Any]) -> None:
    with pytest.raises(Exception) as want:
        PURE["batch_body"]([job_of(b"x", 1 << 31, "")])
    with pytest.raises(want.type, match=str(want.value)):
        twins["batch_body"]([job_of(b"x", 1 << 31, "")])


@pytest.mark.parametrize("twins", TWINS)
@pytest.mark.parametrize("quiet", [True, False])
async def test_settle_stored_gives_each_member_its_result(twins: dict[str, Any], quiet: bool) -> None:
    loop = asyncio.get_running_loop()
    jobs = [job_of(b"x", 0, "", uniq=f"U{i}") for i in range(4)]
    for j in jobs:
        j.future = loop.create_future()
    jobs[2].future.cancel()  # a member cancelled meanwhile keeps its outcome
    mq = MessageQueue("T", "b", 3)
    first = SendResult(SendStatus.SEND_OK, "", "o0,o1", mq, 10)  # fewer ids than members: ""
    twins["settle_stored"](jobs, first, quiet)
    got = [(j.future.result().__repr__(), j.settled) for j in jobs if not j.future.cancelled()]
    want = [
        (repr(SendResult(SendStatus.SEND_OK, f"U{i}", oid, mq, 10 + i)), quiet)
        for i, oid in ((0, "o0"), (1, "o1"), (3, ""))
    ]
    assert got == want
    assert jobs[2].settled is False


@pytest.mark.parametrize("twins", TWINS)
async def test_live_members_and_earliest_deadline(twins: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    jobs = [job_of(b"x", 0, "", uniq=f"U{i}") for i in range(5)]
    for j, (deadline, size) in zip(
        jobs, [(5.0, 10), (9.0, 20), (2.0, 30), (7.0, 40), (1.0, 50)], strict=True
    ):
        j.future, j.deadline, j.item_size = loop.create_future(), deadline, size
    jobs[1].future.cancel()
    jobs[4].future.set_result(None)
    live, dropped, latest = twins["live_members"](jobs)
    assert (live, dropped, latest) == ([jobs[0], jobs[2], jobs[3]], 70, 7.0)
    assert twins["earliest_deadline"](jobs, 6.0) == 2.0  # the done member's 1.0 does not count
    assert twins["earliest_deadline"](jobs, 1.5) == 1.5
    for j in jobs:
        j.future.cancel()
    assert twins["live_members"](jobs) == ([], 150, 0.0)


MESSAGES = [
    Message("T", b"plain"),
    Message("T", b"tagged", tags="TagA"),
    Message("T", b"unicode tag", tags="标签"),
    Message("T", b"timed tag", tags="DELAY"),  # its properties may ask for a delay: not coalesced
    Message("T", b"keys", keys="k1"),
    Message("T", b"props", properties={"a": "b"}),
    Message("T", b"delayed", delay_level=2),
    Message("T", b"x" * 5000),  # compressed: general path
    Message("T", b"flag", flag=7),
    Message("T", b"bad flag", flag=1 << 31),
    Message("T", b"bad tags", tags="a||b"),
    Message("Unchecked", b"topic not checked yet"),
    Message("T", bytearray(b"not bytes")),
    "not a message",
]


def outcome(started: Any) -> Any:
    """What a ``start_usual`` answer says, without its unique key and times."""
    if started is None:
        return None
    if asyncio.iscoroutine(started):
        started.close()
        return "coroutine"
    p = started.prepared
    props = p.properties.replace(p.uniq_key, "<uniq>")
    return (
        type(started).__name__, p.body, p.flag, props, p.queue_nums, p.sys_flag, p.topic, p.needs_compress,
        len(p.uniq_key), started.topic, started.attempts, started.tried, started.item_size, started.mq,
        started.addr, started.settled, started.choice, started.last_broker,
    )  # fmt: skip


async def drop_held(remoting: BatchRemoting) -> None:
    """End the sends ``remoting`` holds unanswered, so one twin's batches do not reach the next."""
    for fut, _ in remoting.held:
        fut.cancel()
    await asyncio.sleep(0)
    remoting.release()


async def test_start_usual_twins_take_the_same_messages_the_same_way() -> None:
    if compiled is None:
        pytest.skip("the compiled core is not built")
    results = {}
    for name, fn in (("pure", PURE["start_usual"]), ("compiled", compiled.start_usual)):
        remoting = BatchRemoting(hold=True)
        p = producer_with(remoting)
        send_core._valid_topics.add("T")  # as a first send of the topic leaves it
        p._instance.tp.index._value = 0  # type: ignore[union-attr]  # the same round robin for both
        got = []
        for msg in MESSAGES:
            started = fn(p._path, MessageJob, msg, p.max_message_bytes, p.compress_over_bytes,
                         p.default_topic_queue_nums, p.retry_times, 3.0)  # fmt: skip
            got.append(outcome(started))
        results[name] = got
        await drop_held(remoting)
    assert results["pure"] == results["compiled"]
    taken = [m for m, o in zip(MESSAGES, results["pure"], strict=True) if o is not None]
    assert [m.body for m in taken] == [b"plain", b"tagged", b"unicode tag", b"flag"]  # type: ignore[union-attr]


async def test_start_usual_before_start_raises_as_send_does() -> None:
    p = producer_with(BatchRemoting())
    p._instance = None
    for fn in [PURE["start_usual"]] + ([compiled.start_usual] if compiled is not None else []):
        with pytest.raises(Exception, match="is not started"):
            fn(p._path, MessageJob, Message("T", b"x"), 1 << 20, 4096, 4, 2, 3.0)


async def test_awaited_sends_get_their_own_results_through_the_shortcut() -> None:
    remoting = BatchRemoting()
    p = producer_with(remoting)
    await p.send(Message("T", b"first"))  # checks the topic, then the usual message takes the shortcut
    results = await asyncio.gather(*(p.send(Message("T", b"m%d" % i, tags="t")) for i in range(30)))
    assert len({r.msg_id for r in results}) == 30
    for r in results:
        mq = r.message_queue
        assert r.status is SendStatus.SEND_OK
        assert r.offset_msg_id == f"{_addr(mq)}/{mq.queue_id}/{r.queue_offset}"
    stats = p.coalesce_stats
    assert stats is not None and stats.messages == 31 and stats.requests < 31
    bodies = [b for _, cmd in remoting.sent for b in remoting.bodies(cmd)]
    assert sorted(bodies) == sorted([b"first"] + [b"m%d" % i for i in range(30)])


def _addr(mq: MessageQueue) -> str:
    from tests.unit.test_client_send_path import ADDRS

    return ADDRS[mq.broker_name]


class _WatchedJob(MessageJob):
    """A job class whose ``item_size`` is a property (not a plain slot): the compiled twin must set
    it with ``setattr`` as the pure one does, and go back to slot writes for ``MessageJob``."""

    __slots__ = ("sizes",)

    @property  # type: ignore[misc]
    def item_size(self) -> int:
        return self.sizes[-1]

    @item_size.setter
    def item_size(self, value: int) -> None:
        try:
            self.sizes.append(value)
        except AttributeError:
            self.sizes = [value]


async def test_start_usual_twins_set_a_subclass_property_and_read_unset_slots_alike() -> None:
    if compiled is None:
        pytest.skip("the compiled core is not built")
    send_core._valid_topics.add("T")
    results = {}
    for name, fn in (("pure", PURE["start_usual"]), ("compiled", compiled.start_usual)):
        remoting = BatchRemoting(hold=True)
        p = producer_with(remoting)
        p._instance.tp.index._value = 0  # type: ignore[union-attr]
        got: list[Any] = []
        for job_cls in (_WatchedJob, MessageJob, _WatchedJob):
            started = fn(p._path, job_cls, Message("T", b"abc", tags="t"), 1 << 20, 4096, 4, 2, 3.0)
            got.append((outcome(started), getattr(started, "sizes", None)))
        unset = Message("T", b"no tags slot")
        del unset.tags  # a slot left unset reads as getattr does: AttributeError
        with pytest.raises(AttributeError, match="tags"):
            fn(p._path, MessageJob, unset, 1 << 20, 4096, 4, 2, 3.0)
        results[name] = got
        await drop_held(remoting)
    assert results["pure"] == results["compiled"]
    assert [sizes for _, sizes in results["pure"]] == [[74], None, [74]]


async def test_a_started_producer_makes_its_sends_futures_on_its_own_loop() -> None:
    p = producer_with(BatchRemoting())
    co = p._path.coalescer
    assert co is not None and co.loop is None  # not started: the shortcut asks for the running loop
    await p.send(Message("T", b"first"))
    result = await p.send(Message("T", b"second"))
    assert result.status is SendStatus.SEND_OK
    co.loop = asyncio.get_running_loop()  # as Producer.start sets it
    started = send_core.start_usual(p._path, MessageJob, Message("T", b"x"), 1 << 20, 4096, 4, 2, 3.0)
    assert isinstance(started, MessageJob) and started.future.get_loop() is co.loop
    await started.future
    assert started.finish(started.future).status is SendStatus.SEND_OK


async def test_start_usual_twins_read_a_real_instance_alike() -> None:
    # the compiled twin reads MQClientInstance's route and address tables inline (and a started
    # producer's instance without calling Producer._inst): the same queue and address as its methods
    if compiled is None:
        pytest.skip("the compiled core is not built")
    from rocketpy.client.instance import ClientSettings, MQClientInstance
    from tests.unit.test_client_send_path import FakeInstance

    send_core._valid_topics.add("T")
    results = {}
    for name, fn in (("pure", PURE["start_usual"]), ("compiled", compiled.start_usual)):
        remoting = BatchRemoting(hold=True)
        p = producer_with(remoting)
        fake = p._instance
        inst = MQClientInstance(["127.0.0.1:9"], ClientSettings())
        inst.set_publish_route("T", fake.tp.route)  # type: ignore[union-attr]
        inst._publish["T"].index._value = 0
        inst.remoting = remoting  # type: ignore[assignment]  # what a batch leaving would write to
        p._instance = inst
        got = [outcome(fn(p._path, MessageJob, Message("T", b"m%d" % i), 1 << 20, 4096, 4, 2, 3.0))
               for i in range(3)]  # fmt: skip
        inst._broker_addrs.clear()  # no address: the attempt waits in SendPath.run
        got.append(outcome(fn(p._path, MessageJob, Message("T", b"late"), 1 << 20, 4096, 4, 2, 3.0)))
        inst._publish.clear()  # no route: the same
        got.append(outcome(fn(p._path, MessageJob, Message("T", b"later"), 1 << 20, 4096, 4, 2, 3.0)))
        results[name] = got
        co = p._path.coalescer
        assert co is not None
        for q in list(co._queues.values()):
            if q.timer is not None:
                q.timer.cancel()
        assert isinstance(fake, FakeInstance)
    assert results["pure"] == results["compiled"]
    assert [o if o == "coroutine" else o[14] for o in results["pure"]] == [
        "127.0.0.1:1", "127.0.0.1:1", "127.0.0.1:1", "coroutine", "coroutine"
    ]  # fmt: skip


# -- a sequential sender's send: written alone, settled, finished -----------------------------------
def lone_state(p: Any, remoting: BatchRemoting, started: Any) -> Any:
    """What a lone send left: the request written, the job's future, the accumulators, the counts."""
    co = p._path.coalescer
    addr, cmd = remoting.sent[-1]
    ext = {k: v for k, v in cmd.ext.items() if k not in ("g", "i")}  # born time, UNIQ_KEY
    accumulators = sorted((k, q.in_flight, len(q.jobs), q.timer is None) for k, q in co._queues.items())
    own_future = bool(remoting.held) and started.future is remoting.held[-1][0]
    return (
        addr, cmd.code, cmd.flag, cmd.remark, cmd.body, cmd.serialize_type, ext, own_future,
        co.held_bytes, co.stats.requests, co.stats.messages, accumulators, outcome(started),
    )  # fmt: skip


async def test_start_usual_twins_write_a_sequential_senders_send_alone_alike() -> None:
    # after a lone send (idle producer): each twin writes the next send at once as its own request,
    # whose response future is the job's, and settles the accumulator when it is answered
    if compiled is None:
        pytest.skip("the compiled core is not built")
    from tests.unit.test_client_coalesce import after_a_lone_send

    states = {}
    for name, fn in (("pure", PURE["start_usual"]), ("compiled", compiled.start_usual)):
        remoting = BatchRemoting(hold=True)
        random.seed(7)  # the same first queue for both twins
        p = await after_a_lone_send(remoting)
        tp = p._instance.tp  # type: ignore[union-attr]
        first = remoting.sent[-1][1].ext
        where = [(mq.broker_name, mq.queue_id) for mq in tp.message_queues].index((first["n"], first["e"]))
        tp.index._value = where - 1  # the round robin's next queue: the lone send's (its accumulator kept)
        send_core._valid_topics.add("T")
        started = fn(p._path, MessageJob, Message("T", b"next", tags="A"), p.max_message_bytes,
                     p.compress_over_bytes, p.default_topic_queue_nums, p.retry_times, 3.0)  # fmt: skip
        written = lone_state(p, remoting, started)
        remoting.release()
        await asyncio.sleep(0)
        settled = lone_state(p, remoting, started)[8:12]
        states[name] = (written, settled, started.future.result().code)
    assert states["pure"] == states["compiled"]
    written, settled, code = states["pure"]
    assert written[7] and written[8] > 0 and written[9:11] == (2, 2)  # its own future; 2 requests
    assert settled[0] == 0 and code == 0  # the accumulator settled, nothing held


@pytest.mark.parametrize("twins", TWINS)
async def test_settle_lone_releases_and_sends_what_queued_meanwhile(twins: dict[str, Any]) -> None:
    from rocketpy.client import coalesce

    remoting = BatchRemoting()
    p = producer_with(remoting)
    co = p._path.coalescer
    assert co is not None
    mq = MessageQueue("T", "b", 0)
    q = coalesce._Pending("a:1", mq, ("a:1", "T", "b", 0))
    co._queues[q.key] = q
    q.in_flight, co.held_bytes = 1, 30
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    twins["settle_lone"](co, q, 10, done)
    assert (q.in_flight, co.held_bytes, co._queues.get(q.key)) == (0, 20, q)  # idle, kept (few)
    flushed: list[Any] = []
    co._flush = flushed.append  # type: ignore[method-assign]
    q.in_flight, q.jobs = 1, ["queued"]  # type: ignore[list-item]
    twins["settle_lone"](co, q, 20, done)
    assert (q.in_flight, co.held_bytes, flushed) == (0, 0, [q])


async def test_a_sequential_sender_keeps_its_accumulators_until_there_are_many() -> None:
    from rocketpy.client import coalesce

    remoting = BatchRemoting()
    p = producer_with(remoting)
    co = p._path.coalescer
    assert co is not None
    for _ in range(3):
        await p.send(Message("T", b"seq"))
    assert len(co._queues) >= 1 and all(not q.jobs and not q.in_flight for q in co._queues.values())
    kept = len(co._queues)
    for i in range(coalesce.KEPT_ACCUMULATORS + 5):  # idle accumulators past the bound are dropped
        q = coalesce._Pending(f"x:{i}", MessageQueue("T", "b", 0), (f"x:{i}", "T", "b", 0))
        co._queues[q.key] = q
        co._maybe_forget(q)
    assert len(co._queues) == coalesce.KEPT_ACCUMULATORS and kept <= coalesce.KEPT_ACCUMULATORS


def answered(code: int, ext: dict[str, Any] | None) -> Any:
    from rocketpy.remoting.command import RemotingCommand

    return RemotingCommand(code, 7, 1, "why" if code else None, ext, b"")


FINISH_CASES = {
    "stored": answered(0, {"msgId": "OFF1", "queueId": 2, "queueOffset": 41}),
    "no queue id": answered(0, {"msgId": "OFF2", "queueOffset": 5}),
    "transaction id": answered(0, {"msgId": "OFF3", "queueId": 1, "queueOffset": 0, "transactionId": "TX"}),
    "json strings": answered(0, {"msgId": "OFF4", "queueId": "3", "queueOffset": "9"}),
    "flush timeout": answered(10, {"msgId": "OFF5", "queueId": 2, "queueOffset": 1}),
    "refused": answered(13, {}),
    "bad offset": answered(0, {"msgId": "OFF6", "queueOffset": True}),
}


@pytest.mark.parametrize("case", sorted([*FINISH_CASES, "error"]))
@pytest.mark.parametrize("uniq", ["UNIQ", ""])
async def test_finish_sent_twins_give_the_same_outcome(case: str, uniq: str) -> None:
    # the same SendResult (or error, or retry) and the same fault-tolerance record, slow or fast
    if compiled is None:
        pytest.skip("the compiled core is not built")
    from rocketpy.errors import RemotingTimeoutError

    outcomes = []
    for fn in (PURE["finish_sent"], compiled.finish_sent):
        p = producer_with(BatchRemoting())
        loop = asyncio.get_running_loop()
        job = job_of(b"body", 0, "", uniq)
        job.topic, job.attempts, job.choice, job.unavailable, job.last_broker = "T", 1, None, 0, None
        job.path, job.mq, job.addr, job.deadline = p._path, MessageQueue("T", "b", 2), "a:1", loop.time() + 3
        job.started, job.tried = loop.time() - (0.7 if uniq else 0.0), 1  # 700 ms: recorded
        done: asyncio.Future[Any] = loop.create_future()
        if case == "error":
            done.set_exception(RemotingTimeoutError("no answer"))
        else:
            done.set_result(FINISH_CASES[case])
        try:
            out: Any = fn(job, done)
            if type(out) is SendResult:
                out = (out.status, out.msg_id, out.offset_msg_id, out.message_queue, out.queue_offset)
            elif asyncio.iscoroutine(out):
                out.close()
                out = "retry"
        except Exception as e:
            out = (type(e).__name__, str(e))
        outcomes.append((out, sorted((k, round(i.latency_ms, -2)) for k, i in p.fault._items.items())))
    assert outcomes[0] == outcomes[1]


async def test_start_usual_twins_write_an_unbatched_producers_send_alike() -> None:
    # auto-batch off: each twin takes the usual message too, writing its request at once as
    # SendPath.start would (the same header, queue, job fields); the rest goes the general way
    if compiled is None:
        pytest.skip("the compiled core is not built")
    results = {}
    for name, fn in (("pure", PURE["start_usual"]), ("compiled", compiled.start_usual)):
        remoting = BatchRemoting(hold=True)
        p = producer_with(remoting, auto_batch=False)
        assert p._path.coalescer is None
        send_core._valid_topics.add("T")
        p._instance.tp.index._value = 0  # type: ignore[union-attr]
        got = []
        for msg in MESSAGES:
            started = fn(p._path, MessageJob, msg, p.max_message_bytes, p.compress_over_bytes,
                         p.default_topic_queue_nums, p.retry_times, 3.0)  # fmt: skip
            written = None
            if started is not None and not asyncio.iscoroutine(started):
                addr, cmd = remoting.sent[-1]
                ext = {k: v for k, v in cmd.ext.items() if k not in ("g", "i")}
                written = (addr, cmd.code, cmd.body, ext, started.future is remoting.held[-1][0])
            got.append((outcome(started), written))
        results[name] = got
        await drop_held(remoting)
    assert results["pure"] == results["compiled"]
    taken = [m for m, (o, _) in zip(MESSAGES, results["pure"], strict=True) if o is not None]
    assert [m.body for m in taken] == [b"plain", b"tagged", b"unicode tag", b"flag"]  # type: ignore[union-attr]
    assert all(w is not None and w[4] for o, w in results["pure"] if o is not None)  # written, own future


async def test_an_unbatched_producers_sends_get_their_results_through_the_shortcut() -> None:
    p = producer_with(BatchRemoting(), auto_batch=False)
    send_core._valid_topics.add("T")
    results = [await p.send(Message("T", b"u%d" % i, tags="A")) for i in range(5)]
    assert [r.status for r in results] == [SendStatus.SEND_OK] * 5
    assert len({r.msg_id for r in results}) == 5 and all(r.offset_msg_id for r in results)
