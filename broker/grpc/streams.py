"""The streaming RPCs: Telemetry (both ways) and PullMessage (server stream).

**Telemetry.** A client opens one stream per endpoint and writes its ``Settings``; the broker
answers with its own settings (``server_settings``: the publishing limits, the group's retry
policy and FIFO flag) and keeps the stream as the way to reach the client unasked:
``RecoverOrphanedTransactionCommand`` for the transaction check (the check service's oneway
CHECK_TRANSACTION_STATE to the client's ``GrpcChannel`` lands in ``recover_orphaned``), and the
admin commands ``PrintThreadStackTraceCommand`` / ``VerifyMessageCommand`` (``ask``), whose
answers the reader matches by nonce. A stream that sends no settings within
``grpcSettingsTimeoutMills`` gets a BAD_REQUEST status and ends; one stream's outbox holds at most
``MAX_OUTBOX`` commands (a check that finds it full is repeated by the next check round).

**PullMessage** is PULL_MESSAGE through the broker's pull processor (long polling included): the
status, then each message, then the next offset.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import grpc

from rocketpy.broker.grpc.channel import GrpcChannel
from rocketpy.broker.grpc.clients import MAX_OUTBOX, GrpcClient, GrpcClients
from rocketpy.broker.grpc.convert import to_proto
from rocketpy.broker.grpc.service import Call, MessagingService
from rocketpy.broker.grpc.status import Code, RpcError, code_of_response, status
from rocketpy.config import parse_delay_levels
from rocketpy.grpc_api.auth import SettingsRefused
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.pull import PullMessageRequestHeader, PullMessageResponseHeader
from rocketpy.protocol.headers.transaction import CheckTransactionStateRequestHeader
from rocketpy.record import decode_record, decode_records
from rocketpy.remoting.command import RemotingCommand
from rocketpy.sysflag import FLAG_SUBSCRIPTION, FLAG_SUSPEND

log = logging.getLogger("rocketpy.broker.grpc")

#: Admin questions (thread stack, verify message) waiting for a client's answer, in total.
MAX_PENDING_ASKS = 1024
#: Messages one PullMessage returns at most (RocketMQ's proxy caps a pull batch at 32 as well).
MAX_PULL_BATCH = 32
#: A retry policy lists at most this many backoff steps.
MAX_BACKOFF_STEPS = 32


class Streams:
    """Telemetry and PullMessage over one ``MessagingService``."""

    def __init__(self, service: MessagingService, clients: GrpcClients) -> None:
        self.service = service
        self.clients = clients
        self._asks: dict[str, asyncio.Future[spb.TelemetryCommand]] = {}

    # -- Telemetry ----------------------------------------------------------------------------

    async def telemetry(self, context: grpc.aio.ServicerContext[Any, Any], call: Call) -> None:
        """Serve one Telemetry stream until the client closes it or its session ends."""
        client = call.client
        outbox: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue(MAX_OUTBOX + 1)
        previous = client.outbox
        client.outbox = outbox
        client.streams += 1
        reader = asyncio.get_running_loop().create_task(self._read_commands(context, call, outbox))
        try:
            while (command := await outbox.get()) is not None:
                await context.write(command)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            client.streams -= 1
            if client.outbox is outbox:
                client.outbox = previous if previous is not None and client.streams else None

    async def _read_commands(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        call: Call,
        outbox: asyncio.Queue[spb.TelemetryCommand | None],
    ) -> None:
        settled = False
        timeout_s = self.service.broker_config.grpc_settings_timeout_mills / 1000.0
        try:
            while True:
                if settled:
                    command = await context.read()
                else:
                    async with asyncio.timeout(timeout_s):
                        command = await context.read()
                if command is grpc.aio.EOF:
                    break
                if not isinstance(command, spb.TelemetryCommand):  # the server's Malformed
                    raise RpcError(Code.BAD_REQUEST, getattr(command, "reason", "not a TelemetryCommand"))
                call.client.last_seen = time.monotonic()
                reply = self._on_command(command, call)
                settled = settled or command.HasField("settings")
                if reply is not None and not outbox.full():
                    outbox.put_nowait(reply)
        except TimeoutError:
            refusal = spb.TelemetryCommand(
                status=status(Code.BAD_REQUEST, f"no settings within {timeout_s:g} s of opening Telemetry")
            )
            outbox.put_nowait(refusal)
        except RpcError as e:
            outbox.put_nowait(spb.TelemetryCommand(status=e.status()))
        except SettingsRefused as e:  # ACL 2.0 (rocketpy.grpc_api.auth): the stream ends FORBIDDEN
            outbox.put_nowait(spb.TelemetryCommand(status=e.status))
        finally:
            while outbox.full():
                outbox.get_nowait()
            outbox.put_nowait(None)

    def _on_command(self, command: spb.TelemetryCommand, call: Call) -> spb.TelemetryCommand | None:
        kind = command.WhichOneof("command")
        if kind == "settings":
            return self._on_settings(command.settings, call)
        if kind in ("thread_stack_trace", "verify_message_result"):
            nonce = getattr(command, kind).nonce
            waiter = self._asks.pop(nonce, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(command)
            return None
        return spb.TelemetryCommand(
            status=status(Code.BAD_REQUEST, f"a client does not send {kind or 'nothing'}")
        )

    def _on_settings(self, settings: pb.Settings, call: Call) -> spb.TelemetryCommand:
        self.service.check_access(call)
        client = call.client
        self.clients.apply_settings(client, settings)
        answer = self.clients.heartbeat(client)
        if answer.code != ResponseCode.SUCCESS:
            return spb.TelemetryCommand(
                status=status(code_of_response(answer.code), answer.remark or "refused")
            )
        return spb.TelemetryCommand(status=status(), settings=self.server_settings(client))

    def server_settings(self, client: GrpcClient) -> pb.Settings:
        """The settings the broker answers a client's with."""
        out = pb.Settings()
        if client.settings is not None:
            out.CopyFrom(client.settings)
        out.metric.on = False
        bc = self.service.broker_config
        if client.is_consumer:
            self._consumer_settings(client, out)
        else:
            out.publishing.max_body_size = self.service.store_config.max_message_size
            out.publishing.validate_message_type = bc.enable_topic_message_type_check
            policy = out.backoff_policy
            policy.max_attempts = bc.grpc_client_producer_max_attempts
            policy.exponential_backoff.initial.FromMilliseconds(
                bc.grpc_client_producer_backoff_initial_millis
            )
            policy.exponential_backoff.max.FromMilliseconds(bc.grpc_client_producer_backoff_max_millis)
            policy.exponential_backoff.multiplier = bc.grpc_client_producer_backoff_multiplier
        return out

    def _consumer_settings(self, client: GrpcClient, out: pb.Settings) -> None:
        """The group's FIFO flag and retry policy: redeliveries follow the broker's retry topic, at
        delay level 3 + attempts (``messageDelayLevel``), up to the group's ``retryMaxTimes``."""
        bc = self.service.broker_config
        group = self.service.subscription_groups.find(client.group) if client.group else None
        sub = out.subscription
        sub.fifo = bool(group is not None and group.consume_message_orderly)
        sub.receive_batch_size = bc.grpc_client_consumer_long_polling_batch_size
        sub.long_polling_timeout.FromMilliseconds(bc.grpc_client_consumer_max_long_polling_timeout_millis)
        retries = group.retry_max_times if group is not None else 16
        levels = parse_delay_levels(self.service.store_config.message_delay_level)[2:]
        steps = [levels[min(i, len(levels) - 1)] for i in range(min(max(retries, 1), MAX_BACKOFF_STEPS))]
        out.backoff_policy.Clear()
        out.backoff_policy.max_attempts = retries + 1
        for ms in steps:
            out.backoff_policy.customized_backoff.next.add().FromMilliseconds(ms)

    def recover_orphaned(self, channel: GrpcChannel, command: RemotingCommand) -> None:
        """The transaction check's CHECK_TRANSACTION_STATE, as the client's Telemetry command."""
        client = self.clients.table.get(channel.client_id)
        if command.code != RequestCode.CHECK_TRANSACTION_STATE or client is None:
            return
        header = CheckTransactionStateRequestHeader.from_ext(command.ext)
        message = to_proto(decode_record(bytes(command.body)))
        recover = spb.RecoverOrphanedTransactionCommand(message=message, transaction_id=header.offset_msg_id)
        if not client.push(spb.TelemetryCommand(recover_orphaned_transaction_command=recover)):
            log.info("transaction check of %s: client %s has no open Telemetry stream with room",
                     header.offset_msg_id, channel.client_id)  # fmt: skip

    async def ask(
        self, client_id: str, command: spb.TelemetryCommand, timeout_s: float
    ) -> spb.TelemetryCommand:
        """Send an admin command (``print_thread_stack_trace_command`` or ``verify_message_command``,
        its nonce set here) and wait for the client's answer.

        Raises:
            RpcError: NOT_FOUND (no such client or stream), TOO_MANY_REQUESTS, REQUEST_TIMEOUT.
        """
        client = self.clients.table.get(client_id)
        if client is None or client.outbox is None:
            raise RpcError(Code.NOT_FOUND, f"no gRPC client {client_id!r} with an open Telemetry stream")
        if len(self._asks) >= MAX_PENDING_ASKS:
            raise RpcError(Code.TOO_MANY_REQUESTS, "too many questions to clients wait already")
        nonce = uuid.uuid4().hex
        getattr(command, command.WhichOneof("command") or "print_thread_stack_trace_command").nonce = nonce
        waiter: asyncio.Future[spb.TelemetryCommand] = asyncio.get_running_loop().create_future()
        self._asks[nonce] = waiter
        try:
            if not client.push(command):
                raise RpcError(Code.TOO_MANY_REQUESTS, f"client {client_id!r}'s Telemetry stream is full")
            async with asyncio.timeout(timeout_s):
                return await waiter
        except TimeoutError:
            raise RpcError(
                Code.REQUEST_TIMEOUT, f"client {client_id!r} did not answer in {timeout_s:g} s"
            ) from None
        finally:
            self._asks.pop(nonce, None)

    # -- PullMessage --------------------------------------------------------------------------

    async def pull_message(
        self, request: spb.PullMessageRequest, call: Call
    ) -> list[spb.PullMessageResponse]:
        """PULL_MESSAGE for the 5.x PullConsumer: status, messages, next offset."""
        mq = request.message_queue
        bc = self.service.broker_config
        hold_ms = (
            request.long_polling_timeout.ToMilliseconds() if request.HasField("long_polling_timeout") else 0
        )
        hold_ms = min(max(hold_ms, bc.grpc_client_consumer_min_long_polling_timeout_millis),
                      bc.grpc_client_consumer_max_long_polling_timeout_millis)  # fmt: skip
        expr = request.filter_expression
        batch = min(max(request.batch_size, 1), MAX_PULL_BATCH)
        header = PullMessageRequestHeader(
            request.group.name, mq.topic.name, mq.id, request.offset, batch,
            FLAG_SUSPEND | FLAG_SUBSCRIPTION, 0, hold_ms, expr.expression or "*", 0,
            "SQL92" if expr.type == pb.FilterType.SQL else "TAG", None,
        )  # fmt: skip
        if request.offset < 0:
            raise RpcError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        answer = await self.service.call(
            call, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        )
        pulled = PullMessageResponseHeader.from_ext(answer.ext) if answer.ext else None
        out = [spb.PullMessageResponse(status=status(code_of_response(answer.code), answer.remark or "OK"))]
        if answer.code == ResponseCode.SUCCESS:
            out += [spb.PullMessageResponse(message=to_proto(m)) for m in decode_records(answer.body)]
        if pulled is not None:
            out.append(spb.PullMessageResponse(next_offset=pulled.next_begin_offset))
        return out
