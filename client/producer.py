"""Producer: send, send_async, send_oneway, send_batch and selector sends.

Owns the producer's public face: its options and lifecycle, the client-side message checks
(``MQClientError`` before anything is sent) and wire preparation (``client.message_check``: UNIQ_KEY,
properties string, zlib compression over ``compress_over_bytes`` with sys-flag 0x1, batches split
into requests of at most ``max_message_bytes``), and the bound on unfinished ``send_async`` sends
(``client.async_sender``). Every send then takes the one send path (``client.send_path``): queue
selection with latency fault tolerance (``client.fault``), the publish route with TBW102 auto-create
fallback, and up to ``retry_times`` retries on another broker inside one ``send_timeout`` budget for
retriable errors. With ``auto_batch`` (the default), concurrent sends to one queue are coalesced into
one SEND_BATCH_MESSAGE by ``client.coalesce`` on that same path, each keeping its own result.
``SendResult``/``SendStatus`` are defined in ``client.results`` and re-exported here.
"""

# ruff: noqa: ASYNC109  (per-call timeouts in seconds are part of the documented API)

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any, cast

from rocketpy.client.async_sender import AsyncSender, SendCallback
from rocketpy.client.coalesce import CoalesceStats
from rocketpy.client.fault import LatencyFaultTolerance
from rocketpy.client.instance import ClientSettings, MQClientInstance, new_client_id
from rocketpy.client.message_check import (
    MAX_MESSAGE_BYTES,
    PreparedMessage,
    check_batch,
    check_message,
    prepare_message,
    split_batch,
)
from rocketpy.client.results import SendResult, SendStatus
from rocketpy.client.selector import QueueSelector, user_choice
from rocketpy.client.send_core import finish_sent, start_usual
from rocketpy.client.send_path import BatchJob, MessageJob, SendPath
from rocketpy.client.trace import ProducerTracer, TraceDispatcher, TraceStats, msg_type_of, new_dispatcher
from rocketpy.client.trace_otel import otel_spans
from rocketpy.errors import MQClientError, RocketpyError
from rocketpy.message import Message, MessageQueue

