"""HEART_BEAT: what a client instance tells the brokers about its producers and consumers.

Owns the heartbeat data of each registered member (docs/wire.md HEART_BEAT): a producer's group; a
consumer's group, consume type, message model, ConsumeFromWhere and subscriptions, and sending it
to every known broker: producers to masters only (only masters take writes), consumers to every
member (a slave serves pulls while its master is down). ``ConsumerLike`` is what the instance needs
from a consumer object, for heartbeats and for NOTIFY_CONSUMER_IDS_CHANGED.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from rocketpy.client.api import MQClientAPI
from rocketpy.route import MASTER_ID

log = logging.getLogger("rocketpy.client.instance")

#: Who we are, in every heartbeat (RocketMQ's brokers ignore the keys): a rocketpy broker calls a
#: client that says so on its connection and waits for its answers (RESET_CONSUMER_CLIENT_OFFSET, ...).
CLIENT_LANGUAGE = "PYTHON"
CLIENT_VERSION = "rocketpy-0.1.0"

#: One member's heartbeat body and whether it goes to masters only (producers).
HeartbeatData = tuple[dict[str, Any], bool]


class ConsumerLike(Protocol):
    """What the instance needs from a consumer object (push or lite pull)."""

    group: str
    client_id: str

    @property
    def consume_type(self) -> str: ...
    @property
    def message_model(self) -> str: ...  # a MessageModel (a StrEnum)
    @property
    def consume_from_where(self) -> str: ...  # a ConsumeFromWhere
    def subscriptions(self) -> list[dict[str, Any]]: ...
    async def on_consumer_ids_changed(self) -> None: ...


def heartbeat_datas(
    producers: Iterable[tuple[str, str]], consumers: Iterable[tuple[tuple[str, str], ConsumerLike]]
) -> list[HeartbeatData]:
    """The heartbeat of each ``(group, client_id)`` producer and each ``((group, client_id), consumer)``."""
    out: list[HeartbeatData] = []
    for group, cid in producers:
        producer = {"clientID": cid, "producerDataSet": [{"groupName": group}], "consumerDataSet": []}
        out.append(({**producer, "language": CLIENT_LANGUAGE, "version": CLIENT_VERSION}, True))
    for (group, cid), c in consumers:
        data: dict[str, Any] = {
            "groupName": group,
            "consumeType": c.consume_type,
            "messageModel": str(c.message_model),
            "consumeFromWhere": str(c.consume_from_where),
            "subscriptionDataSet": c.subscriptions(),
            "unitMode": False,
        }
        body = {"clientID": cid, "producerDataSet": [], "consumerDataSet": [data]}
        out.append(({**body, "language": CLIENT_LANGUAGE, "version": CLIENT_VERSION}, False))
    return out


async def send_heartbeats(
    api: MQClientAPI,
    brokers: Mapping[str, Mapping[int, str]],
    datas: list[HeartbeatData],
    timeout_s: float,
) -> None:
    """Send every heartbeat to every broker address (``broker_name -> {broker_id: addr}``) at once.

    Failures are logged (the next period retries); cancellation propagates.
    """
    calls = []
    for table in list(brokers.values()):
        for broker_id, addr in table.items():
            for data, producer_only in datas:
                if producer_only and broker_id != MASTER_ID:
                    continue
                calls.append((addr, data))
    results = await asyncio.gather(
        *(api.heartbeat(a, d, timeout_s) for a, d in calls), return_exceptions=True
    )
    for (addr, data), r in zip(calls, results, strict=True):
        if isinstance(r, asyncio.CancelledError):
            raise r
        if isinstance(r, BaseException):
            log.info("heartbeat of %s to %s failed: %s", data["clientID"], addr, r)
