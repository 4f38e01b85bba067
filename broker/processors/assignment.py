"""QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE over remoting: wrappers of ``AssignmentService``.

QUERY_ASSIGNMENT's answer is RocketMQ's QueryAssignmentResponseBody: ``messageQueueAssignments``, a
list of ``{"messageQueue": {topic, brokerName, queueId}, "mode": "PULL" | "POP"}`` (nil when the
broker cannot answer now: an unknown topic, no live consumer, an unknown strategy; the client then
keeps what it has). SET_MESSAGE_REQUEST_MODE stores the mode (``mqadmin setConsumeMode``); a retry
topic is refused with NO_PERMISSION, as RocketMQ does.
"""

from __future__ import annotations

from rocketpy.broker.pop.assignment import AssignmentService
from rocketpy.broker.processors.body import decode_map, encode
from rocketpy.errors import HeaderError, RocketpyError
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.pop import QUERY_ASSIGNMENT_BODY, SET_MODE_BODY, MessageRequestMode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX


class AssignmentProcessor:
    """Handles QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE for one broker.

    Args:
        service: the broker's assignment service.
    """

    def __init__(self, service: AssignmentService) -> None:
        self.service = service

    async def query_assignment(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """QUERY_ASSIGNMENT."""
        doc = decode_map(request, "QueryAssignmentRequestBody", QUERY_ASSIGNMENT_BODY)
        answer = await self.service.assign(
            doc["topic"],
            doc["consumerGroup"],
            doc["clientId"],
            str(doc.get("strategyName") or "AVG"),
            str(doc.get("messageModel") or "CLUSTERING"),
        )
        assignments = None
        if answer is not None:
            mode, mqs = answer
            assignments = [
                {"messageQueue": mq.to_dict(), "mode": mode.value, "attachments": {}} for mq in mqs
            ]
        return RemotingCommand.response(
            request, body=encode({"messageQueueAssignments": assignments}, request)
        )

    async def set_message_request_mode(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """SET_MESSAGE_REQUEST_MODE."""
        doc = decode_map(request, "SetMessageRequestModeRequestBody", SET_MODE_BODY)
        topic, group = doc["topic"], doc["consumerGroup"]
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return RemotingCommand.response(
                request, ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode"
            )
        try:
            mode = MessageRequestMode(str(doc["mode"]).upper())
        except ValueError:
            raise HeaderError(
                f"'SetMessageRequestModeRequestBody.mode' must be PULL or POP, got {str(doc['mode'])[:20]!r}"
            ) from None
        try:
            self.service.modes.set(topic, group, mode, int(doc.get("popShareQueueNum") or 0))
        except RocketpyError as e:
            return RemotingCommand.response(request, ResponseCode.SYSTEM_ERROR, str(e))
        await self.service.modes.file.persist()
        return RemotingCommand.response(request)
