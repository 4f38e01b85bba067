"""Unit tests of the SDK core's pure parts: fault tolerance, queue selection, routes, checks, batches, ids."""

from __future__ import annotations

import asyncio
import zlib

import msgpack
import pytest

from rocketpy.addresses import parse_namesrv_addrs
from rocketpy.client.api import MQClientAPI
from rocketpy.client.fault import LatencyFaultTolerance, not_available_duration_ms
from rocketpy.client.instance import ClientSettings, new_client_id
from rocketpy.client.message_check import (
    MAX_MESSAGE_BYTES,
    PreparedMessage,
    check_batch,
    check_message,
    prepare_message,
    split_batch,
    wire_properties,
)
from rocketpy.client.route import TopicPublishInfo, publish_queues, subscribe_queues
from rocketpy.client.selector import RoundRobinIndex, UserChoice, select_by_hash, select_queue, user_choice
from rocketpy.errors import MQClientError, RemotingConnectError
from rocketpy.message import Message, MessageConst, MessageQueue, string_to_properties
from rocketpy.protocol.codes import ResponseCode
from rocketpy.record import COMPRESSED_FLAG, decode_batch
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicRouteData


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ---- fault tolerance ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("latency", "duration"),
    [(0, 0), (49, 0), (99, 0), (100, 0), (549, 0), (550, 2000), (1799, 2000), (1800, 5000), (3000, 6000),
     (5000, 10000), (15000, 30000), (99999, 30000)],
)  # fmt: skip
def test_not_available_duration_table(latency: int, duration: int) -> None:
    assert not_available_duration_ms(latency) == duration


def test_fault_isolation_expires_with_clock() -> None:
    clock = FakeClock()
    ft = LatencyFaultTolerance(clock)
    ft.update("b1", 0, isolation=True)  # 10 s latency -> 10 s
    assert not ft.is_available("b1")
    assert ft.is_available("b2")
    clock.now += 9.99
    assert not ft.is_available("b1")
    clock.now += 0.02
    assert ft.is_available("b1")


def test_fault_fast_send_clears_item() -> None:
    clock = FakeClock()
    ft = LatencyFaultTolerance(clock)
    ft.update("b1", 600)
    assert not ft.is_available("b1")
    ft.update("b1", 10)
    assert ft.is_available("b1")


def test_fault_disabled_never_avoids() -> None:
    ft = LatencyFaultTolerance(FakeClock(), enabled=False)
    ft.update("b1", 0, isolation=True)
    assert ft.is_available("b1")


def test_least_bad_prefers_soonest_available() -> None:
    clock = FakeClock()
    ft = LatencyFaultTolerance(clock)
    ft.update("a", 0, isolation=True)  # 10 s
    ft.update("b", 2000)  # 5 s
    assert ft.least_bad(["a", "b"]) == "b"
    assert ft.least_bad(["a", "b", "c"]) == "c"


# ---- selection --------------------------------------------------------------------------------------


def _queues(brokers: dict[str, int], topic: str = "T") -> list[MessageQueue]:
    return [MessageQueue(topic, b, i) for b in sorted(brokers) for i in range(brokers[b])]


def test_round_robin_covers_all_queues_evenly() -> None:
    qs = _queues({"a": 4, "b": 4})
    idx = RoundRobinIndex(0)
    ft = LatencyFaultTolerance(FakeClock())
    picked = [select_queue(qs, idx, ft) for _ in range(80)]
    assert {q: picked.count(q) for q in qs} == dict.fromkeys(qs, 10)


def test_select_avoids_unavailable_broker() -> None:
    qs = _queues({"a": 4, "b": 4})
    ft = LatencyFaultTolerance(FakeClock())
    ft.update("a", 0, isolation=True)
    idx = RoundRobinIndex(0)
    assert all(select_queue(qs, idx, ft).broker_name == "b" for _ in range(20))


def test_select_retry_goes_to_another_broker_even_without_fault_info() -> None:
    qs = _queues({"a": 4, "b": 4})
    ft = LatencyFaultTolerance(FakeClock(), enabled=False)
    idx = RoundRobinIndex(0)
    assert all(select_queue(qs, idx, ft, last_broker_name="a").broker_name == "b" for _ in range(20))


def test_select_when_all_unavailable_still_returns_least_bad() -> None:
    clock = FakeClock()
    qs = _queues({"a": 2, "b": 2})
    ft = LatencyFaultTolerance(clock)
    ft.update("a", 0, isolation=True)
    ft.update("b", 600)
    mq = select_queue(qs, RoundRobinIndex(0), ft)
    assert mq.broker_name == "b"


