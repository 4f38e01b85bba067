"""The pull fast path (``rocketpy/broker/processors/pullpath.py``): both twins of ``pull_now``
against each other and against ``PullMessageProcessor.process``, which they stand in for: on one
real store and the same sequence of puts, pulls and table changes, the same answers (code, remark,
header, body), the same held pulls, offsets, statistics and store read counts."""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy import _accel
from rocketpy.broker.consumer_manager import ClientChannelInfo, ConsumerManager
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.processors import pullpath  # noqa: F401  (its twin joins PURE)
from rocketpy.broker.processors.guard import Guard
from rocketpy.broker.processors.pull import PullMessageProcessor
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import BrokerMessage, MessageStore
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.message import properties_to_string
from rocketpy.perm import PERM_READ, PERM_WRITE
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicConfig
from rocketpy.subscription import SubscriptionParseError, parse_subscription
from rocketpy.subscription_group import SubscriptionGroupConfig
from rocketpy.sysflag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from tests.unit.test_store_helpers import tiny_config

try:
    COMPILED: Any = _accel.load_compiled()["pull_now"]
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    COMPILED = None
PURE = _accel.PURE["pull_now"]
TOPIC, QUEUES = "T", 3
GROUPS = ("G", "H")  # H: not created (the fast path leaves it to process, which refuses it)
TAGS = ("A", "B", None)


class FakeChannel:
    """What a held pull and the tracer read of a channel."""

    remote_addr = "127.0.0.1:4321"
    closed = False

    def send(self, cmd: Any) -> None:  # a held pull's answer when the table shuts down
        pass

    def count_response(self, request: Any, response: Any) -> None:
        pass


class Side:
    """One processor with its own tables over the shared store; ``fast`` is its pull_now or None."""

    def __init__(self, store: MessageStore, root: str, fast: Any, sql: bool) -> None:
        bc = BrokerConfig(brokerName="b", enablePropertyFilter=sql)
        self.topics = TopicConfigManager(bc, f"{root}/topics-{id(self)}.json")
        self.topics.update(TopicConfig(topic_name=TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES))
        groups = SubscriptionGroupManager(f"{root}/groups-{id(self)}.json", auto_create=False)
        groups.update(SubscriptionGroupConfig("G"))
        self.consumers = ConsumerManager(lambda group, channels: None, 120_000)
        self.offsets = ConsumerOffsetManager(f"{root}/offsets-{id(self)}.json")
        self.stats = BrokerStats()
        sc = store.config
        self.processor = PullMessageProcessor(
            Guard(bc, self.topics, groups), sc, self.consumers, self.offsets, store, self.stats
        )
        self.fast = fast
        self.taken = 0

    def pull(self, request: RemotingCommand) -> Any:
        p = self.processor
        answer = None
        if self.fast is not None:
            answer = self.fast(p, FakeChannel(), request)
            self.taken += answer is not None
        if answer is None:
            try:
                answer = p.process(FakeChannel(), request, allow_suspend=True)
            except Exception as exc:  # a header error: the processor table answers it
                return type(exc).__name__, str(exc)
        return _answer(answer)

    def state(self) -> Any:
        s = self.stats
        gets = (s.get_msgs_total, s.get_bytes_total, s.get_requests_total, dict(s.group_get_msgs),
                {k: list(v) for k, v in s.group_topic_gets.items()})  # fmt: skip
        return self.offsets.table, gets, self.processor.holds.held_count


def _answer(cmd: RemotingCommand | None) -> Any:
    if cmd is None:
        return None
    return cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext, bytes(cmd.body), cmd.serialize_type


EXPRESSIONS = st.sampled_from([("*", "TAG"), ("A", "TAG"), ("A || B", "TAG"), ("C", "TAG"), ("", "TAG"),
                               ("a > 1", "SQL92"), ("((", "SQL92"), ("A", "tag")])  # fmt: skip
