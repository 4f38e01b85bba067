"""rocketpy: a RocketMQ-style message broker and its Python SDK — the public import path.

Users import only from here (``from rocketpy import Producer, Message``). The SDK classes live in the
``client`` package and are loaded lazily on first access (PEP 562), so the daemons, which import
``rocketpy.remoting``/``rocketpy.config``, never load the client SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Producer": "rocketpy.client.producer",
    "SendResult": "rocketpy.client.producer",
    "SendStatus": "rocketpy.client.producer",
    "TransactionProducer": "rocketpy.client.transaction_producer",
    "TransactionSendResult": "rocketpy.client.transaction",
    "LocalTransactionState": "rocketpy.client.transaction",
    "PushConsumer": "rocketpy.client.push_consumer",
    "LitePullConsumer": "rocketpy.client.lite_pull_consumer",
    "SimpleConsumer": "rocketpy.client.simple_consumer",
    "MessageRequestMode": "rocketpy.protocol.headers.pop",
    "Admin": "rocketpy.client.admin",
    "ConsumeStatus": "rocketpy.client.consumer_types",
    "ConsumeOrderlyStatus": "rocketpy.client.consumer_types",
    "MessageModel": "rocketpy.client.consumer_types",
    "ConsumeFromWhere": "rocketpy.client.consumer_types",
    "MessageSelector": "rocketpy.client.consumer_types",
    "AllocateStrategy": "rocketpy.client.consumer_types",
    "Message": "rocketpy.message",
    "MessageExt": "rocketpy.message",
    "MessageQueue": "rocketpy.message",
    "RocketpyError": "rocketpy.errors",
    "MQClientError": "rocketpy.errors",
    "MQBrokerError": "rocketpy.errors",
}

__all__ = [
    "Admin",
    "AllocateStrategy",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "LitePullConsumer",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageRequestMode",
    "MessageSelector",
    "Producer",
    "PushConsumer",
    "RocketpyError",
    "SendResult",
    "SendStatus",
    "SimpleConsumer",
    "TransactionProducer",
    "TransactionSendResult",
]
assert sorted(__all__) == sorted(_EXPORTS)

if TYPE_CHECKING:
    from rocketpy.client.admin import Admin
    from rocketpy.client.consumer_types import (
        AllocateStrategy,
        ConsumeFromWhere,
        ConsumeOrderlyStatus,
        ConsumeStatus,
        MessageModel,
        MessageSelector,
    )
    from rocketpy.client.lite_pull_consumer import LitePullConsumer
    from rocketpy.client.producer import Producer, SendResult, SendStatus
    from rocketpy.client.push_consumer import PushConsumer
    from rocketpy.client.simple_consumer import SimpleConsumer
    from rocketpy.client.transaction import LocalTransactionState, TransactionSendResult
    from rocketpy.client.transaction_producer import TransactionProducer
    from rocketpy.errors import MQBrokerError, MQClientError, RocketpyError
    from rocketpy.message import Message, MessageExt, MessageQueue
    from rocketpy.protocol.headers.pop import MessageRequestMode


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rocketpy' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
