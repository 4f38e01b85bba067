"""Transactional messages against a real NameServer + broker (short check timers).

"Delivered once" and "never" are read from the topic itself (``Admin.pull`` of its one queue from
offset 0) after the check service has provably run more rounds: a probe transaction that stays
UNKNOW is checked once per round, so waiting for its checks (and its discard after
``transactionCheckMax``) is waiting for rounds, never a sleep.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rocketpy import Admin, LocalTransactionState, Message, MQClientError, TransactionProducer
from rocketpy.message import MessageQueue
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.transaction import EndTransactionRequestHeader, TransactionDecision
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.topic import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_OP_HALF_TOPIC
from tests.daemons import daemon_env
from tests.waiting import wait_until_async

S = LocalTransactionState
CHECK = {"transactionTimeOut": 400, "transactionCheckInterval": 300, "transactionCheckMax": 3}
FAST = {"heartbeat_broker_interval": 1.0, "poll_name_server_interval": 1.0}
TOPIC = "TxnTopic"


class Listener:
    """States by body: ``execute`` and ``check`` map bodies to states (UNKNOW when absent)."""

    def __init__(self, execute: dict[bytes, Any], check: dict[bytes, Any]) -> None:
        self.execute, self.check = execute, check
        self.checked: dict[bytes, int] = {}

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        state = self.execute.get(msg.body, S.UNKNOW)
        if isinstance(state, Exception):
            raise state
        return state

    async def check_local_transaction(self, msg: Any) -> Any:
        assert msg.topic == TOPIC  # the check carries the real topic back
        self.checked[msg.body] = self.checked.get(msg.body, 0) + 1
        return self.check.get(msg.body, S.UNKNOW)


async def bodies(ns: str, broker: str = "broker-a") -> list[bytes]:
    async with Admin(ns) as admin:
        msgs, _, _ = await admin.pull(MessageQueue(TOPIC, broker, 0), 0, 64)
    return [m.body for m in msgs]


async def make_topic(ns: str) -> None:
    async with Admin(ns) as admin:
        await admin.create_topic(TOPIC, "DefaultCluster", read_queue_nums=1, write_queue_nums=1)


async def discarded(ns: str, key: str) -> list[Any]:
    async with Admin(ns) as admin:
        return await admin.query_msg_by_key(TRANS_CHECK_MAX_TIME_TOPIC, key)


@pytest.fixture
def ns(daemons: Any) -> str:
    return str(daemons.namesrv().addr)


async def test_states_checks_and_discard(daemons: Any, ns: str) -> None:
    """COMMIT once, ROLLBACK never, UNKNOW -> check -> COMMIT once / ROLLBACK never, an exception is
    UNKNOW, and a transaction never answered is discarded after transactionCheckMax checks."""
    daemons.broker(ns, **CHECK)
    await make_topic(ns)
    listener = Listener(
        {b"commit": S.COMMIT_MESSAGE, b"rollback": S.ROLLBACK_MESSAGE, b"raises": RuntimeError("boom")},
        {
            b"unknown-commit": S.COMMIT_MESSAGE,
            b"unknown-rollback": S.ROLLBACK_MESSAGE,
            b"raises": "COMMIT_MESSAGE",
        },
    )
    async with TransactionProducer("pg_states", ns, listener=listener, **FAST) as p:
        results = {}
        for body in (b"commit", b"rollback", b"unknown-commit", b"unknown-rollback", b"raises", b"probe"):
            results[body] = await p.send_in_transaction(Message(TOPIC, body), arg=body)
        assert results[b"commit"].local_transaction_state is S.COMMIT_MESSAGE
        assert results[b"raises"].local_transaction_state is S.UNKNOW
        assert results[b"probe"].transaction_id
        # the probe is checked every round until its third check, then discarded
        probe_key = results[b"probe"].msg_id
        found = await wait_until_async(
            lambda: discarded(ns, probe_key), 30, 0.2, "probe discarded", ignore=(MQClientError,)
        )
        assert found[0].body == b"probe" and found[0].properties["REAL_TOPIC"] == TOPIC
        assert listener.checked[b"probe"] == 3
        got = await bodies(ns)
    assert sorted(got) == [b"commit", b"raises", b"unknown-commit"]
    assert listener.checked.get(b"commit") is None and listener.checked.get(b"rollback") is None
    assert listener.checked[b"unknown-commit"] == 1 and listener.checked[b"unknown-rollback"] == 1


PRODUCER_A = textwrap.dedent(
    """
    import asyncio, os, sys
    from rocketpy import LocalTransactionState, Message, TransactionProducer

    class L:
        def execute_local_transaction(self, msg, arg):
            return LocalTransactionState.UNKNOW
        def check_local_transaction(self, msg):
            raise AssertionError("the exited producer cannot be checked")

    async def main():
        p = TransactionProducer("pg_failover", sys.argv[1], listener=L(), heartbeat_broker_interval=1.0)
        await p.start()
        r = await p.send_in_transaction(Message("TxnTopic", b"from-a"))
        print(r.msg_id, flush=True)
        os._exit(0)  # exits without shutting down: the broker sees the connection drop

    asyncio.run(main())
    """
)


async def test_check_goes_to_another_live_producer(daemons: Any, ns: str, tmp_path: Path) -> None:
    daemons.broker(ns, **CHECK)
    await make_topic(ns)
    listener = Listener({}, {b"from-a": S.COMMIT_MESSAGE, b"probe": S.UNKNOW})
    async with TransactionProducer("pg_failover", ns, listener=listener, **FAST) as b:
        await b.send_in_transaction(Message(TOPIC, b"probe"))  # b is known to the broker now
        script = tmp_path / "producer_a.py"
        script.write_text(PRODUCER_A)
        done = await asyncio.to_thread(
            subprocess.run, [sys.executable, str(script), ns], capture_output=True, text=True, timeout=60,
            env=daemon_env(tmp_path, tmp_path),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        await wait_until_async(lambda: b"from-a" in listener.checked, timeout=20, message="check reaches b")
        await wait_until_async(lambda: listener.checked.get(b"probe", 0) >= 3, timeout=20, message="rounds")
        assert (await bodies(ns)).count(b"from-a") == 1


class BlockingCommit:
    """Executes COMMIT only once released; checks answer COMMIT."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.checked = 0

    async def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        self.entered.set()
        await self.release.wait()
        return S.COMMIT_MESSAGE

    def check_local_transaction(self, msg: Any) -> Any:
        self.checked += 1
        return S.COMMIT_MESSAGE


