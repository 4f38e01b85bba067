"""Producer: send, send_async, send_oneway, send_batch and selector sends, with retry and failover.

Owns the producer side of issue #5: client-side message checks (``MQClientError`` before anything is
sent), the wire preparation of a message (UNIQ_KEY, properties string, zlib compression over
``compress_over_bytes`` with sys-flag 0x1), the publish route lookup with TBW102 auto-create
fallback, round-robin queue selection with latency fault tolerance (``client.fault``), and up to
``retry_times`` retries on another broker inside one ``send_timeout`` budget. Batches are split into
requests of at most ``max_message_bytes`` encoded bytes (``client.batch``-style splitting lives in
``split_batch``). ``SendResult``/``SendStatus`` are defined in ``client.api`` and re-exported here.
"""

# ruff: noqa: ASYNC109  (per-call timeouts in seconds are part of the documented API)

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from rocketpy.client.api import SendResult, SendStatus
from rocketpy.client.async_sender import AsyncSender, SendCallback
from rocketpy.client.fault import LatencyFaultTolerance
from rocketpy.client.instance import ClientSettings, MQClientInstance, new_client_id
from rocketpy.client.message_check import (
    MAX_MESSAGE_BYTES,
    PreparedMessage,
    batch_ext,
    check_batch,
    check_message,
    prepare_message,
    split_batch,
)
from rocketpy.client.results import RETRY_RESPONSE_CODES
from rocketpy.client.route import TopicPublishInfo, resolve_publish_info
from rocketpy.client.selector import QueueSelector, select_queue, select_with
from rocketpy.client.send_direct import start_direct
from rocketpy.errors import MQBrokerError, MQClientError, RemotingConnectError, RemotingTimeoutError
from rocketpy.message import Message, MessageQueue
from rocketpy.remoting.codes import RequestCode
from rocketpy.remoting.command import RemotingCommand

__all__ = ["Producer", "SendResult", "SendStatus"]

log = logging.getLogger("rocketpy.client.producer")


