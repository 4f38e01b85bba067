"""POP_MESSAGE, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO over remoting: thin wrappers of ``PopService``.

Owns the reading of the headers (``rocketpy/protocol/headers/pop.py``) and the answers in
RocketMQ's shape (``poppath.pop_response``): a pop that found messages is SUCCESS with the stored
records as its body and ``popTime`` / ``invisibleTime`` / ``reviveQid`` / ``restNum`` /
``startOffsetInfo`` / ``msgOffsetInfo`` (/ ``orderCountInfo``) in its header, from which the client
builds each message's receipt handle; one that found nothing within its ``pollTime`` is
POLLING_TIMEOUT, one with no room to wait POLLING_FULL. The common pop is taken in one call by the
fast path (``poppath.pop_now``, compiled); any other's first step (checks and one read) is a plain
call; only a pop that waits or writes records first goes on as a coroutine, run eagerly
(``run_eager``): when it does not suspend on the store it is still answered inline, with no task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from rocketpy.broker.pop.service import PopService, Records
from rocketpy.broker.pop.types import PopError, PopRequest, PopResult, PopStatus
from rocketpy.broker.processors.eager import run_eager
from rocketpy.broker.processors.poppath import pop_now, pop_request, pop_response
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


class PopMessageProcessor:
    """Handles POP_MESSAGE, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO for one broker.

    Args:
        service: the broker's POP service.
    """

    def __init__(self, service: PopService) -> None:
        self.service = service

    def pop(self, channel: Channel, request: RemotingCommand) -> HandlerResult:
        """POP_MESSAGE: the common pop in one step (``pop_now``); any other, its first step here
        (``PopService.pop_first``): one that found messages, or may not wait, with no record to
        write first, is answered inline, the rest by ``rest``."""
        answer = pop_now(self, request)
        if answer is not None:
            return answer
        service = self.service
        req = pop_request(PopMessageRequestHeader.from_ext(request.ext))
        started = asyncio.get_running_loop().time()
        try:
            flt, result, writes = service.pop_first(req)
        except PopError as e:
            return RemotingCommand.response(request, e.code, e.remark)
        if not writes and (result.status is PopStatus.FOUND or req.poll_ms <= 0):
            return pop_response(request, req, result)
        return self.rest(request, req, result, writes, flt, started)

    def rest(
        self,
        request: RemotingCommand,
        req: PopRequest,
        result: PopResult,
        writes: list[Records],
        flt: Any = None,
        started: float | None = None,
    ) -> HandlerResult:
        """The rest of a pop after its first read (``PopService.pop_rest``: the records to write,
        the wait), run eagerly; ``started``: when the pop began (the loop's time; None: now)."""
        if started is None:
            started = asyncio.get_running_loop().time()
        rest = self.service.pop_rest(req, flt, result, writes, started)
        return run_eager(self._pop_rest(request, req, rest))

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