async def test_broker_killed_between_half_and_commit(daemons: Any, ns: str, tmp_path: Path) -> None:
    props = {**CHECK, "brokerName": "broker-k", "storePathRootDir": tmp_path / "kstore"}
    broker = daemons.broker(ns, **props)
    await make_topic(ns)
    listener = BlockingCommit()
    async with TransactionProducer("pg_kill", ns, listener=listener, send_timeout=2.0, **FAST) as p:
        send = asyncio.create_task(p.send_in_transaction(Message(TOPIC, b"survivor")))
        await asyncio.wait_for(listener.entered.wait(), 20)
        broker.kill()  # the half message is stored, the commit not yet sent
        listener.release.set()
        result = await send  # END_TRANSACTION fails (logged); the check resolves it
        assert result.local_transaction_state is S.COMMIT_MESSAGE
        daemons.broker(ns, **props)
        await wait_until_async(lambda: listener.checked >= 1, timeout=30, message="check after restart")
        got = await wait_until_async(
            lambda: bodies(ns, "broker-k"), 20, 0.2, "committed", ignore=(MQClientError,)
        )
        assert got == [b"survivor"]
        # later rounds find it resolved: a probe checked twice more proves they ran
        probe = Listener({}, {})
        async with TransactionProducer("pg_kill_probe", ns, listener=probe, **FAST) as q:
            await q.send_in_transaction(Message(TOPIC, b"probe"))
            await wait_until_async(lambda: probe.checked.get(b"probe", 0) >= 2, timeout=20, message="rounds")
        assert await bodies(ns, "broker-k") == [b"survivor"]
        assert listener.checked == 1


async def test_end_transaction_bad_input(daemons: Any, ns: str, client: RemotingClient) -> None:
    broker = daemons.broker(ns, **CHECK)
    await make_topic(ns)
    listener = Listener({b"rolled": S.ROLLBACK_MESSAGE, b"plain": S.COMMIT_MESSAGE}, {})
    async with TransactionProducer("pg_bad", ns, listener=listener, **FAST) as p:
        rolled = await p.send_in_transaction(Message(TOPIC, b"rolled"))
        committed = await p.send_in_transaction(Message(TOPIC, b"plain"))
    addr = broker.addr

    async def end(result: Any, group: str, decision: TransactionDecision, offset: int | None = None) -> Any:
        phys = decode_offset_msg_id(result.offset_msg_id)[2] if offset is None else offset
        h = EndTransactionRequestHeader(group, result.queue_offset, phys, decision)
        return await client.invoke(
            addr, RemotingCommand.request(RequestCode.END_TRANSACTION, h.to_ext()), 5.0
        )

    async def op_max() -> int:
        ext = {"topic": TRANS_OP_HALF_TOPIC, "queueId": 0}
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, ext), 5.0)
        return int(resp.ext["offset"])

    before = await op_max()
    r = await end(rolled, "pg_bad", TransactionDecision.COMMIT)
    assert r.code == ResponseCode.TRANSACTION_SHOULD_ROLLBACK and "already rolled back" in r.remark
    r = await end(rolled, "no_such_group", TransactionDecision.COMMIT)
    assert r.code == ResponseCode.TRANSACTION_STATE_GROUP_WRONG and "pg_bad" in r.remark
    r = await end(rolled, "pg_bad", TransactionDecision.COMMIT, offset=10**9)
    assert r.code == ResponseCode.INVALID_PARAMETER and "no message is stored" in r.remark
    async with Admin(ns) as admin:  # the committed copy in the real topic is no half message
        real = await admin.query_msg_by_offset(TOPIC, "broker-a", 0, 0)
    r = await end(committed, "pg_bad", TransactionDecision.COMMIT, offset=real.commitlog_offset)
    assert r.code == ResponseCode.INVALID_PARAMETER and "not a half message" in r.remark
    r = await end(committed, "pg_bad", TransactionDecision.COMMIT)
    assert r.code == ResponseCode.SUCCESS and "already committed" in r.remark
    assert await op_max() == before
    assert await bodies(ns) == [b"plain"]


