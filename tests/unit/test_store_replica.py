"""Raw commitlog appends (a slave's write path): byte-identical logs, dispatch, rolls, bad bytes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rocketpy.broker.store import MessageStore
from rocketpy.broker.store.replica import ReplicaError
from tests.unit.test_store_helpers import bmsg, read_all, tiny_config


def _files(store: MessageStore) -> bytes:
    """The commitlog's written bytes, every file concatenated."""
    return b"".join(bytes(mf.view[: mf.wrote]) for mf in store.commitlog.files)


async def _replicate(master: MessageStore, slave: MessageStore, rng: random.Random) -> None:
    """Copy the master's log to the slave in chunks of random size, as the HA transfer does."""
    while slave.max_physical_offset < master.max_physical_offset:
        off = slave.max_physical_offset
        data = master.read_commitlog(off, rng.randint(1, 700))
        assert data is not None
        await slave.append_replica(off, data)


async def test_replica_is_byte_identical_and_dispatched(tmp_path: Path) -> None:
    master = MessageStore(tiny_config(str(tmp_path / "m")))
    slave = MessageStore(tiny_config(str(tmp_path / "s")))
    await master.start()
    await slave.start()
    rng = random.Random(7)
    bodies = [bytes([i % 251]) * rng.randint(1, 600) for i in range(80)]
    for i, b in enumerate(bodies):
        await master.put_message(bmsg("T", i % 2, b, tags="A", keys=f"k{i}"))
        if i % 17 == 0:
            await _replicate(master, slave, rng)
    await _replicate(master, slave, rng)
    assert len(master.commitlog.files) > 3  # rolls (blank tails) were replicated too
    assert _files(slave) == _files(master)
    assert slave.confirm_offset == master.max_physical_offset
    for q in range(2):
        assert read_all(slave, "T", q) == bodies[q::2]
    assert len(slave.query_message("T", "k5", 10, 0, 1 << 62).buffers) == 1
    await master.shutdown()
    await slave.shutdown()
    # a restarted slave continues at its own max offset
    slave = MessageStore(tiny_config(str(tmp_path / "s")))
    await slave.start()
    assert slave.max_physical_offset == master.max_physical_offset
    assert read_all(slave, "T", 0) == bodies[0::2]
    await slave.shutdown()


async def test_replica_refuses_wrong_offset_and_garbled_bytes(tmp_path: Path) -> None:
    master = MessageStore(tiny_config(str(tmp_path / "m")))
    slave = MessageStore(tiny_config(str(tmp_path / "s")))
    await master.start()
    await slave.start()
    for _ in range(3):
        await master.put_message(bmsg("T", 0, b"x" * 100))
    data = master.read_commitlog(0, 4096)
    assert data is not None
    with pytest.raises(ReplicaError, match="ends at 0"):
        await slave.append_replica(10, data)
    first = len(data) // 3
    await slave.append_replica(0, data[:first])
    garbled = bytearray(data[first:])
    garbled[20] ^= 0xFF  # queue offset of the second record: its body CRC still holds, the phys check not
    garbled[30] ^= 0xFF
    with pytest.raises(ReplicaError, match="not a valid record"):
        await slave.append_replica(first, bytes(garbled))
    assert slave.max_physical_offset == first == slave.confirm_offset  # nothing of it kept
    await slave.append_replica(first, data[first:])
    assert _files(slave) == _files(master)
    with pytest.raises(ReplicaError, match="crosses"):
        await slave.append_replica(slave.max_physical_offset, b"\0" * 5000)
    await master.shutdown()
    await slave.shutdown()
