"""A broker with many topics registers in parts (or in one body the NameServer merges in steps);
the NameServer routes all of them, keeps answering route queries meanwhile, and drops a deleted
topic at the next full registration.

100,000 topics are measured by scripts/bench_scale.py; here 4,000 topics in parts of 500 keep it short.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from rocketpy import Admin
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.route import TopicConfig
from tests.conftest import DaemonPool
from tests.integration.test_broker_util import call
from tests.waiting import wait_until_async

TOPICS = 4000


def write_topics(store: Path, n: int) -> None:
    table = {f"many-{i:05d}": TopicConfig(topic_name=f"many-{i:05d}").to_wire() for i in range(n)}
    (store / "config").mkdir(parents=True)
    doc = {"topicConfigTable": table, "dataVersion": {"timestamp": 1, "counter": 1}}
    (store / "config" / "topics.json").write_text(json.dumps(doc))


async def _routed(client: RemotingClient, ns: str, topic: str) -> bool:
    r = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return r.code == ResponseCode.SUCCESS


@pytest.mark.parametrize("split", [True, False], ids=["split-by-broker", "one-body-merged-in-steps"])
async def test_many_topics_register_in_parts(daemons: DaemonPool, tmp_path: Path, split: bool) -> None:
    ns = daemons.namesrv()
    store = tmp_path / "many-store"
    write_topics(store, TOPICS)
    client = RemotingClient()
    lat: list[float] = []
    stop = asyncio.Event()

    async def probe() -> None:  # a client asking the NameServer all along
        while not stop.is_set():
            t0 = time.monotonic()
            await call(client, ns.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "many-00000"})
            lat.append(time.monotonic() - t0)
            await asyncio.sleep(0.005)

    task = asyncio.ensure_future(probe())
    try:
        b = await asyncio.to_thread(
            daemons.broker,
            ns.addr,
            storePathRootDir=store,
            splitRegistrationSize=500,
            registerNameServerPeriod=500,
        )
        await wait_until_async(lambda: _routed(client, ns.addr, f"many-{TOPICS - 1:05d}"), timeout=30)
        stop.set()
        await task
        assert max(lat) < 5.0, f"a route query waited {max(lat):.2f} s"
        async with Admin(ns.addr) as admin:
            listed = set(await admin.topic_list())
            assert {f"many-{i:05d}" for i in range(TOPICS)} <= listed
            # a deleted topic leaves the routes at the next (split) registration
            r = await call(client, b.addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "many-00007"})
            assert r.code == ResponseCode.SUCCESS
            await wait_until_async(lambda: _gone(client, ns.addr, "many-00007"), timeout=15)
            assert await _routed(client, ns.addr, "many-00008")
    finally:
        stop.set()
        await client.close()
    assert "REGISTER_BROKER" not in b.stderr_text()  # no refused or failed registration logged


async def _gone(client: RemotingClient, ns: str, topic: str) -> bool:
    return not await _routed(client, ns, topic)
