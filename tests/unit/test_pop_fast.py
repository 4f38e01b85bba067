"""The plain-pop fast path (``rocketpy/broker/processors/poppath.py``): both twins of ``pop_now``
against each other and against the full path (``PopMessageProcessor.pop`` without it), which they
stand in for: three brokers fed the same puts, pops (plain ones and every kind the fast path leaves
to the full path), batch acks, offset resets and table changes give the same answers (code, remark,
header, body) and keep the same POP ledger, ck buffer, offsets, statistics and counts."""

from __future__ import annotations

import inspect
import random
from pathlib import Path
from typing import Any

import pytest

from rocketpy import _accel
from rocketpy.broker.controller import BrokerController
from rocketpy.broker.pop.service import wall_ms
from rocketpy.broker.processors import pop as pop_processor
from rocketpy.broker.processors import poppath  # its twin joins PURE
from rocketpy.broker.store import BrokerMessage
from rocketpy.client.answers import pack_body
from rocketpy.client.pop_result import pop_result
from rocketpy.client.receipts import ack_groups, batch_acks
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.protocol.codes import RequestCode
from rocketpy.protocol.headers.pop import batch_ack_body
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicConfig
from rocketpy.subscription_group import SubscriptionGroupConfig
from rocketpy.topic import pop_retry_topic

try:
    COMPILED: Any = _accel.load_compiled()["pop_now"]
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    COMPILED = None
PURE = _accel.PURE["pop_now"]
TOPIC, QUEUES, BROKER = "T", 4, "fastpop"
RETRY = pop_retry_topic("G", TOPIC)


def _none(processor: Any, request: Any) -> None:
    return None


class Side:
    """One broker; ``fast`` is the pop_now its processor tries first (``_none``: the full path)."""

    def __init__(self, controller: BrokerController, fast: Any) -> None:
        self.controller = controller
        self.fast = fast
        self.table = controller.processor_table()
        self.taken = 0

    async def call(self, code: RequestCode, request: RemotingCommand) -> Any:
        handler = self.table[code]
        real = pop_processor.pop_now
        if code is RequestCode.POP_MESSAGE:
            taken = self.fast(self.table[code].__self__, request) if self.fast is not _none else None
            if taken is not None:  # the twin took it: its changes are made; compare its answer
                self.taken += 1
                answer = taken
            else:
                pop_processor.pop_now = _none
                try:
                    answer = handler(None, request)
                except Exception as exc:  # a header error: the processor table answers it
                    return type(exc).__name__, str(exc)
                finally:
                    pop_processor.pop_now = real
        else:
            answer = handler(None, request)
        if inspect.isawaitable(answer):
            answer = await answer
        return _answer(answer)

    def state(self) -> Any:
        c = self.controller
        service = c.pop
        ledger = service.ledger
        queues = {
            key: (q.next_offset, q.committed, {o: ck.seq for o, ck in q.inflight.items()}, list(q._order))
            for key, q in ledger.queues.items()
        }
        cks = sorted((s, ck.pop_time, ck.invisible_ms, ck.start_offset, ck.end_offset, list(ck.offsets),
                      ck.open, ck.unwritten) for s, ck in ledger._open.items())  # fmt: skip
        s = c.stats
        gets = (s.get_msgs_total, s.get_bytes_total, s.get_requests_total, dict(s.group_get_msgs),
                {k: list(v) for k, v in s.group_topic_gets.items()})  # fmt: skip
        buffer = (len(service.buffer), service.buffer.held, service.buffer.written, service.buffer.skipped)
        return (queues, cks, ledger.inflight_total, ledger.next_seq, buffer, gets, dict(service.counts),
                c.offsets.table, service.reader._rotor, c.store.stats.get_total)  # fmt: skip


def _answer(cmd: RemotingCommand | None) -> Any:
    if cmd is None:
        return None
    return cmd.code, cmd.flag, cmd.remark, cmd.ext, bytes(cmd.body), cmd.serialize_type


