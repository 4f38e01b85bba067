"""Legal-but-expensive frames against live daemons, and the largest honest requests (docs/design.md §2.2).

Two variants of each kind of ``tests.hostile_frames.EXPENSIVE_KINDS`` (1-8 MiB remarks,
200,000-entry ext maps, 1,000,000-element arrays, nesting up to 100,000 deep, in headers and
structured bodies, msgpack and JSON, and a 15 MiB frame), one to a NameServer and one to a broker,
each on its own connection (``scripts/bench_hostile.py`` sends them all): each gets one
answer or the connection is closed, the daemon keeps answering a well-behaved client, and neither
writes a traceback. How long the well-behaved client waits meanwhile is measured by
``scripts/bench_hostile.py``, not here. The largest requests RocketMQ's clients send legally still
pass: a send with 32,000 bytes of properties (msgpack and JSON headers), a 4 MiB body, a heartbeat
and a JSON broker registration too long to decode at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random

import msgpack

from rocketpy.addresses import parse_addr
from rocketpy.message import properties_to_string
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.codec import FrameDecoder, FrameError
from rocketpy.remoting.command import SERIALIZE_JSON, RemotingCommand
from rocketpy.route import TopicConfig
from tests.conftest import DaemonPool
from tests.hostile_frames import EXPENSIVE_KINDS, _build_expensive
from tests.integration.test_broker_util import call, heartbeat_body, send_ext

TIMEOUT_S = 20.0


async def _answer_or_close(addr: str, frame: bytes) -> str:
    """Send ``frame`` on a new connection: "answered CODE" or "closed"."""
    host, port = parse_addr(addr)
    reader, writer = await asyncio.open_connection(host, port)
    decoder = FrameDecoder(max_frame_bytes=32 << 20)
    try:
        writer.write(frame)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                try:
                    data = await reader.read(1 << 16)
                except ConnectionError:
                    return "closed"
                if not data:
                    return "closed"
                try:
                    answers = decoder.feed(data)
                except FrameError:
                    return "garbage"
                if answers:
                    return f"answered {answers[0].code}"
    finally:
        writer.transport.abort()


async def test_every_expensive_frame_is_answered_or_closed_and_the_daemons_serve_on(
    daemons: DaemonPool,
) -> None:
    namesrv = daemons.namesrv()
    broker = daemons.broker(namesrv.addr)
    client = RemotingClient()
    outcomes: dict[str, set[str]] = {}
    try:
        for kind in EXPENSIVE_KINDS:
            frames = _build_expensive(kind)
            # Two variants of each kind, one per daemon (bench_hostile.py sends every variant to both).
            picks = random.Random(kind).sample(frames, 2)
            for daemon, frame in zip((namesrv, broker), picks, strict=True):
                outcome = await _answer_or_close(daemon.addr, frame)
                assert outcome != "garbage", kind
                outcomes.setdefault(kind, set()).add(outcome.split()[0])
                probe = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
                assert (await client.invoke(namesrv.addr, probe, TIMEOUT_S)).code == 0
                offset = RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": 0}
                )
                assert (await client.invoke(broker.addr, offset, TIMEOUT_S)).code in (
                    0,
                    ResponseCode.TOPIC_NOT_EXIST,
                )
    finally:
        await client.close()
    assert outcomes["big_remark"] == {"closed"}  # past maxHeaderBytes: closed before it is read
    assert outcomes["big_frame"] == {"answered"}  # 15 MiB is a legal frame
    for daemon in (namesrv, broker):
        assert daemon.returncode is None and not daemon.has_traceback()


async def test_the_largest_honest_requests_pass(daemons: DaemonPool) -> None:
    namesrv = daemons.namesrv()
    broker = daemons.broker(namesrv.addr)
    topic = "BigRequests"
    msgpack_client, json_client = RemotingClient(), RemotingClient(serialize_type=SERIALIZE_JSON)
    try:
        create = {"topic": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
        assert (
            await call(msgpack_client, broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        ).code == 0
        props = properties_to_string({"UNIQ_KEY": "u1", "big": "p" * 32_000})  # RocketMQ's limit: 32,767
        for client in (msgpack_client, json_client):
            ext = send_ext(topic, 0, queue_nums=4)
            ext["i"] = props
            sent = await client.invoke(
                broker.addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"b"), 10
            )
            assert sent.code == 0, sent.remark
        body = bytes(range(256)) * (4 * 1024 * 1024 // 256)  # maxMessageSize
        sent = await call(
            msgpack_client, broker.addr, RequestCode.SEND_MESSAGE_V2, send_ext(topic, 1, queue_nums=4), body
        )
        assert sent.code == 0, sent.remark
        hb = msgpack.unpackb(heartbeat_body("big-client", "big-group", topic), raw=False)
        subs = hb["consumerDataSet"][0]["subscriptionDataSet"]
        subs += [dict(subs[0], topic=f"{topic}-{i}") for i in range(600)]  # about 60 KiB: decoded in slices
        for client, encoded in ((msgpack_client, msgpack.packb(hb)), (json_client, json.dumps(hb).encode())):
            assert len(encoded) > 32 * 1024
            answer = await client.invoke(
                broker.addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=encoded), 10
            )
            assert answer.code == 0, answer.remark
        table = {f"j{i}": TopicConfig(topic_name=f"j{i}").to_wire() for i in range(3000)}
        register = {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": table,
                "dataVersion": {"timestamp": 1, "counter": 1},
            }
        }
        ext = {
            "brokerName": "json-broker",
            "brokerAddr": "127.0.0.9:10911",
            "clusterName": "C",
            "haServerAddr": "",
            "brokerId": "0",
        }
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, json.dumps(register).encode())
        assert (await json_client.invoke(namesrv.addr, request, 20)).code == 0
        routed = await call(
            msgpack_client, namesrv.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "j2999"}
        )
        assert routed.code == 0, routed.remark
    finally:
        await msgpack_client.close()
        await json_client.close()
    for daemon in (namesrv, broker):
        assert not daemon.has_traceback()
