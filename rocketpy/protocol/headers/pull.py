"""PULL_MESSAGE / LITE_PULL_MESSAGE headers (RocketMQ's PullMessageRequestHeader and ResponseHeader).

The consumer builds the request map with ``PullMessageRequestHeader.pack`` (positional, per pull)
or ``to_ext``; the broker reads it with ``from_ext`` (with the broker's range checks). ``sysFlag``
holds ``rocketpy.sysflag`` bits; ``maxMsgBytes`` is optional and left out of the map when unset.
The answer's header says where the next pull starts and which broker id to pull from next.
"""

from __future__ import annotations

from rocketpy.protocol.header import Header, wire
from rocketpy.protocol.headers.offset import INT64_MAX
from rocketpy.subscription import ExpressionType

#: The expression type when a request names none (a plain str: it is compared with wire values).
_TAG = ExpressionType.TAG.value


class PullMessageRequestHeader(Header):
    """The fields of a pull request header.

    Attributes:
        group: the consumer group (``consumerGroup``).
        topic, queue_id: the queue.
        queue_offset: where to read.
        max_msgs: most messages to answer (``maxMsgNums``).
        sys_flag: ``PullSysFlag`` bits.
        commit_offset: the consumed offset to store (with ``FLAG_COMMIT_OFFSET``).
        suspend_timeout_ms: how long the broker may hold the pull (``suspendTimeoutMillis``).
        subscription: the expression (with ``FLAG_SUBSCRIPTION``); ``sub_version`` its version.
        expression_type: TAG or SQL92.
        max_msg_bytes: most body bytes to answer, or None.
    """

    group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    queue_offset: int = wire(
        "queueOffset", lo=0, hi=INT64_MAX,
        hint="pull from an offset the queue has (see GET_MIN_OFFSET / GET_MAX_OFFSET)",
    )  # fmt: skip
    max_msgs: int = wire("maxMsgNums", lo=1, hi=1 << 31)
    sys_flag: int = wire("sysFlag", default=0)
    commit_offset: int = wire("commitOffset", default=0, hi=INT64_MAX)
    suspend_timeout_ms: int = wire("suspendTimeoutMillis", default=0, lo=0, hi=INT64_MAX)
    subscription: str = wire("subscription", default="*")
    sub_version: int = wire("subVersion", default=0)
    expression_type: str = wire("expressionType", default=_TAG)
    max_msg_bytes: int | None = wire("maxMsgBytes", default=None)


class PullMessageResponseHeader(Header):
    """The answer's header: the next offset to pull from, the queue's bounds, the broker to pull from next.

    Attributes:
        suggest_which_broker_id: 0 (the master) or a slave's id (``suggestWhichBrokerId``).
        next_begin_offset: where the next pull starts.
        min_offset, max_offset: the queue's bounds when the broker answered.
    """

    suggest_which_broker_id: int = wire("suggestWhichBrokerId", default=0)
    next_begin_offset: int = wire("nextBeginOffset", default=0)
    min_offset: int = wire("minOffset", default=0)
    max_offset: int = wire("maxOffset", default=0)
