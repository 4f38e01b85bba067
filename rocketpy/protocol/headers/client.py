"""Client management: HEART_BEAT's HeartbeatData, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP,
NOTIFY_CONSUMER_IDS_CHANGED (broker -> client) and the queue locks of orderly consumers
(LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies), RocketMQ's names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rocketpy.heartbeat import SETTING_ORDINALS
from rocketpy.message import MessageQueue
from rocketpy.protocol.access import Resource
from rocketpy.protocol.header import Header, wire
from rocketpy.protocol.shape import ANY_SCALAR, INT, REQUIRED_INT, REQUIRED_STR, STR, Fields, ListOf, Scalar

MAX_GROUPS_PER_HEARTBEAT = 1024
MAX_SUBSCRIPTIONS_PER_GROUP = 1024
MAX_LOCK_BATCH = 4096

SUBSCRIPTION_DATA = Fields(
    {
        "topic": REQUIRED_STR,
        "subString": Scalar((str,), max_len=64 * 1024),
        "subVersion": INT,
        "expressionType": STR,
    }
)
CONSUMER_DATA = Fields(
    {
        "groupName": REQUIRED_STR,
        "subscriptionDataSet": ListOf(SUBSCRIPTION_DATA, MAX_SUBSCRIPTIONS_PER_GROUP),
        **{name: ANY_SCALAR for name in SETTING_ORDINALS},
    }
)
#: RocketMQ's HeartbeatData (HEART_BEAT's body).
HEARTBEAT_DATA = Fields(
    {
        "clientID": REQUIRED_STR,
        "consumerDataSet": ListOf(CONSUMER_DATA, MAX_GROUPS_PER_HEARTBEAT),
        "producerDataSet": ListOf(Fields({"groupName": REQUIRED_STR}), MAX_GROUPS_PER_HEARTBEAT),
    }
)

MESSAGE_QUEUE = Fields({"topic": REQUIRED_STR, "brokerName": REQUIRED_STR, "queueId": REQUIRED_INT})
#: RocketMQ's LockBatchRequestBody (also the body of UNLOCK_BATCH_MQ).
LOCK_BATCH_BODY = Fields(
    {"consumerGroup": REQUIRED_STR, "clientId": REQUIRED_STR, "mqSet": ListOf(MESSAGE_QUEUE, MAX_LOCK_BATCH)}
)


class UnregisterClientRequestHeader(Header):
    """UNREGISTER_CLIENT: a client leaves its producer and/or consumer group."""

    client_id: str = wire("clientID")
    producer_group: str | None = wire("producerGroup", default=None)
    consumer_group: str | None = wire("consumerGroup", default=None)


class ConsumerGroupRequestHeader(Header):
    """A request about one consumer group: GET_CONSUMER_LIST_BY_GROUP, GET_CONSUMER_CONNECTION_LIST,
    and the broker's NOTIFY_CONSUMER_IDS_CHANGED to the group's clients."""

    group: str = wire("consumerGroup")


def heartbeat_resources(doc: Any) -> list[Resource]:
    """The groups and subscribed topics a decoded HeartbeatData names (for the ACL).

    Tolerant of a malformed body (it names what it can): the handler answers the malformed body.
    """
    found: list[Resource] = []
    consumers = doc.get("consumerDataSet") if isinstance(doc, dict) else None
    for data in consumers if isinstance(consumers, list) else []:
        if not isinstance(data, dict):
            continue
        group = data.get("groupName")
        if isinstance(group, str) and group:
            found.append(("group", group))
        subs = data.get("subscriptionDataSet")
        for sub in subs if isinstance(subs, list) else []:
            topic = sub.get("topic") if isinstance(sub, dict) else None
            if isinstance(topic, str) and topic:
                found.append(("topic", topic))
    return found


def lock_batch_body(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> dict[str, Any]:
    """LOCK_BATCH_MQ's (and UNLOCK_BATCH_MQ's) body: RocketMQ's LockBatchRequestBody."""
    return {"consumerGroup": group, "clientId": client_id, "mqSet": [mq.to_dict() for mq in mqs]}


def read_lock_batch(doc: dict[str, Any]) -> tuple[str, str, list[MessageQueue]]:
    """``(group, client id, queues)`` of a LockBatchRequestBody (checked against ``LOCK_BATCH_BODY``)."""
    return doc["consumerGroup"], doc["clientId"], [MessageQueue.from_dict(d) for d in doc.get("mqSet") or ()]


def locked_queues_body(mqs: Iterable[MessageQueue]) -> dict[str, Any]:
    """LOCK_BATCH_MQ's answer: the queues the client holds now (``lockOKMQSet``), sorted."""
    return {"lockOKMQSet": [mq.to_dict() for mq in sorted(mqs)]}


def read_locked_queues(doc: dict[str, Any]) -> set[MessageQueue]:
    """The queues of a LOCK_BATCH_MQ answer."""
    return {MessageQueue.from_dict(d) for d in doc.get("lockOKMQSet") or ()}


def consumer_ids_body(client_ids: list[str]) -> dict[str, Any]:
    """GET_CONSUMER_LIST_BY_GROUP's answer: the group's live client ids."""
    return {"consumerIdList": client_ids}


def read_consumer_ids(doc: dict[str, Any]) -> list[str]:
    """The client ids of a GET_CONSUMER_LIST_BY_GROUP answer."""
    return [str(c) for c in doc.get("consumerIdList") or ()]
