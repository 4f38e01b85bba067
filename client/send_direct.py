"""The direct path of ``Producer.send_async``: write the request now, finish in a done callback.

Owns ``start_direct``: when the topic's publish route is cached, the chosen broker's address is
known and its connection is open, the SEND_MESSAGE_V2 request is written at once through
``RemotingClient.invoke_future`` and a ``DirectSend`` is returned; its ``finish`` turns the
response into a ``SendResult``, records the broker's latency for fault tolerance and, on a
retryable failure, hands back the coroutine that retries on another broker within the same
deadline (exactly what ``Producer.send`` does after a failed first attempt). In every other case
(selector sends, bodies still to compress, no route or connection yet) it returns None and the
caller takes the general coroutine path.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from rocketpy.client.async_sender import DirectSend
from rocketpy.client.results import SEND_STATUS_BY_CODE, SendResult
from rocketpy.client.selector import select_queue
from rocketpy.errors import MQBrokerError, RemotingConnectError, RemotingTimeoutError
from rocketpy.message import Message, MessageQueue
from rocketpy.remoting.codes import RequestCode
from rocketpy.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rocketpy.client.message_check import PreparedMessage
    from rocketpy.client.producer import Producer

_SEND_V2 = RequestCode.SEND_MESSAGE_V2
_RETRY_ERRORS = (RemotingConnectError, RemotingTimeoutError, MQBrokerError)


class _DirectSendV2(DirectSend):
    """One SEND_MESSAGE_V2 written to ``mq``'s broker at loop time ``started``."""

    __slots__ = ("addr", "deadline", "mq", "msg", "prepared", "producer", "started")

    def __init__(
        self,
        future: asyncio.Future[Any],
        producer: Producer,
        msg: Message,
        prepared: PreparedMessage,
        mq: MessageQueue,
        addr: str,
        started: float,
        remaining: float,
    ) -> None:
        self.future = future  # DirectSend.__init__, inlined (one call less per send)
        self.producer, self.msg, self.prepared, self.mq, self.addr = producer, msg, prepared, mq, addr
        self.started, self.deadline = started, started + remaining

    def finish(self, done: asyncio.Future[Any]) -> Any:
        """SendResult, or the retry coroutine after a retryable failure (see the module docstring)."""
        producer, mq = self.producer, self.mq
        try:
            result = send_result(done.result(), self.addr, mq, self.prepared.uniq_key)
        except _RETRY_ERRORS as e:
            return producer._retry_after_failure(self.msg, self.prepared, mq, e, self.deadline)
        latency_ms = (done.get_loop().time() - self.started) * 1000.0
        producer.fault.update(mq.broker_name, latency_ms)
        return result


def start_direct(
    producer: Producer, msg: Message, prepared: PreparedMessage, remaining: float
) -> DirectSend | None:
    """Write ``prepared`` to a queue of its cached route now; None when the general path is needed."""
    inst = producer._instance
    if inst is None or prepared.needs_compress:
        return None
    tp = inst.publish_info(prepared.topic)
    if tp is None or not tp.message_queues:
        return None
    mq = select_queue(tp.message_queues, tp.index, producer.fault, None)
    addr = inst.find_broker_addr(mq.broker_name)
    if addr is None or inst.remoting.channel(addr) is None:
        return None
    cmd = RemotingCommand.request(_SEND_V2, prepared.ext_for(producer.group, mq), prepared.body)
    started = asyncio.get_running_loop().time()
    response = inst.remoting.invoke_future(addr, cmd, remaining)
    return _DirectSendV2(response, producer, msg, prepared, mq, addr, started, remaining)


def send_result(resp: RemotingCommand, addr: str, mq: MessageQueue, uniq_key: str) -> SendResult:
    """``MQClientAPI.send_result`` for a response of ``mq``'s broker (non-stored codes raise)."""
    status = SEND_STATUS_BY_CODE.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(resp.code, resp.remark, addr)
    ext = resp.ext or {}
    queue_id = ext.get("queueId")
    offset = ext.get("queueOffset")
    return SendResult(
        status,
        uniq_key or str(ext.get("transactionId") or ""),
        str(ext.get("msgId") or ""),
        MessageQueue(mq.topic, mq.broker_name, mq.queue_id if queue_id is None else int(queue_id)),
        0 if offset is None else int(offset),
    )