def _pop_ext(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.5:  # the usual pop of a SimpleConsumer
        return {"consumerGroup": "G", "topic": TOPIC, "queueId": rng.choice([-1, -1, 2]),
                "maxMsgNums": rng.choice([32, 8]), "invisibleTime": 30_000, "pollTime": 0, "bornTime": 1,
                "initMode": 0, "expType": "TAG", "exp": "*"}  # fmt: skip
    ext: dict[str, Any] = {
        "consumerGroup": rng.choice(["G", "G", "G", "G", "H", "F", ""]),
        "topic": rng.choice([TOPIC] * 8 + ["Missing", RETRY]),
        "queueId": rng.choice([-1, -1, -1, 0, 1, QUEUES - 1, QUEUES, -7]),
        "maxMsgNums": rng.choice([32, 32, 8, 1, 5, 0, 33]),
        "invisibleTime": rng.choice([30_000, 30_000, 60_000, 0]),
        "pollTime": 0,
        "bornTime": 123,
        "initMode": rng.choice([0, 0, 1, 2]),
    }
    expression = rng.choice([None, None, ("*", "TAG"), ("*", None), ("", "TAG"), ("A", "TAG"), ("*", "tag"),
                             ("a > 1", "SQL92"), ("*", "SQL92")])  # fmt: skip
    if expression is not None:
        ext["exp"], ext["expType"] = expression
    roll = rng.random()
    if roll < 0.08:
        ext["order"] = True
    elif roll < 0.16:
        ext["order"] = False
    elif roll < 0.24:  # a field in another type (as a JSON client sends it), or a bool for an int
        field = rng.choice(["queueId", "maxMsgNums", "invisibleTime", "pollTime", "bornTime"])
        ext[field] = rng.choice([str(ext[field]), True])
    elif roll < 0.28:
        ext["attemptId"] = rng.choice(["a-1", 7])
    elif roll < 0.31:
        ext["pollTime"] = 20  # nothing there: waits, then POLLING_TIMEOUT (through ``rest``)
    return ext


async def _run(root: Path, seed: int, steps: int) -> list[Side]:
    rng = random.Random(seed)
    fns = [_none, PURE] + ([COMPILED] if COMPILED is not None else [])
    sides = []
    for i, fn in enumerate(fns):
        bc = BrokerConfig(
            brokerName=BROKER,
            bindAddress="127.0.0.1",
            listenPort=0,
            grpcServerPort=0,
            autoCreateSubscriptionGroup=False,
        )
        controller = BrokerController(bc, StoreConfig(storePathRootDir=str(root / f"side{i}")))
        await controller.start()
        for topic in (TOPIC, RETRY):
            controller.topic_config.update(
                TopicConfig(
                    topic_name=topic,
                    read_queue_nums=QUEUES if topic == TOPIC else 1,
                    write_queue_nums=QUEUES if topic == TOPIC else 1,
                )
            )
        controller.subscription_groups.update(SubscriptionGroupConfig("G"))
        controller.subscription_groups.update(SubscriptionGroupConfig("F", consume_enable=False))
        controller.pop.clock_ms = lambda: clock[0]
        controller.pop.reader._rotor = 0
        put = controller.store._put  # the same stored records on every side: store time and host
        put._clock, put.store_host8 = (
            (lambda: 1_700_000_000.0),
            sides[0].controller.store._put.store_host8 if sides else put.store_host8,
        )
        sides.append(Side(controller, fn))
    clock = [wall_ms()]  # near the revive service's clock: nothing expires within the test
    inflight: list[Any] = []
    try:
        for step in range(steps):
            clock[0] += rng.randrange(1, 50)
            op = rng.random()
            if op < 0.2:  # messages into a queue of the topic (or the retry topic)
                topic, qid = (RETRY, 0) if rng.random() < 0.15 else (TOPIC, rng.randrange(QUEUES))
                tags = rng.choice([None, "A", "B"])
                props = f"TAGS\x01{tags}\x02" if tags else ""
                msgs = [
                    BrokerMessage(topic, qid, b"m%d-%d" % (step, k), props)
                    for k in range(rng.randrange(1, 40))
                ]
                for side in sides:
                    r = await side.controller.store.put_messages(list(msgs))
                    assert r.ok, r
            elif op < 0.75:
                ext = _pop_ext(rng)
                answers = [await s.call(RequestCode.POP_MESSAGE, RemotingCommand.request(
                    RequestCode.POP_MESSAGE, dict(ext))) for s in sides]  # fmt: skip
                assert answers[1:] == answers[:-1], (step, ext, answers)
                if ext[
                    "pollTime"
                ]:  # a waiting pop reads again each time it is woken: as often as timing has it
                    for side in sides[1:]:
                        side.controller.pop.reader._rotor = sides[0].controller.pop.reader._rotor
                code = answers[0][0] if isinstance(answers[0][0], int) else -1
                if code == 0 and ext.get("topic") == TOPIC and not ext.get("order"):
                    cmd = RemotingCommand(0, 0, 1, answers[0][2], answers[0][3], answers[0][4])
                    inflight += [
                        (m, ext["consumerGroup"]) for m in pop_result(cmd, "a", BROKER, False).messages
                    ]
            elif op < 0.9 and inflight:  # a batch ack of some in flight (some twice)
                rng.shuffle(inflight)
                take, inflight = inflight[: rng.randrange(1, 80)], inflight[rng.randrange(0, 10) :]
                group = take[0][1]
                msgs = [m for m, g in take if g == group]
                body = pack_body(batch_ack_body(BROKER, batch_acks(group, ack_groups(msgs))))
                answers = [await s.call(RequestCode.BATCH_ACK_MESSAGE, RemotingCommand.request(
                    RequestCode.BATCH_ACK_MESSAGE, None, body)) for s in sides]  # fmt: skip
                assert answers[1:] == answers[:-1], (step, answers)
            elif op < 0.93:  # an admin's offset reset
                qid, offset = rng.randrange(QUEUES), rng.randrange(0, 60)
                for side in sides:
                    side.controller.offsets.commit_offset("G", TOPIC, qid, offset)
            else:  # the tables change under the pops (or back: readable, the group enabled)
                what = rng.choice(["perm", "topic", "group"]) if op < 0.96 else "back"
                perm = rng.choice([2, 4])
                for side in sides:
                    c = side.controller
                    if what in ("perm", "back"):
                        c.broker_config.broker_permission = perm if what == "perm" else 6
                    if what in ("topic", "back"):
                        c.topic_config.update(TopicConfig(topic_name=TOPIC, read_queue_nums=QUEUES,
                                                          write_queue_nums=QUEUES,
                                                          perm=perm if what == "topic" else 6))  # fmt: skip
                    if what in ("group", "back"):
                        c.subscription_groups.update(
                            SubscriptionGroupConfig("G", consume_enable=what == "back")
                        )
            states = [s.state() for s in sides]
            assert states[1:] == states[:-1], step
    finally:
        for side in sides:
            await side.controller.shutdown()
    return sides


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_both_twins_answer_and_change_what_the_full_path_does(tmp_path: Path, seed: int) -> None:
    sides = await _run(tmp_path, seed, 300)
    for side in sides[1:]:
        assert side.taken >= 15, f"the fast path took {side.taken} pops: too few to compare anything"


def test_the_retry_topic_the_fast_path_may_use() -> None:
    assert poppath.retry_topic_fits("G", TOPIC) == RETRY
    assert poppath.retry_topic_fits("G", RETRY) is None  # a retry topic itself: the full path
    assert poppath.retry_topic_fits("g" * 120, TOPIC) is None  # too long: the full path refuses it
    assert poppath.retry_topic_fits("é" * 60, TOPIC) is None  # 69 characters but 129 bytes
    assert poppath.retry_topic_fits("é" * 10, TOPIC) == pop_retry_topic("é" * 10, TOPIC)