def test_select_single_broker_retry_reuses_it() -> None:
    qs = _queues({"a": 2})
    ft = LatencyFaultTolerance(FakeClock())
    ft.update("a", 0, isolation=True)
    assert select_queue(qs, RoundRobinIndex(0), ft, last_broker_name="a").broker_name == "a"


def test_select_by_hash_is_stable() -> None:
    qs = _queues({"a": 4})
    m = Message("T", b"x")
    assert select_by_hash(qs, m, 42) == qs[42 % 4]
    assert select_by_hash(qs, m, "order-7") == select_by_hash(qs, m, "order-7")


def test_a_user_choice_calls_the_selector_with_its_message_and_arg() -> None:
    qs = _queues({"a": 4})
    m = Message("T", b"x")
    assert user_choice(None, m, 1) is None  # no selector: round robin
    seen: list[tuple[Message, object]] = []

    def pick_last(queues: list[MessageQueue], msg: Message, arg: object) -> MessageQueue:
        seen.append((msg, arg))
        return queues[-1]

    choice = user_choice(pick_last, m, "k")
    assert choice == UserChoice(pick_last, m, "k") and choice.select(qs) == qs[-1]
    assert seen == [(m, "k")]
    with pytest.raises(MQClientError, match="not one of the 4 queues"):
        UserChoice(lambda queues, msg, arg: "q0", m, None).select(qs)  # type: ignore[arg-type, return-value]


# ---- routes -------------------------------------------------------------------------------------------


def _route(perm_a: int = 6, with_master_b: bool = True) -> TopicRouteData:
    return TopicRouteData.from_wire(
        {
            "queueDatas": [
                {"brokerName": "b", "readQueueNums": 2, "writeQueueNums": 3, "perm": 6},
                {"brokerName": "a", "readQueueNums": 4, "writeQueueNums": 4, "perm": perm_a},
            ],
            "brokerDatas": [
                {"cluster": "c", "brokerName": "a", "brokerAddrs": {"0": "127.0.0.1:1"}},
                {
                    "cluster": "c",
                    "brokerName": "b",
                    "brokerAddrs": {"0" if with_master_b else "1": "127.0.0.1:2"},
                },
            ],
        }
    )


def test_publish_queues_sorted_and_filtered() -> None:
    qs = publish_queues("T", _route())
    assert [(q.broker_name, q.queue_id) for q in qs] == [("a", i) for i in range(4)] + [
        ("b", i) for i in range(3)
    ]
    assert [q.broker_name for q in publish_queues("T", _route(perm_a=4))] == ["b"] * 3
    assert [q.broker_name for q in publish_queues("T", _route(with_master_b=False))] == ["a"] * 4


def test_subscribe_queues_use_read_nums() -> None:
    qs = subscribe_queues("T", _route())
    assert [(q.broker_name, q.queue_id) for q in qs] == [("a", i) for i in range(4)] + [("b", 0), ("b", 1)]
    assert TopicPublishInfo("T", _route()).broker_names() == ["a", "b"]


# ---- message checks --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msg", "needle"),
    [
        (Message("", b"x"), "non-empty"),
        (Message("bad topic", b"x"), "illegal characters"),
        (Message("T" * 128, b"x"), "longer than"),
        (Message("TBW102", b"x"), "system topic"),
        (Message("T", b""), "empty"),
        (Message("T", "text"), "must be bytes"),  # type: ignore[arg-type]
        (Message("T", b"x" * (MAX_MESSAGE_BYTES + 1)), "limit is"),
        (Message("T", b"x", tags=""), "tags"),
        (Message("T", b"x", tags="a||b"), "tags"),
        (Message("T", b"x", properties={"a": 1}), "must be str"),  # type: ignore[dict-item]
        (Message("T", b"x", delay_level=-1), "delay_level"),
        ("not a message", "rocketpy.Message"),
    ],
)
def test_check_message_rejects(msg: object, needle: str) -> None:
    with pytest.raises(MQClientError, match=needle):
        check_message(msg)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"body": b""}, "empty"),
        ({"body": "text"}, "must be bytes"),
        ({"body": b"x" * (MAX_MESSAGE_BYTES + 1)}, "limit is"),
        ({"tags": ""}, "tags"),
        ({"tags": "a||b"}, "tags"),
        ({"delay_level": -1}, "delay_level"),
        ({"delay_level": 1.5}, "delay_level"),
        ({"flag": 2**31}, "flag"),
        ({"flag": "1"}, "flag"),
    ],
)
def test_check_message_fast_path_rejects_on_a_validated_topic(kw: dict[str, object], needle: str) -> None:
    assert check_message(Message("Validated", b"x", tags="t")).topic == "Validated"  # topic now cached
    msg = Message("Validated", b"x", tags="t")
    for name, value in kw.items():
        setattr(msg, name, value)
    with pytest.raises(MQClientError, match=needle):
        check_message(msg)


