"""What the admin asks of a group's live clients, through the broker (RocketMQ's Broker2Client).

Handles INVOKE_BROKER_TO_RESET_OFFSET, INVOKE_BROKER_TO_GET_CONSUMER_STATUS, GET_CONSUMER_RUNNING_INFO,
CONSUME_MESSAGE_DIRECTLY and GET_PRODUCER_CONNECTION_LIST. The broker calls each client on the
client's own connection (RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_STATUS_FROM_CLIENT, and 307 / 309
forwarded) and reports every client's answer: a client that does not answer within the call's
timeout is reported as ``NO_ANSWER`` and the others are still reported. Calls to the clients of a
group run concurrently, one per connection (a process's consumers share one).

A reset commits the new offsets in the broker after the clients answered: by then each client that
answered has dropped what it held of the topic and restarts from the new offsets, and whatever it
committed before its answer reached the broker first (one connection, in order), so no commit of
the old position can land after the reset. RocketMQ's own clients (which answer a reset with
nothing) get RocketMQ's body, oneway, as RocketMQ's broker sends it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from rocketpy.broker.consumer_manager import ClientChannelInfo, ConsumerManager
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.processors.body import encode
from rocketpy.broker.store import Store
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig
from rocketpy.errors import HeaderError, RocketpyError
from rocketpy.message import MessageQueue
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.protocol.codes import RequestCode, ResponseCode, response_name
from rocketpy.protocol.headers.clients import (
    NO_ANSWER,
    RESET_TO_MAX,
    ConsumeMessageDirectlyRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    ProducerGroupRequestHeader,
    ResetOffsetRequestHeader,
    fastjson_offset_table,
    offset_rows,
)
from rocketpy.remoting.body import decode_body, encode_body
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel

log = logging.getLogger("rocketpy.broker.clients")

#: What one client's call came to: ``{"clientId", "result": "OK" | NO_ANSWER | error text, ...}``.
Outcome = dict[str, Any]


class ClientCallsProcessor:
    """Handles the admin's calls that reach a group's live clients.

    Args:
        broker_config: the broker's name.
        topic_config: the topic table (a reset's queues).
        consumer_manager: the live groups and their connections.
        offsets: the committed offsets (a reset's last step).
        store: queue offsets by time, and the record a CONSUME_MESSAGE_DIRECTLY runs.
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        topic_config: TopicConfigManager,
        consumer_manager: ConsumerManager,
        offsets: ConsumerOffsetManager,
        store: Store,
    ) -> None:
        self.broker_config = broker_config
        self.topic_config = topic_config
        self.consumer_manager = consumer_manager
        self.offsets = offsets
        self.store = store

    # ---- resetOffsetByTime ---------------------------------------------------------------------

    def reset_targets(self, h: ResetOffsetRequestHeader) -> dict[MessageQueue, int]:
        """Each readable queue's new offset: the first message stored at ``h.timestamp`` (the
        queue's end for ``RESET_TO_MAX``); without ``is_force`` an offset only moves back."""
        tc = self.topic_config.get(h.topic)
        assert tc is not None
        out: dict[MessageQueue, int] = {}
        for qid in range(tc.read_queue_nums):
            if h.timestamp == RESET_TO_MAX:
                target = self.store.get_max_offset_in_queue(h.topic, qid)
            else:
                target = self.store.get_offset_in_queue_by_time(h.topic, qid, h.timestamp)
            current = self.offsets.query_offset(h.group, h.topic, qid)
            keep = not h.is_force and 0 <= current <= target
            out[MessageQueue(h.topic, self.broker_config.broker_name, qid)] = (
                current if keep else max(0, target)
            )
        return out

    async def invoke_reset_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET: tell the group's clients, then commit the new offsets."""
        h = ResetOffsetRequestHeader.from_ext(request.ext)
        if self.topic_config.get(h.topic) is None:
            return RemotingCommand.response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] does not exist on this broker"
            )
        targets = self.reset_targets(h)
        body = {"offsetTable": offset_rows(targets)}
        ext = ResetOffsetRequestHeader(h.topic, h.group, h.timestamp, h.is_force).to_ext()

        async def reset(ci: ClientChannelInfo) -> Any:
            if not ci.answers_calls:  # RocketMQ's clients: oneway, RocketMQ's body
                cmd = RemotingCommand.request(
                    RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, fastjson_offset_table(targets.items())
                )
                ci.channel.send_oneway(cmd)
                return {"result": "sent (RocketMQ clients do not answer)"}
            return await self._invoke(ci, RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body, h.timeout_ms)

        clients = await self._each_client(self.consumer_manager.clients_of(h.group), reset)
        for mq, offset in targets.items():
            self.offsets.commit_offset(h.group, mq.topic, mq.queue_id, offset)
        log.info("offsets of %s on %s reset to %s; clients: %s", h.group, h.topic, body, clients)
        return RemotingCommand.response(request, body=encode({**body, "clients": clients}, request))

    async def invoke_get_consumer_status(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: each live client's offsets of the topic."""
        h = GetConsumerStatusRequestHeader.from_ext(request.ext)
        ext = GetConsumerStatusRequestHeader(h.topic, h.group).to_ext()
        clients = [
            ci for ci in self.consumer_manager.clients_of(h.group) if h.client_addr in (None, ci.client_id)
        ]

        async def status(ci: ClientChannelInfo) -> Any:
            return await self._invoke(
                ci, RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext, None, h.timeout_ms
            )

        outcomes = await self._each_client(clients, status)
        return RemotingCommand.response(request, body=encode({"consumerTable": outcomes}, request))

    # ---- one client's running info / a message run on it -----------------------------------

    async def get_consumer_running_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: forwarded to the named client; its ConsumerRunningInfo."""
        h = GetConsumerRunningInfoRequestHeader.from_ext(request.ext)
        return await self._forward(request, h.group, h.client_id, request.ext or {}, b"", h.timeout_ms)

    async def consume_message_directly(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY: the stored record forwarded to the named client, which runs
        its listener on it; its ConsumeMessageDirectlyResult."""
        h = ConsumeMessageDirectlyRequestHeader.from_ext(request.ext)
        try:
            _ip, _port, offset = decode_offset_msg_id(h.msg_id)
        except ValueError:
            raise HeaderError(f"msgId {h.msg_id!r} is not an offset msg id (32 hex chars)") from None
        record = self.store.lookup_message_by_offset(offset)
        if record is None:
            return RemotingCommand.response(
                request, ResponseCode.SYSTEM_ERROR, f"no message {h.msg_id} is stored on this broker"
            )
        ext = {**(request.ext or {}), "brokerName": self.broker_config.broker_name}
        return await self._forward(request, h.group, h.client_id, ext, record, h.timeout_ms)

    async def _forward(
        self, request: RemotingCommand, group: str, client_id: str, ext: dict[str, Any], body: bytes,
        timeout_ms: int,
    ) -> RemotingCommand:  # fmt: skip
        client = next(
            (ci for ci in self.consumer_manager.clients_of(group) if ci.client_id == client_id), None
        )
        if client is None:
            online = [ci.client_id for ci in self.consumer_manager.clients_of(group)] or "none"
            remark = f"client {client_id} of group {group} is not connected to this broker (online: {online})"
            return RemotingCommand.response(request, ResponseCode.CONSUMER_NOT_ONLINE, remark)
        cmd = RemotingCommand.request(request.code, dict(ext), body)
        try:
            answer = await client.channel.invoke(cmd, timeout_ms / 1000)
        except RocketpyError as e:
            return RemotingCommand.response(
                request, ResponseCode.SYSTEM_ERROR, f"{client_id}: {NO_ANSWER} ({e})"
            )
        if answer.code != ResponseCode.SUCCESS:
            return RemotingCommand.response(request, answer.code, f"{client_id}: {answer.remark}")
        doc = decode_body(answer.body, answer.serialize_type, "client answer") if answer.body else {}
        return RemotingCommand.response(request, body=encode(doc, request))

    # ---- producers ----------------------------------------------------------------------------

    def get_producer_connections(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST: the producer group's clients (RocketMQ's ProducerConnection)."""
        group = ProducerGroupRequestHeader.from_ext(request.ext).group
        members = self.consumer_manager.producers.get(group)
        if not members:
            return RemotingCommand.response(
                request, ResponseCode.SYSTEM_ERROR, f"no producer of group [{group}] is online at this broker"
            )
        body = {"connectionSet": [connection_doc(ci) for _cid, ci in sorted(members.items())]}
        return RemotingCommand.response(request, body=encode(body, request))

    # ---- calling clients --------------------------------------------------------------------

    async def _invoke(
        self, ci: ClientChannelInfo, code: int, ext: dict[str, Any], body: Any, timeout_ms: int
    ) -> Outcome:
        """One call on ``ci``'s connection; its body as the outcome (or what went wrong)."""
        raw = encode_body(body, ci.channel.serialize_type) if body is not None else b""
        try:
            answer = await ci.channel.invoke(RemotingCommand.request(code, ext, raw), timeout_ms / 1000)
        except RocketpyError as e:
            return {"result": NO_ANSWER, "error": str(e)}
        if answer.code != ResponseCode.SUCCESS:
            return {"result": f"{response_name(answer.code)}: {answer.remark}"}
        try:
            doc = decode_body(answer.body, answer.serialize_type, "client answer") if answer.body else {}
        except HeaderError as e:
            return {"result": f"unreadable answer: {e}"}
        return {"result": "OK", **(doc if isinstance(doc, dict) else {"answer": doc})}

    @staticmethod
    async def _each_client(
        clients: list[ClientChannelInfo], call: Callable[[ClientChannelInfo], Awaitable[Any]]
    ) -> list[Outcome]:
        """``call`` once per connection (concurrently), each client id reported with its outcome."""
        by_channel: dict[int, list[ClientChannelInfo]] = {}
        for ci in clients:
            by_channel.setdefault(id(ci.channel), []).append(ci)
        firsts = [group[0] for group in by_channel.values()]
        results = await asyncio.gather(*(call(ci) for ci in firsts), return_exceptions=True)
        outcomes: list[Outcome] = []
        for group, result in zip(by_channel.values(), results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                result = {"result": NO_ANSWER, "error": str(result)}
            for ci in group:
                outcomes.append({"clientId": ci.client_id, "clientAddr": ci.channel.remote_addr, **result})
        return sorted(outcomes, key=lambda o: o["clientId"])


def connection_doc(ci: ClientChannelInfo) -> dict[str, Any]:
    """RocketMQ's Connection of a client: id, address, language and version."""
    return {
        "clientId": ci.client_id,
        "clientAddr": ci.channel.remote_addr,
        "language": ci.language or ci.channel.attrs.get("language", "PYTHON"),
        "versionDesc": ci.version,
    }
