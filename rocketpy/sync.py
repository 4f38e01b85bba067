"""Blocking twins of the SDK classes, for programs without an event loop (DESIGN §6, §8).

``from rocketpy.sync import Producer, PushConsumer, LitePullConsumer, SimpleConsumer, Admin``
(and ``TransactionProducer``) gives classes with the same names and methods as ``rocketpy``'s async
ones; every method blocks until done. They all run on one background event loop thread (see
``client/sync.py``). The message and enum types are re-exported so one import line is enough.
"""

from __future__ import annotations

from typing import Any

from rocketpy.client.consumer_types import (
    AllocateStrategy,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    MessageModel,
    MessageSelector,
)
from rocketpy.client.producer import SendResult, SendStatus
from rocketpy.client.sync import TWINS, twin
from rocketpy.client.transaction import LocalTransactionState, TransactionSendResult
from rocketpy.errors import MQBrokerError, MQClientError, RocketpyError
from rocketpy.message import Message, MessageExt, MessageQueue
from rocketpy.protocol.headers.pop import MessageRequestMode

__all__ = [
    "AllocateStrategy",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageRequestMode",
    "MessageSelector",
    "RocketpyError",
    "SendResult",
    "SendStatus",
    "TransactionSendResult",
    *sorted(TWINS),  # Admin, LitePullConsumer, Producer, PushConsumer, SimpleConsumer, ... (lazily)
]


def __getattr__(name: str) -> Any:
    if name in TWINS:
        return twin(name)
    raise AttributeError(f"module 'rocketpy.sync' has no attribute {name!r}")
