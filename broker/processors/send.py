"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE.

Owns the send checks (broker and topic write permission, topic name, system topics, auto-create,
queue id range, body and properties sizes) and the mapping of the store's PutMessageStatus to a
response code with a remark. The V2 header carries the same fields renamed ``a``..``n``.

``handle_run`` takes the send requests one read brought (``Channel._dispatch_runs``): each is
checked and answered as if alone, but the plain messages among them (no batch, delivery time or
transaction; no SYNC_MASTER wait) that go to one queue are stored by one ``put_messages``, that is
one commitlog append, with one SYNC_FLUSH wait; each request then gets its own record's offsets.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from rocketpy._accel import twin
from rocketpy.broker.processors.eager import run_eager
from rocketpy.broker.processors.guard import SEND, Guard
from rocketpy.broker.processors.sendrun import (
    MAX_RUN_GROUP,
    Groups,
    group_plain,
    plain_messages,
    run_plain,
    stored_answers,
)
from rocketpy.broker.schedule.delivery import DeliveryTimeService, asks_later_delivery
from rocketpy.broker.send_queue import SendQueue
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import BrokerMessage, PutMessageResult, PutMessageStatus, Store
from rocketpy.broker.topic_config import (
    TopicLimitError,
    is_send_forbidden_topic,
    validate_topic_name,
)
from rocketpy.broker.transaction.service import TransactionService
from rocketpy.config import StoreConfig
from rocketpy.message_props import (
    UNIQ_SEP,
    get_property,
    is_half_message,
    may_be_timed,
    may_be_timed_or_half,
)
from rocketpy.perm import PERM_WRITE
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.send import SendMessageRequestHeader, SendMessageResponseHeader
from rocketpy.record import (
    MAX_PROPERTIES_BYTES,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_TYPE_MASK,
    RecordError,
    decode_batch,
)
from rocketpy.remoting.command import FLAG_RESPONSE, RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import HandlerResult
from rocketpy.route import TopicConfig
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger("rocketpy.broker.send")
#: A stored send's answer map, positional (offset msg id, queue id, queue offset, unique key or None).
_send_answer = SendMessageResponseHeader.pack

_TOPIC_CHECK_CACHE_MAX = 65_536
_UNSEEN = ("unseen", "")  # _topic_problems' answer for a topic not checked yet
_TIMED_BATCH = (
    "a batch cannot carry delayed or timed messages (delay_level, deliver_time_ms, delay_seconds), "
    "as in RocketMQ; send them one by one"
)


@twin
def batch_messages(
    items: list[tuple[bytes, int, str]],
    topic: str,
    queue_id: int,
    sys_flag: int,
    born_ts: int,
    born: tuple[str, int],
    reconsume: int,
    max_body: int,
    short_props: int,
) -> tuple[list[BrokerMessage], str, list[int]]:
    """The messages of a decoded SEND_BATCH body (``decode_batch``'s items), their UNIQ_KEYs
    comma-joined (the answer's msgId), and the indexes of the items ``_send_batch`` must look at
    closer: a body over ``max_body`` bytes, properties of more than ``short_props`` characters, or
    properties that may ask for a later delivery or a transaction (compiled twin in ``_speedups``).
    """
    msgs, uniqs, screened = [], [], []
    for i, (body, flag, props) in enumerate(items):
        if len(body) > max_body or len(props) > short_props or may_be_timed_or_half(props):
            screened.append(i)
        msgs.append(BrokerMessage(topic, queue_id, body, props, flag, sys_flag, born_ts, born, reconsume))
        uniqs.append(_batch_unique_key(props))
    return msgs, ",".join(uniqs), screened


def _batch_unique_key(props: str) -> str:
    """A batch item's UNIQ_KEY for the answer's msgId, by the compiled ``batch_messages``' rule: the
    first ``UNIQ_KEY\\x01`` in the string only, "" when that one does not start a pair (where
    ``get_property`` would look further). The two twins must answer alike until the compiled one
    walks pairs as ``get_property`` does."""
    i = props.find(UNIQ_SEP)
    if i < 0 or (i > 0 and props[i - 1] != "\x02"):
        return ""
    return get_property(props, UNIQ_SEP) or ""


