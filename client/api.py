"""MQClientAPI: one async method per request code the SDK sends, response code -> exception.

Owns the request building and response decoding of the client side of docs/wire.md (pull,
offsets, heartbeat, consumer list, queue locks, NameServer route and cluster calls; the POP calls
are ``client.pop_api``'s, inherited; reading answers is ``client.answers``') plus the
NameServer choice: a random start in the configured list, round robin to the next one when a call
cannot connect or times out. It is thin: no retries against brokers, no caching (MQClientInstance
and the producer own those; sends go through ``client.send_path``). Every call takes a timeout in
seconds; an error response becomes ``broker_error(code, remark, addr)`` (the ``MQBrokerError``
subclass of its code); network failures stay ``RemotingTimeoutError`` / ``RemotingConnectError``
(both ``MQClientError``).

``SendResult``/``SendStatus``/``PullResult``/``PullStatus`` live in ``client.results`` and are
re-exported here.
"""

# ruff: noqa: ASYNC109  (per-call timeouts in seconds are part of the documented API)

from __future__ import annotations

import asyncio
import random
from typing import Any

from rocketpy.client.answers import answer_header, check, pack_body, unpack_body
from rocketpy.client.pop_api import PopCalls
from rocketpy.client.results import (
    PULL_STATUS_BY_CODE,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from rocketpy.errors import (
    MQBrokerError,
    MQClientError,
    RemotingConnectError,
    RemotingTimeoutError,
    broker_error,
)
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.admin import TopicRequestHeader
from rocketpy.protocol.headers.client import (
    ConsumerGroupRequestHeader,
    UnregisterClientRequestHeader,
    lock_batch_body,
    read_consumer_ids,
    read_locked_queues,
)
from rocketpy.protocol.headers.namesrv import (
    KVConfigRequestHeader,
    KVConfigResponseHeader,
    PutKVConfigRequestHeader,
)
from rocketpy.protocol.headers.offset import (
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    StoreTimeResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketpy.protocol.headers.pull import PullMessageResponseHeader
from rocketpy.protocol.headers.send_back import ConsumerSendMsgBackRequestHeader
from rocketpy.record import decode_records
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicRouteData

__all__ = [
    "MQClientAPI",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "answer_header",
    "check",
    "pack_body",
    "unpack_body",
]


class MQClientAPI(PopCalls):
    """Request/response calls over one shared RemotingClient.

    Args:
        remoting: the instance's RemotingClient (one connection per address).
        namesrv_addrs: NameServer addresses; the first one used is chosen at random.
    """

    def __init__(self, remoting: RemotingClient, namesrv_addrs: list[str]) -> None:
        assert namesrv_addrs
        self.remoting = remoting
        self.namesrv_addrs = list(namesrv_addrs)
        self._ns_index = random.randrange(len(self.namesrv_addrs))

    def _pack(self, obj: Any) -> bytes:
        """A structured request body in this client's encoding."""
        return pack_body(obj, self.remoting.serialize_type)

    # ---- NameServer -------------------------------------------------------------------------------

    async def invoke_namesrv(self, cmd: RemotingCommand, timeout: float) -> tuple[str, RemotingCommand]:
        """Send ``cmd`` to the current NameServer, moving round robin to the next on failure.

        Returns:
            (the NameServer address that answered, its response).

        Raises:
            MQClientError: no NameServer answered; the message lists them and says what to do.
        """
        n = len(self.namesrv_addrs)
        start = self._ns_index
        errors: list[str] = []
        for k in range(n):  # each address once, whatever concurrent calls do to the shared index
            i = (start + k) % n
            addr = self.namesrv_addrs[i]
            try:
                return addr, await self.remoting.invoke(addr, cmd, timeout)
            except (RemotingConnectError, RemotingTimeoutError) as e:
                errors.append(str(e))
                if self._ns_index == i:  # calls failing on the same one move past it once, not back
                    self._ns_index = (i + 1) % n
                cmd = RemotingCommand.request(cmd.code, cmd.ext, cmd.body)
        raise self._unreachable(errors)

    def _unreachable(self, errors: list[str]) -> MQClientError:
        """The error of a call that no NameServer answered (says what to do)."""
        return MQClientError(
            f"no NameServer reachable at {';'.join(self.namesrv_addrs)} ({'; '.join(errors)}):"
            " start one with `mqnamesrv` or fix namesrv_addr / NAMESRV_ADDR"
        )

    async def get_topic_route(self, topic: str, timeout: float = 3.0) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC; None when the topic does not exist."""
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, TopicRequestHeader.pack(topic))
        addr, resp = await self.invoke_namesrv(cmd, timeout)
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        check(resp, addr)
        return TopicRouteData.from_wire(unpack_body(resp))

    async def get_broker_cluster_info(self, timeout: float = 3.0) -> dict[str, Any]:
        """GET_BROKER_CLUSTER_INFO -> ``{"brokerAddrTable": ..., "clusterAddrTable": ...}``."""
        addr, resp = await self.invoke_namesrv(
            RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout
        )
        return unpack_body(check(resp, addr)) or {"brokerAddrTable": {}, "clusterAddrTable": {}}

    async def get_topic_list(self, timeout: float = 3.0) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        cmd = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        addr, resp = await self.invoke_namesrv(cmd, timeout)
        body = unpack_body(check(resp, addr)) or {}
        return list(body.get("topicList", []))

    async def invoke_all_namesrv(
        self, code: int, ext: dict[str, Any], timeout: float = 3.0
    ) -> dict[str, Any]:
        """Send one request to every NameServer; returns addr -> response ext (or the error text)."""
        out: dict[str, Any] = {}
        for addr in self.namesrv_addrs:
            try:
                resp = await self.remoting.invoke(addr, RemotingCommand.request(code, ext), timeout)
                out[addr] = check(resp, addr).ext or {}
            except (MQClientError, MQBrokerError) as e:
                out[addr] = e
        if all(isinstance(v, Exception) for v in out.values()):
            first = next(iter(out.values()))
            raise first
        return out

    async def put_kv_config(self, namespace: str, key: str, value: str, timeout: float = 3.0) -> None:
        """PUT_KV_CONFIG to every NameServer (as ``mqadmin updateKvConfig``).

        Raises:
            MQClientError / MQBrokerError: no NameServer stored it.
        """
        ext = PutKVConfigRequestHeader(namespace=namespace, key=key, value=value).to_ext()
        await self.invoke_all_namesrv(RequestCode.PUT_KV_CONFIG, ext, timeout)

    async def delete_kv_config(self, namespace: str, key: str, timeout: float = 3.0) -> None:
        """DELETE_KV_CONFIG on every NameServer (absent is fine).

        Raises:
            MQClientError / MQBrokerError: no NameServer deleted it.
        """
        await self.invoke_all_namesrv(
            RequestCode.DELETE_KV_CONFIG,
            KVConfigRequestHeader(namespace=namespace, key=key).to_ext(),
            timeout,
        )

    async def get_kv_config(self, namespace: str, key: str, timeout: float = 3.0) -> dict[str, str | None]:
        """GET_KV_CONFIG from every NameServer: address -> value (None: not set there).

        Every NameServer is asked because a put may have missed one that was down then; those that
        do not answer are left out.

        Raises:
            MQClientError: no NameServer answered.
        """
        out: dict[str, str | None] = {}
        errors: list[str] = []
        ext = KVConfigRequestHeader(namespace=namespace, key=key).to_ext()
        for addr in self.namesrv_addrs:
            cmd = RemotingCommand.request(RequestCode.GET_KV_CONFIG, ext)
            try:
                resp = await self.remoting.invoke(addr, cmd, timeout)
            except (RemotingConnectError, RemotingTimeoutError) as e:
                errors.append(str(e))
                continue
            found = resp.code != ResponseCode.QUERY_NOT_FOUND
            out[addr] = (
                answer_header(check(resp, addr), addr, KVConfigResponseHeader).value if found else None
            )
        if not out:
            raise self._unreachable(errors)
        return out

    # ---- Broker: pull and offsets ----------------------------------------------------------------

    async def pull_message(
        self, addr: str, ext: dict[str, Any], timeout: float, *, lite: bool = False, raw: bool = False
    ) -> PullResult:
        """PULL_MESSAGE (or LITE_PULL_MESSAGE) with the docs/wire.md header fields in ``ext``.

        ``raw``: leave the records undecoded in ``PullResult.body`` (a columnar reader decodes them).
        """
        code = RequestCode.LITE_PULL_MESSAGE if lite else RequestCode.PULL_MESSAGE
        resp = await self.remoting.invoke(addr, RemotingCommand.request(code, ext), timeout)
        return self.pull_result(resp, addr, raw=raw)

    def pull_future(self, addr: str, ext: dict[str, Any], timeout: float) -> asyncio.Future[RemotingCommand]:
        """PULL_MESSAGE as ``pull_message``, but the raw response's future (no coroutine or task
        when connected: for readers that keep many pulls in flight); ``pull_result`` reads it.

        Raises:
            MQClientError: too many requests are already pending on the connection (at once).
        """
        cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)
        return self.remoting.invoke_future(addr, cmd, timeout)

    @staticmethod
    def pull_result(resp: RemotingCommand, addr: str, *, raw: bool = False) -> PullResult:
        """The ``PullResult`` of a pull's response from ``addr`` (``raw``: records left undecoded).

        Raises:
            MQBrokerError: the broker answered with an error code.
        """
        status = PULL_STATUS_BY_CODE.get(resp.code)  # type: ignore[call-overload]
        if status is None:
            raise broker_error(resp.code, resp.remark, addr)
        h = answer_header(resp, addr, PullMessageResponseHeader)
        found = status is PullStatus.FOUND and resp.body
        return PullResult(
            status,
            h.next_begin_offset,
            h.min_offset,
            h.max_offset,
            decode_records(resp.body) if found and not raw else [],
            h.suggest_which_broker_id,
            bytes(resp.body) if found and raw else b"",
        )

    async def query_consumer_offset(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        timeout: float = 3.0,
        *,
        zero_if_not_found: bool = False,
    ) -> int | None:
        """QUERY_CONSUMER_OFFSET; None when the group has no offset for the queue.

        ``zero_if_not_found`` asks for RocketMQ's young-queue rule: a group without an offset gets 0
        while the queue still starts at offset 0 (so CONSUME_FROM_LAST_OFFSET on a new topic reads
        it from the beginning).
        """
        ext = QueryConsumerOffsetRequestHeader(group, topic, queue_id, zero_if_not_found).to_ext()
        resp = await self.remoting.invoke(
            addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, ext), timeout
        )
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return answer_header(check(resp, addr), addr, OffsetResponseHeader).offset

    async def update_consumer_offset(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        oneway: bool = True,
        timeout: float = 3.0,
    ) -> None:
        """UPDATE_CONSUMER_OFFSET (oneway by default, as RocketMQ clients send it)."""
        ext = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset).to_ext()
        cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext, oneway=oneway)
        if oneway:
            await self.remoting.invoke_oneway(addr, cmd, timeout)
        else:
            check(await self.remoting.invoke(addr, cmd, timeout), addr)

    async def _queue_call(self, code: int, addr: str, ext: dict[str, Any], timeout: float) -> RemotingCommand:
        return check(await self.remoting.invoke(addr, RemotingCommand.request(code, ext), timeout), addr)

    async def get_max_offset(self, addr: str, topic: str, queue_id: int, timeout: float = 3.0) -> int:
        """GET_MAX_OFFSET: the queue's next offset to be written."""
        resp = await self._queue_call(
            RequestCode.GET_MAX_OFFSET,
            addr,
            QueueRequestHeader(topic=topic, queue_id=queue_id).to_ext(),
            timeout,
        )
        return answer_header(resp, addr, OffsetResponseHeader).offset

    async def get_min_offset(self, addr: str, topic: str, queue_id: int, timeout: float = 3.0) -> int:
        """GET_MIN_OFFSET: the queue's smallest readable offset."""
        resp = await self._queue_call(
            RequestCode.GET_MIN_OFFSET,
            addr,
            QueueRequestHeader(topic=topic, queue_id=queue_id).to_ext(),
            timeout,
        )
        return answer_header(resp, addr, OffsetResponseHeader).offset

    async def search_offset(
        self, addr: str, topic: str, queue_id: int, timestamp_ms: int, timeout: float = 3.0
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after ``timestamp_ms``."""
        ext = SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, timestamp=int(timestamp_ms)).to_ext()
        resp = await self._queue_call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr, ext, timeout)
        return answer_header(resp, addr, OffsetResponseHeader).offset

    async def get_earliest_msg_store_time(
        self, addr: str, topic: str, queue_id: int, timeout: float = 3.0
    ) -> int:
        """GET_EARLIEST_MSG_STORETIME (ms)."""
        ext = QueueRequestHeader(topic=topic, queue_id=queue_id).to_ext()
        resp = await self._queue_call(RequestCode.GET_EARLIEST_MSG_STORETIME, addr, ext, timeout)
        return answer_header(resp, addr, StoreTimeResponseHeader).timestamp

    # ---- Broker: client management ---------------------------------------------------------------

    async def heartbeat(self, addr: str, heartbeat_data: dict[str, Any], timeout: float = 3.0) -> None:
        """HEART_BEAT with a HeartbeatData body."""
        cmd = RemotingCommand.request(RequestCode.HEART_BEAT, None, self._pack(heartbeat_data))
        check(await self.remoting.invoke(addr, cmd, timeout), addr)

    async def unregister_client(
        self,
        addr: str,
        client_id: str,
        producer_group: str | None,
        consumer_group: str | None,
        timeout: float = 3.0,
    ) -> None:
        """UNREGISTER_CLIENT for one group of one client id."""
        ext = UnregisterClientRequestHeader(
            client_id=client_id, producer_group=producer_group or None, consumer_group=consumer_group or None
        ).to_ext()
        cmd = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, ext)
        check(await self.remoting.invoke(addr, cmd, timeout), addr)

    async def get_consumer_id_list(self, addr: str, group: str, timeout: float = 3.0) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's live consumers."""
        cmd = RemotingCommand.request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, ConsumerGroupRequestHeader.pack(group)
        )
        resp = await self.remoting.invoke(addr, cmd, timeout)
        if resp.code == ResponseCode.SYSTEM_ERROR and not resp.body:
            # RocketMQ answers SYSTEM_ERROR when the group has no consumer on that broker.
            return []
        return read_consumer_ids(unpack_body(check(resp, addr)) or {})

    async def lock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: list[MessageQueue], timeout: float = 3.0
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: returns the queues now locked by ``client_id``."""
        body = lock_batch_body(group, client_id, mqs)
        cmd = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, None, self._pack(body))
        return read_locked_queues(
            unpack_body(check(await self.remoting.invoke(addr, cmd, timeout), addr)) or {}
        )

    async def unlock_batch_mq(
        self,
        addr: str,
        group: str,
        client_id: str,
        mqs: list[MessageQueue],
        *,
        oneway: bool = False,
        timeout: float = 3.0,
    ) -> None:
        """UNLOCK_BATCH_MQ for ``mqs`` held by ``client_id``."""
        body = lock_batch_body(group, client_id, mqs)
        cmd = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, None, self._pack(body), oneway=oneway)
        if oneway:
            await self.remoting.invoke_oneway(addr, cmd, timeout)
        else:
            check(await self.remoting.invoke(addr, cmd, timeout), addr)

    async def consumer_send_msg_back(
        self,
        addr: str,
        msg: MessageExt,
        group: str,
        delay_level: int,
        max_reconsume_times: int,
        timeout: float = 5.0,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: hand a failed message back for redelivery through the retry topic.

        ``delay_level`` 0 lets the broker choose (``3 + reconsume_times``), a negative one sends the
        message to the dead-letter queue at once.
        """
        ext = ConsumerSendMsgBackRequestHeader(
            msg.commitlog_offset, group, delay_level, msg.msg_id, msg.topic,
            max_reconsume_times=max_reconsume_times,
        ).to_ext()  # fmt: skip
        cmd = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
        check(await self.remoting.invoke(addr, cmd, timeout), addr)
