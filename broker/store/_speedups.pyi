"""The store's compiled twins (``_speedups.pyx``), as mypy sees them.

Each signature is its pure twin's (``commitlog.py``, ``props.py``, ``index.py``, ``recovery.py``,
``dispatch.py``, ``flush.py``), checked both ways by mypy (``rocketpy._accel.same_signature``, at the
end of each of those modules) and against the built module by ``stubtest`` (``scripts/check``).
"""

from array import array
from mmap import mmap

from rocketpy.broker.store.commitlog import RecordBatch
from rocketpy.broker.store.consume_queue import ConsumeQueue
from rocketpy.broker.store.dispatch import Dispatcher
from rocketpy.broker.store.message import BrokerMessage
from rocketpy.broker.store.recovery import StoredRecord
from rocketpy.broker.store.results import PutMessageResult

__all__ = [
    "append_records",
    "dispatch_run",
    "group_commit_sync",
    "put_unique_key_entry",
    "read_record",
    "redispatch",
    "tags_hash",
]

def append_records(
    mm: mmap, base_offset: int, pos: int, room: int, batch: RecordBatch
) -> tuple[int, PutMessageResult]: ...
def tags_hash(props: str) -> int: ...
def put_unique_key_entry(
    mm: mmap | bytearray,
    props: str,
    topic_hash: int,
    phys: int,
    time_diff: int,
    count: int,
    slots: int,
    entries_pos: int,
) -> bool: ...
def read_record(
    buf: memoryview | bytes | bytearray, pos: int, room: int, phys: int, check_crc: bool, text: bool
) -> StoredRecord | int: ...
def dispatch_run(
    d: Dispatcher,
    cq: ConsumeQueue,
    queue_offset: int,
    phys: int,
    sizes: list[int],
    msgs: list[BrokerMessage],
    store_ts: int,
) -> int: ...
def redispatch(d: Dispatcher, record: StoredRecord, phys: int) -> None: ...
def group_commit_sync(
    wake_fd: int,
    sync_fd: int,
    done_fd: int,
    flushed: int,
    limit: int,
    timeout_s: float,
    started: array[float],
) -> tuple[int, int, float]: ...
