"""Delay levels on a real store with a hand-driven clock: redirect, clamping, order, never early,
progress in delayOffset.json across a restart, and the messageDelayLevel parser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rocketpy.broker.schedule.delivery import DeliveryTimeService
from rocketpy.broker.store import BrokerMessage, MessageStore
from rocketpy.broker.topic_config import SCHEDULE_TOPIC
from rocketpy.config import StoreConfig, parse_delay_levels
from rocketpy.message import properties_to_string
from rocketpy.record import decode_records
from tests.clock import T0, ManualClock
from tests.waiting import wait_until_async


async def start(root: Path, clock: ManualClock) -> tuple[MessageStore, DeliveryTimeService]:
    cfg = StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=8 << 20,
        message_delay_level="1s 2s",
        flush_delay_offset_interval=50,
    )
    store = MessageStore(cfg, clock=clock)
    await store.start()
    svc = DeliveryTimeService(store, cfg, str(root / "config"))
    await svc.start()
    return store, svc


async def stop(store: MessageStore, svc: DeliveryTimeService) -> None:
    await svc.shutdown()
    await store.shutdown()


def delivered(store: MessageStore, topic: str, qid: int) -> list[Any]:
    n = store.get_max_offset_in_queue(topic, qid)
    return decode_records(store.get_message("g", topic, qid, 0, n, 1 << 30).join()) if n else []


def msg(body: bytes, qid: int, delay: int) -> BrokerMessage:
    return BrokerMessage("Real", qid, body, properties_to_string({"DELAY": str(delay), "KEYS": "k"}), flag=7)


async def nudge(svc: DeliveryTimeService, clock: ManualClock, t: float) -> None:
    clock.t = t
    for ev in svc.schedule._events.values():
        ev.set()


async def test_redirect_clamp_order_and_never_early(tmp_path: Path) -> None:
    clock = ManualClock()
    store, svc = await start(tmp_path, clock)
    try:
        for i in range(60):
            r = await svc.put(msg(b"a%d" % i, i % 2, 1))
            assert r.ok
        r = await svc.put(msg(b"clamped", 0, 9))  # beyond the last level: stored at level 2
        [waiting] = decode_records(store.lookup_message_by_offset(r.wrote_offset) or b"")
        assert (waiting.topic, waiting.queue_id, waiting.delay_level) == (SCHEDULE_TOPIC, 1, 2)
        assert waiting.properties["REAL_TOPIC"] == "Real" and waiting.properties["REAL_QID"] == "0"
        assert svc.delay_waiting() == {1: 60, 2: 1}
        clock.t = T0 + 0.999
        wait_s = await svc.schedule.deliver_due(1)
        assert wait_s is not None and 0 < wait_s <= 0.001 + 1e-9
        assert delivered(store, "Real", 0) == []  # not one ms early
        await nudge(svc, clock, T0 + 1.0)
        await wait_until_async(lambda: len(delivered(store, "Real", 1)) == 30, 5, message="level 1 due")
        for qid in (0, 1):
            got = delivered(store, "Real", qid)
            assert [m.body for m in got][:30] == [b"a%d" % i for i in range(qid, 60, 2)]
            assert all(m.flag == 7 and m.keys == ["k"] and m.delay_level == 0 for m in got)
        await nudge(svc, clock, T0 + 2.0)
        await wait_until_async(lambda: len(delivered(store, "Real", 0)) == 31, 5, message="level 2 due")
        assert svc.delay_waiting() == {}
    finally:
        await stop(store, svc)
    doc = json.loads((tmp_path / "config" / "delayOffset.json").read_text())
    assert doc == {"offsetTable": {"1": 60, "2": 1}}


async def test_restart_resumes_without_redelivery(tmp_path: Path) -> None:
    clock = ManualClock()
    store, svc = await start(tmp_path, clock)
    for i in range(10):
        await svc.put(msg(b"x%d" % i, 0, 1))
    await nudge(svc, clock, T0 + 1.5)
    await wait_until_async(lambda: len(delivered(store, "Real", 0)) == 10, 5)
    clock.t = T0 + 1.6
    for i in range(5):
        await svc.put(msg(b"y%d" % i, 0, 2))  # due at T0 + 3.6, after the restart
    await stop(store, svc)
    store, svc = await start(tmp_path, clock)
    try:
        await nudge(svc, clock, T0 + 4)
        await wait_until_async(lambda: len(delivered(store, "Real", 0)) >= 15, 5)
        assert [m.body for m in delivered(store, "Real", 0)] == [b"x%d" % i for i in range(10)] + [
            b"y%d" % i for i in range(5)
        ]
    finally:
        await stop(store, svc)


def test_delay_level_parser() -> None:
    assert parse_delay_levels("1s 5s 1m 2h 1d") == [1000, 5000, 60_000, 7_200_000, 86_400_000]
    for bad in ("", "1s 0s", "1x", "1.5s", "s", "1s,2s"):
        with pytest.raises(ValueError):
            parse_delay_levels(bad)


async def test_clamp_is_logged_once_per_producer(tmp_path: Path, caplog: Any) -> None:
    store, svc = await start(tmp_path, ManualClock())
    try:
        for port in (1000, 1000, 1000, 2000):
            m = msg(b"c", 0, 7)
            m.born_host8 = BrokerMessage("T", 0, b"", born_host=("10.0.0.1", port)).born_host8
            with caplog.at_level("WARNING", logger="rocketpy.broker.schedule"):
                assert (await svc.put(m)).ok
        lines = [r.getMessage() for r in caplog.records if "delay_level=7" in r.getMessage()]
        assert len(lines) == 2 and "10.0.0.1:1000" in lines[0] and "10.0.0.1:2000" in lines[1]
        assert "delivered at level 2" in lines[0]
        await svc.put_delayed(BrokerMessage("Real", 0, b"x"), 9)  # send-backs clamp quietly
        assert len([r for r in caplog.records if "delay_level" in r.getMessage()]) == 2
    finally:
        await stop(store, svc)
