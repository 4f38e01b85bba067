"""Crash safety: SIGKILL a putting process at random moments; every acknowledged message survives."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketpy.broker.store import MessageStore
from rocketpy.record import decode_records
from tests.store_crash_worker import QUEUES, body_of, crash_config

ROOT = Path(__file__).resolve().parents[2]


def _run_round(store_dir: str, rnd: int, flush: str, acks_wanted: int) -> list[tuple[int, int, int, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store_crash_worker", store_dir, str(rnd), flush],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    acks: list[tuple[int, int, int, int]] = []
    deadline = time.monotonic() + 30
    try:
        line = proc.stdout.readline()
        assert line.strip() == "READY", (
            f"worker did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        )
        while len(acks) < acks_wanted and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            _, r, n, q, qo = line.split()
            acks.append((int(r), int(n), int(q), int(qo)))
    finally:
        proc.send_signal(signal.SIGKILL)
        rest, err = proc.communicate(timeout=10)
    for line in rest.splitlines():
        parts = line.split()
        if len(parts) == 5:  # a line cut by the kill is not an acknowledgement
            acks.append((int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])))
    assert len(acks) >= min(acks_wanted, 1), f"worker produced no acks; stderr: {err[-2000:]}"
    return acks


async def _verify(store_dir: str, flush: str, acks: list[tuple[int, int, int, int]]) -> None:
    store = MessageStore(crash_config(store_dir, flush))
    await store.start()
    try:
        by_queue: dict[int, dict[int, bytes]] = {q: {} for q in range(QUEUES)}
        for q in range(QUEUES):
            off = store.get_min_offset_in_queue("Crash", q)
            while True:
                r = store.get_message("g", "Crash", q, off, 32, max_bytes=1 << 20)
                if r.message_count == 0:
                    break
                for m in decode_records(r.join()):  # raises on any torn or corrupt record
                    by_queue[q][m.queue_offset] = m.body
                off = r.next_begin_offset
            stored = by_queue[q]
            assert sorted(stored) == list(range(len(stored))), "queue offsets must be dense"
        for rnd, n, q, qo in acks:
            assert by_queue[q].get(qo) == body_of(rnd, n), f"acknowledged message r{rnd} n{n} lost or changed"
        for q, stored in by_queue.items():
            for qo, body in stored.items():
                r_s, n_s = body.split(b":", 1)[0].decode().lstrip("r").split("-n")
                assert body == body_of(int(r_s), int(n_s)), f"queue {q} offset {qo} holds a damaged body"
        found = store.query_message("Crash", f"r{acks[-1][0]}-{acks[-1][1]}", 4, 0, 2**62)
        assert len(found.buffers) == 1
    finally:
        await store.shutdown()


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_sigkill_never_loses_acknowledged_messages(tmp_path: Path, flush: str) -> None:
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    acks: list[tuple[int, int, int, int]] = []
    for rnd in range(3):
        acks += await asyncio.to_thread(_run_round, str(tmp_path), rnd, flush, rng.randint(20, 400))
    await _verify(str(tmp_path), flush, acks)
