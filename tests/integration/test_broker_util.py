"""Raw-RPC helpers for the broker integration tests (no SDK): send, pull, heartbeat, routes.

Holds no tests itself; the ``test_broker*.py`` modules import it.
"""

from __future__ import annotations

from typing import Any

import msgpack

from rocketpy.message import properties_to_string
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
TIMEOUT_S = 10.0


def send_ext(
    topic: str, queue_id: int, props: dict[str, str] | None = None, queue_nums: int = 4
) -> dict[str, Any]:
    """A SEND_MESSAGE_V2 header (fields a..j)."""
    return {
        "a": "test_pg",
        "b": topic,
        "c": "TBW102",
        "d": queue_nums,
        "e": queue_id,
        "f": 0,
        "g": 1_700_000_000_000,
        "h": 0,
        "i": properties_to_string(props or {}),
        "j": 0,
    }


async def send(
    client: RemotingClient,
    addr: str,
    topic: str,
    body: bytes,
    queue_id: int = 0,
    props: dict[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
) -> RemotingCommand:
    """One SEND_MESSAGE_V2; returns the response (any code)."""
    cmd = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, ext=send_ext(topic, queue_id, props), body=body
    )
    return await client.invoke(addr, cmd, timeout_s)


async def send_batch(
    client: RemotingClient, addr: str, topic: str, batch_body: bytes, queue_id: int = 0
) -> RemotingCommand:
    """One SEND_BATCH_MESSAGE of an encoded batch."""
    ext = send_ext(topic, queue_id)
    ext["m"] = True
    cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext=ext, body=batch_body)
    return await client.invoke(addr, cmd, TIMEOUT_S)


def pull_ext(
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    max_msgs: int = 32,
    sys_flag: int = FLAG_SUBSCRIPTION,
    suspend_ms: int = 0,
    subscription: str = "*",
    commit_offset: int = 0,
) -> dict[str, Any]:
    """A PULL_MESSAGE header."""
    return {
        "consumerGroup": group,
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": offset,
        "maxMsgNums": max_msgs,
        "sysFlag": sys_flag,
        "commitOffset": commit_offset,
        "suspendTimeoutMillis": suspend_ms,
        "subscription": subscription,
        "subVersion": 0,
        "expressionType": "TAG",
    }


async def pull(client: RemotingClient, addr: str, timeout_s: float = TIMEOUT_S, **kw: Any) -> RemotingCommand:
    """One PULL_MESSAGE (keyword arguments as ``pull_ext``)."""
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext=pull_ext(**kw))
    return await client.invoke(addr, cmd, timeout_s)


async def call(
    client: RemotingClient,
    addr: str,
    code: int,
    ext: dict[str, Any] | None = None,
    body: bytes = b"",
    timeout_s: float = TIMEOUT_S,
) -> RemotingCommand:
    """Any request; returns the response."""
    return await client.invoke(addr, RemotingCommand.request(code, ext=ext, body=body), timeout_s)


async def route(client: RemotingClient, namesrv_addr: str, topic: str) -> dict[str, Any] | None:
    """The topic's route from a NameServer, or None when it has none."""
    resp = await call(client, namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if resp.code != 0:
        return None
    doc: dict[str, Any] = msgpack.unpackb(resp.body, raw=False)
    return doc


def route_brokers(doc: dict[str, Any] | None) -> set[str]:
    """Broker names that serve a route."""
    if not doc:
        return set()
    return {q["brokerName"] for q in doc.get("queueDatas", [])}


def heartbeat_body(client_id: str, group: str, topic: str, sub: str = "*") -> bytes:
    """A HeartbeatData with one consumer group subscribing ``topic``."""
    return msgpack.packb(
        {
            "clientID": client_id,
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": topic, "subString": sub, "subVersion": 1, "expressionType": "TAG"}
                    ],
                    "unitMode": False,
                }
            ],
        },
        use_bin_type=True,
    )
