"""Message trace's record writers (``_traceenc.pyx``), as mypy sees them.

Their signatures are their pure twins' (``client/trace.py``), checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``trace.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from typing import Any

from rocketpy.client.results import SendResult
from rocketpy.client.trace import BeforeToken, TraceDispatcher
from rocketpy.message import Message, MessageExt

__all__ = ["write_after", "write_before", "write_pub", "write_sent"]

def write_pub(
    d: TraceDispatcher,
    group: str,
    msg: Message,
    result: SendResult,
    begin_ms: int,
    cost_ms: int,
    msg_type: int,
) -> bool: ...
def write_sent(
    d: TraceDispatcher, group: str, msg: Message, result: SendResult, begin: float, end: float
) -> bool: ...
def write_before(
    d: TraceDispatcher, group: str, now_ms: int, seq: int, chunks: list[list[MessageExt]]
) -> BeforeToken: ...
def write_after(
    d: TraceDispatcher,
    group: str,
    chunks: list[list[MessageExt]],
    token: BeforeToken,
    results: list[Any],
    times: list[float],
    ok_statuses: tuple[Any, ...],
) -> None: ...
