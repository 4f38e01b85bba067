"""The pull fast path's compiled twin (``_pullpath.pyx``), as mypy sees it.

Its signature is its pure twin's in ``pullpath.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``pullpath.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from typing import TYPE_CHECKING

from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel

if TYPE_CHECKING:
    from rocketpy.broker.processors.pull import PullMessageProcessor

__all__ = ["pull_now"]

def pull_now(
    processor: PullMessageProcessor, channel: Channel, request: RemotingCommand
) -> RemotingCommand | None: ...
