"""The unary RPCs of ``MessagingService`` other than POP consumption's (``consumers.py``).

Each handler takes the request and the ``Call`` (who is calling), and either returns the response
message (its ``status`` OK) or raises ``RpcError`` (the server turns it into the response with
that status). Messages and offsets go through the broker's own processors as remoting commands
(``Call.channel.call``), so the send checks, the delivery-time and transaction services, long
polling, the offset table, statistics and the ACL's permission rules are the ones remoting uses.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rocketpy.acl.validator import AccessValidator
from rocketpy.broker.grpc.clients import GrpcClient, GrpcClients
from rocketpy.broker.grpc.convert import TOPIC_TYPES, MessageType, SendPlan
from rocketpy.broker.grpc.metadata import CallMeta
from rocketpy.broker.grpc.routes import RouteSource, message_queues
from rocketpy.broker.grpc.sendrun import SendRuns
from rocketpy.broker.grpc.status import Code, RpcError, code_of_response, set_ok, status
from rocketpy.broker.store import MessageStore
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.timer.service import TimerMessageService
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb
from rocketpy.message import MessageExt
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.offset import (
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketpy.protocol.headers.send import SendMessageRequestHeader
from rocketpy.protocol.headers.transaction import EndTransactionRequestHeader, TransactionDecision
from rocketpy.record import decode_record
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.processor import Handler, RunHandler

log = logging.getLogger("rocketpy.broker.grpc")

#: Messages one SendMessage request may carry (RocketMQ's proxy bounds the request's bytes only).
MAX_SEND_ENTRIES = 1024
_OK = int(Code.OK)
_TRANSACTION = int(MessageType.TRANSACTION)
_DELAY = int(MessageType.DELAY)
_NORMAL = int(MessageType.NORMAL)
_EVERY_TYPE = TOPIC_TYPES["MIXED"]
_DECISIONS = {
    pb.TransactionResolution.COMMIT: TransactionDecision.COMMIT,
    pb.TransactionResolution.ROLLBACK: TransactionDecision.ROLLBACK,
}


@dataclass(slots=True)
class Call:
    """One call: its client's metadata, session and address."""

    meta: CallMeta
    client: GrpcClient
    peer_ip: str


def ok(response: Any) -> Any:
    """``response`` with its ``status`` set to OK."""
    set_ok(response.status)
    return response


def consumer_probe(group: str, topic: str) -> RemotingCommand:
    """What the ACL checks for a consumer's RPC (ReceiveMessage, AckMessage, ...): POP_MESSAGE's
    rule, SUB on the topic and the group (ACK and CHANGE_MESSAGE_INVISIBLETIME have the same)."""
    return RemotingCommand.request(RequestCode.POP_MESSAGE, {"consumerGroup": group, "topic": topic})


