"""The broker's calls on a client's own connection and the admin calls that start them.

RESET_CONSUMER_CLIENT_OFFSET (220), GET_CONSUMER_STATUS_FROM_CLIENT (221), GET_CONSUMER_RUNNING_INFO
(307) and CONSUME_MESSAGE_DIRECTLY (309) are served by the SDK; the admin reaches them through a
broker: INVOKE_BROKER_TO_RESET_OFFSET (222), INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), and 307 /
309 themselves (the broker forwards them to the named client). GET_PRODUCER_CONNECTION_LIST (204)
lists a producer group's clients. Field names are RocketMQ's.

Bodies are lists of ``{"mq": MessageQueue, "offset": n}`` rows (``offset_rows``), not RocketMQ's maps
keyed by a MessageQueue object, which only fastjson writes; a RocketMQ client gets RocketMQ's own
form of the reset (``fastjson_offset_table``), sent oneway as RocketMQ's broker does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rocketpy.message import MessageQueue
from rocketpy.protocol.header import Header, wire
from rocketpy.protocol.headers.offset import INT64_MAX

#: Longest a broker waits for the clients of a broker-to-client call (the admin may ask for less).
MAX_CLIENT_CALL_TIMEOUT_MS = 60_000
DEFAULT_CLIENT_CALL_TIMEOUT_MS = 5_000
#: The ``timestamp`` of a reset that moves to each queue's end (RocketMQ's ``now`` / skip accumulated).
RESET_TO_MAX = -1
#: What a client that did not answer a broker-to-client call in time is reported as.
NO_ANSWER = "client did not answer"
#: ConsumeMessageDirectlyResult.consumeResult values (RocketMQ's CMResult).
CONSUME_RESULTS = (
    "CR_SUCCESS",
    "CR_LATER",
    "CR_ROLLBACK",
    "CR_COMMIT",
    "CR_THROW_EXCEPTION",
    "CR_RETURN_NULL",
)


class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET (admin -> broker) and RESET_CONSUMER_CLIENT_OFFSET (broker ->
    client): move ``group``'s offsets of ``topic`` to the first message stored at ``timestamp``.

    Attributes:
        topic, group: which offsets.
        timestamp: ms since the epoch; ``RESET_TO_MAX`` (-1) moves to each queue's end.
        is_force: also move offsets forward (False: only back, RocketMQ's ``-f false``).
        timeout_ms: rocketpy: how long the broker waits for the clients' answers.
    """

    topic: str = wire("topic", nonempty=True)
    group: str = wire("group", nonempty=True)
    timestamp: int = wire("timestamp", lo=RESET_TO_MAX, hi=INT64_MAX)
    is_force: bool = wire("isForce", default=True)
    timeout_ms: int = wire("timeoutMillis", default=DEFAULT_CLIENT_CALL_TIMEOUT_MS, lo=1,
                           hi=MAX_CLIENT_CALL_TIMEOUT_MS)  # fmt: skip


class GetConsumerStatusRequestHeader(Header):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (admin -> broker) and GET_CONSUMER_STATUS_FROM_CLIENT
    (broker -> client): the offsets the group's live consumers hold for ``topic``.

    Attributes:
        client_addr: only this client id (RocketMQ's ``clientAddr``; None: every client).
    """

    topic: str = wire("topic", nonempty=True)
    group: str = wire("group", nonempty=True)
    client_addr: str | None = wire("clientAddr", default=None)
    timeout_ms: int = wire("timeoutMillis", default=DEFAULT_CLIENT_CALL_TIMEOUT_MS, lo=1,
                           hi=MAX_CLIENT_CALL_TIMEOUT_MS)  # fmt: skip


class GetConsumerRunningInfoRequestHeader(Header):
    """GET_CONSUMER_RUNNING_INFO: one client's subscriptions, queues, rates and thread pool
    (``jstack_enable``: and its threads' and tasks' stacks)."""

    group: str = wire("consumerGroup", nonempty=True)
    client_id: str = wire("clientId", nonempty=True)
    jstack_enable: bool = wire("jstackEnable", default=False)
    timeout_ms: int = wire("timeoutMillis", default=DEFAULT_CLIENT_CALL_TIMEOUT_MS, lo=1,
                           hi=MAX_CLIENT_CALL_TIMEOUT_MS)  # fmt: skip


class ConsumeMessageDirectlyRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY: run one stored message through a chosen client's listener.

    Attributes:
        msg_id: the offset msg id of the stored message (admin -> broker; the broker attaches the
            record as the body when it forwards the call).
        broker_name: the broker holding it (the client's answer names no broker).
        topic: the message's topic (RocketMQ 5).
    """

    group: str = wire("consumerGroup", nonempty=True)
    client_id: str = wire("clientId", nonempty=True)
    msg_id: str = wire("msgId", nonempty=True)
    broker_name: str | None = wire("brokerName", default=None)
    topic: str | None = wire("topic", default=None)
    timeout_ms: int = wire("timeoutMillis", default=DEFAULT_CLIENT_CALL_TIMEOUT_MS, lo=1,
                           hi=MAX_CLIENT_CALL_TIMEOUT_MS)  # fmt: skip


class ProducerGroupRequestHeader(Header):
    """GET_PRODUCER_CONNECTION_LIST: a producer group's live clients."""

    group: str = wire("producerGroup", nonempty=True)


def offset_rows(offsets: Mapping[MessageQueue, int]) -> list[dict[str, Any]]:
    """``[{"mq": {...}, "offset": n}]`` sorted by queue (the body rows of 220, 221, 222 and 223)."""
    return [{"mq": mq.to_dict(), "offset": int(off)} for mq, off in sorted(offsets.items())]


def read_offset_rows(rows: Any, what: str) -> dict[MessageQueue, int]:
    """The ``{MessageQueue: offset}`` of ``offset_rows`` rows.

    Raises:
        ValueError: a row is not ``{"mq": {"topic", "brokerName", "queueId"}, "offset": int}``.
    """
    if not isinstance(rows, list):
        raise ValueError(f"{what} must be a list of {{mq, offset}} rows")
    out: dict[MessageQueue, int] = {}
    for row in rows:
        try:
            mq, offset = MessageQueue.from_dict(row["mq"]), row["offset"]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{what}: a row is not {{mq, offset}}: {e}") from None
        if type(offset) is not int or offset < 0:
            raise ValueError(f"{what}: offset {offset!r} of {mq} is not a non-negative integer")
        out[mq] = offset
    return out


def fastjson_offset_table(offsets: Iterable[tuple[MessageQueue, int]]) -> bytes:
    """RocketMQ's ResetOffsetBody as fastjson writes it: a map keyed by MessageQueue objects
    (``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:10}}``; not strict JSON, what
    RocketMQ's clients read)."""
    items = (
        json.dumps({"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic},
                   separators=(",", ":"), sort_keys=True) + f":{int(off)}"
        for mq, off in offsets
    )  # fmt: skip
    return ('{"offsetTable":{' + ",".join(items) + "}}").encode()
