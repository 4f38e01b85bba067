"""One message sent and pulled back over the raw msgpack RPC, without the SDK (used by scripts/quickstart).

python scripts/raw_demo.py NAMESRV_ADDR TOPIC

Shows the wire protocol at work: GET_BROKER_CLUSTER_INFO from the NameServer to find a broker,
SEND_MESSAGE to it (the topic is auto-created from the TBW102 template), PULL_MESSAGE of the same
queue offset with the body decoded from the raw commitlog record the broker copied into the
response, then GET_ROUTEINFO_BY_TOPIC for the new topic.
"""

from __future__ import annotations

import asyncio
import sys
import time

import msgpack

from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.record import decode_records
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand

TIMEOUT_S = 5.0


async def first_broker(client: RemotingClient, namesrv_addr: str) -> str:
    """The master address of the first broker the NameServer knows."""
    request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    info = msgpack.unpackb((await client.invoke(namesrv_addr, request, TIMEOUT_S)).body)
    for broker in info["brokerAddrTable"].values():
        if "0" in broker["brokerAddrs"]:
            return str(broker["brokerAddrs"]["0"])
    raise SystemExit("error: the NameServer knows no broker master yet; start a broker first")


async def send(client: RemotingClient, broker_addr: str, topic: str, body: bytes) -> tuple[int, int]:
    """SEND_MESSAGE to queue 0 of ``topic``; returns (queue id, queue offset)."""
    ext = {
        "producerGroup": "raw_demo_producer",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4,
        "queueId": 0,
        "sysFlag": 0,
        "bornTimestamp": int(time.time() * 1000),
        "flag": 0,
        "properties": "",
        "reconsumeTimes": 0,
        "unitMode": False,
        "batch": False,
    }
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, body)
    response = await client.invoke(broker_addr, request, TIMEOUT_S)
    if response.code != ResponseCode.SUCCESS:
        raise SystemExit(f"error: SEND_MESSAGE answered {response.code}: {response.remark}")
    assert response.ext is not None
    print(
        f"raw send: SEND_MESSAGE -> SUCCESS msgId={response.ext['msgId']} "
        f"queueId={response.ext['queueId']} queueOffset={response.ext['queueOffset']}"
    )
    return int(response.ext["queueId"]), int(response.ext["queueOffset"])


async def pull(client: RemotingClient, broker_addr: str, topic: str, queue_id: int, offset: int) -> None:
    """PULL_MESSAGE one message at ``offset`` and decode the raw record."""
    ext = {
        "consumerGroup": "raw_demo_consumer",
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": offset,
        "maxMsgNums": 1,
        "sysFlag": 0x4,  # the subscription travels in this request (no heartbeat was sent)
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subscription": "*",
        "subVersion": 0,
        "expressionType": "TAG",
    }
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)
    response = await client.invoke(broker_addr, request, TIMEOUT_S)
    if response.code != ResponseCode.SUCCESS:
        raise SystemExit(f"error: PULL_MESSAGE answered {response.code}: {response.remark}")
    (msg,) = decode_records(response.body)
    assert response.ext is not None
    print(
        f"raw pull: PULL_MESSAGE -> SUCCESS {len(response.body)} record bytes, "
        f"nextBeginOffset={response.ext['nextBeginOffset']} body={msg.body.decode()!r}"
    )


async def show_route(client: RemotingClient, namesrv_addr: str, topic: str) -> None:
    """GET_ROUTEINFO_BY_TOPIC, waiting briefly for the broker to register the auto-created topic."""
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    deadline = time.monotonic() + TIMEOUT_S
    while (response := await client.invoke(namesrv_addr, request, TIMEOUT_S)).code != ResponseCode.SUCCESS:
        if time.monotonic() > deadline:
            print(f"raw route: GET_ROUTEINFO_BY_TOPIC {topic} -> {response.remark}")
            return
        await asyncio.sleep(0.1)  # the broker registers a new topic with the NameServer right after it
    route = msgpack.unpackb(response.body)
    queues = {q["brokerName"]: q["writeQueueNums"] for q in route["queueDatas"]}
    print(f"raw route: GET_ROUTEINFO_BY_TOPIC {topic} -> write queues per broker {queues}")


async def main(namesrv_addr: str, topic: str) -> None:
    client = RemotingClient(name="raw_demo")
    try:
        broker_addr = await first_broker(client, namesrv_addr)
        queue_id, offset = await send(client, broker_addr, topic, b"Hello over the raw RPC")
        await pull(client, broker_addr, topic, queue_id, offset)
        await show_route(client, namesrv_addr, topic)
    finally:
        await client.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(f"usage: {sys.argv[0]} NAMESRV_ADDR TOPIC")
    asyncio.run(main(sys.argv[1], sys.argv[2]))