class MessagingService:
    """The handlers, over the broker's managers and its request-code -> handler table.

    Args:
        broker_config, store_config: the broker's settings (live).
        handlers: the broker's processor table (request code -> handler).
        topics: the topic table (message types, queue counts).
        store: the message store (half messages read back by EndTransaction).
        subscription_groups: the group table (FIFO flag, retry policy).
        routes: topic routes from the NameServers.
        clients: the gRPC client sessions.
        acl: the ACL rules in force (None: ACL off).
        timer: the broker's timer (delayed messages; None until it runs or when it is off).
        send_run: the send processor's run handler (``SendMessageProcessor.handle_run``), when
            ``handlers`` sends with that processor (not on a slave).
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        handlers: dict[int, Handler],
        topics: TopicConfigManager,
        store: MessageStore,
        subscription_groups: SubscriptionGroupManager,
        routes: RouteSource,
        clients: GrpcClients,
        acl: Callable[[], AccessValidator | None],
        timer: Callable[[], TimerMessageService | None] = lambda: None,
        send_run: RunHandler | None = None,
    ) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.handlers = handlers
        self.topics = topics
        self.store = store
        self.subscription_groups = subscription_groups
        self.routes = routes
        self.clients = clients
        self.acl = acl
        self.timer = timer
        #: plain sends of one tick stored together (None: each alone, through ``handlers``)
        self._runs = SendRuns(send_run) if send_run is not None else None

    # -- access control -----------------------------------------------------------------------

    def check_access(self, call: Call, request: RemotingCommand | None = None) -> None:
        """With ACL on: the call's signature, then what ``request`` needs (None: signature only).

        Raises:
            RpcError: UNAUTHORIZED (no or unknown account, bad signature) or FORBIDDEN.
        """
        validator = self.acl()
        if validator is None:
            return
        m = call.meta
        refusal = validator.check_grpc(call.peer_ip, m.access_key, m.signature, m.date_time, request)
        if refusal is None:
            return
        code = Code.FORBIDDEN if refusal.log_key.startswith(("perm:", "admin:")) else Code.UNAUTHORIZED
        raise RpcError(code, refusal.remark)

    async def call(self, call: Call, request: RemotingCommand) -> RemotingCommand:
        """Run ``request`` through the broker's processor for its code, after the ACL's check."""
        self.check_access(call, request)
        return await call.client.channel.call(self.handlers[request.code], request)

    # -- routes and clients -------------------------------------------------------------------

    def accepted_types(self, topic: str) -> list[int]:
        """The message types ``topic`` accepts (its ``message.type`` attribute; unset: every type)."""
        tc = self.topics.get(topic)
        kind = tc.attributes.get("message.type", "") if tc is not None else ""
        return sorted(TOPIC_TYPES.get(kind.upper(), TOPIC_TYPES["MIXED"]))

    async def query_route(self, request: spb.QueryRouteRequest, call: Call) -> spb.QueryRouteResponse:
        """The topic's queues, each with its broker's gRPC endpoint."""
        self.check_access(call)
        topic = request.topic.name
        if not topic:
            raise RpcError(Code.ILLEGAL_TOPIC, "QueryRoute needs a topic name")
        route = await self.routes.route(topic)
        queues = message_queues(topic, route, self.accepted_types(topic))
        if not queues:
            raise RpcError(Code.TOPIC_NOT_FOUND, f"no broker serving gRPC holds topic {topic!r}")
        return ok(spb.QueryRouteResponse(message_queues=queues))

    async def heartbeat(self, request: spb.HeartbeatRequest, call: Call) -> spb.HeartbeatResponse:
        """Keep the client's session and its group entries alive."""
        self.check_access(call)
        client = call.client
        if request.client_type:
            client.client_type = request.client_type
        if request.HasField("group") and request.group.name:
            client.group = request.group.name
        answer = self.clients.heartbeat(client)
        if answer.code != ResponseCode.SUCCESS:
            raise RpcError(code_of_response(answer.code), answer.remark or "heartbeat refused")
        return ok(spb.HeartbeatResponse())

    async def notify_client_termination(
        self, request: spb.NotifyClientTerminationRequest, call: Call
    ) -> spb.NotifyClientTerminationResponse:
        """The client is shutting down: leave its groups and end its session."""
        self.check_access(call)
        self.clients.terminate(call.client.channel.client_id, "the client terminated")
        return ok(spb.NotifyClientTerminationResponse())

    # -- sending ------------------------------------------------------------------------------

    async def send_message(self, request: spb.SendMessageRequest, call: Call) -> spb.SendMessageResponse:
        """Store each message (normal, FIFO, delay or transactional); one entry per message.

        The plain messages (``_plain``) go to ``SendRuns``: with the other calls' of this tick
        they are stored by one append per queue. The others are sent one after another, in order.
        """
        messages = request.messages
        if not messages:
            raise RpcError(Code.BAD_REQUEST, "SendMessage carries no message")
        if len(messages) > MAX_SEND_ENTRIES:
            raise RpcError(Code.BAD_REQUEST, f"SendMessage carries more than {MAX_SEND_ENTRIES} messages")
        response = spb.SendMessageResponse()
        entries = response.entries
        if len(messages) == 1:
            started = self._start_send(messages[0], call, entries.add())
            if started is not None:
                await self._finish_send(*started)
        else:
            await self._send_all(messages, call, entries)
        failed: pb.Status | None = None
        for entry in entries:
            if entry.status.code != _OK:
                failed = entry.status
                break
        if failed is not None:
            response.status.CopyFrom(failed)
        else:
            set_ok(response.status)
        return response

    async def _send_all(self, messages: Any, call: Call, entries: Any) -> None:
        # entries are filled in place: no entry built and then copied in
        rest = iter([self._start_send(msg, call, entries.add()) for msg in messages])
        try:
            for item in rest:
                if item is not None:
                    await self._finish_send(*item)
        finally:
            for item in rest:  # a failure left these unawaited: no warning, no leak
                if item is not None:
                    pending = item[2]
                    if isinstance(pending, asyncio.Future):
                        pending.cancel()
                    else:
                        pending.close()

    def _start_send(
        self, msg: pb.Message, call: Call, entry: spb.SendResultEntry
    ) -> tuple[spb.SendResultEntry, SendPlan, Any] | None:
        """Check ``msg`` and start its send: (entry, plan, the answer to await), or None when it is
        refused already (``entry`` says why). A plain message is submitted to this tick's run now;
        another's send is a coroutine that starts when awaited."""
        try:
            plan = SendPlan.from_proto(msg, self.broker_config, self.store_config.max_message_size)
            self._check_type(plan)
        except RpcError as e:
            entry.message_id = msg.system_properties.message_id
            entry.status.CopyFrom(e.status())
            return None
        entry.message_id = plan.message_id
        runs = self._runs
        # a normal message (no message group, delivery time or transaction) joins this tick's run
        plain = runs is not None and plan.sys_flag == 0 and plan.message_type == _NORMAL
        if plain and runs is not None:
            tc = self.topics.get(plan.topic)
            count = tc.write_queue_nums if tc is not None else 0
            queue_id = runs.queue(plan.topic, count) if count > 0 else -1  # unknown: the processor's
        else:
            queue_id = self._queue_for(plan)
        header = SendMessageRequestHeader(
            plan.topic, plan.topic, queue_id, plan.properties,
            sys_flag=plan.sys_flag, born_timestamp=plan.born_timestamp,
        )  # fmt: skip
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext(), plan.body)
        if not plain or runs is None:
            return entry, plan, self.call(call, request)
        try:
            self.check_access(call, request)
        except RpcError as e:
            entry.status.CopyFrom(e.status())
            return None
        return entry, plan, runs.submit(call.client.channel, request)

    async def _finish_send(
        self, entry: spb.SendResultEntry, plan: SendPlan, pending: Awaitable[RemotingCommand]
    ) -> None:
        try:
            answer = await pending
        except RpcError as e:
            entry.status.CopyFrom(e.status())
            return
        if answer.code != ResponseCode.SUCCESS:
            remark = answer.remark or ResponseCode(answer.code).name
            entry.status.CopyFrom(status(code_of_response(answer.code), remark))
            return
        ext = answer.ext or {}  # the send processor's SendMessageResponseHeader.pack, read as written
        set_ok(entry.status)
        entry.offset = int(ext.get("queueOffset", 0))
        if plan.message_type == _TRANSACTION:
            entry.transaction_id = ext.get("msgId", "")  # the half message's offset msg id (EndTransaction)
        elif plan.message_type == _DELAY and self.timer() is not None:
            entry.recall_handle = recall_handle(
                plan.topic, self.broker_config.broker_name, ext.get("msgId", ""), plan.message_id
            )

    async def recall_message(
        self, request: spb.RecallMessageRequest, call: Call
    ) -> spb.RecallMessageResponse:
        """Cancel a delayed message that is still waiting, by the recall handle its send answered."""
        topic = request.topic.name
        probe = SendMessageRequestHeader(topic, topic, 0).to_ext()
        self.check_access(call, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, probe))
        handle_topic, broker_name, offset_msg_id, message_id = parse_recall_handle(request.recall_handle)
        if handle_topic != topic:
            raise RpcError(
                Code.BAD_REQUEST, f"the recall handle is for topic {handle_topic!r}, not {topic!r}"
            )
        if broker_name != self.broker_config.broker_name:
            raise RpcError(Code.NOT_FOUND, f"the message is on broker {broker_name!r}; recall it there")
        timer = self.timer()
        if timer is None:
            raise RpcError(Code.NOT_IMPLEMENTED, "this broker has no timer (timerWheelEnable=false)")
        why = await timer.recall(_offset_of(offset_msg_id), message_id)
        if why is not None:
            raise RpcError(Code.NOT_FOUND, f"message {message_id} cannot be recalled: {why}")
        return ok(spb.RecallMessageResponse(message_id=message_id))

    def _check_type(self, plan: SendPlan) -> None:
        if not self.broker_config.enable_topic_message_type_check:
            return
        tc = self.topics.get(plan.topic)
        kind = tc.attributes.get("message.type", "") if tc is not None else ""
        if plan.message_type not in TOPIC_TYPES.get(kind.upper(), _EVERY_TYPE):
            names = ", ".join(MessageType(t).name for t in self.accepted_types(plan.topic))
            raise RpcError(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"topic {plan.topic!r} accepts {names} messages, not {MessageType(plan.message_type).name}",
            )

    def _queue_for(self, plan: SendPlan) -> int:
        """A FIFO message's queue: fixed by its group's hash; others: any (-1, the processor picks)."""
        if not plan.message_group:
            return -1
        tc = self.topics.get(plan.topic)
        count = tc.write_queue_nums if tc is not None else self.broker_config.default_topic_queue_nums
        return zlib.crc32(plan.message_group.encode()) % max(count, 1)

    async def end_transaction(
        self, request: spb.EndTransactionRequest, call: Call
    ) -> spb.EndTransactionResponse:
        """Commit or roll back a half message, by the transaction id its send answered."""
        decision = _DECISIONS.get(request.resolution)
        if decision is None:
            raise RpcError(Code.BAD_REQUEST, "EndTransaction needs resolution COMMIT or ROLLBACK")
        commitlog_offset = _offset_of(request.transaction_id)
        record = self._half_record(commitlog_offset, request.transaction_id)
        header = EndTransactionRequestHeader(
            record.properties.get("PGROUP", request.topic.name), record.queue_offset, commitlog_offset,
            decision, request.source == pb.TransactionSource.SOURCE_SERVER_CHECK, request.message_id,
            request.transaction_id,
        )  # fmt: skip
        answer = await self.call(call, RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext()))
        if answer.code != ResponseCode.SUCCESS:
            raise RpcError(code_of_response(answer.code), answer.remark or "transaction not ended")
        return ok(spb.EndTransactionResponse())

    def _half_record(self, commitlog_offset: int, transaction_id: str) -> MessageExt:
        raw = self.store.lookup_message_by_offset(commitlog_offset)
        if raw is None:
            raise RpcError(
                Code.INVALID_TRANSACTION_ID,
                f"transaction {transaction_id!r}: no half message at its offset on this broker",
            )
        return decode_record(raw)

    # -- offsets and pulls (the 5.x PullConsumer) ---------------------------------------------

    async def get_offset(self, request: spb.GetOffsetRequest, call: Call) -> spb.GetOffsetResponse:
        """The group's committed offset of one queue."""
        mq = request.message_queue
        header = QueryConsumerOffsetRequestHeader(request.group.name, mq.topic.name, mq.id, False)
        answer = await self.call(
            call, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
        )
        if answer.code != ResponseCode.SUCCESS:
            raise RpcError(code_of_response(answer.code), answer.remark or "no offset")
        return ok(spb.GetOffsetResponse(offset=OffsetResponseHeader.from_ext(answer.ext).offset))

    async def update_offset(self, request: spb.UpdateOffsetRequest, call: Call) -> spb.UpdateOffsetResponse:
        """Commit the group's offset of one queue."""
        mq = request.message_queue
        if request.offset < 0:
            raise RpcError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        header = UpdateConsumerOffsetRequestHeader(request.group.name, mq.topic.name, mq.id, request.offset)
        answer = await self.call(
            call, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
        )
        if answer.code != ResponseCode.SUCCESS:
            raise RpcError(code_of_response(answer.code), answer.remark or "offset not stored")
        return ok(spb.UpdateOffsetResponse())

    async def query_offset(self, request: spb.QueryOffsetRequest, call: Call) -> spb.QueryOffsetResponse:
        """A queue's first or next offset, or the first offset stored at or after a time."""
        mq = request.message_queue
        policy = request.query_offset_policy
        if policy == pb.QueryOffsetPolicy.TIMESTAMP:
            ts = request.timestamp.ToMilliseconds() if request.HasField("timestamp") else 0
            code = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
            ext = SearchOffsetRequestHeader(mq.topic.name, mq.id, ts).to_ext()
        else:
            end = policy == pb.QueryOffsetPolicy.END
            code = RequestCode.GET_MAX_OFFSET if end else RequestCode.GET_MIN_OFFSET
            ext = QueueRequestHeader(mq.topic.name, mq.id).to_ext()
        answer = await self.call(call, RemotingCommand.request(code, ext))
        if answer.code != ResponseCode.SUCCESS:
            raise RpcError(code_of_response(answer.code), answer.remark or "no offset")
        return ok(spb.QueryOffsetResponse(offset=OffsetResponseHeader.from_ext(answer.ext).offset))


