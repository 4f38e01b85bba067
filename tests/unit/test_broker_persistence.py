"""JsonTable: a write cancelled while its thread runs still finishes before the next write starts."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from rocketpy.broker import persistence
from rocketpy.broker.persistence import JsonTable


async def test_cancelled_persist_holds_the_file_until_its_thread_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config" / "table.json"
    doc = {"n": 1}
    table = JsonTable(str(path), lambda: dict(doc))
    release = threading.Event()
    started = threading.Event()
    real_write = persistence._write
    overlapping = []
    active = threading.Lock()

    def slow_write(p: str, d: object) -> None:
        if not active.acquire(blocking=False):
            overlapping.append(d)  # two writer threads at once: the race this guards against
            return
        try:
            started.set()
            release.wait(5)
            real_write(p, d)
        finally:
            active.release()

    monkeypatch.setattr(persistence, "_write", slow_write)
    table.mark_dirty()
    first = asyncio.create_task(table.persist())
    await asyncio.to_thread(started.wait, 5)
    first.cancel()  # as a shutdown cancels the periodic persist routine
    doc["n"] = 2
    second = asyncio.create_task(table.persist(force=True))
    await asyncio.sleep(0.05)  # give the second write the chance to start early (it must not)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await first
    await second
    assert overlapping == []
    assert json.loads(path.read_text()) == {"n": 2}
