"""The plain-pop fast path's compiled twin (``_poppath.pyx``), as mypy sees it.

Its signature is its pure twin's in ``poppath.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``poppath.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from typing import TYPE_CHECKING

from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.processor import HandlerResult

if TYPE_CHECKING:
    from rocketpy.broker.processors.pop import PopMessageProcessor

__all__ = ["pop_now"]

def pop_now(processor: PopMessageProcessor, request: RemotingCommand) -> HandlerResult | None: ...
