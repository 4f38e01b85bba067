"""Master/slave replication with real daemons: catch-up, restarts, SYNC_MASTER acks, bad peers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from rocketpy import Admin, Message, Producer, SendStatus
from rocketpy.msgid import decode_offset_msg_id
from tests.conftest import DaemonPool
from tests.daemons import Daemon
from tests.waiting import wait_until, wait_until_async

#: Short HA timers and small commitlog files (several rolls per test).
HA_FAST: dict[str, Any] = {
    "haSendHeartbeatInterval": 200,
    "haHousekeepingInterval": 5000,
    "slaveSyncInterval": 300,
    "registerNameServerPeriod": 1000,
    "mappedFileSizeCommitLog": 1 << 20,
}


def written_log(store: Path, sub: str = "commitlog") -> bytes:
    """The commitlog's bytes (every file, in order), without the zeros past the last written byte."""
    files = sorted((store / sub).iterdir())
    return b"".join(f.read_bytes() for f in files if f.name.isdigit()).rstrip(b"\0")


def queue_files(store: Path, topic: str) -> dict[str, bytes]:
    """Consume-queue bytes per queue id (zeros past the last unit stripped)."""
    root = store / "consumequeue" / topic
    if not root.is_dir():
        return {}
    return {
        q.name: b"".join(f.read_bytes() for f in sorted(q.iterdir())).rstrip(b"\0") for q in root.iterdir()
    }


def start_master(daemons: DaemonPool, ns: str, role: str = "ASYNC_MASTER", **props: Any) -> Daemon:
    return daemons.broker(ns, brokerName="broker-a", brokerRole=role, **{**HA_FAST, **props})


def start_slave(daemons: DaemonPool, ns: str, broker_id: int = 1, **props: Any) -> Daemon:
    return daemons.broker(
        ns, brokerName="broker-a", brokerId=broker_id, brokerRole="SLAVE", **{**HA_FAST, **props}
    )


def store_of(daemon: Daemon) -> Path:
    """The daemon's storePathRootDir (from its properties file)."""
    for line in daemon.config_file.read_text().splitlines():
        if line.startswith("storePathRootDir="):
            return Path(line.split("=", 1)[1])
    raise AssertionError(f"no storePathRootDir in {daemon.config_file}")


def has_topic(daemon: Daemon, topic: str) -> bool:
    """The daemon's topics.json names ``topic`` (False while a slave has not written the file yet)."""
    path = store_of(daemon) / "config" / "topics.json"
    return path.exists() and topic in path.read_text()


def wait_identical(master: Daemon, slave: Daemon, timeout: float = 30.0) -> None:
    m, s = store_of(master), store_of(slave)
    wait_until(
        lambda: written_log(s) == written_log(m), timeout, message="the slave's commitlog equals the master's"
    )


