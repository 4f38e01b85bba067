"""ACL 2.0 on the gRPC endpoint: a ``grpc.aio`` server interceptor that authenticates every call
and authorizes what it asks for, as RocketMQ 5's proxy does.

**Authentication.** A 5.x client signs each call in its metadata: ``x-mq-date-time`` (a UTC
timestamp) and ``authorization: MQv2-HMAC-SHA1 Credential=USER[/...], SignedHeaders=x-mq-date-time,
Signature=HEX``, where HEX is ``hex(HmacSHA1(password, x-mq-date-time))`` (rocketmq-clients'
``Signature``; the proxy's ``DefaultAuthenticationContextBuilder`` takes the Credential up to its
first ``/`` as the username and compares the signatures). A call without a readable authorization,
of an unknown or disabled user, or with another signature is answered UNAUTHORIZED (40100).

**Authorization.** What a call needs follows RocketMQ's ``DefaultAuthorizationContextBuilder``:
SendMessage and EndTransaction Pub on the topic; QueryRoute Pub or Sub on it; ReceiveMessage,
AckMessage, ForwardMessageToDeadLetterQueue and QueryAssignment Sub on the group and the topic;
ChangeInvisibleDuration and NotifyClientTermination Sub on the group; Heartbeat of a consumer Sub
on its group. The RPCs RocketMQ's builder leaves out are given their remoting twins' needs
(PullMessage and GetOffset: Sub on group and topic, UpdateOffset: Sub or Update on both,
QueryOffset: Sub or Get on the topic, RecallMessage: Pub on the topic). A refusal is FORBIDDEN
(40300). Telemetry is authenticated when it opens, and each ``Settings`` the client sends on it
is authorized before the endpoint reads it (RocketMQ's ``newContext(TelemetryCommand)``): Pub on
each topic of ``publishing``, Sub on the group and each topic of ``subscription``; settings with
neither, or with a blank group or topic, are refused. A refused ``Settings`` ends the stream with
a FORBIDDEN status command (``SettingsRefused``, which the endpoint's reader answers).

Every refusal is the RPC's own response with that status (the proxy's rule, which the clients
read), never a raw gRPC error. The decision itself is the broker's (``checker``: its current ACL
2.0 users and ACLs, ``rocketpy.acl.auth_eval.AuthEvaluator.check_grpc``); this module owns the
metadata, the mapping of requests to resources and the answers. Installed only when
``authenticationEnabled=true``; each call then costs a metadata read, one HMAC and the checks.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, NamedTuple, Protocol

import grpc

from rocketpy.errors import RocketpyError
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb

log = logging.getLogger("rocketpy.broker.grpc")

AUTH_SCHEME = "MQv2-HMAC-SHA1"
#: Longest ``authorization`` value read (a longer one is refused unread).
MAX_AUTHORIZATION_CHARS = 1024
#: Refusals logged once per (peer address, reason), at most this many remembered.
MAX_LOGGED = 4096
_SERVICE = spb.DESCRIPTOR.services_by_name["MessagingService"]
_CONSUMER_TYPES = frozenset({pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER})


class Need(NamedTuple):
    """One resource a call touches and the actions of which one suffices (RocketMQ's context)."""

    type: str
    name: str
    actions: tuple[str, ...]


class Refusal(Protocol):
    """The checker's refusal: its reason, and a key that starts with ``perm:`` for a denial."""

    remark: str
    log_key: str


class Checker(Protocol):
    """The broker's ACL 2.0 decision for one call."""

    def check_grpc(
        self, ip: str, username: str | None, signature: str | None, date_time: str, needs: Iterable[Need]
    ) -> Refusal | None:
        """None when the call may go on."""
        ...


def parse_authorization(value: str) -> tuple[str | None, str | None]:
    """``(username, hex signature)`` of an ``authorization`` value (RocketMQ's parsing: the scheme,
    comma-separated ``key=value`` items, the Credential up to its first ``/``); ``(None, None)``
    when it is not RocketMQ 5's scheme."""
    scheme, _, rest = value.strip().partition(" ")
    if scheme != AUTH_SCHEME:
        return None, None
    user: str | None = None
    signature: str | None = None
    for item in rest.split(","):
        key, sep, val = item.strip().partition("=")
        if not sep:
            continue
        if key == "Credential":
            user = val.split("/", 1)[0]
        elif key == "Signature":
            signature = val
    return user, signature


def _topic_sub(group: Any, topic: Any, *extra: str) -> list[Need]:
    actions = ("Sub", *extra)
    return [Need("Group", group.name, actions), Need("Topic", topic.name, actions)]


def needs_of(method: str, request: Any) -> list[Need]:
    """What ``request`` of RPC ``method`` needs (module docstring); [] for an RPC that needs no
    resource, or a request that did not decode (the endpoint answers it BAD_REQUEST)."""
    r = request
    if not hasattr(r, "DESCRIPTOR"):
        return []
    if method == "SendMessage":
        return [Need("Topic", r.messages[0].topic.name, ("Pub",))] if r.messages else []
    if method in ("EndTransaction", "RecallMessage"):
        return [Need("Topic", r.topic.name, ("Pub",))]
    if method == "QueryRoute":
        return [Need("Topic", r.topic.name, ("Pub", "Sub"))]
    if method in ("ReceiveMessage", "PullMessage", "GetOffset"):
        return _topic_sub(r.group, r.message_queue.topic)
    if method == "UpdateOffset":
        return _topic_sub(r.group, r.message_queue.topic, "Update")
    if method == "QueryOffset":
        return [Need("Topic", r.message_queue.topic.name, ("Sub", "Get"))]
    if method in ("AckMessage", "ForwardMessageToDeadLetterQueue", "QueryAssignment"):
        return _topic_sub(r.group, r.topic)
    if method in ("ChangeInvisibleDuration", "NotifyClientTermination"):
        return [Need("Group", r.group.name, ("Sub",))]
    if method == "Heartbeat" and r.client_type in _CONSUMER_TYPES:
        return [Need("Group", r.group.name, ("Sub",))]
    if method == "Telemetry" and r.HasField("settings"):
        return settings_needs(r.settings)
    return []


def settings_needs(settings: pb.Settings) -> list[Need]:
    """What a Telemetry ``Settings`` needs: Pub on each published topic; Sub on the subscription's
    group and each of its topics.

    Raises:
        ValueError: the settings carry neither publishing nor subscription, or a blank name
            (RocketMQ refuses these too).
    """
    if not settings.HasField("publishing") and not settings.HasField("subscription"):
        raise ValueError("the settings carry neither publishing nor subscription")
    needs: list[Need] = []
    if settings.HasField("publishing"):
        needs.extend(Need("Topic", _named(t, "topic"), ("Pub",)) for t in settings.publishing.topics)
    if settings.HasField("subscription"):
        sub = settings.subscription
        needs.append(Need("Group", _named(sub.group, "group"), ("Sub",)))
        needs.extend(Need("Topic", _named(e.topic, "topic"), ("Sub",)) for e in sub.subscriptions)
    return needs


def _named(resource: pb.Resource, what: str) -> str:
    if not resource.name.strip():
        raise ValueError(f"the settings name a blank {what}")
    return resource.name


class SettingsRefused(RocketpyError):
    """A Telemetry ``Settings`` the caller may not send; ``status`` is the stream's answer."""

    def __init__(self, status: pb.Status) -> None:
        super().__init__(status.message)
        self.status = status


def _peer_ip(peer: str) -> str:
    """The address of grpc's peer text (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``)."""
    _, _, rest = peer.partition(":")
    host = rest.rpartition(":")[0] if ":" in rest else rest
    return host.strip("[]") or "0.0.0.0"


def _status(code: Any, message: str) -> Any:
    return pb.Status(code=code, message=message)


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Authenticates and authorizes every call of ``MessagingService`` (module docstring).

    Args:
        checker: the broker's current decision maker (called per call: it is swapped whole when
            users or ACLs change).
    """

    def __init__(self, checker: Callable[[], Checker]) -> None:
        self.checker = checker
        self._logged: set[tuple[str, str]] = set()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        service, _, method = details.method.lstrip("/").rpartition("/")
        if handler is None or service != _SERVICE.full_name or method not in _SERVICE.methods_by_name:
            return handler
        answer = getattr(spb, _SERVICE.methods_by_name[method].output_type.name)
        metadata = details.invocation_metadata
        codec = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            inner_uu = handler.unary_unary

            async def unary(request: Any, context: Any) -> Any:
                refused = self._refusal(method, request, metadata, context)
                if refused is not None:
                    return answer(status=refused)
                return await inner_uu(request, context)

            return grpc.unary_unary_rpc_method_handler(unary, **codec)
        if handler.unary_stream is not None:
            inner_us = handler.unary_stream

            async def unary_stream(request: Any, context: Any) -> None:
                refused = self._refusal(method, request, metadata, context)
                if refused is not None:
                    await _refuse_stream(context, answer, refused, method)
                    return
                await _relay(inner_us(request, context), context)

            return grpc.unary_stream_rpc_method_handler(unary_stream, **codec)
        if handler.stream_stream is not None:
            inner_ss = handler.stream_stream

            async def stream_stream(requests: Any, context: Any) -> None:
                refused = self._refusal(method, None, metadata, context)
                if refused is not None:
                    await context.write(answer(status=refused))
                    return

                def settings_refusal(command: Any) -> Any:
                    return self._refusal(method, command, metadata, context)

                await _relay(inner_ss(requests, _SettingsGate(context, settings_refusal)), context)

            return grpc.stream_stream_rpc_method_handler(stream_stream, **codec)
        return handler  # no client-streaming-only RPC in the service

    def _refusal(self, method: str, request: Any, metadata: Any, context: Any) -> Any:
        """The refusal status of a call (or of a Telemetry command), None when it may go on."""
        try:
            needs = needs_of(method, request)
        except ValueError as e:
            return _status(pb.Code.FORBIDDEN, f"access denied: {e}")
        values = dict(metadata or ())
        auth = values.get("authorization")
        date_time = values.get("x-mq-date-time", "")
        user = signature = None
        if isinstance(auth, str) and len(auth) <= MAX_AUTHORIZATION_CHARS:
            user, signature = parse_authorization(auth)
        if not isinstance(date_time, str):
            date_time = ""
        ip = _peer_ip(context.peer())
        refusal = self.checker().check_grpc(ip, user, signature, date_time, needs)
        if refusal is None:
            return None
        forbidden = refusal.log_key.startswith("perm:")
        key = (ip, refusal.log_key)
        if key not in self._logged:
            if len(self._logged) >= MAX_LOGGED:
                self._logged.clear()
            self._logged.add(key)
            log.warning("gRPC %s from %s refused: %s", method, ip, refusal.remark)
        code = pb.Code.FORBIDDEN if forbidden else pb.Code.UNAUTHORIZED
        return _status(code, f"access denied: {refusal.remark}")


class _SettingsGate:
    """A Telemetry call's context whose ``read`` authorizes each ``Settings`` command before the
    endpoint sees it (everything else is the call's own context)."""

    def __init__(self, context: Any, refusal: Callable[[Any], Any]) -> None:
        self._context = context
        self._refusal = refusal

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    async def read(self) -> Any:
        """The next command; raises ``SettingsRefused`` for settings the caller may not send."""
        command = await self._context.read()
        if isinstance(command, spb.TelemetryCommand) and command.HasField("settings"):
            refused = self._refusal(command)
            if refused is not None:
                raise SettingsRefused(refused)
        return command


async def _relay(result: Any, context: Any) -> None:
    """Run a stream handler of either style: an async generator (its items written here) or a
    coroutine that writes through ``context``."""
    if isinstance(result, AsyncIterator):
        async for item in result:
            await context.write(item)
    else:
        await result


async def _refuse_stream(context: Any, answer: Any, refused: Any, method: str) -> None:
    await context.write(answer(status=refused))
    if method == "ReceiveMessage":  # the clients wait for the delivery timestamp that ends a receive
        done = answer()
        done.delivery_timestamp.GetCurrentTime()
        await context.write(done)
