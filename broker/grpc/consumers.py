"""The unary RPCs of POP consumption: QueryAssignment, AckMessage, ChangeInvisibleDuration and
ForwardMessageToDeadLetterQueue.

* **QueryAssignment** is the broker's own server-side assignment (``broker/pop/assignment.py``,
  QUERY_ASSIGNMENT's): a group in POP mode (the default for 5.x consumers, which announce
  ``CONSUME_POP``) gets every broker's queues as queue id -1, "pop any queue", so each broker is
  one receive loop of the PushConsumer; ``mqadmin setConsumeMode ... -m PULL`` (or ``-q N``) gives
  each consumer its own queues. Each queue names its broker's gRPC endpoint.
* **AckMessage**: each entry's receipt handle, grouped by the pop it came from, acked as one
  BATCH_ACK_MESSAGE (one revive-log record); an entry whose handle is garbled or foreign is
  INVALID_RECEIPT_HANDLE on its own, and a message no longer in flight is OK, as RocketMQ answers
  (its ack changes nothing). The response's status is the entries' one code, or MULTIPLE_RESULTS.
* **ChangeInvisibleDuration** answers the new receipt handle (the client acks with it next); a
  message no longer in flight is INVALID_RECEIPT_HANDLE, so a client stops retrying.
* **ForwardMessageToDeadLetterQueue**: the handle names the message's queue and offset; the
  record there goes to ``%DLQ%{group}`` through CONSUMER_SEND_MSG_BACK (the broker's send-back
  processor, level -1: straight to the DLQ), then the message is acked (the proxy's order).

Each takes the message out of auto-renewal first and uses the handle renewal gave it (the client
still holds the one it received).
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketpy.broker.grpc.receipts import parse_handle, rpc_error
from rocketpy.broker.grpc.receive import check_names
from rocketpy.broker.grpc.renew import RenewTable
from rocketpy.broker.grpc.routes import message_queues
from rocketpy.broker.grpc.service import Call, MessagingService, consumer_probe, ok
from rocketpy.broker.grpc.status import Code, RpcError, code_name, code_of_response, set_ok, status
from rocketpy.broker.pop.assignment import AssignmentService
from rocketpy.broker.pop.service import PopService
from rocketpy.broker.pop.types import PopError
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb
from rocketpy.message import MessageQueue
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.pop import MAX_BATCH_ACK_BITS, MAX_BATCH_ACKS, BatchAck
from rocketpy.protocol.headers.send_back import USE_GROUP_MAX, ConsumerSendMsgBackRequestHeader
from rocketpy.protocol.receipt import ReceiptHandle
from rocketpy.remoting.command import RemotingCommand

#: Entries one AckMessage may carry (BATCH_ACK_MESSAGE's bound).
MAX_ACK_ENTRIES = MAX_BATCH_ACKS
_OK = int(Code.OK)


def batch_acks(group: str, topic: str, handles: Sequence[ReceiptHandle]) -> list[BatchAck]:
    """``handles`` as BatchAcks: one per (topic kind, queue, pop time), each at most
    ``MAX_BATCH_ACK_BITS`` offsets wide (``topic`` is the subscribed topic)."""
    by_pop: dict[tuple[str, int, int], list[ReceiptHandle]] = {}
    for h in handles:
        by_pop.setdefault((h.kind, h.queue_id, h.pop_time), []).append(h)
    out = []
    for same in by_pop.values():
        same.sort(key=lambda h: h.queue_offset)
        while same:
            start = same[0].queue_offset
            n = next(
                (i for i, h in enumerate(same) if h.queue_offset - start >= MAX_BATCH_ACK_BITS), len(same)
            )
            first = same[0]
            bits = tuple(sorted({h.queue_offset - start for h in same[:n]}))
            out.append(
                BatchAck(
                    group, topic, first.retry, start, first.queue_id, first.revive_qid,
                    first.pop_time, first.invisible_time, bits,
                )
            )  # fmt: skip
            same = same[n:]
    return out


class ConsumerRpcs:
    """The handlers (see the module docstring).

    Args:
        service: the endpoint's unary service (config, ACL, routes, processors).
        pop: the broker's POP service.
        assignment: the broker's QUERY_ASSIGNMENT service.
        renew: the auto-renew table.
    """

    def __init__(
        self, service: MessagingService, pop: PopService, assignment: AssignmentService, renew: RenewTable
    ) -> None:
        self.service = service
        self.pop = pop
        self.assignment = assignment
        self.renew = renew

    # -- QueryAssignment ------------------------------------------------------------------------

    async def query_assignment(
        self, request: spb.QueryAssignmentRequest, call: Call
    ) -> spb.QueryAssignmentResponse:
        """The queues this client should receive from (the broker's assignment)."""
        topic, group = request.topic.name, request.group.name
        check_names(topic, group)
        self.service.check_access(call, consumer_probe(group, topic))
        route = await self.service.routes.route(topic)
        queues = message_queues(topic, route, self.service.accepted_types(topic))
        answer = await self.assignment.assign(
            topic, group, call.client.channel.client_id, "AVG", "CLUSTERING"
        )
        if answer is None:  # no consumer of the group registered yet: the client asks again
            return ok(spb.QueryAssignmentResponse())
        _, mqs = answer
        assignments = [pb.Assignment(message_queue=q) for q in _as_proto(mqs, queues)]
        return ok(spb.QueryAssignmentResponse(assignments=assignments))

    # -- AckMessage -----------------------------------------------------------------------------

    async def ack_message(self, request: spb.AckMessageRequest, call: Call) -> spb.AckMessageResponse:
        """Acknowledge each entry's message."""
        topic, group = request.topic.name, request.group.name
        check_names(topic, group)
        self.service.check_access(call, consumer_probe(group, topic))
        if not request.entries or len(request.entries) > MAX_ACK_ENTRIES:
            raise RpcError(
                Code.BAD_REQUEST, f"AckMessage carries {len(request.entries)} entries; 1 to {MAX_ACK_ENTRIES}"
            )
        response = spb.AckMessageResponse()
        results = response.entries
        handles: list[ReceiptHandle] = []
        client_id = call.client.channel.client_id
        holding = self.renew.holding(client_id)
        checked: set[tuple[str, int]] = set()  # (stored topic, queue) known good in this request
        codes: set[int] = set()
        for entry in request.entries:
            text = entry.receipt_handle
            if holding:
                text = await self.renew.take(client_id, group, entry.message_id, text)
            result = results.add()
            result.message_id = entry.message_id
            result.receipt_handle = entry.receipt_handle
            try:
                handles.append(self._handle(text, topic, group, checked))
                set_ok(result.status)
                codes.add(_OK)
            except RpcError as e:
                result.status.CopyFrom(e.status())
                codes.add(e.code)
        if handles:
            try:
                await self.pop.ack_batch(batch_acks(group, topic, handles), None)
            except PopError as e:
                raise rpc_error(e, handle=True) from None
        code = codes.pop() if len(codes) == 1 else Code.MULTIPLE_RESULTS
        if code == _OK:
            set_ok(response.status)
        else:
            response.status.CopyFrom(status(code, code_name(code)))
        return response

    # -- ChangeInvisibleDuration ----------------------------------------------------------------

    async def change_invisible_duration(
        self, request: spb.ChangeInvisibleDurationRequest, call: Call
    ) -> spb.ChangeInvisibleDurationResponse:
        """Keep the message invisible ``invisible_duration`` from now; answers its new handle."""
        topic, group = request.topic.name, request.group.name
        check_names(topic, group)
        self.service.check_access(call, consumer_probe(group, topic))
        ms = request.invisible_duration.ToMilliseconds()
        hi = self.service.broker_config.max_invisible_time_mills
        if not request.HasField("invisible_duration") or not 0 <= ms <= hi:
            raise RpcError(
                Code.ILLEGAL_INVISIBLE_TIME,
                f"invisible_duration {ms} ms is outside [0, {hi}] ms (maxInvisibleTimeMills)",
            )
        text = await self._take(call, group, request.message_id, request.receipt_handle)
        h = self._handle(text, topic, group)
        try:
            result = await self.pop.change_invisible(
                group, h.stored_topic(topic, group), h.queue_id, h.queue_offset, text, ms
            )
        except PopError as e:
            raise rpc_error(e, handle=True) from None
        new = h._replace(
            pop_time=result.pop_time, invisible_time=result.invisible_ms, revive_qid=result.revive_qid
        )
        return ok(spb.ChangeInvisibleDurationResponse(receipt_handle=new.encode()))

    # -- ForwardMessageToDeadLetterQueue --------------------------------------------------------

    async def forward_message_to_dead_letter_queue(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, call: Call
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        """Store the message in ``%DLQ%{group}``, then ack it."""
        topic, group = request.topic.name, request.group.name
        check_names(topic, group)
        self.service.check_access(call, consumer_probe(group, topic))
        text = await self._take(call, group, request.message_id, request.receipt_handle)
        h = self._handle(text, topic, group)
        stored = h.stored_topic(topic, group)
        offset = self.pop.store.get_commit_log_offset_in_queue(stored, h.queue_id, h.queue_offset)
        if offset < 0:
            raise RpcError(
                Code.INVALID_RECEIPT_HANDLE,
                f"no message at {stored}:{h.queue_id} offset {h.queue_offset} (cleaned up since)",
            )
        header = ConsumerSendMsgBackRequestHeader(
            offset, group, -1, request.message_id, topic, False, USE_GROUP_MAX
        )
        answer = await self.service.call(
            call, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())
        )
        if answer.code != ResponseCode.SUCCESS:
            raise RpcError(code_of_response(answer.code), answer.remark or "not stored in the DLQ")
        try:
            await self.pop.ack_batch(batch_acks(group, topic, [h]), None)
        except PopError as e:
            raise rpc_error(e, handle=True) from None
        return ok(spb.ForwardMessageToDeadLetterQueueResponse())

    # -- helpers --------------------------------------------------------------------------------

    async def _take(self, call: Call, group: str, message_id: str, text: str) -> str:
        return await self.renew.take(call.client.channel.client_id, group, message_id, text)

    def _handle(
        self, text: str, topic: str, group: str, checked: set[tuple[str, int]] | None = None
    ) -> ReceiptHandle:
        """The handle, checked to name a queue of this broker (``checked``: queues known good).

        Raises:
            RpcError: INVALID_RECEIPT_HANDLE (or TOPIC_NOT_FOUND when the topic is gone).
        """
        h = parse_handle(text, self.pop.checks.broker_name)
        key = (h.stored_topic(topic, group), h.queue_id)
        if checked is not None and key in checked:
            return h
        try:
            self.pop.checks.queue_of_message(*key)
        except PopError as e:
            raise rpc_error(e, handle=True) from None
        if checked is not None:
            checked.add(key)
        return h


def _as_proto(mqs: Sequence[MessageQueue], queues: list[pb.MessageQueue]) -> list[pb.MessageQueue]:
    """The assigned queues as the route's queues (queue id -1: a broker's "any queue")."""
    by_id = {(q.broker.name, q.id): q for q in queues}
    first: dict[str, pb.MessageQueue] = {}
    for q in queues:
        if q.permission != pb.Permission.WRITE:
            first.setdefault(q.broker.name, q)
    out = []
    for mq in mqs:
        found = by_id.get((mq.broker_name, mq.queue_id))
        if found is None and mq.queue_id < 0 and mq.broker_name in first:
            found = pb.MessageQueue()
            found.CopyFrom(first[mq.broker_name])
            found.id = -1
        if found is not None:  # a broker without a gRPC endpoint is left out
            out.append(found)
    return out
