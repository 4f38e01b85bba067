"""The gRPC clients a broker knows: one session per ``x-mq-client-id``.

A session holds the client's stand-in channel (``GrpcChannel``), its type and last settings,
the topics it publishes and the group it consumes for, and its Telemetry stream's outbox. The
broker's producer and consumer tables learn of it the way they learn of a remoting client: the
endpoint sends HEART_BEAT (and UNREGISTER_CLIENT) through the broker's own processor, with the
producer groups = the published topics (RocketMQ's proxy registers 5.x producers by topic, and
sends their half messages with the topic as producer group) and the consumer group with its
subscriptions; a PushConsumer or SimpleConsumer announces ``CONSUME_POP`` (it receives by POP), so
its group's assignment is POP's unless an admin set the group's mode. Sessions end on
NotifyClientTermination or after ``grpcClientIdleTimeMills`` without a call or a Telemetry stream
(``expire_idle``); the table is bounded (``MAX_CLIENTS``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import msgpack

from rocketpy.broker.grpc.channel import GrpcChannel
from rocketpy.broker.grpc.status import Code, RpcError
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import Handler, ProcessorTable
from rocketpy.subscription import ExpressionType

log = logging.getLogger("rocketpy.broker.grpc")

#: gRPC client sessions one broker keeps (a client id beyond it is refused TOO_MANY_REQUESTS).
MAX_CLIENTS = 20_000
#: Commands queued for one client's Telemetry stream before more are dropped (checks are repeated).
MAX_OUTBOX = 256
#: Subscriptions kept from one consumer's settings.
MAX_SUBSCRIPTIONS = 64
CONSUMER_TYPES = frozenset(
    {pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER, pb.ClientType.PULL_CONSUMER}
)


class GrpcClient:
    """One client's session.

    Attributes:
        channel: what the broker's processors and tables see of the client.
        client_type: ``ClientType`` from its settings or heartbeat.
        topics: topics it publishes (producer settings).
        group: its consumer group ("" for a producer).
        subscriptions: topic -> (expression, ``ExpressionType``), from its settings.
        settings: its last settings.
        outbox: commands for its Telemetry stream (None while no stream is open; a None in it ends
            the stream).
        streams: Telemetry streams open (a session with one never expires for idleness).
        last_seen: monotonic time of its last call.
    """

    __slots__ = (
        "channel", "client_type", "group", "last_seen", "outbox", "settings", "streams", "subscriptions",
        "topics",
    )  # fmt: skip

    def __init__(self, channel: GrpcChannel) -> None:
        self.channel = channel
        self.client_type = pb.ClientType.CLIENT_TYPE_UNSPECIFIED
        self.topics: set[str] = set()
        self.group = ""
        self.subscriptions: dict[str, tuple[str, str]] = {}
        self.settings: pb.Settings | None = None
        self.outbox: asyncio.Queue[spb.TelemetryCommand | None] | None = None
        self.streams = 0
        self.last_seen = time.monotonic()

    @property
    def is_consumer(self) -> bool:
        """True for a push, simple or pull consumer."""
        return self.client_type in CONSUMER_TYPES

    def push(self, command: spb.TelemetryCommand) -> bool:
        """Queue ``command`` for the client's Telemetry stream; False when none is open or it is full."""
        if self.outbox is None or self.outbox.full():
            return False
        self.outbox.put_nowait(command)
        return True

    def end_stream(self) -> None:
        """Tell the open Telemetry stream to end (None in the outbox; room is kept for it)."""
        if self.outbox is not None:
            while self.outbox.full():
                self.outbox.get_nowait()
            self.outbox.put_nowait(None)


def subscriptions_of(settings: pb.Settings) -> dict[str, tuple[str, str]]:
    """topic -> (expression, expression type) of a consumer's settings (at most MAX_SUBSCRIPTIONS)."""
    out = {}
    for entry in list(settings.subscription.subscriptions)[:MAX_SUBSCRIPTIONS]:
        kind = ExpressionType.SQL92 if entry.expression.type == pb.FilterType.SQL else ExpressionType.TAG
        out[entry.topic.name] = (entry.expression.expression or "*", kind.value)
    return out


