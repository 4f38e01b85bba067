"""POP's compiled twins (``_speedups.pyx``), as mypy sees them.

Each signature is its pure twin's in ``ledger.py``, ``revive_log.py`` or ``acks.py``, checked both
ways by mypy (``rocketpy._accel.same_signature``, at the end of each) and against the built module
by ``stubtest`` (``scripts/check``).
"""

from collections import deque
from typing import Any

from rocketpy.broker.pop.acks import AckedRun
from rocketpy.broker.pop.ledger import PopQueue
from rocketpy.broker.pop.revive_log import AckEntry
from rocketpy.broker.pop.service import PopService
from rocketpy.protocol.headers.pop import BatchAck

__all__ = [
    "acks_entry",
    "apply_batch_acks",
    "commit_queues",
    "drop_done",
    "encode_acks",
    "offsets_of",
    "read_acks",
    "take_run",
]

def take_run(inflight: dict[int, Any], offsets: list[int], pop_time: int) -> Any: ...
def drop_done(order: deque[int], inflight: dict[int, Any]) -> None: ...
def acks_entry(queue_id: int, seq: int, committed: int, offsets: list[int]) -> bytes: ...
def encode_acks(group: str, topic: str, entries: list[AckEntry], reason: int = 0) -> list[bytes]: ...
def offsets_of(start: int, bits: tuple[int, ...]) -> list[int]: ...
def read_acks(doc: dict[str, Any]) -> list[BatchAck] | None: ...
def apply_batch_acks(service: PopService, acks: list[BatchAck]) -> tuple[list[AckedRun], int, int]: ...
def commit_queues(service: PopService, queues: list[PopQueue]) -> None: ...
