"""GrpcEndpoint: the broker's ``apache.rocketmq.v2.MessagingService`` server (``grpcServerPort``).

``grpc.aio`` runs on the broker's own event loop (uvloop; docs/design.md §15 has the measurement
behind that choice): handlers call the broker's managers and processors directly, with no thread
hop. The method table is built from the service's descriptor, so every RPC of the proto is
served: the ones this broker implements by ``MessagingService``, ``ConsumerRpcs`` (POP's unary
RPCs), ``Receiver`` (ReceiveMessage) and ``Streams``, the rest (Lite topics) with NOT_IMPLEMENTED
in their response's status. Each call first reads its
metadata (``CallMeta``) and the client's session; a handler's ``RpcError`` becomes its response's
status, any other exception INTERNAL_ERROR (logged), never a raw gRPC error. Bounds: inbound
message size (``grpcMaxInboundMessageSize``), concurrent calls per connection
(``grpcMaxConcurrentCallsPerConnection``, HTTP/2 MAX_CONCURRENT_STREAMS), idle sessions
(``grpcClientIdleTimeMills``). TLS when ``grpcTlsCertPath`` and ``grpcTlsKeyPath`` are set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from rocketpy.broker.grpc.clients import GrpcClients
from rocketpy.broker.grpc.consumers import ConsumerRpcs
from rocketpy.broker.grpc.metadata import peer_host_port, read_metadata
from rocketpy.broker.grpc.receive import Receiver
from rocketpy.broker.grpc.service import Call, MessagingService
from rocketpy.broker.grpc.status import Code, RpcError, code_name, status
from rocketpy.broker.grpc.streams import Streams
from rocketpy.config import BrokerConfig
from rocketpy.grpc_api.v2 import service_pb2 as spb

log = logging.getLogger("rocketpy.broker.grpc")

SERVICE = spb.DESCRIPTOR.services_by_name["MessagingService"]
#: RPCs answered NOT_IMPLEMENTED, with what they wait for.
NOT_YET = {"SyncLiteSubscription": "Lite topics"}
#: (RPC, status code) pairs counted for metrics, at most.
MAX_COUNTED = 1024
#: Client connections whose parsed address is kept (the table is emptied when it fills).
MAX_PEERS = 4096


def _message_class(name: str) -> type[Any]:
    return getattr(spb, name)  # every request and response type of the service is in service.proto


class Malformed:
    """A request whose bytes are not its protobuf type: answered BAD_REQUEST, never a traceback."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _decoder(cls: type[Any]) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except DecodeError as e:
            return Malformed(f"the request is not a valid {cls.DESCRIPTOR.full_name}: {e}")

    return decode


def _check_decoded(request: Any) -> None:
    if isinstance(request, Malformed):
        raise RpcError(Code.BAD_REQUEST, request.reason)


