"""POP_MESSAGE, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO over remoting: thin wrappers of ``PopService``.

Owns the reading of the headers (``rocketpy/protocol/headers/pop.py``) and the answers in
RocketMQ's shape: a pop that found messages is SUCCESS with the stored records as its body and
``popTime`` / ``invisibleTime`` / ``reviveQid`` / ``restNum`` / ``startOffsetInfo`` /
``msgOffsetInfo`` (/ ``orderCountInfo``) in its header, from which the client builds each message's
receipt handle; one that found nothing within its ``pollTime`` is POLLING_TIMEOUT, one with no
room to wait POLLING_FULL. A pop's first step (checks and one read) is a plain call; only a pop
that waits or writes records first goes on as a coroutine, run eagerly (``run_eager``): when it
does not suspend on the store it is still answered inline, with no task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from rocketpy.broker.pop.service import PopService
from rocketpy.broker.pop.types import PopError, PopRequest, PopResult, PopStatus
from rocketpy.broker.processors.eager import run_eager
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.pop import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import HandlerResult

#: The request codes of POP consumption (a slave refuses them: its master keeps the bookkeeping).
POP_CODES = (
    RequestCode.POP_MESSAGE,
    RequestCode.PEEK_MESSAGE,
    RequestCode.NOTIFICATION,
    RequestCode.POLLING_INFO,
    RequestCode.ACK_MESSAGE,
    RequestCode.BATCH_ACK_MESSAGE,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
)


def pop_request(h: PopMessageRequestHeader) -> PopRequest:
    """The service's request for a POP_MESSAGE header (any negative queue id is -1: any queue)."""
    return PopRequest(
        h.group,
        h.topic,
        max(h.queue_id, -1),
        h.max_msgs,
        h.invisible_time_ms,
        h.poll_time_ms,
        h.exp_type or "TAG",
        h.exp,
        h.order,
        h.init_mode,
    )


def _answer_header(result: PopResult) -> dict[str, object]:
    """``PopMessageResponseHeader(...).to_ext()`` of ``result``, built as a map directly (one per pop)."""
    ext: dict[str, object] = {
        "popTime": result.pop_time,
        "invisibleTime": result.invisible_ms,
        "reviveQid": result.revive_qid,
        "restNum": result.rest_num,
        "startOffsetInfo": result.start_offset_info(),
        "msgOffsetInfo": result.msg_offset_info(),
    }
    if result.order:
        ext["orderCountInfo"] = result.order_count_info()
    return ext


def pop_response(request: RemotingCommand, req: PopRequest, result: PopResult) -> RemotingCommand:
    """The POP_MESSAGE answer of ``result``."""
    ext = _answer_header(result)
    if result.status is PopStatus.FOUND:
        return RemotingCommand.response(request, ResponseCode.SUCCESS, "FOUND", ext, result.body())
    if result.status is PopStatus.POLLING_FULL:
        remark = (
            f"the broker holds its maximum of waiting POP requests (popPollingSize / maxPopPollingSize) "
            f"for group {req.group} on {req.topic}; retry later"
        )
        return RemotingCommand.response(request, ResponseCode.POLLING_FULL, remark, ext)
    remark = f"no message for group {req.group} in topic {req.topic} within its pollTime of {req.poll_ms} ms"
    return RemotingCommand.response(request, ResponseCode.POLLING_TIMEOUT, remark, ext)


class PopMessageProcessor:
    """Handles POP_MESSAGE, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO for one broker.

    Args:
        service: the broker's POP service.
    """

    def __init__(self, service: PopService) -> None:
        self.service = service

    def pop(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        """POP_MESSAGE: its first step runs here (``PopService.pop_first``); a pop that found
        messages, or may not wait, with no record to write first, is answered inline, the rest by
        ``PopService.pop_rest``."""
        service = self.service
        req = pop_request(PopMessageRequestHeader.from_ext(request.ext))
        started = asyncio.get_running_loop().time()
        try:
            flt, result, writes = service.pop_first(req)
        except PopError as e:
            return RemotingCommand.response(request, e.code, e.remark)
        if not writes and (result.status is PopStatus.FOUND or req.poll_ms <= 0):
            return pop_response(request, req, result)
        return run_eager(self._pop_rest(request, req, service.pop_rest(req, flt, result, writes, started)))

    async def _pop_rest(
        self, request: RemotingCommand, req: PopRequest, rest: Coroutine[Any, Any, PopResult]
    ) -> RemotingCommand:
        try:
            result = await rest
        except PopError as e:
            return RemotingCommand.response(request, e.code, e.remark)
        return pop_response(request, req, result)

    def peek(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """PEEK_MESSAGE: SUCCESS with the records, or PULL_NOT_FOUND (RocketMQ's answer)."""
        h = PeekMessageRequestHeader.from_ext(request.ext)
        try:
            result = self.service.peek(h.group, h.topic, max(h.queue_id, -1), h.max_msgs)
        except PopError as e:
            return RemotingCommand.response(request, e.code, e.remark)
        ext = PopMessageResponseHeader(rest_num=result.rest_num).to_ext()
        if result.status is PopStatus.FOUND:
            return RemotingCommand.response(request, ResponseCode.SUCCESS, "FOUND", ext, result.body())
        return RemotingCommand.response(request, ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", ext)

    def notification(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        """NOTIFICATION: ``hasMsg`` now, or once a message comes within ``pollTime``."""
        h = NotificationRequestHeader.from_ext(request.ext)
        return run_eager(self._notification(request, h))

    async def _notification(self, request: RemotingCommand, h: NotificationRequestHeader) -> RemotingCommand:
        try:
            has, full = await self.service.notification(
                h.group, h.topic, max(h.queue_id, -1), h.poll_time_ms, h.order
            )
        except PopError as e:
            return RemotingCommand.response(request, e.code, e.remark)
        return RemotingCommand.response(request, ext=NotificationResponseHeader(has, full).to_ext())

    def polling_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """POLLING_INFO: how many pops of the group wait on the queue."""
        h = PollingInfoRequestHeader.from_ext(request.ext)
        try:
            n = self.service.polling_info(h.group, h.topic, max(h.queue_id, -1))
        except PopError as e:
            return RemotingCommand.response(request, e.code, e.remark)
        return RemotingCommand.response(request, ext=PollingInfoResponseHeader(n).to_ext())