def recall_handle(topic: str, broker_name: str, offset_msg_id: str, message_id: str) -> str:
    """The recall handle of a delayed message (as RocketMQ's: ``v1`` and its fields, base64url)."""
    return base64.urlsafe_b64encode(
        f"v1 {topic} {broker_name} {offset_msg_id} {message_id}".encode()
    ).decode()


def parse_recall_handle(handle: str) -> tuple[str, str, str, str]:
    """``(topic, broker name, offset msg id, message id)`` of a recall handle.

    Raises:
        RpcError: BAD_REQUEST when it is not one this broker gives.
    """
    try:
        version, topic, broker_name, offset_msg_id, message_id = (
            base64.urlsafe_b64decode(handle.encode()).decode().split(" ")
        )
    except (ValueError, UnicodeError) as e:
        raise RpcError(Code.BAD_REQUEST, "the recall handle is not one a rocketpy broker gave") from e
    if version != "v1":
        raise RpcError(Code.BAD_REQUEST, f"recall handle version {version!r} is not v1")
    return topic, broker_name, offset_msg_id, message_id


def _offset_of(transaction_id: str) -> int:
    try:
        return decode_offset_msg_id(transaction_id)[2]
    except (ValueError, IndexError) as e:
        raise RpcError(
            Code.INVALID_TRANSACTION_ID, f"transaction id {transaction_id!r} is not one this broker gave"
        ) from e