async def send_many(producer: Producer, topic: str, n: int, size: int = 1024) -> list[Any]:
    results = []
    for i in range(n):
        r = await producer.send(Message(topic, (b"%08d" % i) * (size // 8), keys=[f"k{i}"]))
        assert r.status is SendStatus.SEND_OK, r
        results.append(r)
    return results


async def test_slave_catches_up_late_and_after_sigkill(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    master = start_master(daemons, ns.addr)
    async with Admin(ns.addr) as admin, Producer("hapg", ns.addr) as producer:
        await admin.create_topic("HaT", "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        await send_many(producer, "HaT", 1500)  # about 1.6 MiB: two commitlog files
        slave = start_slave(daemons, ns.addr)  # starts late, empty
        wait_identical(master, slave)
        wait_until(lambda: queue_files(store_of(slave), "HaT") == queue_files(store_of(master), "HaT"), 10.0)
        # the slave knows the master's topic (SlaveSynchronize) and its route lists both brokers
        wait_until(lambda: has_topic(slave, "HaT"), 10.0)
        info = await admin.broker_runtime_info(slave.addr)
        assert json.loads(info["haStatus"])["connected"] is True
        route = await admin.topic_route("HaT")
        assert set(route.broker_datas[0].broker_addrs) == {0, 1}
        slave.kill()
        await send_many(producer, "HaT", 700)
        slave = start_slave(daemons, ns.addr, storePathRootDir=store_of(slave))
        await send_many(producer, "HaT", 300)
        wait_identical(master, slave)
        wait_until(lambda: queue_files(store_of(slave), "HaT") == queue_files(store_of(master), "HaT"), 10.0)
        master_info = await admin.broker_runtime_info(master.addr)
        [status] = json.loads(master_info["haStatus"])
        assert status["brokerId"] == 1 and status["bytesBehind"] >= 0


async def test_master_restart_resumes_at_the_right_offset(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    master = start_master(daemons, ns.addr)
    slave = start_slave(daemons, ns.addr)
    async with Producer("hapg", ns.addr) as producer:
        await send_many(producer, "HaR", 300)
        wait_identical(master, slave)
    master.kill()
    master = start_master(daemons, ns.addr, storePathRootDir=store_of(master))
    async with Producer("hapg", ns.addr) as producer:  # the master listens on a new port
        await send_many(producer, "HaR", 300)
    wait_identical(master, slave)
    assert "stopped" not in slave.stderr_text()


async def test_sync_master_acks_only_what_the_slave_has(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    master = start_master(daemons, ns.addr, role="SYNC_MASTER", syncFlushTimeout=2000)
    async with Producer("hapg", ns.addr) as producer:
        r = await producer.send(Message("HaS", b"alone"))
        assert r.status is SendStatus.SLAVE_NOT_AVAILABLE  # stored, but no slave: the status says so
        slave = start_slave(daemons, ns.addr)
        slave_log = store_of(slave) / "commitlog"

        async def replicated() -> bool:
            return (await producer.send(Message("HaS", b"probe"))).status is SendStatus.SEND_OK

        await wait_until_async(replicated, 20.0, message="a send acknowledged by the slave")
        for i in range(200):
            r = await producer.send(Message("HaS", b"x%d" % i * 50))
            assert r.status is SendStatus.SEND_OK
            _, _, offset = decode_offset_msg_id(r.offset_msg_id)
            data = written_log(slave_log.parent)
            assert len(data) > offset and data[offset + 4 : offset + 8] == b"\xda\xa3\x20\xa7"
    wait_identical(master, slave)


async def test_bad_peers_are_refused_with_a_clear_error(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    master = start_master(daemons, ns.addr)
    async with Admin(ns.addr) as admin:
        ha_addr = (await admin.broker_runtime_info(master.addr))["haServerAddr"]
    host, port = ha_addr.rsplit(":", 1)
    # non-HA traffic on the HA port: closed at once
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert await asyncio.wait_for(reader.read(), 5.0) == b""
    writer.close()
    # a slave with another commitlog file size, and a second slave with the same brokerId
    odd = start_slave(daemons, ns.addr, mappedFileSizeCommitLog=2 << 20)
    wait_until(lambda: "mappedFileSizeCommitLog differs" in odd.stderr_text(), 10.0)
    odd.terminate()
    start_slave(daemons, ns.addr)
    async with Admin(ns.addr) as admin:

        async def slave_connected() -> bool:
            return bool(json.loads((await admin.broker_runtime_info(master.addr))["haStatus"]))

        await wait_until_async(slave_connected, 10.0)
    second = start_slave(daemons, ns.addr)
    wait_until(lambda: "another slave with brokerId 1" in second.stderr_text(), 10.0)
    wait_until(lambda: "does not speak the HA protocol" in master.stderr_text(), 10.0)
    assert not list((store_of(odd) / "commitlog").glob("*.bad"))


async def test_truncated_and_garbled_frames_never_reach_the_store(daemons: DaemonPool) -> None:
    """A fake master (this test) sends a truncated frame, a garbled header, then garbage bytes."""
    from rocketpy.broker.ha.protocol import HELLO, TRANSFER, encode_welcome

    sessions: list[int] = []

    async def fake_master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        fixed = await reader.readexactly(HELLO.size)
        await reader.readexactly(HELLO.unpack(fixed)[4] + 8)
        writer.write(encode_welcome(0, ""))
        n = len(sessions)
        sessions.append(n)
        if n == 0:
            writer.write(TRANSFER.pack(0, 100) + b"\x01" * 50)  # truncated: the socket closes mid-body
        elif n == 1:
            writer.write(TRANSFER.pack(0, -5))  # garbled size
        else:
            writer.write(TRANSFER.pack(0, 200) + b"\x00\x00\x00\xc8\xda\xa3\x20\xa7" + b"\x07" * 192)
            await reader.read()  # the slave closes
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ns = daemons.namesrv()
    slave = daemons.broker(ns.addr, brokerName="broker-z", brokerId=1, brokerRole="SLAVE",
                           haMasterAddress=f"127.0.0.1:{port}", **HA_FAST)  # fmt: skip
    await wait_until_async(lambda: len(sessions) >= 3, 15.0)
    await wait_until_async(lambda: "not a valid record" in slave.stderr_text(), 10.0)
    text = slave.stderr_text()
    assert "closed mid-frame (50 of 100 bytes)" in text and "garbled transfer frame" in text
    server.close()
    slave.terminate()
    assert written_log(store_of(slave)) == b""  # nothing of it was kept


async def test_producer_retries_another_broker_when_not_store_ok(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    daemons.broker(ns.addr, brokerName="broker-a", brokerRole="SYNC_MASTER", **HA_FAST)  # no slave
    daemons.broker(ns.addr, brokerName="broker-b", **HA_FAST)
    async with Admin(ns.addr) as admin:
        await admin.create_topic("HaRetry", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    async with Producer("hapg", ns.addr, send_latency_fault_enable=False) as plain:
        statuses = {(await plain.send(Message("HaRetry", b"p"))).status for _ in range(8)}
    assert statuses == {SendStatus.SEND_OK, SendStatus.SLAVE_NOT_AVAILABLE}  # returned as they are
    async with Producer("hapg2", ns.addr, retry_another_broker_when_not_store_ok=True,
                        send_latency_fault_enable=False) as retrying:  # fmt: skip
        results = [await retrying.send(Message("HaRetry", b"r")) for _ in range(8)]
    assert {r.status for r in results} == {SendStatus.SEND_OK}
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}


async def test_consumers_read_from_the_slave_while_the_master_is_down(daemons: DaemonPool) -> None:
    from rocketpy.client.consumer_types import ConsumeStatus
    from rocketpy.client.push_consumer import PushConsumer

    ns = daemons.namesrv()
    master = start_master(daemons, ns.addr)
    slave = start_slave(daemons, ns.addr)
    async with Admin(ns.addr) as admin, Producer("hapg", ns.addr) as producer:
        await admin.create_topic("HaC", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        sent = await send_many(producer, "HaC", 100, size=64)
    wait_identical(master, slave)
    wait_until(lambda: has_topic(slave, "HaC"), 10.0)
    master_store = store_of(master)
    master.kill()
    got: set[bytes] = set()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("g_ha", ns.addr, rebalance_interval=1.0, persist_consumer_offset_interval=0.3,
                            heartbeat_broker_interval=1.0, poll_name_server_interval=0.5,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe("HaC", "*")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        await wait_until_async(lambda: len(got) == 100, 30.0, message="all messages consumed from the slave")
        async with Admin(ns.addr) as admin:  # admin reads work against the slave
            rows = await admin.consumer_progress("g_ha", "HaC")
            assert sum(r["broker_offset"] for r in rows) == 100
            m = await admin.query_msg_by_id(sent[0].offset_msg_id, broker_addr=slave.addr)
            assert m.topic == "HaC" and m.body.startswith(b"00000000")
        # the master comes back: the consumer's offsets reach it
        master = start_master(daemons, ns.addr, storePathRootDir=master_store)

        async def master_has_offsets() -> bool:
            async with Admin(ns.addr) as admin:
                rows = await admin.consumer_progress("g_ha", "HaC")
            return sum(r["consumer_offset"] for r in rows) == 100 and all(
                r["mq"].broker_name == "broker-a" for r in rows
            )

        await wait_until_async(master_has_offsets, 20.0, message="offsets committed to the restarted master")
    finally:
        await consumer.shutdown()


async def test_master_suggests_the_slave_to_a_consumer_far_behind(daemons: DaemonPool) -> None:
    ns = daemons.namesrv()
    # ratio 0: any lag counts as "not in memory", so every successful pull is pointed at the slave
    master = start_master(daemons, ns.addr, slaveReadEnable=True, accessMessageInMemoryMaxRatio=0)
    slave = start_slave(daemons, ns.addr, slaveReadEnable=True, accessMessageInMemoryMaxRatio=0)
    async with Admin(ns.addr) as admin, Producer("hapg", ns.addr) as producer:
        await admin.create_topic("HaSug", "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
        await send_many(producer, "HaSug", 200, size=64)
        wait_identical(master, slave)
        wait_until(lambda: has_topic(slave, "HaSug"), 10.0)
        inst = producer._inst()
        await inst.update_topic_route("HaSug")
        [mq] = inst.subscribe_queues("HaSug")
        offset, suggestions, count = 0, [], 0
        while True:
            ext = {"consumerGroup": "g_sug", "topic": "HaSug", "queueId": 0, "queueOffset": offset,
                   "maxMsgNums": 32, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
                   "subscription": "*", "subVersion": 0, "expressionType": "TAG"}  # fmt: skip
            r = await inst.pull(mq, ext, 5.0)
            if not r.messages:
                break
            suggestions.append(r.suggest_which_broker_id)
            count += len(r.messages)
            offset = r.next_begin_offset
        assert count == 200
        assert set(suggestions) == {1}  # the master points at the slave, which serves the rest
        slave_info = await admin.broker_runtime_info(slave.addr)
        assert int(slave_info["getMessageTransferedMsgCount"]) == 200 - 32