def born_host_of(peer: tuple[str, int] | None) -> tuple[str, int] | None:
    """The born host stored for a producer at ``peer``: its IPv4 address and port.

    An IPv4-mapped IPv6 peer (``::ffff:a.b.c.d``, a dual-stack listener) is its IPv4 address.
    None when the address cannot be stored: the socket reported no peer, or a true IPv6 peer (the
    record's born-host field holds IPv4 only; RocketMQ's IPv6 record layout is not built).
    """
    if peer is None:
        return None
    try:
        ip = ipaddress.ip_address(peer[0].split("%", 1)[0])  # an IPv6 scope id is not part of it
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is None:
            return None
        ip = ip.ipv4_mapped
    return str(ip), peer[1]


class SendMessageProcessor:
    """Handles the send codes for one broker.

    Args:
        guard: the broker's checks (permission, topic) over its config and topic table (lookups,
            auto-creation on send).
        store_config: the message size limit and sync-flush timeout.
        store: where messages are put.
        stats: counts stored messages and bytes.
        transactions: stores TRAN_MSG sends as half messages.
        send_queue: the broker's send queue (SYSTEM_BUSY when puts wait too long for the disk).
    """

    def __init__(
        self,
        guard: Guard,
        store_config: StoreConfig,
        store: Store,
        delivery: DeliveryTimeService,
        stats: BrokerStats,
        transactions: TransactionService | None = None,
        send_queue: SendQueue | None = None,
    ) -> None:
        self.guard = guard
        self.broker_config = broker_config = guard.broker_config
        self.store_config = store_config
        self.topic_config = guard.topic_config
        self.store = store
        self.delivery = delivery
        self.stats = stats
        self.transactions = transactions  # None: TRAN_MSG sends are stored as plain messages
        self._topic_problems: dict[str, tuple[int, str] | None] = {}
        # puts waiting for the disk and the SYSTEM_BUSY rules (one per broker)
        self.send_queue = send_queue or SendQueue(broker_config, store_config, store.flush_started)
        #: SYNC_MASTER: ``(result, wait)`` after a put -> a future of the replicas holding it (False:
        #: timed out), or None when nothing waits (the status says why when no replica is there)
        self.replica_future: Callable[[PutMessageResult, bool], asyncio.Future[bool] | None] | None = None
        #: controller mode (broker/failover/replicas.py): ``(code, remark)`` refusing a send before
        #: it is stored (not the master, fenced, switching over), and the remark refusing to
        #: acknowledge a stored send (the lease may have ended since); None: go ahead
        self.write_gate: Callable[[], tuple[int, str] | None] | None = None
        self.ack_gate: Callable[[], str | None] | None = None

    def _topic_problem(self, topic: str) -> tuple[int, str] | None:
        """(code, remark) when ``topic`` cannot be sent to by its name alone (cached per name)."""
        try:
            return self._topic_problems[topic]
        except KeyError:
            pass
        remark = validate_topic_name(topic)
        problem = (ResponseCode.MESSAGE_ILLEGAL, remark) if remark else None
        if problem is None and is_send_forbidden_topic(topic):
            problem = (
                ResponseCode.NO_PERMISSION,
                f"sending to system topic {topic} is forbidden; send to a topic of your own",
            )
        if len(self._topic_problems) >= _TOPIC_CHECK_CACHE_MAX:
            self._topic_problems.clear()
        self._topic_problems[topic] = problem
        return problem

    def handle(
        self, channel: Channel, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """Check the request and store it; answers inline unless the store had to wait."""
        busy = self._busy(request)
        if busy is not None:
            return busy
        admitted = self._admit(channel, request)
        if isinstance(admitted, RemotingCommand):
            return admitted
        header, queue_id, born_host, batch = admitted
        if batch:
            return self._send_batch(request, header, queue_id, born_host)
        return self._send_one(request, header, queue_id, born_host)

    def handle_run(self, channel: Channel, requests: list[RemotingCommand]) -> list[HandlerResult]:
        """The send requests of one read, in order: plain messages to one queue share one append.

        Stores happen in arrival order per queue: a request that is not grouped (a batch, a timed
        or half message) first stores the groups opened before it. A run of plain sends only (a
        sequential producer's lone send, most runs) is answered by ``run_plain`` in one call.
        """
        out: list[Any] | None = run_plain(self, channel, requests)
        if out is not None:
            return out
        out = []
        groups: Groups = {}  # open groups: indexes into ``out``
        plain = self._plain(channel, requests)
        i, n = 0, len(requests)
        while i < n:
            if plain is not None:  # _run_one's grouping of the plain messages, checked by plain_messages
                i = group_plain(requests, plain, i, out, groups, MAX_RUN_GROUP, partial(self._put_group, out))
                if i == n:
                    break
            try:
                self._run_one(channel, requests[i], out, groups)
            except Exception as exc:  # this request alone fails, as ``handle`` would (bad header)
                out.append(_failed(exc))
            i += 1
        self._put_groups(out, groups)
        return out

    def _plain(self, channel: Channel, requests: list[RemotingCommand]) -> list[BrokerMessage | None] | None:
        """``plain_messages`` of the run when the fast path may take its plain sends: the broker
        writable, no write or acknowledgement gate, the send queue not refusing, the producer's born
        host known (a SYNC_MASTER's slave wait is the group's, ``_put_group``). None: every request
        goes the general way."""
        born = channel.attrs.get("born_host")
        if (
            born is None
            or self.write_gate is not None
            or self.ack_gate is not None
            or not self.broker_config.broker_permission & PERM_WRITE
            or self.send_queue.would_refuse()  # refusal() would count a SYSTEM_BUSY not answered
        ):
            return None
        return plain_messages(
            requests, self.topic_config.get, self._topic_problems, born, self.store_config.max_message_size
        )

    def _run_one(
        self,
        channel: Channel,
        request: RemotingCommand,
        out: list[Any],
        groups: Groups,
    ) -> None:
        """Answer ``request`` into ``out``, or add it to its queue's open group."""
        admitted = self._busy(request) or self._admit(channel, request)
        if isinstance(admitted, RemotingCommand):
            out.append(admitted)
            return
        h, queue_id, born, batch = admitted
        if batch or self._stored_apart(h.properties):
            self._put_groups(out, groups)
            out.append(
                self._send_batch(request, h, queue_id, born)
                if batch
                else self._send_one(request, h, queue_id, born)
            )
            return
        msg = self._one_message(request, h, queue_id, born)
        if isinstance(msg, RemotingCommand):
            out.append(msg)
            return
        key = (h.topic, queue_id, msg.wait_store_msg_ok)
        members = groups.get(key)
        if members is None:
            members = groups[key] = []
        members.append(len(out))
        out.append((request, msg, queue_id, h.properties))
        if len(members) >= MAX_RUN_GROUP:
            self._put_group(out, groups.pop(key))

    def _put_groups(self, out: list[Any], groups: Groups) -> None:
        for members in groups.values():
            self._put_group(out, members)
        groups.clear()

    def _stored_apart(self, properties: str) -> bool:
        """True for a message ``handle_run`` does not group: a half message or a timed message."""
        return may_be_timed(properties) or (self.transactions is not None and is_half_message(properties))

    def _put_group(self, out: list[Any], members: list[int]) -> None:
        """Store the messages at ``members`` of ``out`` with one append; put each one's result there."""
        msgs = [out[i][1] for i in members]
        self._after_put(out, members, msgs, self.store.put_now(msgs))

    def _after_put(self, out: list[Any], members: list[int], msgs: list[BrokerMessage], put: Any) -> None:
        """``_put_group`` once ``put_now`` answered ``put`` (None: it would have suspended, nothing
        written): the put finished another way if needed, then each member's answer in ``out``."""
        if put is None:  # SYNC_FLUSH: answered from the flush; the next file: the coroutine
            if self.replica_future is None:
                durable = self.store.put_then_flush(msgs)
                if durable is not None:
                    self._members_waited(out, members, *durable, self.store.flush_outcome)
                    return
            put = run_eager(self.store.put_messages(msgs))
        if isinstance(put, PutMessageResult):
            self._stored_group(out, members, msgs, put)
            return
        # the put that suspended (the next file; SYNC_FLUSH with a SYNC_MASTER's replica wait after
        # it) of the whole group, awaited by each member's task
        shared = asyncio.ensure_future(self._group_results(put, len(members), msgs[0].wait_store_msg_ok))
        shared.add_done_callback(_retrieve)  # its members may all be cancelled (connection closed)
        for n, i in enumerate(members):
            out[i] = self._member_later(shared, n, *out[i])

    def _stored_group(
        self, out: list[Any], members: list[int], msgs: list[BrokerMessage], put: PutMessageResult
    ) -> None:
        """Answer a group stored at once: once the replicas hold it (SYNC_MASTER), else now."""
        if self.replica_future is not None:
            waited = self.replica_future(put, msgs[0].wait_store_msg_ok)
            if waited is not None:
                self._members_waited(out, members, put, waited, _replica_outcome)
                return
        if (
            put.status is PutMessageStatus.PUT_OK
            and self.ack_gate is None
            and put.sizes is not None
            and len(put.sizes) == len(members)
        ):
            self.stats.on_put(msgs[0].topic, len(members), stored_answers(out, members, put, put.host_hex))
            return
        for i, result in zip(members, _per_record(put, len(members)), strict=True):
            request, msg, queue_id, props = out[i]
            out[i] = self._response(
                request, result, queue_id, get_property(props, UNIQ_SEP), 1, len(request.body), msg.topic
            )

    def _members_waited(
        self,
        out: list[Any],
        members: list[int],
        result: PutMessageResult,
        waited: asyncio.Future[bool],
        outcome: Callable[[PutMessageResult, bool], PutMessageResult],
    ) -> None:
        """The answers of a group (``_put_group``) that waits for its flush (SYNC_FLUSH) or its
        replicas (SYNC_MASTER): futures completed by one callback on that wait (each member's
        record, or the timeout status for all), holding one place in the send queue meanwhile; no
        task per member, none for the group."""
        entries = [out[i] for i in members]

        def respond(i: int, record: PutMessageResult) -> RemotingCommand:
            request, msg, queue_id, props = entries[i]
            uniq = get_property(props, UNIQ_SEP)
            return self._response(request, record, queue_id, uniq, 1, len(request.body), msg.topic)

        n = len(entries)
        answers = self._when_done(result, waited, outcome, n, lambda stored: _per_record(stored, n), respond)
        for i, answer in zip(members, answers, strict=True):
            out[i] = answer

    def _when_done(
        self,
        result: PutMessageResult,
        waited: asyncio.Future[bool],
        outcome: Callable[[PutMessageResult, bool], PutMessageResult],
        n: int,
        records: Callable[[PutMessageResult], list[PutMessageResult]],
        respond: Callable[[int, PutMessageResult], RemotingCommand],
    ) -> list[asyncio.Future[RemotingCommand]]:
        """``n`` answers completed by one callback on ``waited`` (a flush, or the replicas holding
        the bytes): the ``i``-th is ``respond(i, record)`` of the ``i``-th of ``records(result)``
        once ``outcome`` gave the result its status (FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT when
        the wait timed out), holding one place in the send queue meanwhile. An answer cancelled
        meanwhile (its connection closed) is skipped, its response never made; a cancelled wait
        cancels the others, as it cancelled the sends' tasks before; an error answers each as its
        handler's error."""
        ticket = self.send_queue.enter()
        loop = asyncio.get_running_loop()
        answers: list[asyncio.Future[RemotingCommand]] = [loop.create_future() for _ in range(n)]

        def answer_when_done(done: asyncio.Future[bool]) -> None:
            self.send_queue.leave(ticket)
            waiting = [i for i, answer in enumerate(answers) if not answer.done()]
            if not waiting:
                return
            if done.cancelled():
                for i in waiting:
                    answers[i].cancel()
                return
            try:
                stored = records(outcome(result, done.result()))
                made = [(i, respond(i, stored[i])) for i in waiting]
            except Exception as exc:  # the channel answers it as each handler's error
                for i in waiting:
                    answers[i].set_exception(exc)
                return
            for i, response in made:
                answers[i].set_result(response)

        waited.add_done_callback(answer_when_done)
        return answers

    async def _group_results(
        self, put: Awaitable[PutMessageResult], n: int, wait: bool
    ) -> list[PutMessageResult]:
        """The per-record results of a group put that suspended (holding one place in the send
        queue), once a SYNC_MASTER's replicas hold them."""
        ticket = self.send_queue.enter()
        try:
            result = await put
            if self.replica_future is not None:
                await self._replicated(result, wait)
            return _per_record(result, n)
        finally:
            self.send_queue.leave(ticket)

    async def _member_later(
        self,
        shared: asyncio.Future[list[PutMessageResult]],
        n: int,
        request: RemotingCommand,
        msg: BrokerMessage,
        queue_id: int,
        properties: str,
    ) -> RemotingCommand:
        """The answer of the ``n``-th request of a group whose put suspended."""
        result = (await asyncio.shield(shared))[n]
        return self._response(
            request, result, queue_id, get_property(properties, UNIQ_SEP), 1, len(request.body), msg.topic
        )

    def _busy(self, request: RemotingCommand) -> RemotingCommand | None:
        """SYSTEM_BUSY (or the read-only remark) when the send queue refuses new sends; nothing is
        stored, so the producer may retry on another broker."""
        if self.write_gate is not None:
            refused = self.write_gate()
            if refused is not None:
                return RemotingCommand.response(request, refused[0], refused[1])
        busy = self.send_queue.refusal()
        if busy is None:
            return None
        if self.store.read_only_remark:  # puts stuck behind a failed flush: say why, not "busy"
            return RemotingCommand.response(
                request, ResponseCode.SERVICE_NOT_AVAILABLE, self.store.read_only_remark
            )
        return RemotingCommand.response(request, ResponseCode.SYSTEM_BUSY, busy)

    def _admit(
        self, channel: Channel, request: RemotingCommand
    ) -> tuple[SendMessageRequestHeader, int, tuple[str, int], bool] | RemotingCommand:
        """The request's header, queue id, born host and batch flag, or its refusal."""
        header = SendMessageRequestHeader.from_ext(request.ext, v2=request.code != RequestCode.SEND_MESSAGE)
        # RocketMQ's C++ client sends a batch as SEND_MESSAGE with the header's batch flag.
        batch = header.batch or request.code == RequestCode.SEND_BATCH_MESSAGE
        tc_or_error = self._check(request, header)
        if isinstance(tc_or_error, RemotingCommand):
            return tc_or_error
        tc = tc_or_error
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(tc.write_queue_nums)
        born_host = channel.attrs.get("born_host")
        if born_host is None:
            born_host = born_host_of(channel.peer)
            if born_host is None:
                return self._error(
                    request,
                    ResponseCode.SYSTEM_ERROR,
                    f"cannot record the producer's address {channel.remote_addr} as the message's born "
                    "host (this broker stores IPv4 born hosts only); connect to the broker over IPv4",
                )
            channel.attrs["born_host"] = born_host
        return header, queue_id, born_host, batch

    def _error(self, request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        log.info("send from request %d refused: %s", request.opaque, remark)
        return RemotingCommand.response(request, code, remark)

    def _check(self, request: RemotingCommand, h: SendMessageRequestHeader) -> TopicConfig | RemotingCommand:
        """The topic's config when the send may go ahead, else the error response.

        The common case (writable broker, known valid topic, writable, queue in range) is decided
        with a few lookups; anything else goes through ``_check_slow``: the guard's steps in order
        (``guard.py``, whose remarks the answer carries), with auto-creation.
        """
        if (
            self.broker_config.broker_permission & PERM_WRITE
            and self._topic_problems.get(h.topic, _UNSEEN) is None
        ):
            tc = self.topic_config.get(h.topic)
            if (
                tc is not None
                and tc.perm & PERM_WRITE
                and (h.queue_id < tc.write_queue_nums or h.queue_id < tc.read_queue_nums)
            ):
                return tc
        return self._check_slow(request, h)

    def _check_slow(
        self, request: RemotingCommand, h: SendMessageRequestHeader
    ) -> TopicConfig | RemotingCommand:
        refused = self.guard.broker(SEND)
        if refused is not None:
            return self._error(request, *refused)
        problem = self._topic_problem(h.topic)
        if problem is not None:
            return self._error(request, *problem)
        try:
            found = self._topic_config(h)
        except TopicLimitError as e:
            return self._error(request, ResponseCode.SYSTEM_ERROR, str(e))
        tc = self.guard.topic(SEND, h.topic, found)
        if isinstance(tc, tuple):
            return self._error(request, *tc)
        limit = max(tc.write_queue_nums, tc.read_queue_nums)
        if h.queue_id >= limit:
            return self._error(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"queueId {h.queue_id} is out of range for topic[{h.topic}] on broker "
                f"{self.broker_config.broker_name}: it has {tc.write_queue_nums} write queues "
                f"(ids 0..{tc.write_queue_nums - 1}); refresh the route",
            )
        return tc

    def _topic_config(self, h: SendMessageRequestHeader) -> TopicConfig | None:
        tm = self.topic_config
        tc = tm.get(h.topic)
        if tc is not None:
            return tc
        if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return tm.create_system_group_topic(h.topic, 1)
        return tm.create_on_send(h.topic, h.default_topic, h.default_topic_queue_nums)

    def _check_message(self, body_len: int, properties: str) -> str | None:
        limit = self.store_config.max_message_size
        if body_len > limit:
            return (
                f"the message body is {body_len} bytes; this broker's maxMessageSize is {limit}; "
                "send smaller messages (split or compress the body)"
            )
        if len(properties) > MAX_PROPERTIES_BYTES // 4 and len(properties.encode()) > MAX_PROPERTIES_BYTES:
            return (
                f"the message properties exceed {MAX_PROPERTIES_BYTES} bytes; use fewer or shorter properties"
            )
        return None

    def _message(
        self,
        h: SendMessageRequestHeader,
        queue_id: int,
        body: Any,
        flag: int,
        props: str,
        born: tuple[str, int],
    ) -> BrokerMessage:
        # positional, in BrokerMessage's parameter order (no keyword matching per message)
        return BrokerMessage(
            h.topic, queue_id, body, props, flag, h.sys_flag, h.born_timestamp, born, h.reconsume_times
        )

    def _one_message(
        self, request: RemotingCommand, h: SendMessageRequestHeader, queue_id: int, born: tuple[str, int]
    ) -> BrokerMessage | RemotingCommand:
        """The message of a single send, or its refusal (body or properties too large)."""
        problem = self._check_message(len(request.body), h.properties)
        if problem:
            return self._error(request, ResponseCode.MESSAGE_ILLEGAL, problem)
        return self._message(h, queue_id, request.body, h.flag, h.properties, born)

    def _send_one(
        self, request: RemotingCommand, h: SendMessageRequestHeader, queue_id: int, born: tuple[str, int]
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """Store one message; the response at once when the put did not suspend (ASYNC_FLUSH)."""
        msg = self._one_message(request, h, queue_id, born)
        if isinstance(msg, RemotingCommand):
            return msg
        if self.transactions is not None and is_half_message(h.properties):  # TRAN_MSG: a half message
            put = run_eager(self.transactions.put_half(msg, h.producer_group))
        elif may_be_timed(h.properties):  # DELAY / TIMER_*: stored to wait until due
            put = run_eager(self.delivery.put(msg))
        else:
            if self.replica_future is None:
                durable = self.store.put_then_flush([msg])
                if durable is not None:
                    uniq = get_property(h.properties, UNIQ_SEP)
                    return self._answer_when(
                        request, *durable, self.store.flush_outcome, queue_id, uniq, 1, h.topic
                    )
            else:
                stored = self.store.put_now([msg])
                if stored is not None:
                    uniq = get_property(h.properties, UNIQ_SEP)
                    return self._answer_replicated(
                        request, stored, msg.wait_store_msg_ok, queue_id, uniq, 1, h.topic
                    )
            put = run_eager(self.store.put_message(msg))
        if isinstance(put, PutMessageResult) and self.replica_future is None:
            uniq = get_property(h.properties, UNIQ_SEP)
            return self._response(request, put, queue_id, uniq, 1, len(request.body), h.topic)
        return self._finish_one(request, put, queue_id, h.properties, msg.wait_store_msg_ok, h.topic)

    def _answer_when(
        self,
        request: RemotingCommand,
        result: PutMessageResult,
        waited: asyncio.Future[bool],
        outcome: Callable[[PutMessageResult, bool], PutMessageResult],
        queue_id: int,
        uniq: str | None,
        n: int,
        topic: str,
    ) -> RemotingCommand | asyncio.Future[RemotingCommand]:
        """The answer of a send (one message, or a batch of ``n`` with ``uniq`` their comma-joined
        ids) once ``waited`` ended (its SYNC_FLUSH flush, or its SYNC_MASTER replicas; ``outcome``
        gives the status): a future completed from the wait's own completion (no task, no coroutine
        to resume: one callback), holding a place in the send queue meanwhile; at once when there
        is nothing to wait for."""
        if waited.done() and not waited.cancelled():
            outcome(result, waited.result())
            return self._response(request, result, queue_id, uniq, n, len(request.body), topic)
        return self._when_done(
            result,
            waited,
            outcome,
            1,
            lambda stored: [stored],
            lambda _, stored: self._response(request, stored, queue_id, uniq, n, len(request.body), topic),
        )[0]

    def _answer_replicated(
        self,
        request: RemotingCommand,
        result: PutMessageResult,
        wait: bool,
        queue_id: int,
        uniq: str | None,
        n: int,
        topic: str,
    ) -> RemotingCommand | asyncio.Future[RemotingCommand]:
        """The answer of a SYNC_MASTER send stored at once: when its replicas hold it (``_answer_when``)."""
        assert self.replica_future is not None
        waited = self.replica_future(result, wait)
        if waited is None:
            return self._response(request, result, queue_id, uniq, n, len(request.body), topic)
        return self._answer_when(request, result, waited, _replica_outcome, queue_id, uniq, n, topic)

    async def _replicated(self, result: PutMessageResult, wait: bool) -> None:
        """SYNC_MASTER on the coroutine path: wait until the replicas hold ``result``'s bytes."""
        assert self.replica_future is not None
        waited = self.replica_future(result, wait)
        if waited is not None:
            _replica_outcome(result, await waited)

    async def _finish_one(
        self,
        request: RemotingCommand,
        put: Awaitable[PutMessageResult] | PutMessageResult,
        queue_id: int,
        properties: str,
        wait: bool,
        topic: str,
    ) -> RemotingCommand:
        """The rest of a send whose put suspended (SYNC_FLUSH wait, next file) or waits for a slave."""
        ticket = self.send_queue.enter()
        try:
            result = put if isinstance(put, PutMessageResult) else await put
            if self.replica_future is not None:
                await self._replicated(result, wait)
        finally:
            self.send_queue.leave(ticket)
        uniq = get_property(properties, UNIQ_SEP)
        return self._response(request, result, queue_id, uniq, 1, len(request.body), topic)

    def _send_batch(
        self, request: RemotingCommand, h: SendMessageRequestHeader, queue_id: int, born: tuple[str, int]
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """Check and store a batch request; answered at once, from its flush (SYNC_FLUSH), or by the
        awaitable of the put that suspended (half messages, a slave wait, the next file)."""
        checked = self._batch_checked(request, h, queue_id, born)
        if isinstance(checked, RemotingCommand):
            return checked
        msgs, uniqs, halves = checked
        if not halves and self.replica_future is None:
            durable = self.store.put_then_flush(msgs)
            if durable is not None:
                flushed = self.store.flush_outcome
                return self._answer_when(request, *durable, flushed, queue_id, uniqs, len(msgs), h.topic)
        elif not halves:
            stored = self.store.put_now(msgs)
            if stored is not None:
                wait = msgs[0].wait_store_msg_ok
                return self._answer_replicated(request, stored, wait, queue_id, uniqs, len(msgs), h.topic)
        return run_eager(self._store_batch(request, h, queue_id, msgs, uniqs, halves))

    def _batch_checked(
        self, request: RemotingCommand, h: SendMessageRequestHeader, queue_id: int, born: tuple[str, int]
    ) -> tuple[list[BrokerMessage], str, bool] | RemotingCommand:
        """A batch request's messages, their comma-joined ids and whether they are half messages, or
        the refusal."""
        try:
            items = decode_batch(request.body)
        except RecordError as e:
            return self._error(request, ResponseCode.MESSAGE_ILLEGAL, f"the batch body is malformed: {e}")
        if not items:
            return self._error(request, ResponseCode.MESSAGE_ILLEGAL, "the batch body holds no message")
        max_body = self.store_config.max_message_size
        short_props = MAX_PROPERTIES_BYTES // 4  # shorter strings cannot exceed the limit in UTF-8
        msgs, uniqs, screened = batch_messages(
            items, h.topic, queue_id, h.sys_flag, h.born_timestamp, born, h.reconsume_times, max_body,
            short_props,
        )  # fmt: skip
        for i in screened:
            body, _, props = items[i]
            if len(body) > max_body or len(props) > short_props:  # _check_message's conditions
                problem = self._check_message(len(body), props)
                if problem:
                    return self._error(request, ResponseCode.MESSAGE_ILLEGAL, problem)
            if may_be_timed(props) and asks_later_delivery(props):
                return self._error(request, ResponseCode.MESSAGE_ILLEGAL, _TIMED_BATCH)
        # half messages in a batch (rocketpy's extension; RocketMQ refuses them): all or none
        halves = self.transactions is not None and (
            h.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_PREPARED_TYPE
            or any(is_half_message(items[i][2]) for i in screened)
        )
        return msgs, uniqs, halves

    async def _store_batch(
        self,
        request: RemotingCommand,
        h: SendMessageRequestHeader,
        queue_id: int,
        msgs: list[BrokerMessage],
        uniqs: str,
        halves: bool,
    ) -> RemotingCommand:
        ticket = self.send_queue.enter()
        try:
            if halves:
                assert self.transactions is not None
                result = await self.transactions.put_halves(msgs, h.producer_group)
            else:
                result = await self.store.put_messages(msgs)
            if self.replica_future is not None:
                await self._replicated(result, msgs[0].wait_store_msg_ok)
        finally:
            self.send_queue.leave(ticket)
        return self._response(request, result, queue_id, uniqs, len(msgs), len(request.body), h.topic)

    def _response(
        self,
        request: RemotingCommand,
        result: PutMessageResult,
        queue_id: int,
        uniq: str | None,
        msg_num: int,
        size_bytes: int,
        topic: str,
    ) -> RemotingCommand:
        code: int = ResponseCode.SUCCESS
        remark: str | None = None
        if result.status is not PutMessageStatus.PUT_OK:  # PUT_OK is the fast path
            code, remark = put_status_to_response(result, self.store_config.sync_flush_timeout)
            if result.status not in STORED_STATUSES:
                # a store that refuses every put (disk full, read-only) logged why once already:
                # a line per refused put would flood the log exactly when the disk is short
                level = (
                    logging.DEBUG
                    if result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
                    else logging.WARNING
                )
                log.log(level, "put refused: %s", remark)
                return RemotingCommand.response(request, code, remark)
        if self.ack_gate is not None:
            refused = self.ack_gate()
            if refused is not None:
                return RemotingCommand.response(request, ResponseCode.SYSTEM_BUSY, refused)
        self.stats.on_put(topic, msg_num, size_bytes)
        ext = _send_answer(result.offset_msg_id, queue_id, result.queue_offset, uniq or None)
        return RemotingCommand(code, request.opaque, FLAG_RESPONSE, remark, ext, b"", request.serialize_type)


def _replica_outcome(result: PutMessageResult, held: bool) -> PutMessageResult:
    """``result`` once its replica wait ended: FLUSH_SLAVE_TIMEOUT when it timed out (stored here)."""
    if not held:
        result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    return result


def _failed(exc: Exception) -> asyncio.Future[Any]:
    """A failed result: the channel's task answers it as ``ProcessorTable`` answers a handler that
    raised (a bad header -> INVALID_PARAMETER with its message)."""
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    fut.set_exception(exc)
    return fut


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("a grouped put failed: %r", fut.exception())


def _per_record(result: PutMessageResult, n: int) -> list[PutMessageResult]:
    """Results for the first ``n`` records of a group put (all ``n`` share a refusal)."""
    if n == 1 and result.msg_num == 1:  # a lone send: its put's result is its record's
        return [result]
    if result.status in STORED_STATUSES and result.msg_num >= n:
        return result.per_record()
    return [result] * n


class PutResponse(NamedTuple):
    """How a put status is answered: the code, and a remark (None for success) that may use
    ``{timeout}`` (syncFlushTimeout ms) and ``{detail}`` (``": " + the store's remark``, or
    ``no_detail`` when the store gave none)."""

    code: ResponseCode
    remark: str | None = None
    no_detail: str = ""


_STORE_REFUSED = "the store rejected the message{detail}; fix the message"
_STORE_FAILED = "the store failed to write the message ({status}){detail}; see the broker log"
#: The store's answer -> the send's response (reference §1.4).
PUT_RESPONSES: dict[PutMessageStatus, PutResponse] = {
    PutMessageStatus.PUT_OK: PutResponse(ResponseCode.SUCCESS),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: PutResponse(
        ResponseCode.FLUSH_DISK_TIMEOUT,
        "the message is stored but was not flushed to disk within syncFlushTimeout={timeout} ms; "
        "the disk is slow or overloaded",
    ),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: PutResponse(
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        "the message is stored but no slave confirmed it within syncFlushTimeout={timeout} ms",
    ),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: PutResponse(
        ResponseCode.SLAVE_NOT_AVAILABLE, "the message is stored on the master but no slave is available"
    ),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: PutResponse(
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "the broker's store refuses writes now{detail}; free disk space or send to another broker",
        " (disk full or shutting down)",
    ),
    PutMessageStatus.MESSAGE_ILLEGAL: PutResponse(ResponseCode.MESSAGE_ILLEGAL, _STORE_REFUSED),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutResponse(ResponseCode.MESSAGE_ILLEGAL, _STORE_REFUSED),
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: PutResponse(ResponseCode.SYSTEM_ERROR, _STORE_FAILED),
    PutMessageStatus.UNKNOWN_ERROR: PutResponse(ResponseCode.SYSTEM_ERROR, _STORE_FAILED),
}
#: Statuses of a put that stored the message: the response carries its offsets (RocketMQ answers
#: FLUSH_*_TIMEOUT / SLAVE_NOT_AVAILABLE with the send result, and the producer reports the status).
STORED_STATUSES = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


def put_status_to_response(result: PutMessageResult, sync_flush_timeout_ms: int) -> tuple[int, str | None]:
    """Map a PutMessageResult to (response code, remark)."""
    response = PUT_RESPONSES[result.status]
    if response.remark is None:
        return response.code, None
    detail = f": {result.remark}" if result.remark else response.no_detail
    return response.code, response.remark.format(
        timeout=sync_flush_timeout_ms, detail=detail, status=result.status.name
    )


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.processors import _speedups

    same_signature(batch_messages)(_speedups.batch_messages)
    same_signature(_speedups.batch_messages)(batch_messages)
