"""The awaited send's compiled twin (``_speedups.pyx``), as mypy sees it.

Its signatures are its pure twin's in ``send_core.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``send_core.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

import asyncio
from collections.abc import Coroutine
from typing import Any

from rocketpy.client.coalesce import Coalescer, _Pending
from rocketpy.client.results import SendResult
from rocketpy.client.send_path import MessageJob, SendPath

__all__ = [
    "batch_body",
    "earliest_deadline",
    "finish_sent",
    "live_members",
    "settle_lone",
    "settle_stored",
    "start_deflate",
    "start_usual",
]

def start_usual(
    path: SendPath,
    job_cls: type[MessageJob],
    msg: Any,
    max_bytes: int,
    compress_over_bytes: int,
    queue_nums: int,
    retry_times: int,
    remaining: float,
) -> MessageJob | Coroutine[Any, Any, Any] | None: ...
def batch_body(jobs: list[MessageJob]) -> bytes: ...
def settle_stored(jobs: list[MessageJob], first: SendResult, quiet: bool) -> None: ...
def live_members(jobs: list[MessageJob]) -> tuple[list[MessageJob], int, float]: ...
def earliest_deadline(jobs: list[MessageJob], before: float) -> float: ...
def finish_sent(job: MessageJob, done: asyncio.Future[Any]) -> Any: ...
def settle_lone(co: Coalescer, q: _Pending, size: int, _done: asyncio.Future[Any]) -> None: ...
def start_deflate(
    loop: asyncio.AbstractEventLoop, body: bytes, level: int, done: asyncio.Future[bytes]
) -> None: ...