def test_check_message_keys_type() -> None:
    m = Message("T", b"x")
    m.keys = [1]  # type: ignore[list-item]
    with pytest.raises(MQClientError, match="key"):
        check_message(m)


def test_max_body_accepted_exactly() -> None:
    check_message(Message("T", b"x" * MAX_MESSAGE_BYTES))


async def test_prepare_compresses_large_bodies_only() -> None:
    small = prepare_message(Message("T", b"a" * 4096), MAX_MESSAGE_BYTES, 4096)
    await small.compress(5)
    assert small.sys_flag & COMPRESSED_FLAG == 0 and small.body == b"a" * 4096
    big_body = b"abc" * 5000
    big = prepare_message(Message("T", big_body), MAX_MESSAGE_BYTES, 4096)
    await big.compress(5)
    assert big.sys_flag & COMPRESSED_FLAG
    assert zlib.decompress(big.body) == big_body
    ext = big.ext_for("pg", MessageQueue("T", "a", 3))
    assert (ext["f"], ext["e"], ext["n"], ext["b"], ext["a"]) == (COMPRESSED_FLAG, 3, "a", "T", "pg")


def test_prepared_properties_have_uniq_keys_tags_delay() -> None:
    p1 = PreparedMessage(Message("T", b"x", tags="A", keys=["k1", "k2"], delay_level=3), 4096)
    p2 = PreparedMessage(Message("T", b"x"), 4096)
    props = string_to_properties(p1.properties)
    assert props[MessageConst.KEYS] == "k1 k2"
    assert props[MessageConst.TAGS] == "A"
    assert props[MessageConst.DELAY] == "3"
    assert props[MessageConst.UNIQ_KEY] == p1.uniq_key
    assert p1.uniq_key != p2.uniq_key and len(p1.uniq_key) == 32


# ---- batches -----------------------------------------------------------------------------------------------


def test_check_batch_rules() -> None:
    with pytest.raises(MQClientError, match="non-empty list"):
        check_batch([])
    with pytest.raises(MQClientError, match="one topic"):
        check_batch([Message("A", b"1"), Message("B", b"1")])
    with pytest.raises(MQClientError, match="delay"):
        check_batch([Message("A", b"1", delay_level=2)])
    with pytest.raises(MQClientError, match="#1"):
        check_batch([Message("A", b"1"), Message("A", b"")])


def test_split_batch_respects_limit_and_order() -> None:
    msgs = [Message("T", bytes([i % 256]) * 1000, keys=f"k{i}") for i in range(50)]
    chunks = split_batch(msgs, max_bytes=10_000)
    assert len(chunks) > 1
    assert all(len(body) <= 10_000 for body, _ in chunks)
    decoded = [d for body, _ in chunks for d in decode_batch(body)]
    assert [d[0] for d in decoded] == [m.body for m in msgs]
    uids = [u for _, us in chunks for u in us]
    assert uids == [m.properties[MessageConst.UNIQ_KEY] for m in msgs]
    assert len(set(uids)) == 50


def test_split_batch_lone_big_message() -> None:
    msgs = [Message("T", b"x" * 100), Message("T", b"y" * 5000), Message("T", b"z" * 100)]
    chunks = split_batch(msgs, max_bytes=1000)
    assert [len(us) for _, us in chunks] == [1, 1, 1]


# ---- client ids / settings ------------------------------------------------------------------------------


def test_client_ids_unique_and_shaped() -> None:
    ids = {new_client_id("inst") for _ in range(1000)}
    assert len(ids) == 1000
    ip, name, rest = next(iter(ids)).split("@")
    assert name == "inst" and "-" in rest and ip.count(".") == 3


def test_settings_check() -> None:
    with pytest.raises(MQClientError, match="heartbeat_broker_interval"):
        ClientSettings(heartbeat_broker_interval=0).check()
    with pytest.raises(MQClientError, match="instance_name"):
        ClientSettings(instance_name="a@b").check()