class GrpcClients:
    """The sessions of one broker's gRPC clients.

    Args:
        processors: the endpoint's processor table (request counts of held answers).
        heart_beat: the broker's HEART_BEAT handler; ``unregister``: its UNREGISTER_CLIENT handler.
        on_close: the broker's close listener (held pulls, group tables).
        on_oneway: takes commands the broker sends a client unasked (the transaction check).
    """

    def __init__(
        self,
        processors: ProcessorTable,
        heart_beat: Handler,
        unregister: Handler,
        on_close: Callable[[Channel], None],
        on_oneway: Callable[[GrpcChannel, RemotingCommand], None],
    ) -> None:
        self._processors = processors
        self._heart_beat = heart_beat
        self._unregister = unregister
        self._on_close = on_close
        self._on_oneway = on_oneway
        self.table: dict[str, GrpcClient] = {}

    def touch(self, client_id: str, peer: tuple[str, int], language: str) -> GrpcClient:
        """The session of ``client_id`` (created on its first call); its peer and time refreshed.

        Raises:
            RpcError: CLIENT_ID_REQUIRED without an id, TOO_MANY_REQUESTS past ``MAX_CLIENTS``.
        """
        if not client_id:
            raise RpcError(Code.CLIENT_ID_REQUIRED, "the call has no x-mq-client-id metadata")
        client = self.table.get(client_id)
        if client is None or client.channel.closed:
            if len(self.table) >= MAX_CLIENTS:
                raise RpcError(
                    Code.TOO_MANY_REQUESTS, f"this broker serves {MAX_CLIENTS} gRPC clients already"
                )
            channel = GrpcChannel(
                self._processors, client_id, peer, language, self._on_oneway, self._on_close
            )
            client = self.table[client_id] = GrpcClient(channel)
        elif client.channel.peer != peer:  # a new connection: its address is the born host now
            client.channel.peer = peer
            client.channel.attrs.pop("born_host", None)
        client.last_seen = time.monotonic()
        return client

    def apply_settings(self, client: GrpcClient, settings: pb.Settings) -> None:
        """Remember the client's settings: its type, published topics or group and subscriptions."""
        client.settings = settings
        if settings.HasField("client_type"):
            client.client_type = settings.client_type
        if settings.HasField("publishing"):
            client.topics = {t.name for t in settings.publishing.topics if t.name}
        if settings.HasField("subscription"):
            client.group = settings.subscription.group.name
            client.subscriptions = subscriptions_of(settings)

    def heartbeat(self, client: GrpcClient) -> RemotingCommand:
        """Register or refresh the client in the broker's producer/consumer tables (HEART_BEAT)."""
        producers = [] if client.is_consumer else [{"groupName": t} for t in sorted(client.topics)]
        consumers = []
        if client.is_consumer and client.group:
            consumers.append(
                {
                    "groupName": client.group,
                    "consumeType": "CONSUME_ACTIVELY"
                    if client.client_type == pb.ClientType.PULL_CONSUMER
                    else "CONSUME_POP",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": t, "subString": expr, "expressionType": kind, "subVersion": 0}
                        for t, (expr, kind) in sorted(client.subscriptions.items())
                    ],
                }
            )
        doc = {
            "clientID": client.channel.client_id,
            "producerDataSet": producers,
            "consumerDataSet": consumers,
        }
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, msgpack.packb(doc))
        answer = self._heart_beat(client.channel, request)
        assert isinstance(answer, RemotingCommand), "HEART_BEAT is answered inline"
        return answer

    def terminate(self, client_id: str, reason: str) -> bool:
        """End a client's session: leave its groups, fail its waiting calls. False when unknown."""
        client = self.table.pop(client_id, None)
        if client is None:
            return False
        for topic in client.topics:
            ext = {"clientID": client_id, "producerGroup": topic}
            self._unregister(client.channel, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, ext))
        if client.group:
            ext = {"clientID": client_id, "consumerGroup": client.group}
            self._unregister(client.channel, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, ext))
        client.channel.close(reason)
        if client.outbox is not None:
            client.end_stream()
        return True

    def expire_idle(self, idle_s: float) -> int:
        """End the sessions silent for ``idle_s`` seconds with no Telemetry stream; returns how many."""
        cutoff = time.monotonic() - idle_s
        stale = [cid for cid, c in self.table.items() if c.last_seen < cutoff and c.streams == 0]
        for cid in stale:
            log.info("gRPC client %s idle for %.0f s: session ended", cid, idle_s)
            self.terminate(cid, "idle")
        return len(stale)

    def close_all(self, reason: str) -> None:
        """End every session (shutdown)."""
        for cid in list(self.table):
            self.terminate(cid, reason)
