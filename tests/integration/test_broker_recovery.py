"""Broker crash and restart: acknowledged messages survive SIGKILL; consumer offsets survive restarts."""

from __future__ import annotations

import asyncio
import json
import random
import time
import zlib
from pathlib import Path

import pytest

from rocketpy.errors import MQClientError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.record import decode_records
from rocketpy.remoting.client import RemotingClient
from tests.conftest import DaemonPool
from tests.daemons import Daemon
from tests.integration.test_broker_util import call, pull, send
from tests.waiting import wait_until, wait_until_async

MIB = 1024 * 1024
SENDERS = 4
QUEUES = 4
CRASH_ROUNDS = 3


def broker_props(store: Path, **extra: object) -> dict[str, object]:
    return {
        "brokerName": "broker-r",
        "storePathRootDir": store,
        "mappedFileSizeCommitLog": 4 * MIB,  # several rolls during the test
        "mappedFileSizeConsumeQueue": 2000,
        **extra,
    }


async def _sender(
    addr: str, n: int, acked: dict[tuple[int, int], bytes], stop: asyncio.Event, tag: bytes
) -> None:
    client = RemotingClient()
    try:
        i = 0
        while not stop.is_set():
            body = b"%s-s%d-%d-" % (tag, n, i) + b"p" * 900
            qid = i % QUEUES
            try:
                r = await send(client, addr, "Crash", body, queue_id=qid, timeout_s=2.0)
            except MQClientError:
                return  # the broker died: stop
            if r.code == ResponseCode.SUCCESS:
                assert r.ext is not None
                acked[(r.ext["queueId"], r.ext["queueOffset"])] = body
            i += 1
    finally:
        await client.close()


async def _stored(addr: str) -> dict[tuple[int, int], bytes]:
    """Every message of the test topic, read back by pulling each queue; bodies CRC-checked."""
    client = RemotingClient()
    found: dict[tuple[int, int], bytes] = {}
    try:
        for qid in range(QUEUES):
            offset = 0
            while True:
                r = await pull(
                    client, addr, group="check", topic="Crash", queue_id=qid, offset=offset, max_msgs=32
                )
                if r.code != ResponseCode.SUCCESS:
                    break
                for m in decode_records(r.body):
                    assert m.body_crc == zlib.crc32(m.body), f"corrupt body at {qid}:{m.queue_offset}"
                    found[(qid, m.queue_offset)] = m.body
                offset = r.ext["nextBeginOffset"]  # type: ignore[index]
    finally:
        await client.close()
    return found


@pytest.mark.parametrize("flush_type", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_acknowledged_messages_survive_a_sigkill_loop(
    daemons: DaemonPool, namesrv: Daemon, tmp_path: Path, flush_type: str
) -> None:
    """Rounds of: producers sending, SIGKILL at a random moment, restart, every acknowledged
    message of every round present and intact (RocketMQ's loss-on-crash complaints, issue #2706)."""
    store = tmp_path / "crash-store"
    props = broker_props(store, flushDiskType=flush_type)
    b = daemons.broker(namesrv.addr, **props)
    setup = RemotingClient()
    try:
        ext = {"topic": "Crash", "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
        assert (await call(setup, b.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)).code == 0
    finally:
        await setup.close()
    rng = random.Random()
    acked: dict[tuple[int, int], bytes] = {}
    for rnd in range(CRASH_ROUNDS):
        stop = asyncio.Event()
        tasks = [asyncio.ensure_future(_sender(b.addr, n, acked, stop, b"r%d" % rnd)) for n in range(SENDERS)]
        goal = len(acked) + rng.randrange(200, 1500)  # a random moment: after 200..1500 more acks
        await wait_until_async(lambda g=goal: len(acked) >= g, timeout=30, message="senders got acks")
        b.kill()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        stop.set()
        t0 = time.monotonic()
        b = daemons.broker(namesrv.addr, **props)
        recovery_s = time.monotonic() - t0
        found = await _stored(b.addr)
        missing = [k for k, body in acked.items() if found.get(k) != body]
        assert not missing, (
            f"round {rnd}: {len(missing)} of {len(acked)} acknowledged messages lost or changed, "
            f"e.g. {missing[:5]}"
        )
        print(f"{flush_type} round {rnd}: {len(acked)} acked, all present; restart took {recovery_s:.2f} s")


def _offset_file_has(path: Path, key: str) -> bool:
    try:
        return key in json.loads(path.read_text())["offsetTable"]
    except (OSError, ValueError, KeyError):
        return False


async def test_offsets_survive_restart(
    daemons: DaemonPool, namesrv: Daemon, client: RemotingClient, tmp_path: Path
) -> None:
    store = tmp_path / "offset-store"
    props = broker_props(store, flushConsumerOffsetInterval=200)
    b = daemons.broker(namesrv.addr, **props)
    assert (await send(client, b.addr, "OffT", b"x")).code == 0
    q = {"consumerGroup": "cg", "topic": "OffT", "queueId": 0}
    assert (
        await call(client, b.addr, RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 1})
    ).code == 0
    b.terminate()  # clean stop persists the offsets
    b = daemons.broker(namesrv.addr, **props)
    r = await call(client, b.addr, RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert r.code == 0 and r.ext is not None and r.ext["offset"] == 1
    # a killed broker keeps what the periodic persist wrote
    q2 = {**q, "consumerGroup": "cg2"}
    assert (
        await call(client, b.addr, RequestCode.UPDATE_CONSUMER_OFFSET, {**q2, "commitOffset": 1})
    ).code == 0
    wait_until(lambda: _offset_file_has(store / "config" / "consumerOffset.json", "OffT@cg2"), timeout=5)
    b.kill()
    b = daemons.broker(namesrv.addr, **props)
    r = await call(client, b.addr, RequestCode.QUERY_CONSUMER_OFFSET, q2)
    assert r.code == 0 and r.ext is not None and r.ext["offset"] == 1
