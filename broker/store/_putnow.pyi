"""The store's coroutine-free put, compiled (``_putnow.pyx``), as mypy sees it.

Its signature is its pure twin's in ``put.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``put.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from rocketpy.broker.store.message import BrokerMessage
from rocketpy.broker.store.put import PutService
from rocketpy.broker.store.results import PutMessageResult

__all__ = ["put_now"]

def put_now(service: PutService, msgs: list[BrokerMessage]) -> PutMessageResult | None: ...
