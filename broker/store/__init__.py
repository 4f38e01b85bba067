"""The message store: mmap commitlog, consume queues, index, checkpoint, flush, recovery, cleanup.

A library the broker wraps; it imports nothing from the rest of ``broker`` nor from the network layer.
"""

from rocketpy.broker.store.interface import Store
from rocketpy.broker.store.message import BrokerMessage
from rocketpy.broker.store.message_store import MessageStore
from rocketpy.broker.store.results import (
    GetMessageResult,
    GetMessageStatus,
    MessageFilter,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    StoreError,
    StoreLockedError,
)

__all__ = [
    "BrokerMessage",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageFilter",
    "MessageStore",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
    "Store",
    "StoreError",
    "StoreLockedError",
]
