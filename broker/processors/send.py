"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE.

Owns the send checks (broker and topic write permission, topic name, system topics, auto-create,
queue id range, body and properties sizes) and the mapping of the store's PutMessageStatus to a
response code with a remark. The V2 header carries the same fields renamed ``a``..``n``.
"""

from __future__ import annotations

import ipaddress
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from rocketpy.broker.processors.eager import run_eager
from rocketpy.broker.schedule.delivery import DeliveryTimeService, asks_later_delivery, may_be_timed
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import BrokerMessage, MessageStore, PutMessageResult, PutMessageStatus
from rocketpy.broker.topic_config import (
    TopicConfigManager,
    TopicLimitError,
    is_send_forbidden_topic,
    validate_topic_name,
)
from rocketpy.broker.transaction.half import is_half_message
from rocketpy.broker.transaction.service import TransactionService
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.header.send import SendMessageRequestHeader
from rocketpy.message import MessageConst
from rocketpy.perm import PERM_WRITE, is_writeable
from rocketpy.record import MAX_PROPERTIES_BYTES, RecordError, decode_batch
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import FLAG_RESPONSE, RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.route import TopicConfig
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger("rocketpy.broker.send")

_UNIQ_PREFIX = MessageConst.UNIQ_KEY + "\x01"
_TOPIC_CHECK_CACHE_MAX = 65_536
_UNSEEN = ("unseen", "")  # _topic_problems' answer for a topic not checked yet
_TIMED_BATCH = (
    "a batch cannot carry delayed or timed messages (delay_level, deliver_time_ms, delay_seconds), "
    "as in RocketMQ; send them one by one"
)


def unique_key_of(properties: str) -> str | None:
    """The UNIQ_KEY value inside a properties string, without decoding the rest."""
    start = properties.find(_UNIQ_PREFIX)
    if start < 0 or (start > 0 and properties[start - 1] != "\x02"):
        return None
    start += len(_UNIQ_PREFIX)
    end = properties.find("\x02", start)
    return properties[start : end if end >= 0 else len(properties)]


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
        broker_config: the broker's permission, names and topic auto-creation settings (live).
        store_config: the message size limit and sync-flush timeout.
        topic_config: the topic table (lookups, auto-creation on send).
        store: where messages are put.
        stats: counts stored messages and bytes.
        transactions: stores TRAN_MSG sends as half messages.
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        topic_config: TopicConfigManager,
        store: MessageStore,
        delivery: DeliveryTimeService,
        stats: BrokerStats,
        transactions: TransactionService | None = None,
    ) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.topic_config = topic_config
        self.store = store
        self.delivery = delivery
        self.stats = stats
        self.transactions = transactions  # None: TRAN_MSG sends are stored as plain messages
        self._topic_problems: dict[str, tuple[int, str] | None] = {}
        #: SYNC_MASTER: awaited after a put, ``(result, wait)``; sets the status when no slave acks
        self.replica_wait: Callable[[PutMessageResult, bool], Awaitable[None]] | None = None

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
        if batch:
            return run_eager(self._send_batch(request, header, queue_id, born_host))
        return self._send_one(request, header, queue_id, born_host)

    def _error(self, request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        log.info("send from request %d refused: %s", request.opaque, remark)
        return RemotingCommand.response(request, code, remark)

    def _check(self, request: RemotingCommand, h: SendMessageRequestHeader) -> TopicConfig | RemotingCommand:
        """The topic's config when the send may go ahead, else the error response.

        The common case (writable broker, known valid topic, writable, queue in range) is decided
        with a few lookups; anything else goes through ``_check_slow``, which also auto-creates.
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
        bc = self.broker_config
        name = bc.broker_name
        if not is_writeable(bc.broker_permission):
            return self._error(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{name}] does not accept messages now: its write permission is wiped "
                "(brokerPermission); send to another broker or restore it with mqadmin updateBrokerConfig",
            )
        problem = self._topic_problem(h.topic)
        if problem is not None:
            return self._error(request, *problem)
        try:
            tc = self._topic_config(h)
        except TopicLimitError as e:
            return self._error(request, ResponseCode.SYSTEM_ERROR, str(e))
        if tc is None:
            return self._error(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{h.topic}] does not exist on broker {name} and autoCreateTopicEnable is false; "
                f"create it with: mqadmin updateTopic -t {h.topic} -c {bc.broker_cluster_name}",
            )
        if not is_writeable(tc.perm):
            return self._error(
                request,
                ResponseCode.NO_PERMISSION,
                f"topic[{h.topic}] on broker {name} is not writable (perm={tc.perm}); "
                "restore its write permission with mqadmin updateTopic -p 6",
            )
        limit = max(tc.write_queue_nums, tc.read_queue_nums)
        if h.queue_id >= limit:
            return self._error(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"queueId {h.queue_id} is out of range for topic[{h.topic}] on broker {name}: "
                f"it has {tc.write_queue_nums} write queues (ids 0..{tc.write_queue_nums - 1}); "
                "refresh the route",
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

    def _send_one(
        self, request: RemotingCommand, h: SendMessageRequestHeader, queue_id: int, born: tuple[str, int]
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """Store one message; the response at once when the put did not suspend (ASYNC_FLUSH)."""
        problem = self._check_message(len(request.body), h.properties)
        if problem:
            return self._error(request, ResponseCode.MESSAGE_ILLEGAL, problem)
        msg = self._message(h, queue_id, request.body, h.flag, h.properties, born)
        if self.transactions is not None and is_half_message(h.properties):  # TRAN_MSG: a half message
            put = run_eager(self.transactions.put_half(msg, h.producer_group))
        elif may_be_timed(h.properties):  # DELAY / TIMER_*: stored to wait until due
            put = run_eager(self.delivery.put(msg))
        else:
            put = run_eager(self.store.put_message(msg))
        if isinstance(put, PutMessageResult) and self.replica_wait is None:
            uniq = unique_key_of(h.properties)
            return self._response(request, put, queue_id, uniq, 1, len(request.body), h.topic)
        return self._finish_one(request, put, queue_id, h.properties, msg.wait_store_msg_ok, h.topic)

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
        result = put if isinstance(put, PutMessageResult) else await put
        if self.replica_wait is not None:
            await self.replica_wait(result, wait)
        uniq = unique_key_of(properties)
        return self._response(request, result, queue_id, uniq, 1, len(request.body), topic)

    async def _send_batch(
        self, request: RemotingCommand, h: SendMessageRequestHeader, queue_id: int, born: tuple[str, int]
    ) -> RemotingCommand:
        try:
            items = decode_batch(request.body)
        except RecordError as e:
            return self._error(request, ResponseCode.MESSAGE_ILLEGAL, f"the batch body is malformed: {e}")
        if not items:
            return self._error(request, ResponseCode.MESSAGE_ILLEGAL, "the batch body holds no message")
        msgs = []
        uniqs = []
        max_body = self.store_config.max_message_size
        short_props = MAX_PROPERTIES_BYTES // 4  # shorter strings cannot exceed the limit in UTF-8
        topic, sys_flag, born_ts, reconsume = h.topic, h.sys_flag, h.born_timestamp, h.reconsume_times
        for body, flag, props in items:
            if len(body) > max_body or len(props) > short_props:  # _check_message's conditions
                problem = self._check_message(len(body), props)
                if problem:
                    return self._error(request, ResponseCode.MESSAGE_ILLEGAL, problem)
            if may_be_timed(props) and asks_later_delivery(props):
                return self._error(request, ResponseCode.MESSAGE_ILLEGAL, _TIMED_BATCH)
            msgs.append(BrokerMessage(topic, queue_id, body, props, flag, sys_flag, born_ts, born, reconsume))
            uniqs.append(unique_key_of(props) or "")
        result = await self.store.put_messages(msgs)
        if self.replica_wait is not None:
            await self.replica_wait(result, msgs[0].wait_store_msg_ok)
        return self._response(request, result, queue_id, ",".join(uniqs), len(msgs), len(request.body), topic)

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
                log.warning("put refused: %s", remark)
                return RemotingCommand.response(request, code, remark)
        self.stats.on_put(topic, msg_num, size_bytes)
        if uniq:
            ext = {
                "msgId": result.offset_msg_id,
                "queueId": queue_id,
                "queueOffset": result.queue_offset,
                "transactionId": uniq,
            }
        else:
            ext = {"msgId": result.offset_msg_id, "queueId": queue_id, "queueOffset": result.queue_offset}
        return RemotingCommand(code, request.opaque, FLAG_RESPONSE, remark, ext, b"", request.serialize_type)


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
