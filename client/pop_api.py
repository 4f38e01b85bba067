"""The POP calls of the SDK's ``MQClientAPI`` (a mixin: ``MQClientAPI`` inherits them).

One method per request code: POP_MESSAGE (its answer turned into messages with receipt handles by
``client.pop_result``), ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, PEEK_MESSAGE,
NOTIFICATION, POLLING_INFO, QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE. Times are seconds for
timeouts and milliseconds in headers, as on the wire.
"""

# ruff: noqa: ASYNC109  (per-call timeouts in seconds are part of the documented API)

from __future__ import annotations

from typing import Any

from rocketpy.client.answers import answer_header, check, pack_body, unpack_body
from rocketpy.client.pop_result import PopResult, pop_result
from rocketpy.errors import MQClientError
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.pop import (
    AckMessageRequestHeader,
    BatchAck,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    MessageRequestMode,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    batch_ack_body,
)
from rocketpy.record import decode_records
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand

#: A queue assignment: the queue (queue id -1: any queue of its broker) and how to read it.
Assignment = tuple[MessageQueue, MessageRequestMode]


class PopCalls:
    """POP request codes; needs ``self.remoting`` (a ``RemotingClient``)."""

    remoting: RemotingClient

    async def _call(
        self, addr: str, code: int, ext: dict[str, Any] | None, body: bytes, timeout: float
    ) -> RemotingCommand:
        return await self.remoting.invoke(addr, RemotingCommand.request(code, ext, body), timeout)

    async def pop_message(
        self, addr: str, broker_name: str, header: PopMessageRequestHeader, timeout: float
    ) -> PopResult:
        """POP_MESSAGE: the popped messages, each with its ``receipt_handle`` ([] when none came).

        Raises:
            MQBrokerError: a refusal (no such topic, no permission, bad subscription, POLLING_FULL...).
        """
        resp = await self._call(addr, RequestCode.POP_MESSAGE, header.to_ext(), b"", timeout)
        return pop_result(resp, addr, broker_name, header.order)

    async def ack_message(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        receipt_handle: str,
        timeout: float,
    ) -> str | None:
        """ACK_MESSAGE of one message (``topic``: where it is stored); the broker's remark (None:
        acked now; a remark: it was not in flight any more and nothing changed)."""
        ext = AckMessageRequestHeader(group, topic, queue_id, receipt_handle, offset).to_ext()
        return check(await self._call(addr, RequestCode.ACK_MESSAGE, ext, b"", timeout), addr).remark

    async def batch_ack_message(
        self, addr: str, broker_name: str, acks: list[BatchAck], timeout: float
    ) -> str | None:
        """BATCH_ACK_MESSAGE; the broker's remark (None: all acked)."""
        body = pack_body(batch_ack_body(broker_name, acks), self.remoting.serialize_type)
        return check(await self._call(addr, RequestCode.BATCH_ACK_MESSAGE, None, body, timeout), addr).remark

    async def change_invisible_time(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        receipt_handle: str,
        invisible_ms: int,
        timeout: float,
    ) -> ChangeInvisibleTimeResponseHeader:
        """CHANGE_MESSAGE_INVISIBLETIME; the answer carries the new pop time (the new handle's)."""
        ext = ChangeInvisibleTimeRequestHeader(
            group, topic, queue_id, receipt_handle, offset, invisible_ms
        ).to_ext()
        resp = check(
            await self._call(addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext, b"", timeout), addr
        )
        return answer_header(resp, addr, ChangeInvisibleTimeResponseHeader)

    async def peek_message(
        self, addr: str, group: str, topic: str, queue_id: int, max_msgs: int, timeout: float
    ) -> list[MessageExt]:
        """PEEK_MESSAGE: what the group would pop next (nothing is handed out)."""
        ext = PeekMessageRequestHeader(group, topic, queue_id, max_msgs).to_ext()
        resp = await self._call(addr, RequestCode.PEEK_MESSAGE, ext, b"", timeout)
        return decode_records(check(resp, addr, ResponseCode.PULL_NOT_FOUND).body or b"")

    async def notification(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        poll_ms: int,
        timeout: float,
        *,
        order: bool = False,
    ) -> NotificationResponseHeader:
        """NOTIFICATION: whether the group has something to pop (held up to ``poll_ms``)."""
        ext = NotificationRequestHeader(group, topic, queue_id, poll_ms, order=order).to_ext()
        resp = check(await self._call(addr, RequestCode.NOTIFICATION, ext, b"", timeout), addr)
        return answer_header(resp, addr, NotificationResponseHeader)

    async def polling_info(self, addr: str, group: str, topic: str, queue_id: int, timeout: float) -> int:
        """POLLING_INFO: pops of the group waiting on the queue."""
        ext = PollingInfoRequestHeader(group, topic, queue_id).to_ext()
        resp = check(await self._call(addr, RequestCode.POLLING_INFO, ext, b"", timeout), addr)
        return answer_header(resp, addr, PollingInfoResponseHeader).polling_num

    async def query_assignment(
        self,
        addr: str,
        topic: str,
        group: str,
        client_id: str,
        strategy: str,
        message_model: str,
        timeout: float,
    ) -> list[Assignment] | None:
        """QUERY_ASSIGNMENT: the queues the broker assigns this client (None: keep what you have)."""
        doc = {"topic": topic, "consumerGroup": group, "clientId": client_id, "strategyName": strategy,
               "messageModel": message_model}  # fmt: skip
        body = pack_body(doc, self.remoting.serialize_type)
        resp = check(await self._call(addr, RequestCode.QUERY_ASSIGNMENT, None, body, timeout), addr)
        answer = unpack_body(resp) or {}
        rows = answer.get("messageQueueAssignments")
        if rows is None:
            return None
        try:
            return [(MessageQueue.from_dict(r["messageQueue"]), MessageRequestMode(r.get("mode") or "PULL"))
                    for r in rows]  # fmt: skip
        except (KeyError, TypeError, ValueError) as e:
            raise MQClientError(f"the QUERY_ASSIGNMENT answer of {addr} is malformed: {e!r}") from None

    async def set_message_request_mode(
        self, addr: str, topic: str, group: str, mode: MessageRequestMode, share: int, timeout: float
    ) -> None:
        """SET_MESSAGE_REQUEST_MODE (``mqadmin setConsumeMode``)."""
        doc = {"topic": topic, "consumerGroup": group, "mode": mode.value, "popShareQueueNum": share}
        body = pack_body(doc, self.remoting.serialize_type)
        check(await self._call(addr, RequestCode.SET_MESSAGE_REQUEST_MODE, None, body, timeout), addr)
