"""Crash-test helper process: puts messages in a loop and prints each acknowledged one.

Usage: ``python -m tests.store_crash_worker STORE_DIR ROUND ASYNC_FLUSH|SYNC_FLUSH``. Prints ``READY``
after start-up, then ``ACK <round> <n> <queue_id> <queue_offset> <commitlog_offset>`` per PUT_OK.
The test kills it with SIGKILL at a random moment; nothing here stops on its own.
"""

from __future__ import annotations

import asyncio
import sys

from rocketpy.broker.store import BrokerMessage, MessageStore, PutMessageStatus
from rocketpy.config import FlushDiskType, StoreConfig
from rocketpy.message import properties_to_string

QUEUES = 3


def crash_config(root: str, flush: str) -> StoreConfig:
    """Small files so a run crosses many file boundaries."""
    return StoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 64,
        max_hash_slot_num=128,
        max_index_num=512,
        flush_disk_type=FlushDiskType(flush),
        flush_interval_commit_log=10,
        flush_interval_consume_queue=20,
        max_message_size=8192,
    )


def body_of(rnd: int, n: int) -> bytes:
    """Deterministic body of message n of a round (sizes vary up to ~3 KiB)."""
    head = f"r{rnd}-n{n}:".encode()
    return head + bytes((n * 7 + i) % 251 for i in range((n * 397) % 3000))


async def main(root: str, rnd: int, flush: str) -> None:
    store = MessageStore(crash_config(root, flush))
    await store.start()
    print("READY", flush=True)
    n = 0
    while True:
        batch = n % 10 == 9
        q = n % QUEUES
        if batch:
            msgs = [BrokerMessage("Crash", q, body_of(rnd, n + i),
                                  properties=properties_to_string({"KEYS": f"r{rnd}-{n + i}"}))
                    for i in range(3)]  # fmt: skip
            r = await store.put_messages(msgs)
        else:
            msgs = [
                BrokerMessage(
                    "Crash", q, body_of(rnd, n), properties=properties_to_string({"KEYS": f"r{rnd}-{n}"})
                )
            ]
            r = await store.put_message(msgs[0])
        if r.status is PutMessageStatus.PUT_OK:
            lines = [f"ACK {rnd} {n + i} {q} {r.queue_offset + i}" for i in range(len(msgs))]
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
        n += len(msgs)
        if n % 50 == 0:
            await asyncio.sleep(0)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
