"""Queue selection for producers (pure functions over a queue list).

Owns: the round-robin + latency-fault-aware choice of RocketMQ's ``MQFaultStrategy.selectOneMessageQueue``
(reference §5), and the stock user selectors (by hash of the argument, random) that
``Producer.send(msg, selector=..., arg=...)`` accepts. A selector receives the topic's writable queues
sorted by (broker_name, queue_id), the message and the user argument, and returns one queue.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from rocketpy.client.fault import LatencyFaultTolerance
from rocketpy.errors import MQClientError
from rocketpy.filter.tags import java_string_hash
from rocketpy.message import Message, MessageQueue

#: User queue selector: (writable queues sorted by (broker_name, queue_id), message, arg) -> queue.
QueueSelector = Callable[[list[MessageQueue], Message, Any], MessageQueue]


class RoundRobinIndex:
    """A wrapping counter that starts at a random value (RocketMQ's ThreadLocalIndex; one per topic)."""

    __slots__ = ("_value",)

    def __init__(self, start: int | None = None) -> None:
        self._value = random.randrange(1 << 16) if start is None else start

    def next(self) -> int:
        """Advance and return a non-negative index."""
        self._value = (self._value + 1) & 0x7FFFFFFF
        return self._value


def select_queue(
    queues: Sequence[MessageQueue],
    index: RoundRobinIndex,
    fault: LatencyFaultTolerance,
    last_broker_name: str | None = None,
) -> MessageQueue:
    """Choose the next queue round-robin, avoiding ``last_broker_name`` and unavailable brokers.

    Preference order (reference §5): a queue on an available broker other than the last failed
    one; then any queue not on the last broker; then the least-bad broker's next queue; then plain
    round robin.

    Args:
        queues: the topic's writable queues (non-empty).
        index: the topic's round-robin counter.
        fault: latency fault tolerance state.
        last_broker_name: the broker the previous attempt of this send went to (None on a first try).

    Returns:
        The selected queue.
    """
    assert queues, "select_queue needs at least one queue"
    n = len(queues)
    if fault.enabled:
        for _ in range(n):
            mq = queues[index.next() % n]
            if mq.broker_name != last_broker_name and fault.is_available(mq.broker_name):
                return mq
    if last_broker_name is not None:
        for _ in range(n):
            mq = queues[index.next() % n]
            if mq.broker_name != last_broker_name:
                return mq
    if fault.enabled:
        best = fault.least_bad(sorted({mq.broker_name for mq in queues}))
        on_best = [mq for mq in queues if mq.broker_name == best]
        if on_best:
            return on_best[index.next() % len(on_best)]
    return queues[index.next() % n]


def select_with(selector: QueueSelector, queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """Call a user selector and check that it returned one of ``queues``.

    Raises:
        MQClientError: the selector returned something else.
    """
    mq = selector(queues, msg, arg)
    if not isinstance(mq, MessageQueue) or mq not in queues:
        raise MQClientError(
            f"selector returned {mq!r}, which is not one of the {len(queues)} queues it was given:"
            " return an element of the list"
        )
    return mq


class UserChoice(NamedTuple):
    """A send's own queue choice: the user's selector and the message and argument it is called with."""

    selector: QueueSelector
    msg: Message
    arg: Any

    def select(self, queues: list[MessageQueue]) -> MessageQueue:
        """The queue the selector picks among ``queues`` (checked by ``select_with``)."""
        return select_with(self.selector, queues, self.msg, self.arg)


def user_choice(selector: QueueSelector | None, msg: Message, arg: Any) -> UserChoice | None:
    """The send's own choice when the user gave a selector; None: round robin with failover."""
    return None if selector is None else UserChoice(selector, msg, arg)


def select_by_hash(queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """RocketMQ's SelectMessageQueueByHash: ``queues[abs(hash(arg)) % len(queues)]``.

    Integers map to themselves, so ``arg=order_id`` keeps one order id on one queue across
    processes; other arguments use Java's String.hashCode of their ``str()`` (Python's hash() is salted).
    """
    if isinstance(arg, int):
        key = arg
    else:
        key = java_string_hash(str(arg))
    return queues[abs(key) % len(queues)]


def select_random(queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """RocketMQ's SelectMessageQueueByRandom."""
    return queues[random.randrange(len(queues))]
