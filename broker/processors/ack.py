"""ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME over remoting: wrappers of ``PopService``.

Owns the reading of the requests and RocketMQ's answers: an ack is SUCCESS, also for a message no
longer in flight (acked before, or redelivered since; the remark says so and nothing changes, as
RocketMQ's broker appends such an ack and ignores it); an offset outside the queue is NO_MESSAGE,
a malformed or foreign receipt handle INVALID_PARAMETER. BATCH_ACK_MESSAGE is SUCCESS with a
remark counting what was acked (an empty body: NO_MESSAGE, RocketMQ's answer). An invisible-time
change answers the new ``popTime`` / ``invisibleTime`` / ``reviveQid``; a message no longer in
flight is NO_MESSAGE (the client should receive it again). Each runs eagerly: inline unless it
waits for the store (SYNC_FLUSH).
"""

from __future__ import annotations

from rocketpy.broker.pop.acks import read_acks
from rocketpy.broker.pop.service import PopService
from rocketpy.broker.pop.types import PopError
from rocketpy.broker.processors.body import decode_map
from rocketpy.broker.processors.eager import run_eager
from rocketpy.errors import HeaderError
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.pop import (
    BATCH_ACK_BODY,
    AckMessageRequestHeader,
    BatchAck,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    read_batch_acks,
)
from rocketpy.protocol.shape import check_shape
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import HandlerResult

_BATCH_ACK_NAME = "BatchAckMessageRequestBody"


class AckMessageProcessor:
    """Handles ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME for one broker.

    Args:
        service: the broker's POP service.
    """

    def __init__(self, service: PopService) -> None:
        self.service = service

    def ack(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        """ACK_MESSAGE."""
        h = AckMessageRequestHeader.from_ext(request.ext)
        return run_eager(self._ack(request, h))

    async def _ack(self, request: RemotingCommand, h: AckMessageRequestHeader) -> RemotingCommand:
        try:
            result = await self.service.ack(h.group, h.topic, h.queue_id, h.offset, h.extra_info)
        except PopError as e:
            return RemotingCommand.response(request, e.code, e.remark)
        return RemotingCommand.response(request, ResponseCode.SUCCESS, result.remark or None)

    def batch_ack(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        """BATCH_ACK_MESSAGE."""
        doc = decode_map(request, _BATCH_ACK_NAME)
        acks = read_acks(doc)  # the usual form in one pass; None: any other, checked and read below
        if acks is None:
            check_shape(doc, BATCH_ACK_BODY, _BATCH_ACK_NAME)
            try:
                acks = read_batch_acks(doc)
            except ValueError as e:
                raise HeaderError(f"{_BATCH_ACK_NAME}.{e}") from None
        if not acks:
            return RemotingCommand.response(request, ResponseCode.NO_MESSAGE, "the body names no ack")
        broker = doc.get("brokerName")
        return run_eager(self._batch_ack(request, acks, broker if isinstance(broker, str) else None))

    async def _batch_ack(
        self, request: RemotingCommand, acks: list[BatchAck], broker: str | None
    ) -> RemotingCommand:
        try:
            acked, asked = await self.service.ack_batch(acks, broker)
        except PopError as e:
            return RemotingCommand.response(request, e.code, e.remark)
        remark = None
        if acked < asked:
            remark = (
                f"acked {acked} of {asked} messages; the others were not in flight (acked before, "
                "or delivered again since), and nothing changed for them"
            )
        return RemotingCommand.response(request, ResponseCode.SUCCESS, remark)

    def change_invisible_time(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        """CHANGE_MESSAGE_INVISIBLETIME."""
        h = ChangeInvisibleTimeRequestHeader.from_ext(request.ext)
        return run_eager(self._change(request, h))

    async def _change(self, request: RemotingCommand, h: ChangeInvisibleTimeRequestHeader) -> RemotingCommand:
        try:
            result = await self.service.change_invisible(
                h.group, h.topic, h.queue_id, h.offset, h.extra_info, h.invisible_time_ms
            )
        except PopError as e:
            return RemotingCommand.response(request, e.code, e.remark)
        ext = ChangeInvisibleTimeResponseHeader(result.pop_time, result.invisible_ms, result.revive_qid)
        return RemotingCommand.response(request, ext=ext.to_ext())