class Producer:
    """Sends messages to the brokers of a NameServer set.

    Args:
        group: the producer group (shown in the brokers' producer table).
        namesrv_addr: ``"host:port"`` or several separated by ``;`` (default: env NAMESRV_ADDR).
        send_timeout: seconds for one send, retries included.
        retry_times: extra attempts on another broker for ``send``/``send_async``/``send_batch``.
        compress_over_bytes: bodies longer than this are zlib-compressed (not in batches).
        compress_level: zlib level.
        max_message_bytes: body limit (before compression) and batch request size limit.
        default_topic_queue_nums: queues requested when a topic is auto-created through TBW102.
        send_latency_fault_enable: avoid brokers that recently failed or were slow.
        max_async_pending: bound on unfinished ``send_async`` futures.
        instance_name: part of the client id.
        poll_name_server_interval: route refresh period (seconds).
        heartbeat_broker_interval: heartbeat period (seconds).
    """

    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv_addr: str | None = None,
        *,
        send_timeout: float = 3.0,
        retry_times: int = 2,
        compress_over_bytes: int = 4096,
        compress_level: int = 5,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        default_topic_queue_nums: int = 4,
        send_latency_fault_enable: bool = True,
        max_async_pending: int = 65_536,
        instance_name: str = "DEFAULT",
        poll_name_server_interval: float = 30.0,
        heartbeat_broker_interval: float = 30.0,
    ) -> None:
        if not isinstance(group, str) or not group.strip():
            raise MQClientError(f"producer group must be a non-empty string, got {group!r}")
        if not isinstance(retry_times, int) or retry_times < 0:
            raise MQClientError(f"retry_times={retry_times!r} must be an int >= 0 (default 2)")
        if not isinstance(max_async_pending, int) or max_async_pending <= 0:
            raise MQClientError(
                f"max_async_pending={max_async_pending!r} must be a positive int (default 65536)"
            )
        if not isinstance(send_timeout, int | float) or send_timeout <= 0:
            raise MQClientError(
                f"send_timeout={send_timeout!r} must be a positive number of seconds (default 3.0)"
            )
        self.group = group
        self.namesrv_addr = namesrv_addr
        self.send_timeout = float(send_timeout)
        self.retry_times = retry_times
        self.compress_over_bytes = compress_over_bytes
        self.compress_level = compress_level
        self.max_message_bytes = max_message_bytes
        self.default_topic_queue_nums = default_topic_queue_nums
        self.max_async_pending = max_async_pending
        self.settings = ClientSettings(
            instance_name=instance_name,
            poll_name_server_interval=poll_name_server_interval,
            heartbeat_broker_interval=heartbeat_broker_interval,
        )
        self.client_id = new_client_id(instance_name)
        self.fault = LatencyFaultTolerance(enabled=send_latency_fault_enable)
        self._instance: MQClientInstance | None = None
        self._async = AsyncSender(max_async_pending)

    # ---- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the shared client instance (connections are made on first send)."""
        if self._instance is not None:
            raise MQClientError(f"producer {self.group} is already started; call shutdown() first")
        self._instance = await MQClientInstance.acquire(self.namesrv_addr, config=self.settings)
        self._instance.register_producer(self.group, self.client_id, self)

    async def shutdown(self) -> None:
        """Wait (up to ``send_timeout``) for unfinished async sends, unregister from every broker and
        leave the client instance (idempotent)."""
        inst = self._instance
        if inst is None:
            return
        await self._async.close(self.send_timeout)
        self._instance = None
        await inst.unregister_producer(self.group, self.client_id)
        await inst.release()

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _inst(self) -> MQClientInstance:
        if self._instance is None:
            raise MQClientError(f"producer {self.group} is not started: call `await producer.start()` first")
        return self._instance

    # ---- routes ------------------------------------------------------------------------------------

    async def _publish_info(self, topic: str) -> TopicPublishInfo:
        return await resolve_publish_info(self._inst(), topic, self.default_topic_queue_nums)

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues sorted by (broker_name, queue_id) (what selectors receive)."""
        return list((await self._publish_info(topic)).message_queues)

    # ---- send --------------------------------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        selector: QueueSelector | None = None,
        arg: Any = None,
        *,
        timeout: float | None = None,
    ) -> SendResult:
        """Send one message and wait for the broker's ack.

        Args:
            msg: the message (checked before anything is sent).
            selector: optional ``(queues, msg, arg) -> queue``; such sends are not retried elsewhere.
            arg: passed to ``selector``.
            timeout: overrides ``send_timeout`` (seconds, retries included).

        Raises:
            MQClientError: bad message, no route, timeout or no broker reachable.
            MQBrokerError: the broker refused the message (non-retryable code).
        """
        self._inst()
        prepared = prepare_message(
            msg, self.max_message_bytes, self.compress_over_bytes, self.default_topic_queue_nums
        )
        return await self._send_prepared(msg, prepared, selector, arg, timeout or self.send_timeout)

    def send_async(
        self,
        msg: Message,
        callback: SendCallback | None = None,
        *,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start a send and return its future at once (bad messages raise here, before sending).

        ``callback(result, error)`` is called once with exactly one of them not None: an ``async def``
        callback runs on the loop, a plain function in a one-thread executor (never blocking the loop).

        Raises:
            MQClientError: bad message, producer not started, or ``max_async_pending`` sends unfinished.
        """
        self._inst()
        prepared = prepare_message(
            msg, self.max_message_bytes, self.compress_over_bytes, self.default_topic_queue_nums
        )

        send = functools.partial(self._start_async, msg, prepared, selector, arg)
        return self._async.submit(send, timeout or self.send_timeout, callback)

    def _start_async(
        self,
        msg: Message,
        prepared: PreparedMessage,
        selector: QueueSelector | None,
        arg: Any,
        remaining: float,
    ) -> Any:
        """Launch one async send: written now when the route and connection are ready, else a coroutine."""
        if selector is None and (direct := start_direct(self, msg, prepared, remaining)) is not None:
            return direct  # finished by the response's done callback
        return self._send_prepared(msg, prepared, selector, arg, remaining)

    async def send_oneway(self, msg: Message, selector: QueueSelector | None = None, arg: Any = None) -> None:
        """Send without waiting for an ack (best effort: lost only if the connection breaks)."""
        self._inst()
        prepared = prepare_message(
            msg, self.max_message_bytes, self.compress_over_bytes, self.default_topic_queue_nums
        )
        tp = await self._publish_info(msg.topic)
        mq = self._select(tp, msg, selector, arg, None)
        addr = await self._broker_addr(mq)
        await prepared.compress(self.compress_level)
        await self._inst().api.send_oneway(
            addr, prepared.ext_for(self.group, mq), prepared.body, self.send_timeout
        )

    async def send_batch(self, msgs: Sequence[Message], *, timeout: float | None = None) -> list[SendResult]:
        """Send messages of one topic as batch requests of at most ``max_message_bytes`` each.

        Returns:
            One SendResult per message, in order.

        Raises:
            MQClientError: empty list, mixed topics, a delay level, or a bad message.
        """
        self._inst()
        check_batch(msgs, self.max_message_bytes)
        results: list[SendResult] = []
        for chunk_body, uids in split_batch(msgs, self.max_message_bytes):
            results.extend(
                await self._send_batch_chunk(msgs[0].topic, chunk_body, uids, timeout or self.send_timeout)
            )
        return results

    # ---- internals ---------------------------------------------------------------------------------

    def _select(
        self,
        tp: TopicPublishInfo,
        msg: Message,
        selector: QueueSelector | None,
        arg: Any,
        last_broker: str | None,
    ) -> MessageQueue:
        if selector is None:
            return select_queue(tp.message_queues, tp.index, self.fault, last_broker)
        return select_with(selector, list(tp.message_queues), msg, arg)

    async def _broker_addr(self, mq: MessageQueue) -> str:
        return await self._inst().queue_broker_addr(mq)

    async def _send_prepared(
        self,
        msg: Message,
        prepared: PreparedMessage,
        selector: QueueSelector | None,
        arg: Any,
        timeout: float,
    ) -> SendResult:
        if prepared.needs_compress:
            await prepared.compress(self.compress_level)
        inst = self._inst()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        attempts = 1 if selector is not None else 1 + self.retry_times
        tp = inst.publish_info(msg.topic)
        if selector is not None or tp is None or not tp.ok:
            return await self._with_retries(
                msg.topic, msg, selector, arg, deadline, self._attempt_fn(prepared), attempts=attempts
            )
        # Fast path (no selector, route cached): one attempt with a short await chain.
        mq = select_queue(tp.message_queues, tp.index, self.fault, None)
        addr = inst.find_broker_addr(mq.broker_name)
        if addr is None:
            return await self._with_retries(
                msg.topic, msg, None, None, deadline, self._attempt_fn(prepared), attempts=attempts
            )
        cmd = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, prepared.ext_for(self.group, mq), prepared.body
        )
        try:
            resp = await inst.remoting.invoke(addr, cmd, timeout)
            result = inst.api.send_result(
                resp, addr, mq.broker_name, mq.topic, mq.queue_id, prepared.uniq_key
            )
        except (RemotingConnectError, RemotingTimeoutError, MQBrokerError) as e:
            return await self._retry_after_failure(msg, prepared, mq, e, deadline)
        self.fault.update(mq.broker_name, (loop.time() - (deadline - timeout)) * 1000.0)
        return result

    def _retry_after_failure(
        self, msg: Message, prepared: PreparedMessage, mq: MessageQueue, err: Exception, deadline: float
    ) -> Coroutine[Any, Any, SendResult]:
        """After a failed first attempt on ``mq``: isolate its broker, then raise ``err`` (not
        retryable) or return the coroutine of the remaining attempts before ``deadline``."""
        self.fault.update(mq.broker_name, 0, isolation=True)
        if isinstance(err, MQBrokerError) and err.code not in RETRY_RESPONSE_CODES:
            raise err
        log.info("send to %s failed (attempt 1/%d): %s", mq, 1 + self.retry_times, err)
        return self._with_retries(
            msg.topic,
            msg,
            None,
            None,
            deadline,
            self._attempt_fn(prepared),
            attempts=self.retry_times,
            last_broker=mq.broker_name,
            last_error=err,
        )

    def _attempt_fn(self, prepared: PreparedMessage) -> Callable[[MessageQueue, str, float], Any]:
        async def attempt(mq: MessageQueue, addr: str, remaining: float) -> SendResult:
            ext = prepared.ext_for(self.group, mq)
            return await self._inst().api.send_message(
                addr, mq.broker_name, ext, prepared.body, remaining, msg_id=prepared.uniq_key
            )

        return attempt

    async def _send_batch_chunk(
        self, topic: str, body: bytes, uids: list[str], timeout: float
    ) -> list[SendResult]:
        async def attempt(mq: MessageQueue, addr: str, remaining: float) -> list[SendResult]:
            ext = batch_ext(self.group, topic, self.default_topic_queue_nums, mq)
            return await self._inst().api.send_batch(addr, mq.broker_name, ext, body, uids, remaining)

        deadline = asyncio.get_running_loop().time() + timeout
        return await self._with_retries(
            topic, None, None, None, deadline, attempt, attempts=1 + self.retry_times
        )

    async def _with_retries(
        self,
        topic: str,
        msg: Message | None,
        selector: QueueSelector | None,
        arg: Any,
        deadline: float,
        attempt: Callable[[MessageQueue, str, float], Any],
        *,
        attempts: int,
        last_broker: str | None = None,
        last_error: BaseException | None = None,
    ) -> Any:
        """Up to ``attempts`` sends before ``deadline`` (loop time), avoiding the last failed broker."""
        loop = asyncio.get_running_loop()
        tp = await self._publish_info(topic)
        tried = 0 if last_broker is None else 1
        for _ in range(attempts):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            tried += 1
            mq = (
                self._select(tp, msg, selector, arg, last_broker)
                if msg is not None
                else self._select(tp, Message(topic), None, None, last_broker)
            )
            addr = await self._broker_addr(mq)
            started = loop.time()
            try:
                result = await attempt(mq, addr, remaining)
            except (RemotingConnectError, RemotingTimeoutError) as e:
                self.fault.update(mq.broker_name, 0, isolation=True)
                last_error, last_broker = e, mq.broker_name
                log.info("send to %s failed (attempt %d): %s", mq, tried, e)
                continue
            except MQBrokerError as e:
                self.fault.update(mq.broker_name, 0, isolation=True)
                if e.code not in RETRY_RESPONSE_CODES:
                    raise
                last_error, last_broker = e, mq.broker_name
                log.info("send to %s refused (attempt %d): %s", mq, tried, e)
                continue
            self.fault.update(mq.broker_name, (loop.time() - started) * 1000.0)
            return result
        if isinstance(last_error, MQBrokerError) and tried == 1:
            raise last_error
        reason = f"last error: {last_error}" if last_error else "no attempt fitted in the time budget"
        raise MQClientError(
            f"send to topic {topic!r} failed after {tried} attempt(s) within the send timeout ({reason}):"
            " check that the brokers are running, or raise send_timeout / retry_times"
        ) from last_error


__all__ += ["RETRY_RESPONSE_CODES", "check_message"]