FIELD = st.one_of(st.none(), st.integers(-2, 3), st.just("7"), st.just(True))
PULL = st.tuples(
    st.just("pull"),
    st.fixed_dictionaries(
        {
            "group": st.sampled_from(GROUPS),
            "queue": st.integers(-1, QUEUES),
            "offset": st.integers(0, 40),
            "max": st.integers(1, 40),
            "flag": st.sampled_from(
                [
                    FLAG_SUBSCRIPTION,
                    FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET,
                    0,
                    FLAG_COMMIT_OFFSET,
                    FLAG_SUSPEND | FLAG_SUBSCRIPTION,
                ]
            ),
            "expr": EXPRESSIONS,
            "commit": st.integers(-1, 30),
            "max_bytes": st.one_of(st.none(), st.integers(0, 6000)),
            "odd": st.one_of(
                st.none(),
                st.tuples(
                    st.sampled_from(["queueId", "sysFlag", "subscription", "maxMsgBytes", "queueOffset"]),
                    FIELD,
                ),
            ),
        }
    ),
)
OPS = st.lists(
    st.one_of(
        PULL,
        PULL,
        PULL,
        st.tuples(
            st.just("put"), st.tuples(st.integers(0, QUEUES - 1), st.integers(1, 12), st.sampled_from(TAGS))
        ),
        st.tuples(st.just("heartbeat"), EXPRESSIONS),
        st.tuples(st.just("perm"), st.sampled_from([PERM_READ | PERM_WRITE, PERM_WRITE])),
        st.tuples(st.just("broker_perm"), st.sampled_from([PERM_READ | PERM_WRITE, PERM_WRITE])),
    ),
    max_size=30,
)


def _request(op: dict[str, Any], opaque: int) -> RemotingCommand:
    sub, kind = op["expr"]
    ext: dict[str, Any] = {
        "consumerGroup": op["group"], "topic": TOPIC, "queueId": op["queue"], "queueOffset": op["offset"],
        "maxMsgNums": op["max"], "sysFlag": op["flag"], "commitOffset": op["commit"],
        "suspendTimeoutMillis": 20_000, "subscription": sub, "subVersion": 0, "expressionType": kind,
    }  # fmt: skip
    if op["max_bytes"] is not None:
        ext["maxMsgBytes"] = op["max_bytes"]
    if op["odd"] is not None:
        key, value = op["odd"]
        if value is None:
            ext.pop(key, None)
        else:
            ext[key] = value
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext=ext)
    request.opaque = opaque
    return request


def _run(fns: list[Any], ops: list[Any], sql: bool, cq_units: int) -> tuple[list[Any], list[int]]:
    """What each side answered and left after each step, and how many pulls each fast path took."""

    async def run() -> tuple[list[Any], list[int]]:
        with tempfile.TemporaryDirectory() as root:
            config: StoreConfig = tiny_config(root, mapped_file_size_commit_log=1 << 14)
            config.mapped_file_size_consume_queue = 20 * cq_units
            store = MessageStore(config)
            await store.start()
            sides = [Side(store, root, fn, sql) for fn in fns]
            try:
                seen: list[list[Any]] = [[] for _ in fns]
                for step, (op, arg) in enumerate(ops):
                    if op == "put":
                        qid, n, tag = arg
                        props = properties_to_string({"TAGS": tag}) if tag else ""
                        msgs = [
                            BrokerMessage(TOPIC, qid, b"m%d-%d" % (step, i), properties=props)
                            for i in range(n)
                        ]
                        await store.put_messages(msgs)
                        continue
                    for side, out in zip(sides, seen, strict=True):
                        if op == "pull":
                            before = store.stats.get_total
                            answer = side.pull(_request(arg, step))
                            out.append((answer, store.stats.get_total - before, side.state()))
                        elif op == "heartbeat":
                            try:
                                sub = parse_subscription(TOPIC, arg[0] or "*", 1, arg[1].upper())
                            except SubscriptionParseError:  # a heartbeat the broker refuses
                                continue
                            client = ClientChannelInfo(FakeChannel(), "c1", 0)  # type: ignore[arg-type]
                            side.consumers.register_consumer("G", client, {}, [sub], notify=False)
                        elif op == "perm":
                            tc = side.topics.get(TOPIC)
                            assert tc is not None
                            side.topics.update(TopicConfig(topic_name=TOPIC, read_queue_nums=QUEUES,
                                                           write_queue_nums=QUEUES, perm=arg))  # fmt: skip
                        elif op == "broker_perm":
                            side.processor.broker_config.broker_permission = arg
                return seen, [s.taken for s in sides]
            finally:
                for side in sides:
                    side.processor.holds.shutdown()
                await store.shutdown()

    return asyncio.run(run())


FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@given(ops=OPS, sql=st.booleans(), cq_units=st.sampled_from([8, 64]))
@FUZZ
def test_pure_twin_answers_as_process(ops: list[Any], sql: bool, cq_units: int) -> None:
    seen, _ = _run([None, PURE], ops, sql, cq_units)
    assert seen[0] == seen[1]


@pytest.mark.skipif(COMPILED is None, reason="the compiled core is not built")
@given(ops=OPS, sql=st.booleans(), cq_units=st.sampled_from([8, 64]))
@FUZZ
def test_compiled_twin_answers_as_pure(ops: list[Any], sql: bool, cq_units: int) -> None:
    seen, taken = _run([PURE, COMPILED], ops, sql, cq_units)
    assert seen[0] == seen[1]
    assert taken[0] == taken[1]


def _plain_ops(expr: tuple[str, str], flag: int) -> list[Any]:
    pull = {"group": "G", "queue": 1, "offset": 0, "max": 4, "flag": flag, "expr": expr, "commit": 3,
            "max_bytes": None, "odd": None}  # fmt: skip
    ops: list[Any] = [("put", (1, 10, "A")), ("heartbeat", expr), ("pull", pull), ("pull", pull)]
    ops += [("pull", {**pull, "offset": k}) for k in range(1, 12)]
    return ops


@pytest.mark.parametrize("fn", [PURE, COMPILED], ids=["pure", "compiled"])
@pytest.mark.parametrize(
    ("expr", "flag", "fast"),
    [
        # 10 messages, 13 pulls: from 0, 0 again, 1 to 11 (10 and 11: nothing there)
        (("*", "TAG"), FLAG_SUBSCRIPTION, 10),  # the first pull fills the filter cache
        (("A", "TAG"), FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET, 10),
        (("B", "TAG"), FLAG_SUBSCRIPTION, 0),  # no unit matches: the filtered scan's answer
        (("A || B", "TAG"), FLAG_COMMIT_OFFSET, 11),  # the heartbeat's subscription
        (("*", "TAG"), 0, 11),
        (("a > 1", "SQL92"), FLAG_SUBSCRIPTION, 0),
    ],
)
def test_fast_path_is_taken(fn: Any, expr: tuple[str, str], flag: int, fast: int) -> None:
    """Each kind of pull the fast path takes is taken (and answered as process answers it)."""
    if fn is None:
        pytest.skip("the compiled core is not built")
    seen, taken = _run([None, fn], _plain_ops(expr, flag), True, 64)
    assert seen[0] == seen[1]
    assert taken[1] == fast


@pytest.mark.skipif(COMPILED is None, reason="the compiled core is not built")
def test_compiled_twin_counts_as_pure_with_the_statistics_tables_full() -> None:
    # The compiled pull counts the pull itself (BrokerStats.on_get without its frame): past the
    # bounds on the per-group and per-(group, topic) tables, both twins leave them as they are.
    from rocketpy.broker.stats import MAX_GROUP_COUNTERS, MAX_KEYED_COUNTERS

    async def run() -> list[Any]:
        with tempfile.TemporaryDirectory() as root:
            store = MessageStore(tiny_config(root, mapped_file_size_commit_log=1 << 14))
            await store.start()
            try:
                await store.put_messages([BrokerMessage(TOPIC, 0, b"m%d" % i) for i in range(4)])
                seen = []
                for fn in (PURE, COMPILED):
                    side = Side(store, root, fn, False)
                    s = side.stats
                    s.group_get_msgs.update((f"other{i}", 1) for i in range(MAX_GROUP_COUNTERS))
                    s.group_topic_gets.update(
                        ((f"o{i}", TOPIC), [1, 1, 1]) for i in range(MAX_KEYED_COUNTERS)
                    )
                    op = {"group": "G", "queue": 0, "offset": 0, "max": 1, "flag": FLAG_SUBSCRIPTION,
                          "commit": 0, "expr": ("*", "TAG"), "max_bytes": None, "odd": None}  # fmt: skip
                    answers = [side.pull(_request({**op, "offset": k}, k)) for k in range(4)]
                    assert side.taken == 3  # the first pull caches the filter (process)
                    seen.append((answers, side.state()))
                    side.processor.holds.shutdown()
                return seen
            finally:
                await store.shutdown()

    pure, compiled = asyncio.run(run())
    assert pure == compiled
    gets = pure[1][1]
    assert (gets[0], gets[2]) == (4, 4) and "G" not in gets[3] and ("G", TOPIC) not in gets[4]
