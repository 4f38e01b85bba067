"""Transaction types of the SDK: the local transaction states, the listener and the send result.

Owns ``LocalTransactionState`` (RocketMQ's spelling; ``UNKNOWN`` is an alias of ``UNKNOW``), what a
transaction listener is (``TransactionListener``), how a listener method is run
(``ListenerRunner``: an ``async def`` on the loop, a plain function in the producer's own bounded
thread pool, never on the loop; an exception or an answer that is not a state counts as UNKNOW),
and ``TransactionSendResult`` (a ``SendResult`` plus the local transaction's state).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Any, Protocol

from rocketpy.client.results import SendResult
from rocketpy.errors import MQClientError
from rocketpy.message import Message, MessageExt
from rocketpy.protocol.headers.transaction import TransactionDecision

log = logging.getLogger("rocketpy.client.transaction")


class LocalTransactionState(Enum):
    """What a local transaction came to (RocketMQ's names)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    UNKNOWN = "UNKNOW"  # alias (the same member)

    @property
    def decision(self) -> TransactionDecision:
        """The END_TRANSACTION value of this state."""
        return _DECISIONS[self]


_DECISIONS = {
    LocalTransactionState.COMMIT_MESSAGE: TransactionDecision.COMMIT,
    LocalTransactionState.ROLLBACK_MESSAGE: TransactionDecision.ROLLBACK,
    LocalTransactionState.UNKNOW: TransactionDecision.UNKNOW,
}


class TransactionListener(Protocol):
    """The user object of a ``TransactionProducer``; either method may be ``async def``."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        """Run the local transaction of a stored half message; return a ``LocalTransactionState``."""

    def check_local_transaction(self, msg: MessageExt) -> Any:
        """Say what became of the local transaction of ``msg`` (asked by a broker)."""


def check_listener(listener: Any) -> None:
    """Raise MQClientError unless ``listener`` has both listener methods."""
    missing = [
        name
        for name in ("execute_local_transaction", "check_local_transaction")
        if not callable(getattr(listener, name, None))
    ]
    if missing:
        raise MQClientError(
            f"the transaction listener {type(listener).__name__} lacks {' and '.join(missing)}: give an "
            "object with execute_local_transaction(msg, arg) and check_local_transaction(msg)"
        )


def as_state(value: Any, what: str) -> LocalTransactionState:
    """``value`` as a state; anything else is UNKNOW (logged)."""
    if isinstance(value, LocalTransactionState):
        return value
    if isinstance(value, str) and value in LocalTransactionState.__members__:
        return LocalTransactionState[value]
    log.warning("%s returned %r, not a LocalTransactionState; counted as UNKNOW", what, value)
    return LocalTransactionState.UNKNOW


class ListenerRunner:
    """Runs listener methods: coroutines on the loop, plain functions in a bounded thread pool.

    Args:
        threads: worker threads for plain (blocking) listener methods.
        name: thread name prefix.
    """

    def __init__(self, threads: int, name: str) -> None:
        self.threads = threads
        self.name = name
        self._pool: ThreadPoolExecutor | None = None

    async def run(self, fn: Callable[..., Any], *args: Any) -> LocalTransactionState:
        """The state ``fn(*args)`` returns; UNKNOW when it raises (logged)."""
        what = getattr(fn, "__qualname__", "the transaction listener")
        try:
            if inspect.iscoroutinefunction(fn):
                value = await fn(*args)
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name)
                value = await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except Exception:
            log.exception("%s raised; the transaction state is UNKNOW", what)
            return LocalTransactionState.UNKNOW
        return as_state(value, what)

    def shutdown(self) -> None:
        """Let the pool's threads end once their work is done (does not wait)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


class TransactionSendResult(SendResult):
    """A half message's SendResult plus what its local transaction came to (built from both).

    Attributes:
        local_transaction_state: the listener's answer (ROLLBACK_MESSAGE when the half message was
            not stored durably, as RocketMQ's producer does).
        transaction_id: the transaction id (the message's UNIQ_KEY).
    """

    __slots__ = ("local_transaction_state", "transaction_id")

    def __init__(self, result: SendResult, local_transaction_state: LocalTransactionState) -> None:
        super().__init__(
            result.status, result.msg_id, result.offset_msg_id, result.message_queue, result.queue_offset
        )
        self.local_transaction_state = local_transaction_state
        self.transaction_id = result.msg_id

    def __repr__(self) -> str:
        state = self.local_transaction_state.name
        return f"Transaction{super().__repr__()[:-1]}, local_transaction_state={state})"