@pytest.mark.parametrize(
    "msg",
    [
        Message("T", b"x"),
        Message("T", b"x", tags="A", keys="k1 k2", delay_level=2, properties={"a": "1", "TAGS": "old"}),
        Message("T", b"x", properties={"UNIQ_KEY": "ABC", "KEYS": "kept", "b": "2"}),
    ],
)
def test_wire_properties_match_all_properties(msg: Message) -> None:
    uniq, text = wire_properties(msg)
    expected = msg.all_properties()
    expected[MessageConst.UNIQ_KEY] = uniq
    assert string_to_properties(text) == expected
    if "UNIQ_KEY" in msg.properties:
        assert uniq == "ABC"


# ---- NameServer choice ------------------------------------------------------------------------------------


class FakeRemoting:
    """Stands in for RemotingClient: some addresses refuse connections, the others answer."""

    def __init__(self, dead: set[str]) -> None:
        self.dead = dead
        self.calls: list[str] = []

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        self.calls.append(addr)
        if addr in self.dead:
            raise RemotingConnectError(f"cannot connect to {addr}")
        return RemotingCommand.response(cmd, ResponseCode.SUCCESS, body=msgpack.packb({"topicList": ["T"]}))


async def test_namesrv_round_robin_on_failure() -> None:
    addrs = ["ns1:1", "ns2:2", "ns3:3"]
    fake = FakeRemoting(dead={"ns1:1", "ns2:2"})
    api = MQClientAPI(fake, addrs)  # type: ignore[arg-type]
    api._ns_index = 0
    assert await api.get_topic_list() == ["T"]
    assert fake.calls == addrs
    fake.calls.clear()
    assert await api.get_topic_list() == ["T"]
    assert fake.calls == ["ns3:3"]  # stays on the one that answered
    fake.dead = set(addrs)
    with pytest.raises(MQClientError, match=r"no NameServer reachable at ns1:1;ns2:2;ns3:3.*mqnamesrv"):
        await api.get_topic_list()


class SlowDeathRemoting(FakeRemoting):
    """A dead address fails only after every concurrent call has reached it (as an in-flight
    request fails when its NameServer is killed)."""

    def __init__(self, dead: set[str], callers: int) -> None:
        super().__init__(dead)
        self.arrived = 0
        self.all_arrived = asyncio.Event()
        self.callers = callers

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        if addr in self.dead and not self.all_arrived.is_set():
            self.arrived += 1
            if self.arrived >= self.callers:
                self.all_arrived.set()
            await self.all_arrived.wait()
        return await super().invoke(addr, cmd, timeout)


async def test_namesrv_failover_of_concurrent_calls() -> None:
    """Calls in flight on a NameServer that dies each move on to the live one: a second failure of
    the same address must not move the shared index back onto it."""
    addrs = ["ns1:1", "ns2:2"]
    fake = SlowDeathRemoting(dead={"ns1:1"}, callers=3)
    api = MQClientAPI(fake, addrs)  # type: ignore[arg-type]
    api._ns_index = 0
    assert await asyncio.gather(*(api.get_topic_list() for _ in range(3))) == [["T"]] * 3
    assert fake.calls.count("ns1:1") == 3 and fake.calls.count("ns2:2") == 3
    assert api._ns_index == 1
    fake.calls.clear()
    assert await api.get_topic_list() == ["T"]
    assert fake.calls == ["ns2:2"]


def test_namesrv_start_is_random() -> None:
    addrs = [f"ns{i}:1" for i in range(8)]
    starts = {MQClientAPI(FakeRemoting(set()), addrs)._ns_index for _ in range(200)}  # type: ignore[arg-type]
    assert len(starts) > 4


def test_parse_namesrv_addrs() -> None:
    assert parse_namesrv_addrs("a:1; b:2;") == ["a:1", "b:2"]
    with pytest.raises(MQClientError, match="HOST:PORT"):
        parse_namesrv_addrs("nohost")


def test_a_transaction_send_result_is_its_send_result_plus_the_state() -> None:
    from rocketpy.client.results import SendResult, SendStatus
    from rocketpy.client.transaction import LocalTransactionState, TransactionSendResult

    sent = SendResult(SendStatus.SEND_OK, "U1", "0A" * 16, MessageQueue("T", "b", 2), 7)
    result = TransactionSendResult(sent, LocalTransactionState.COMMIT_MESSAGE)
    fields = ("status", "msg_id", "offset_msg_id", "message_queue", "queue_offset")
    assert [getattr(result, f) for f in fields] == [getattr(sent, f) for f in fields]
    assert result.transaction_id == "U1"
    assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
    text = repr(result)
    assert text.startswith("TransactionSendResult(status=SEND_OK") and "COMMIT_MESSAGE" in text
