"""The send-run fast path's compiled twins (``_sendrun.pyx``), as mypy sees them.

Their signatures are their pure twins' in ``sendrun.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``sendrun.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from collections.abc import Callable
from typing import Any

from rocketpy.broker.processors.send import SendMessageProcessor
from rocketpy.broker.store import BrokerMessage, PutMessageResult
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.route import TopicConfig

__all__ = ["group_plain", "plain_messages", "run_plain", "stored_answers"]

def plain_messages(
    requests: list[RemotingCommand],
    topic_config: Callable[[str], TopicConfig | None],
    problems: dict[str, tuple[int, str] | None],
    born: tuple[str, int],
    max_body: int,
) -> list[BrokerMessage | None]: ...
def group_plain(
    requests: list[RemotingCommand],
    plain: list[BrokerMessage | None],
    start: int,
    out: list[Any],
    groups: dict[tuple[str, int, bool], list[int]],
    max_group: int,
    put_full: Callable[[list[int]], None],
) -> int: ...
def stored_answers(out: list[Any], members: list[int], result: PutMessageResult, host_hex: str) -> int: ...
def run_plain(
    processor: SendMessageProcessor, channel: Channel, requests: list[RemotingCommand]
) -> list[Any] | None: ...
