"""The SDK's answers to a broker's calls on its connection (RocketMQ's ClientRemotingProcessor).

Owns the handlers ``MQClientInstance`` registers for RESET_CONSUMER_CLIENT_OFFSET,
GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY: each reads
the request, finds the consumer(s) of the instance it names and answers in the request's encoding.
A reset or status call names a group: every consumer of that group in this process answers
(they share the connection, and hold disjoint queues); running info and a direct consume name one
client id. Bad input (an unknown client, a body that does not decode) is an error answer that
says what was wrong; the consumers' own code does the work (``client.consumer_admin``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rocketpy.errors import HeaderError, MQClientError
from rocketpy.message import MessageQueue
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.clients import (
    ConsumeMessageDirectlyRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    ResetOffsetRequestHeader,
    offset_rows,
    read_offset_rows,
)
from rocketpy.record import decode_record
from rocketpy.remoting.body import decode_body, encode_body
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand

log = logging.getLogger("rocketpy.client.instance")

#: ``(group, client id) -> consumer`` of the instance (``MQClientInstance._consumers``).
Consumers = Callable[[], dict[tuple[str, str], Any]]


class ClientCalls:
    """Answers a broker's calls for the consumers of one client instance."""

    def __init__(self, consumers: Consumers) -> None:
        self._consumers = consumers

    def register(self, remoting: RemotingClient) -> None:
        """Serve the four codes on ``remoting``'s connections."""
        remoting.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self.reset_offset)
        remoting.register_processor(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self.consumer_status)
        remoting.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self.running_info)
        remoting.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_directly)

    def _of_group(self, group: str, able: str) -> list[Any]:
        return [c for (g, _cid), c in sorted(self._consumers().items()) if g == group and hasattr(c, able)]

    def _one(self, group: str, client_id: str) -> Any:
        consumer = self._consumers().get((group, client_id))
        if consumer is None:
            raise MQClientError(f"no consumer {client_id} of group {group} in this process")
        return consumer

    async def reset_offset(self, channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        """RESET_CONSUMER_CLIENT_OFFSET: the group's consumers restart the topic's queues they hold
        from the new offsets; answers which consumers and queues moved."""
        try:
            h = ResetOffsetRequestHeader.from_ext(cmd.ext)
            doc = decode_body(cmd.body, cmd.serialize_type, "ResetOffsetBody") if cmd.body else {}
            offsets = read_offset_rows(
                doc.get("offsetTable") if isinstance(doc, dict) else None, "offsetTable"
            )
        except (HeaderError, ValueError) as e:
            return RemotingCommand.response(cmd, ResponseCode.INVALID_PARAMETER, str(e))
        moved: dict[str, list[dict[str, Any]]] = {}
        for consumer in self._of_group(h.group, "reset_offset"):
            mqs = await consumer.reset_offset(h.topic, offsets)
            moved[consumer.client_id] = [mq.to_dict() for mq in mqs]
        log.info("offsets of %s on %s reset by the broker: %s", h.group, h.topic, moved)
        return _answer(cmd, {"clients": moved})

    def consumer_status(self, channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the offsets the group's consumers hold for the topic."""
        try:
            h = GetConsumerStatusRequestHeader.from_ext(cmd.ext)
        except HeaderError as e:
            return RemotingCommand.response(cmd, ResponseCode.INVALID_PARAMETER, str(e))
        held: dict[MessageQueue, int] = {}
        for consumer in self._of_group(h.group, "held_offsets"):
            held.update(consumer.held_offsets(h.topic))
        return _answer(cmd, {"messageQueueTable": offset_rows(held)})

    def running_info(self, channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: the named consumer's ConsumerRunningInfo."""
        try:
            h = GetConsumerRunningInfoRequestHeader.from_ext(cmd.ext)
            consumer = self._one(h.group, h.client_id)
        except (HeaderError, MQClientError) as e:
            return RemotingCommand.response(cmd, ResponseCode.SYSTEM_ERROR, str(e))
        if not hasattr(consumer, "running_info"):
            return RemotingCommand.response(
                cmd,
                ResponseCode.SYSTEM_ERROR,
                f"{h.client_id} is a {type(consumer).__name__}: it keeps no running info",
            )
        return _answer(cmd, consumer.running_info(h.jstack_enable))

    async def consume_directly(self, channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY: the named push consumer's listener runs on the attached record."""
        try:
            h = ConsumeMessageDirectlyRequestHeader.from_ext(cmd.ext)
            consumer = self._one(h.group, h.client_id)
            msg = decode_record(bytes(cmd.body))
        except (HeaderError, MQClientError, ValueError) as e:
            return RemotingCommand.response(
                cmd, ResponseCode.SYSTEM_ERROR, f"cannot consume it directly: {e}"
            )
        if not hasattr(consumer, "consume_message_directly"):
            kind = type(consumer).__name__
            remark = f"{h.client_id} is a {kind}, not a push consumer: it has no listener to run"
            return RemotingCommand.response(cmd, ResponseCode.SYSTEM_ERROR, remark)
        try:
            result = await consumer.consume_message_directly(msg, h.broker_name or "")
        except MQClientError as e:
            return RemotingCommand.response(cmd, ResponseCode.SYSTEM_ERROR, str(e))
        return _answer(cmd, result)


def _answer(cmd: RemotingCommand, doc: Any) -> RemotingCommand:
    return RemotingCommand.response(cmd, body=encode_body(doc, cmd.serialize_type))