class GrpcEndpoint:
    """The gRPC server of one broker.

    Args:
        config: the broker's settings.
        service: the unary handlers; ``consumers``: POP's unary handlers; ``receiver``:
            ReceiveMessage; ``streams``: Telemetry and PullMessage; ``clients``: sessions.
    """

    def __init__(
        self,
        config: BrokerConfig,
        service: MessagingService,
        streams: Streams,
        clients: GrpcClients,
        consumers: ConsumerRpcs,
        receiver: Receiver,
    ) -> None:
        self.config = config
        self.service = service
        self.streams = streams
        self.clients = clients
        self.consumers = consumers
        self.receiver = receiver
        self.port = -1
        self.calls: dict[tuple[str, int], int] = {}  # (rpc, status code) -> calls answered
        self._peers: dict[str, tuple[str, int]] = {}  # grpc's peer text -> (ip, port)
        self._server: grpc.aio.Server | None = None
        self.interceptors: list[grpc.aio.ServerInterceptor] = []  # ACL 2.0: rocketpy.grpc_api.auth
        self._routines: list[asyncio.Task[None]] = []

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, bind_address: str) -> int:
        """Listen on ``grpcServerPort`` (0: a free port); returns the port.

        Raises:
            OSError: the port cannot be bound, or the TLS files cannot be read.
        """
        c = self.config
        options = server_options(c)
        server = grpc.aio.server(options=options, interceptors=self.interceptors)
        server.add_generic_rpc_handlers((self._handlers(),))
        address = f"{bind_address}:{c.grpc_server_port}"
        try:
            if c.grpc_tls_cert_path and c.grpc_tls_key_path:
                key, cert = await asyncio.to_thread(_read_pair, c.grpc_tls_key_path, c.grpc_tls_cert_path)
                port = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
            else:
                port = server.add_insecure_port(address)
        except RuntimeError as e:  # grpc's "Failed to bind to address"
            raise OSError(f"cannot listen for gRPC on {address} (grpcServerPort): {e}") from e
        if port == 0:
            raise OSError(f"cannot listen for gRPC on {address} (grpcServerPort): in use or not allowed")
        await server.start()
        self._server, self.port = server, port
        loop = asyncio.get_running_loop()
        self._routines = [
            loop.create_task(self._sweep_routine(), name="rocketpy-grpc-sweep"),
            loop.create_task(self.consumers.renew.routine(), name="rocketpy-grpc-renew"),
        ]
        log.info("gRPC endpoint (RocketMQ 5 clients) on %s:%d%s", bind_address, port,
                 " with TLS" if c.grpc_tls_cert_path else "")  # fmt: skip
        return port

    async def shutdown(self, grace_s: float) -> None:
        """End client sessions (their Telemetry streams), then stop the server within ``grace_s``."""
        for task in self._routines:
            task.cancel()
        await asyncio.gather(*self._routines, return_exceptions=True)
        self._routines = []
        self.clients.close_all("the broker is shutting down")
        if self._server is not None:
            await self._server.stop(grace_s)

    async def _sweep_routine(self) -> None:
        idle_s = self.config.grpc_client_idle_time_mills / 1000.0
        while True:
            await asyncio.sleep(min(idle_s / 4, 10.0))
            self.clients.expire_idle(self.config.grpc_client_idle_time_mills / 1000.0)

    # -- dispatch -----------------------------------------------------------------------------

    def _handlers(self) -> grpc.GenericRpcHandler:
        table = {}
        for method in SERVICE.methods:
            req = _message_class(method.input_type.name)
            resp = _message_class(method.output_type.name)
            kwargs = {"request_deserializer": _decoder(req), "response_serializer": resp.SerializeToString}
            if method.client_streaming:
                table[method.name] = grpc.stream_stream_rpc_method_handler(self._telemetry, **kwargs)
            elif method.name == "ReceiveMessage":
                table[method.name] = grpc.unary_stream_rpc_method_handler(self._receive, **kwargs)
            elif method.server_streaming:
                table[method.name] = grpc.unary_stream_rpc_method_handler(
                    self._streamer(method.name, resp), **kwargs
                )
            else:
                table[method.name] = grpc.unary_unary_rpc_method_handler(
                    self._unary(method.name, resp), **kwargs
                )
        return grpc.method_handlers_generic_handler(SERVICE.full_name, table)

    def _call(self, context: grpc.aio.ServicerContext[Any, Any]) -> Call:
        meta = read_metadata(context.invocation_metadata())
        peer_text = context.peer()
        peer = self._peers.get(peer_text)
        if peer is None:  # a new connection: parsed once
            peer = peer_host_port(peer_text) or ("0.0.0.0", 0)
            if len(self._peers) >= MAX_PEERS:
                self._peers.clear()
            self._peers[peer_text] = peer
        client = self.clients.touch(meta.client_id, peer, meta.language)
        language = meta.language or "UNKNOWN"
        attrs = client.channel.attrs
        if attrs.get("language") != language:
            attrs["language"] = language
        return Call(meta, client, peer[0])

    def _count(self, rpc: str, code: int) -> None:
        key = (rpc, code)
        n = self.calls.get(key)
        if n is not None:
            self.calls[key] = n + 1
        elif len(self.calls) < MAX_COUNTED:
            self.calls[key] = 1

    def calls_by_name(self) -> dict[tuple[str, str], int]:
        """Calls answered, by (RPC, status code name), for the metrics."""
        return {(rpc, code_name(code)): n for (rpc, code), n in self.calls.items()}

    def _unary(self, name: str, resp_cls: type[Any]) -> Callable[[Any, Any], Awaitable[Any]]:
        handler = getattr(self.consumers, _snake(name), None) or getattr(self.service, _snake(name), None)
        reason = NOT_YET.get(name, "a later version")

        async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            try:
                _check_decoded(request)
                if handler is None:
                    raise RpcError(
                        Code.NOT_IMPLEMENTED, f"{name} needs {reason}, which this broker does not serve yet"
                    )
                response = await handler(request, self._call(context))
            except RpcError as e:
                response = resp_cls(status=e.status())
            except Exception as e:
                log.exception("gRPC %s from %s failed", name, context.peer())
                response = resp_cls(status=status(Code.INTERNAL_ERROR, f"{name} failed on the broker: {e}"))
            self._count(name, response.status.code)
            return response

        return unary

    def _streamer(self, name: str, resp_cls: type[Any]) -> Callable[[Any, Any], AsyncIterator[Any]]:
        reason = NOT_YET.get(name, "a later version")

        async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            try:
                _check_decoded(request)
                if name != "PullMessage":
                    raise RpcError(
                        Code.NOT_IMPLEMENTED, f"{name} needs {reason}, which this broker does not serve yet"
                    )
                responses = await self.streams.pull_message(request, self._call(context))
            except RpcError as e:
                responses = [resp_cls(status=e.status())]
            except Exception as e:
                log.exception("gRPC %s from %s failed", name, context.peer())
                responses = [
                    resp_cls(status=status(Code.INTERNAL_ERROR, f"{name} failed on the broker: {e}"))
                ]
            self._count(name, responses[0].status.code)
            for response in responses:
                yield response

        return stream

    async def _receive(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """ReceiveMessage: its stream is written by ``Receiver``; a refusal is a status entry."""
        try:
            _check_decoded(request)
            code = await self.receiver.receive_message(request, self._call(context), context)
        except RpcError as e:
            code = e.code
            await _refuse_receive(context, e.status())
        except Exception as e:
            log.exception("gRPC ReceiveMessage from %s failed", context.peer())
            code = Code.INTERNAL_ERROR
            await _refuse_receive(context, status(code, f"ReceiveMessage failed on the broker: {e}"))
        self._count("ReceiveMessage", code)

    async def _telemetry(self, request_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        try:
            call = self._call(context)
        except RpcError as e:
            await context.write(spb.TelemetryCommand(status=e.status()))
            self._count("Telemetry", e.code)
            return
        self._count("Telemetry", Code.OK)
        await self.streams.telemetry(context, call)


async def _refuse_receive(context: grpc.aio.ServicerContext[Any, Any], refusal: Any) -> None:
    await context.write(spb.ReceiveMessageResponse(status=refusal))
    done = spb.ReceiveMessageResponse()
    done.delivery_timestamp.GetCurrentTime()
    await context.write(done)


def server_options(c: BrokerConfig) -> list[tuple[str, Any]]:
    """The grpc server's channel arguments: the bounds of the config and the keepalive policy."""
    return [
        ("grpc.max_receive_message_length", c.grpc_max_inbound_message_size),
        ("grpc.max_send_message_length", c.grpc_max_inbound_message_size),
        ("grpc.max_concurrent_streams", c.grpc_max_concurrent_calls_per_connection),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.so_reuseport", 0),
    ]


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def _read_pair(key_path: str, cert_path: str) -> tuple[bytes, bytes]:
    return Path(key_path).read_bytes(), Path(cert_path).read_bytes()
