"""ReceiveMessage (server stream): a 5.x consumer's pop, through the broker's ``PopService``.

The stream is RocketMQ proxy's: a ``status`` entry (OK; MESSAGE_NOT_FOUND when the long poll
ended empty; TOO_MANY_REQUESTS when too many pops wait already), one entry per message, each with
its ``receipt_handle`` (``receipts.py``), ``body_digest`` (MD5, as the proxy's) and ``delivery_attempt``, then
the ``delivery_timestamp`` entry. What a request may ask, with the proxy's keys:

* **long polling**: the request's ``long_polling_timeout`` (else the call's deadline less half the
  client's request timeout), clamped to ``grpcClientConsumerMin/MaxLongPollingTimeoutMillis`` and
  answered ``longPollingReserveTimeInMillis`` before the deadline; a deadline shorter than the
  minimum is ILLEGAL_POLLING_TIME;
* **invisible time** in [``minInvisibleTimeMillsForRecv``, ``maxInvisibleTimeMills``], else
  ILLEGAL_INVISIBLE_TIME; with ``auto_renew`` (a PushConsumer) none is asked: the messages get
  ``defaultInvisibleTimeMills`` and are renewed while the client works on them (``renew.py``);
* **queues**: every queue of the topic on this broker (queue id -1), as the proxy pops whatever
  queue a SimpleConsumer names; a PushConsumer assigned one queue (``QueryAssignment`` in PULL
  mode or with ``popShareQueueNum``) pops that queue only;
* **FIFO**: a group with ``consumeMessageOrderly`` pops orderly (one batch per queue in flight,
  so each message group's messages come in order; ``delivery_attempt`` counts the redeliveries);
* **filters**: TAG and SQL92 expressions, as POP_MESSAGE's;
* **attempt_id** (a PushConsumer's retry of a receive that failed on its side): the same
  messages again, not new ones, while their invisible time lasts. ``Attempts`` keeps each
  attempt's handles (not its bodies; the messages are read again from the store), at most
  ``MAX_ATTEMPTS``.

A stream the client cancels while messages are being written: what was not written is made
visible again 1 s later (the proxy's NACK_INVISIBLE_TIME), unless the request carried an
attempt id, whose retry gets them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocketpy.broker.grpc.convert import fill_message
from rocketpy.broker.grpc.receipts import rpc_error
from rocketpy.broker.grpc.renew import Held, RenewTable
from rocketpy.broker.grpc.service import Call, MessagingService, consumer_probe
from rocketpy.broker.grpc.status import Code, RpcError, status
from rocketpy.broker.pop.service import PopService, wall_ms
from rocketpy.broker.pop.types import PopError, PopRequest, PopResult, PopStatus
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb
from rocketpy.message import MessageExt
from rocketpy.protocol.headers.pop import MAX_POP_MSGS
from rocketpy.protocol.receipt import ReceiptHandle
from rocketpy.record import decode_record, decode_records
from rocketpy.subscription import ExpressionType
from rocketpy.topic import TOPIC_MAX_LENGTH, TOPIC_NAME_RE

log = logging.getLogger("rocketpy.broker.grpc")

#: Receive attempts whose messages are kept for a retry of the same attempt id.
MAX_ATTEMPTS = 4096
#: Invisible time of the messages a cancelled stream did not write (RocketMQ proxy's NACK).
NACK_INVISIBLE_MS = 1000
_OK = status()
_OK_ENTRY = spb.ReceiveMessageResponse(status=_OK)
_NOT_FOUND = status(Code.MESSAGE_NOT_FOUND, "no new message")
_POLLING_FULL = status(Code.TOO_MANY_REQUESTS, "polling full: too many receives wait on this broker")


@dataclass(slots=True)
class Delivered:
    """One message of a receive: its handle and how often it was delivered before."""

    handle: ReceiptHandle
    attempts: int


@dataclass(slots=True)
class Plan:
    """A checked ReceiveMessage request."""

    pop: PopRequest
    auto_renew: bool
    attempt_key: tuple[str, str, str] | None


class Attempts:
    """(client id, group, attempt id) -> (topic, deadline ms, messages), oldest evicted first."""

    def __init__(self, max_attempts: int = MAX_ATTEMPTS) -> None:
        self.max_attempts = max_attempts
        self._table: OrderedDict[tuple[str, str, str], tuple[str, int, list[Delivered]]] = OrderedDict()

    def get(self, key: tuple[str, str, str], now_ms: int) -> tuple[str, list[Delivered]] | None:
        """The messages of an attempt whose invisible time has not ended (None: none)."""
        found = self._table.get(key)
        if found is None:
            return None
        topic, deadline, items = found
        if deadline <= now_ms:
            del self._table[key]
            return None
        return topic, items

    def put(self, key: tuple[str, str, str], topic: str, deadline_ms: int, items: list[Delivered]) -> None:
        """Remember what an attempt got."""
        self._table.pop(key, None)
        while len(self._table) >= self.max_attempts:
            self._table.popitem(last=False)
        self._table[key] = (topic, deadline_ms, items)

    def __len__(self) -> int:
        return len(self._table)


def valid_name(name: str) -> bool:
    """A topic or group name RocketMQ accepts (``[%|a-zA-Z0-9_-]``, at most 127 characters)."""
    return bool(name) and len(name) <= TOPIC_MAX_LENGTH and TOPIC_NAME_RE.match(name) is not None


def check_names(topic: str, group: str) -> None:
    """Raises:
    RpcError: ILLEGAL_TOPIC or ILLEGAL_CONSUMER_GROUP."""
    if not valid_name(topic):
        raise RpcError(
            Code.ILLEGAL_TOPIC, f"topic name {topic[:80]!r} is empty or not [%|a-zA-Z0-9_-]{{1,127}}"
        )
    if not valid_name(group):
        raise RpcError(
            Code.ILLEGAL_CONSUMER_GROUP, f"group name {group[:80]!r} is empty or not [%|a-zA-Z0-9_-]{{1,127}}"
        )


class Receiver:
    """Serves ReceiveMessage (see the module docstring).

    Args:
        service: the endpoint's unary service (config, ACL, group table).
        pop: the broker's POP service.
        renew: the auto-renew table.
        is_slave: whether this broker is a slave now (slaves do not serve POP).
    """

    def __init__(
        self, service: MessagingService, pop: PopService, renew: RenewTable, is_slave: Callable[[], bool]
    ) -> None:
        self.service = service
        self.pop = pop
        self.renew = renew
        self.is_slave = is_slave
        self.attempts = Attempts()
        self._nacks: set[asyncio.Task[None]] = set()

    async def receive_message(self, request: spb.ReceiveMessageRequest, call: Call, context: Any) -> int:
        """Serve one ReceiveMessage on ``context`` (grpc's); returns the status code written.

        Raises:
            RpcError: before anything is written (the caller writes its status).
        """
        plan = self.plan(request, call, context.time_remaining())
        got = self.attempts.get(plan.attempt_key, wall_ms()) if plan.attempt_key else None
        if got is not None:
            messages = self._again(got[1], plan, call)
        else:
            try:
                result = await self.pop.pop(plan.pop)
            except PopError as e:
                raise rpc_error(e) from None
            if result.status is not PopStatus.FOUND:
                answer = _NOT_FOUND if result.status is PopStatus.NO_MESSAGE else _POLLING_FULL
                await _finish(context, answer)
                return answer.code
            messages = self._messages(result, plan.pop.topic)
            if plan.attempt_key is not None:
                deadline = result.pop_time + result.invisible_ms
                self.attempts.put(plan.attempt_key, plan.pop.topic, deadline, [d for _, d in messages])
        await self._write(context, plan, call, messages)
        return Code.OK

    # -- the request ----------------------------------------------------------------------------

    def plan(self, request: spb.ReceiveMessageRequest, call: Call, remaining_s: float | None) -> Plan:
        """Check a request and say what to pop.

        Raises:
            RpcError: a name, time, batch size, filter or queue the API refuses.
        """
        bc = self.service.broker_config
        mq = request.message_queue
        topic, group = mq.topic.name, request.group.name
        check_names(topic, group)
        if self.is_slave():
            raise RpcError(
                Code.FORBIDDEN, f"broker {bc.broker_name} is a slave now: receive from its master's endpoint"
            )
        if mq.broker.name and mq.broker.name != bc.broker_name:
            raise RpcError(
                Code.BAD_REQUEST,
                f"the queue is on broker {mq.broker.name!r}, this is {bc.broker_name!r}: "
                "receive from the endpoint the route names for it",
            )
        if request.batch_size <= 0:
            raise RpcError(Code.BAD_REQUEST, f"batch_size {request.batch_size} is not positive")
        self.service.check_access(call, consumer_probe(group, topic))
        auto_renew = request.auto_renew and bc.enable_proxy_auto_renew
        expr = request.filter_expression
        sql = expr.type == pb.FilterType.SQL
        if sql and not bc.enable_property_filter:
            raise RpcError(
                Code.ILLEGAL_FILTER_EXPRESSION,
                "this broker does not filter by SQL92: set enablePropertyFilter=true, "
                "or use a TAG expression",
            )
        found = self.service.subscription_groups.find(group)
        client = call.client
        by_queue = client.client_type == pb.ClientType.PUSH_CONSUMER and mq.id >= 0
        pop = PopRequest(
            group,
            topic,
            mq.id if by_queue else -1,
            min(request.batch_size, MAX_POP_MSGS),
            bc.default_invisible_time_mills if auto_renew else self._invisible_ms(request),
            self._poll_ms(request, remaining_s, _request_timeout_ms(client.settings)),
            (ExpressionType.SQL92 if sql else ExpressionType.TAG).value,
            expr.expression or None,
            bool(found is not None and found.consume_message_orderly),
        )
        key = (client.channel.client_id, group, request.attempt_id) if request.attempt_id else None
        return Plan(pop, auto_renew, key)

    def _invisible_ms(self, request: spb.ReceiveMessageRequest) -> int:
        bc = self.service.broker_config
        ms = request.invisible_duration.ToMilliseconds() if request.HasField("invisible_duration") else 0
        lo = max(bc.min_invisible_time_mills_for_recv, 1)
        if not lo <= ms <= bc.max_invisible_time_mills:
            raise RpcError(
                Code.ILLEGAL_INVISIBLE_TIME,
                f"invisible_duration {ms} ms is outside [{lo}, {bc.max_invisible_time_mills}] ms "
                "(minInvisibleTimeMillsForRecv, maxInvisibleTimeMills)",
            )
        return ms

    def _poll_ms(
        self, request: spb.ReceiveMessageRequest, remaining_s: float | None, request_timeout_ms: int
    ) -> int:
        bc = self.service.broker_config
        lo = bc.grpc_client_consumer_min_long_polling_timeout_millis
        hi = bc.grpc_client_consumer_max_long_polling_timeout_millis
        remaining = None if remaining_s is None else int(remaining_s * 1000)
        if request.HasField("long_polling_timeout"):
            ms = request.long_polling_timeout.ToMilliseconds()
        elif remaining is not None:
            ms = remaining - request_timeout_ms // 2
        else:
            ms = hi
        ms = min(max(ms, lo), hi)
        if remaining is None:
            return ms
        room = remaining - bc.long_polling_reserve_time_in_millis
        if ms <= room:
            return ms
        if room >= lo:
            return room
        raise RpcError(
            Code.ILLEGAL_POLLING_TIME,
            f"the call's deadline leaves {remaining} ms, less than the shortest long poll "
            f"({lo} ms, grpcClientConsumerMinLongPollingTimeoutMillis): give the call more time",
        )

    # -- the answer -----------------------------------------------------------------------------

    def _messages(self, result: PopResult, topic: str) -> list[tuple[spb.ReceiveMessageResponse, Delivered]]:
        exts = decode_records(result.body())
        assert len(exts) == result.count, (len(exts), result.count)
        out = []
        it = iter(exts)
        for pq in result.queues:
            counts = pq.counts
            for i, offset in enumerate(pq.offsets):
                ext = next(it)
                h = ReceiptHandle(
                    pq.start_offset, result.pop_time, result.invisible_ms, result.revive_qid,
                    pq.kind, result.broker_name, pq.queue_id, offset,
                )  # fmt: skip
                d = Delivered(h, counts[i] if counts is not None else ext.reconsume_times)
                out.append((_response(ext, topic, d), d))
        return out

    def _again(
        self, items: list[Delivered], plan: Plan, call: Call
    ) -> list[tuple[spb.ReceiveMessageResponse, Delivered]]:
        """An attempt's messages read again, each with its current handle (renewals change it)."""
        store = self.pop.store
        p = plan.pop
        out = []
        for d in items:
            h = d.handle
            stored = h.stored_topic(p.topic, p.group)
            offset = store.get_commit_log_offset_in_queue(stored, h.queue_id, h.queue_offset)
            raw = store.lookup_message_by_offset(offset) if offset >= 0 else None
            if raw is None:
                continue  # cleaned up since
            response = _response(decode_record(raw), p.topic, d)
            sp = response.message.system_properties
            current = self.renew.current(call.client.channel.client_id, p.group, sp.message_id)
            if current is not None:
                sp.receipt_handle = current.encode()
            out.append((response, Delivered(current or h, d.attempts)))
        return out

    async def _write(
        self,
        context: Any,
        plan: Plan,
        call: Call,
        messages: list[tuple[spb.ReceiveMessageResponse, Delivered]],
    ) -> None:
        written = 0
        client_id = call.client.channel.client_id
        p = plan.pop
        try:
            await context.write(_OK_ENTRY)
            for response, d in messages:
                await context.write(response)
                written += 1
                if plan.auto_renew:
                    sp = response.message.system_properties
                    held = Held(p.group, p.topic, sp.receipt_handle, d.handle, wall_ms(), d.attempts)
                    self.renew.hold(client_id, sp.message_id, held)
            await _finish(context, None)
        finally:
            if written < len(messages) and plan.attempt_key is None:
                self._nack([d for _, d in messages[written:]], p)

    def _nack(self, items: list[Delivered], p: PopRequest) -> None:
        task = asyncio.get_running_loop().create_task(self._nack_all(items, p.group, p.topic))
        self._nacks.add(task)
        task.add_done_callback(self._nacks.discard)

    async def _nack_all(self, items: list[Delivered], group: str, topic: str) -> None:
        for d in items:
            h = d.handle
            try:
                await self.pop.change_invisible(
                    group,
                    h.stored_topic(topic, group),
                    h.queue_id,
                    h.queue_offset,
                    h.encode(),
                    NACK_INVISIBLE_MS,
                )
            except PopError as e:  # acked or redelivered meanwhile: nothing to give back
                log.info("receive of %s not written; its message at %d stays as it is: %s",
                         group, h.queue_offset, e.remark)  # fmt: skip


def _request_timeout_ms(settings: pb.Settings | None) -> int:
    """The client's request timeout from its settings (the clients' default, 3 s, without)."""
    if settings is not None and settings.HasField("request_timeout"):
        return settings.request_timeout.ToMilliseconds()
    return 3000


def _response(ext: MessageExt, topic: str, d: Delivered) -> spb.ReceiveMessageResponse:
    """The stream entry of one message (built in place in the entry, not copied into it)."""
    response = spb.ReceiveMessageResponse()
    msg = response.message
    fill_message(msg, ext, topic)
    sp = msg.system_properties
    sp.receipt_handle = d.handle.encode()
    sp.delivery_attempt = d.attempts + 1
    invisible = sp.invisible_duration
    invisible.seconds, ms = divmod(d.handle.invisible_time, 1000)
    invisible.nanos = ms * 1_000_000
    return response


async def _finish(context: Any, answer: pb.Status | None) -> None:
    """Write the status (when given), then the delivery timestamp entry that ends the stream."""
    if answer is not None:
        await context.write(spb.ReceiveMessageResponse(status=answer))
    done = spb.ReceiveMessageResponse()
    done.delivery_timestamp.FromMilliseconds(wall_ms())
    await context.write(done)
