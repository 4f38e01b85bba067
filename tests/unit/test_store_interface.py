"""The store interface (``broker/store/interface.py``): ``MessageStore`` has every member of ``Store``,
and the members added for the schedule, timer, send queue and metrics answer as the internals did."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketpy.broker.store import MessageStore, Store
from rocketpy.broker.store.consume_queue import units_struct
from rocketpy.broker.store.reads import record_view
from rocketpy.filter.tags import java_string_hash
from rocketpy.record import decode_record
from tests.unit.test_store_helpers import bmsg, tiny_config


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MessageStore]:
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    yield s
    await s.shutdown()


def _members(cls: type) -> dict[str, object]:
    return {name: value for name, value in vars(cls).items() if not name.startswith("_")}


def test_message_store_has_every_member_of_the_interface() -> None:
    members = _members(Store)
    assert "commitlog" not in members and "dispatcher" not in members
    for name, member in members.items():
        impl = getattr(MessageStore, name, None)
        assert impl is not None, name
        assert isinstance(impl, property) == isinstance(member, property), name
        if inspect.isfunction(member):
            assert inspect.signature(impl) == inspect.signature(member), name
    assert "clock" in Store.__annotations__


async def test_queue_units_and_record_views(store: MessageStore) -> None:
    results = [await store.put_message(bmsg("T", 1, b"m%d" % i, tags="A")) for i in range(3)]
    units = store.read_queue_units("T", 1, 0, 10)
    assert units[0::3] == tuple(r.wrote_offset for r in results)
    assert units[1::3] == tuple(r.wrote_bytes for r in results)
    assert set(units[2::3]) == {java_string_hash("A")}
    assert store.read_queue_units("T", 1, 1, 1) == units[3:6]
    cq = store.dispatcher.cqs[("T", 1)]  # the same as the consume queue's own read
    raw, n = cq.read_units(0, 10)
    assert units == units_struct(n).unpack_from(raw)
    assert store.read_queue_units("T", 1, 3, 10) == ()  # past the end
    assert store.read_queue_units("NOPE", 0, 0, 10) == ()
    view = store.record_view(results[1].wrote_offset)
    assert view is not None and decode_record(view).body == b"m1"
    assert bytes(view) == bytes(record_view(store.commitlog, results[1].wrote_offset) or b"")
    assert store.record_view(results[2].wrote_offset + 1) is None
    assert store.record_view(-1) is None


async def test_flush_and_disk_figures(store: MessageStore) -> None:
    assert store.flush_started() == store.commitlog.flush_started
    assert store.cleanup is not None
    store.cleanup.disk_ratio = 0.25
    assert store.disk_ratio == 0.25
    assert store.runtime_info()["commitLogDiskRatio"] == "0.2500"


def test_disk_ratio_before_start(tmp_path: Path) -> None:
    assert MessageStore(tiny_config(str(tmp_path))).disk_ratio == 0.0