async def test_half_batches_are_invisible_until_each_is_decided(daemons: Any, ns: str) -> None:
    daemons.broker(ns, **CHECK)
    await make_topic(ns)
    async with TransactionProducer("pg_batch", ns, listener=Listener({}, {}), **FAST) as p:
        msgs = [Message(TOPIC, b"b%d" % i, tags="t", properties={"k": str(i)}) for i in range(5)]
        results = await p.send_half_batch(msgs)
        assert [r.queue_offset for r in results] == [results[0].queue_offset + i for i in range(5)]
        assert len({r.offset_msg_id for r in results}) == 5 and all(r.msg_id for r in results)
        assert await bodies(ns) == []  # half messages: nothing visible yet
        addr = await p.broker_addr_of(results[0])
        for i, r in enumerate(results):
            state = S.ROLLBACK_MESSAGE if i == 2 else S.COMMIT_MESSAGE
            assert await p.end_transaction(
                addr, decode_offset_msg_id(r.offset_msg_id)[2], r.queue_offset, state
            )
    assert await bodies(ns) == [b"b0", b"b1", b"b3", b"b4"]
    async with Admin(ns) as admin:
        msgs_back, _, _ = await admin.pull(MessageQueue(TOPIC, "broker-a", 0), 0, 8)
    assert [(m.tags, m.properties.get("k")) for m in msgs_back] == [
        ("t", "0"),
        ("t", "1"),
        ("t", "3"),
        ("t", "4"),
    ]
    assert all("TRAN_MSG" not in m.properties and "REAL_TOPIC" not in m.properties for m in msgs_back)


async def test_end_transaction_batch_decides_many_and_counts_refusals(
    daemons: Any, ns: str, client: RemotingClient
) -> None:
    broker = daemons.broker(ns, **CHECK)
    await make_topic(ns)
    async with TransactionProducer("pg_many", ns, listener=Listener({}, {}), **FAST) as p:
        results = await p.send_half_batch([Message(TOPIC, b"m%d" % i) for i in range(6)])
        pairs = [(decode_offset_msg_id(r.offset_msg_id)[2], r.queue_offset) for r in results]
        assert await p.end_transactions(broker.addr, pairs[:2], S.ROLLBACK_MESSAGE) == 0
        # two already rolled back (refused), one that names no half message, three committed
        wrong = [(pairs[0][0], pairs[0][1] + 1)]
        assert await p.end_transactions(broker.addr, pairs[:2] + wrong + pairs[2:5], S.COMMIT_MESSAGE) == 3
        assert await p.end_transactions(broker.addr, pairs[2:5], S.COMMIT_MESSAGE) == 0  # again: no-op
    assert await bodies(ns) == [b"m2", b"m3", b"m4"]
    bad = RemotingCommand.request(
        RequestCode.END_TRANSACTION_BATCH, {"producerGroup": "pg_many", "commitOrRollback": 8}, b"x" * 15
    )
    resp = await client.invoke(broker.addr, bad, 5.0)
    assert resp.code == ResponseCode.INVALID_PARAMETER and "16-byte" in resp.remark
    async with TransactionProducer("pg_many", ns, listener=Listener({}, {}), **FAST) as p:  # m5 stays open
        assert await p.end_transactions(broker.addr, pairs[5:], S.COMMIT_MESSAGE) == 0
    assert await bodies(ns) == [b"m2", b"m3", b"m4", b"m5"]


def test_blocking_twin_commits(daemons: Any, ns: str) -> None:
    from rocketpy import sync

    daemons.broker(ns, **CHECK)
    asyncio.run(make_topic(ns))
    listener = Listener({b"sync": S.COMMIT_MESSAGE}, {})
    with sync.TransactionProducer("pg_sync", ns, listener=listener, **FAST) as p:
        result = p.send_in_transaction(Message(TOPIC, b"sync"))
    assert isinstance(result, sync.TransactionSendResult)
    assert result.local_transaction_state is sync.LocalTransactionState.COMMIT_MESSAGE
    assert asyncio.run(bodies(ns)) == [b"sync"]