__all__ = ["Producer", "SendResult", "SendStatus", "check_message"]

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
        retry_another_broker_when_not_store_ok: send again to another broker when a broker answers
            FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE (stored, not fully
            durable); off (RocketMQ's default): that status is returned to the caller.
        access_key: ACL account to sign every request with (brokers with ``aclEnable=true``).
        secret_key: that account's secret key.
        serialize_type: the wire encoding, ``"msgpack"`` (rocketpy's) or ``"json"`` (RocketMQ's JSON
            remoting, as RocketMQ's own clients speak it); None: ``$ROCKETPY_SERIALIZE_TYPE``, else msgpack.
        auto_batch: coalesce concurrent ``send``/``send_async`` sends to the same queue into one
            SEND_BATCH_MESSAGE request (RocketMQ 5's autoBatch; ``client.coalesce``): sends that
            arrive while a request to that queue is in flight, or in the same loop tick, leave
            together. Each message keeps its own result, callback, error and deadline. Off: one
            request per message.
        batch_max_bytes: most encoded bytes in one coalesced request (larger messages go alone).
        batch_max_delay: seconds a send with no request in flight to its queue waits for company
            (0: never waits; it takes only what the same tick queued).
        total_batch_max_bytes: most bytes of coalesced sends unfinished at once; beyond it sends wait
            for room (within their timeout).
        enable_trace: write RocketMQ's trace record (Pub) of every stored message to the trace topic,
            in the background and bounded (``client/trace.py``; off by default, as RocketMQ's).
        trace_topic: where trace records go (None: ``RMQ_SYS_TRACE_TOPIC``).
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
        retry_another_broker_when_not_store_ok: bool = False,
        access_key: str | None = None,
        secret_key: str | None = None,
        serialize_type: str | None = None,
        auto_batch: bool = True,
        batch_max_bytes: int = 32 * 1024,
        batch_max_delay: float = 0.0,
        total_batch_max_bytes: int = 32 * 1024 * 1024,
        enable_trace: bool = False,
        trace_topic: str | None = None,
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
        _check_batch_options(batch_max_bytes, batch_max_delay, total_batch_max_bytes)
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
            access_key=access_key,
            secret_key=secret_key,
            serialize_type=serialize_type,
        )
        self.client_id = new_client_id(instance_name)
        self.fault = LatencyFaultTolerance(enabled=send_latency_fault_enable)
        self._instance: MQClientInstance | None = None
        self._async = AsyncSender(max_async_pending)
        self.auto_batch = bool(auto_batch)
        coalesce = (batch_max_bytes, float(batch_max_delay), total_batch_max_bytes) if auto_batch else None
        self._path = SendPath(
            self._inst, group, self.fault, compress_level, default_topic_queue_nums, coalesce
        )
        self._path.retry_not_stored = retry_another_broker_when_not_store_ok
        #: message trace (``enable_trace``): the dispatcher and the Pub hook
        self.trace: TraceDispatcher | None = None
        self._tracer: ProducerTracer | None = None
        if enable_trace:
            self.trace = new_dispatcher(group, namesrv_addr, trace_topic, self.settings)
            self._tracer = ProducerTracer(self.trace, group, otel_spans())

    # ---- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the shared client instance (connections are made on first send)."""
        if self._instance is not None:
            raise MQClientError(f"producer {self.group} is already started; call shutdown() first")
        self._instance = await MQClientInstance.acquire(self.namesrv_addr, config=self.settings)
        self._instance.register_producer(self.group, self.client_id, self)
        co = self._path.coalescer
        if co is not None:  # the instance's loop, the one its sends run on, and its remoting's call
            co.loop = asyncio.get_running_loop()  # (SendPath._invoke's, without its two frames)
            co.invoke = self._instance.remoting.invoke_future
        if self.trace is not None:
            try:
                await self.trace.start()
            except BaseException:
                await self.shutdown()
                raise

    async def shutdown(self) -> None:
        """Wait (up to ``send_timeout``) for unfinished async sends, unregister from every broker and
        leave the client instance (idempotent)."""
        inst = self._instance
        if inst is None:
            return
        await self._async.close(self.send_timeout)
        if self.trace is not None:
            await self.trace.shutdown()
        self._instance = None
        if self._path.coalescer is not None:
            self._path.coalescer.loop = None
            self._path.coalescer.invoke = self._path._invoke  # says "not started" from now on
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

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues sorted by (broker_name, queue_id) (what selectors receive)."""
        return list((await self._path.publish_info(topic)).message_queues)

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
            MQBrokerError: the broker refused the message (a code that is not retriable).
        """
        tracer = self._tracer
        if selector is None:
            # the usual message: checked, prepared and written (joined to its batch) in one step
            begin = time.time() if tracer is not None else 0.0
            started = start_usual(
                self._path, MessageJob, msg, self.max_message_bytes, self.compress_over_bytes,
                self.default_topic_queue_nums, self.retry_times, timeout or self.send_timeout,
            )  # fmt: skip
            if started is not None:
                if type(started) is not MessageJob:
                    result = await cast("Coroutine[Any, Any, SendResult]", started)
                else:
                    response = started.future
                    try:
                        await response
                    except RocketpyError:
                        pass  # finish reads the outcome from the future: raises it, or says retry
                    if started.settled:  # SEND_OK from a coalesced batch, nothing left to record
                        result = response.result()
                    else:
                        out = finish_sent(started, response)
                        if type(out) is SendResult:
                            result = out
                        else:
                            result = await cast("Coroutine[Any, Any, SendResult]", out)
                if tracer is not None:  # a traced send takes the same path, then writes its record
                    tracer.sent(msg, result, begin, time.time())
                return result
        if tracer is None:
            return await self._send_one(msg, selector, arg, timeout)
        begin = time.time()
        result = await self._send_one(msg, selector, arg, timeout)
        tracer.sent(msg, result, begin, time.time())
        return result

    async def _send_one(
        self, msg: Message, selector: QueueSelector | None, arg: Any, timeout: float | None
    ) -> SendResult:
        job = MessageJob(self._prepare(msg), self.retry_times, 0.0, user_choice(selector, msg, arg))
        path = self._path
        path.coalesce(job)
        # the first attempt is written now when the route is cached (no retry-loop coroutine);
        # after a retriable failure ``finish`` hands back the remaining attempts to await
        started = path.start(job, timeout or self.send_timeout)
        if started is not job:
            return await cast("Coroutine[Any, Any, SendResult]", started)
        response = job.future
        try:
            await response
        except RocketpyError:
            pass  # finish reads the outcome from the future: raises it, or says retry
        out = finish_sent(job, response)
        if type(out) is SendResult:
            return out
        return await cast("Coroutine[Any, Any, SendResult]", out)

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
        job = MessageJob(self._prepare(msg), self.retry_times, 0.0, user_choice(selector, msg, arg))
        self._path.coalesce(job)
        start = functools.partial(self._path.start, job)  # the deadline is set when it is launched
        fut = self._async.submit(start, timeout or self.send_timeout, callback)
        if self._tracer is not None:
            fut.add_done_callback(functools.partial(self._traced_future, msg, time.time()))
        return fut

    async def send_oneway(self, msg: Message, selector: QueueSelector | None = None, arg: Any = None) -> None:
        """Send without waiting for an ack (best effort: lost only if the connection breaks)."""
        job = MessageJob(self._prepare(msg), 0, 0.0, user_choice(selector, msg, arg))
        await self._path.oneway(job, self.send_timeout)

    async def send_batch(
        self,
        msgs: Sequence[Message],
        *,
        timeout: float | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> list[SendResult]:
        """Send messages of one topic as batch requests of at most ``max_message_bytes`` each.

        ``selector``/``arg`` pick the queue as for ``send`` (called with the first message; no
        retry on another queue, as for any selector send); else round robin with failover.

        Returns:
            One SendResult per message, in order.

        Raises:
            MQClientError: empty list, mixed topics, a delay level, or a bad message.
        """
        return await self._send_batches(msgs, timeout, 0, selector, arg)

    async def _send_batches(
        self,
        msgs: Sequence[Message],
        timeout: float | None,
        sys_flag: int,
        selector: QueueSelector | None,
        arg: Any,
        marks: dict[str, str] | None = None,
    ) -> list[SendResult]:
        """``send_batch`` with a sys flag for every request and ``marks`` added to the properties
        of every (checked) message (the one batch path)."""
        self._inst()
        check_batch(msgs, self.max_message_bytes)
        if marks:
            for m in msgs:
                m.properties.update(marks)
        loop = asyncio.get_running_loop()
        topic, queue_nums = msgs[0].topic, self.default_topic_queue_nums
        results: list[SendResult] = []
        begin = time.time()
        for body, uniq_keys in split_batch(msgs, self.max_message_bytes):
            deadline = loop.time() + (timeout or self.send_timeout)
            job = BatchJob(
                topic,
                body,
                uniq_keys,
                queue_nums,
                self.retry_times,
                deadline,
                sys_flag,
                user_choice(selector, msgs[0], arg),
            )
            results.extend(await self._path.run(job))
        if self._tracer is not None:
            cost_ms = int((time.time() - begin) * 1000 / max(1, len(msgs)))
            for m, r in zip(msgs, results, strict=True):
                self._tracer.pub(m, r, int(begin * 1000), cost_ms, msg_type_of(m, sys_flag))
        return results

    @property
    def coalesce_stats(self) -> CoalesceStats | None:
        """What auto-batch sent so far (requests, messages, batches, splits); None when it is off."""
        co = self._path.coalescer
        return None if co is None else co.stats

    @property
    def trace_stats(self) -> TraceStats | None:
        """What message trace wrote and dropped so far; None when ``enable_trace`` is off."""
        return None if self.trace is None else self.trace.stats

    # ---- internals ---------------------------------------------------------------------------------

    def _traced_future(self, msg: Message, begin: float, fut: asyncio.Future[SendResult]) -> None:
        if self._tracer is not None and not fut.cancelled() and fut.exception() is None:
            self._tracer.sent(msg, fut.result(), begin, time.time())  # (failed sends leave none: RocketMQ's)

    def _prepare(self, msg: Message) -> PreparedMessage:
        """Check that the producer is started and ``msg`` is sendable; build its wire form."""
        self._inst()
        return prepare_message(
            msg, self.max_message_bytes, self.compress_over_bytes, self.default_topic_queue_nums
        )


def _check_batch_options(batch_max_bytes: Any, batch_max_delay: Any, total_batch_max_bytes: Any) -> None:
    """Refuse auto-batch bounds that cannot work, naming the option and its default."""
    if not isinstance(batch_max_bytes, int) or batch_max_bytes <= 0:
        raise MQClientError(f"batch_max_bytes={batch_max_bytes!r} must be a positive int (default 32768)")
    if not isinstance(batch_max_delay, int | float) or not 0 <= batch_max_delay <= 10:
        raise MQClientError(
            f"batch_max_delay={batch_max_delay!r} must be seconds between 0 and 10 (default 0: never wait)"
        )
    if not isinstance(total_batch_max_bytes, int) or total_batch_max_bytes < batch_max_bytes:
        raise MQClientError(
            f"total_batch_max_bytes={total_batch_max_bytes!r} must be an int >= batch_max_bytes"
            f" ({batch_max_bytes}); default 33554432 (32 MiB)"
        )
