"""Blocking twins of the SDK classes, for programs without an event loop (DESIGN §6, §8).

``from rocketpy.sync import Producer, PushConsumer, LitePullConsumer, SimpleConsumer, Admin``
(and ``TransactionProducer``) gives classes with the same names and methods as ``rocketpy``'s async
ones; every method blocks until done. They all run on one background event loop thread (see
``client/sync.py``). The message and enum types are re-exported so one import line is enough.
"""

from __future__ import annotations

from typing import Any

import rocketpy
from rocketpy import (  # noqa: F401  (re-exported: the same classes as rocketpy's)
    AllocateStrategy,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    MessageRequestMode,
    MessageSelector,
    MQBrokerError,
    MQClientError,
    RocketpyError,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from rocketpy.client.sync import TWINS, twin

#: rocketpy's own public names: the SDK classes as blocking twins (lazily), the rest as rocketpy's.
__all__ = list(rocketpy.__all__)
assert set(TWINS) <= set(__all__)


def __getattr__(name: str) -> Any:
    if name in TWINS:
        return twin(name)
    if name in __all__:  # a public name of rocketpy's not listed above: the same object
        return getattr(rocketpy, name)
    raise AttributeError(f"module 'rocketpy.sync' has no attribute {name!r}")
