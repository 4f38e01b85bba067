"""The producer's one send path: an attempt, its outcome, and the retry loop under one deadline.

Owns how a send (one message, or one request of a batch) reaches a broker, for ``send``,
``send_async`` and ``send_batch`` alike:

* ``SendPath.run`` is the retry loop: up to ``job.attempts`` attempts before ``job.deadline``, each
  on a queue chosen round robin with latency fault tolerance (avoiding the broker that failed last)
  or by the user's selector, on the topic's route (cached, fetched, or TBW102's: ``client.route``).
* An attempt (``SendPath._attempt``) writes the job's request at once with
  ``RemotingClient.invoke_future``; ``SendPath._settle`` maps its response (``results.send_result``,
  the one mapper) and records the broker's latency for fault tolerance; a failure isolates the
  broker and is raised unless ``err.retriable`` (``rocketpy.errors``), in which case the loop tries
  another broker.
* ``SendPath.start`` launches a ``send_async`` send (through ``AsyncSender``): with the route cached
  it makes the first attempt now and returns the job, a ``DirectSend`` whose ``finish`` settles the
  response in its done callback (no task, no coroutine frame) and, after a retriable failure, hands
  back ``run`` for the remaining attempts. A body still to compress or a route not cached yet starts
  with ``run``.

* With auto-batch on (``coalesce``), an attempt of a message that can travel in a batch is handed
  to the producer's ``client.coalesce.Coalescer`` instead of written alone: the job's future then
  settles with its own outcome from a shared SEND_BATCH_MESSAGE (or its own SEND_MESSAGE_V2), and
  everything else (settle, fault tolerance, retries under the job's deadline) is the same.

A ``SendJob`` is the one object of a send: what it carries, its deadline and its current attempt.
"""

# ruff: noqa: ASYNC109  (per-call timeouts in seconds are part of the documented API)

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, cast

from rocketpy.client.async_sender import DirectSend
from rocketpy.client.coalesce import Coalescer
from rocketpy.client.fault import LatencyFaultTolerance
from rocketpy.client.instance import MQClientInstance
from rocketpy.client.message_check import PreparedMessage, batch_ext, item_bytes
from rocketpy.client.results import SendResult, SendStatus, batch_results, send_result
from rocketpy.client.route import NoWritableQueueError, TopicPublishInfo, resolve_publish_info
from rocketpy.client.selector import UserChoice, select_queue
from rocketpy.errors import MQBrokerError, MQClientError, RocketpyError, ServiceNotAvailableError
from rocketpy.message import MessageQueue
from rocketpy.message_props import may_be_timed_or_half
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.waits import wait_done

#: A retry needs at least this much of the deadline left. An attempt that timed out with the whole
#: remaining time may wake up to a millisecond before the deadline (event-loop timers are rounded
#: to milliseconds): that remainder is timer slack, not time for another round trip.
MIN_RETRY_SECONDS = 0.002
#: A retry that can only go to the broker that just failed waits this long times the attempts so
#: far (at most a quarter of the time left): a master handing over needs a moment.
RETRY_BACKOFF_S = 0.1
#: A refusal with SERVICE_NOT_AVAILABLE (the broker cannot write now: a slave, a master handing over
#: or not yet taken over, a store not writable) does not use up one of a send's attempts: the send
#: asks for the route again and retries, paused as above, until its timeout. A switchover or an
#: election lasts longer than three quick attempts, and nothing of such a send was stored.

log = logging.getLogger("rocketpy.client.producer")

#: ``SendPath._settle``'s answer after a retriable failure: the loop goes on.
_RETRY: Any = object()


class SendJob(DirectSend):
    """One send across its attempts: where it may go, its deadline, and how its attempts went.

    Subclasses say which request an attempt writes and what its mapped response becomes. As a
    ``DirectSend``, ``future`` is the response future of the current attempt, written to ``mq``'s
    broker at ``addr`` at loop time ``started``.

    Attributes:
        topic: the topic sent to.
        attempts: most attempts: 1 for selector sends (they stay on the queue chosen), else
            1 + ``retry_times``.
        choice: the user's queue choice (selector, message, argument), or None: round robin.
        deadline: loop time after which no attempt starts (set by ``SendPath.start`` for async sends).
        tried: attempts made so far that count against ``attempts``.
        unavailable: attempts refused with SERVICE_NOT_AVAILABLE (not counted in ``tried``).
        last_broker / last_error: the broker and error of the last failed attempt.
        needs_compress: True while the body still has to be compressed (before the first attempt).
    """

    __slots__ = (
        "addr",
        "attempts",
        "choice",
        "deadline",
        "item_size",
        "last_broker",
        "last_error",
        "last_result",
        "mq",
        "needs_compress",
        "path",
        "refresh",
        "settled",
        "started",
        "topic",
        "tried",
        "unavailable",
    )
    path: SendPath
    mq: MessageQueue
    addr: str
    started: float

    def __init__(
        self, topic: str, retry_times: int, deadline: float, choice: UserChoice | None = None
    ) -> None:
        self.topic, self.deadline = topic, deadline
        self.attempts = 1 if choice is not None else 1 + retry_times
        self.choice = choice
        self.tried = self.unavailable = 0
        self.last_broker: str | None = None
        self.last_error: RocketpyError | None = None
        self.last_result: Any = None  # a stored-but-not-OK result retried elsewhere (see SendPath)
        self.needs_compress = False
        self.refresh: asyncio.Future[Any] | None = None  # the route refresh a failed attempt asked for
        self.item_size = 0  # > 0: coalesced with sends to the same queue (its bytes in a batch)
        #: True once ``future`` holds the send's final result and ``SendPath._settle`` would only
        #: return it (set by the coalescer, ``send_core.settle_stored``): ``finish`` may be skipped
        self.settled = False

    @property
    def made(self) -> int:
        """Attempts made: those counted against ``attempts`` plus refusals by brokers that could not
        write then (SERVICE_NOT_AVAILABLE, which do not use up a retry)."""
        return self.tried + self.unavailable

    async def compress(self, level: int) -> None:
        """Compress the body once, when ``needs_compress``."""

    def request(self, group: str, mq: MessageQueue) -> RemotingCommand:
        """The request an attempt on ``mq`` writes."""
        raise NotImplementedError

    def results(self, resp: RemotingCommand, addr: str, mq: MessageQueue) -> Any:
        """The send's result from a response of ``mq``'s broker (raises for a refusal)."""
        raise NotImplementedError

    def finish(self, done: asyncio.Future[Any]) -> Any:
        """The current attempt settled (``SendPath._settle``), or the coroutine of the remaining
        attempts after a retriable failure."""
        path = self.path
        result = path._settle(self, done)
        return path.run(self) if result is _RETRY else result


class MessageJob(SendJob):
    """One message, sent as SEND_MESSAGE_V2; its result is a SendResult."""

    __slots__ = ("prepared",)

    def __init__(
        self, prepared: PreparedMessage, retry_times: int, deadline: float, choice: UserChoice | None = None
    ) -> None:
        SendJob.__init__(self, prepared.topic, retry_times, deadline, choice)
        self.prepared = prepared
        self.needs_compress = prepared.needs_compress

    async def compress(self, level: int) -> None:
        await self.prepared.compress(level)
        self.needs_compress = False

    def request(self, group: str, mq: MessageQueue) -> RemotingCommand:
        prepared = self.prepared  # RemotingCommand.request's fields, without its frame (hot path)
        ext = prepared.ext_for(group, mq)
        return RemotingCommand(RequestCode.SEND_MESSAGE_V2, 0, 0, None, ext, prepared.body)

    def results(self, resp: RemotingCommand | SendResult, addr: str, mq: MessageQueue) -> SendResult:
        if type(resp) is SendResult:  # a coalesced send: mapped from its batch's response
            return resp
        return send_result(resp, addr, mq, self.prepared.uniq_key)  # type: ignore[arg-type]


class BatchJob(SendJob):
    """One batch request (SEND_BATCH_MESSAGE); its result is one SendResult per message, in order."""

    __slots__ = ("body", "queue_nums", "sys_flag", "uniq_keys")

    def __init__(
        self,
        topic: str,
        body: bytes,
        uniq_keys: list[str],
        queue_nums: int,
        retry_times: int,
        deadline: float,
        sys_flag: int = 0,
        choice: UserChoice | None = None,
    ) -> None:
        SendJob.__init__(self, topic, retry_times, deadline, choice)
        self.body, self.uniq_keys, self.queue_nums, self.sys_flag = body, uniq_keys, queue_nums, sys_flag

    def request(self, group: str, mq: MessageQueue) -> RemotingCommand:
        ext = batch_ext(group, self.topic, self.queue_nums, mq, self.sys_flag)
        return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, self.body)

    def results(self, resp: RemotingCommand, addr: str, mq: MessageQueue) -> list[SendResult]:
        return batch_results(send_result(resp, addr, mq, ""), self.uniq_keys)


class SendPath:
    """Attempts and retries of one producer's sends.

    Args:
        instance: returns the producer's started client instance (raises when not started).
        group: the producer group written in every request.
        fault: the producer's latency fault tolerance.
        compress_level: zlib level for bodies over the producer's ``compress_over_bytes``.
        default_topic_queue_nums: queues asked for when a topic is auto-created through TBW102.
        coalesce: the auto-batch bounds ``(batch_max_bytes, batch_max_delay, total_batch_max_bytes)``,
            or None: one request per message.
    """

    def __init__(
        self,
        instance: Callable[[], MQClientInstance],
        group: str,
        fault: LatencyFaultTolerance,
        compress_level: int,
        default_topic_queue_nums: int,
        coalesce: tuple[int, float, int] | None = None,
    ) -> None:
        self.instance = instance
        self.group = group
        self.fault = fault
        self.compress_level = compress_level
        self.default_topic_queue_nums = default_topic_queue_nums
        #: RocketMQ's retryAnotherBrokerWhenNotStoreOK: a FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT /
        #: SLAVE_NOT_AVAILABLE result is sent again to another broker (the last result is returned
        #: when the attempts run out); off: the result is returned with its status.
        self.retry_not_stored = False
        self.coalescer: Coalescer | None = None
        if coalesce is not None:
            self.coalescer = Coalescer(self._invoke, group, *coalesce)
            self.coalescer.fault = fault

    def _invoke(self, addr: str, request: RemotingCommand, timeout: float) -> asyncio.Future[RemotingCommand]:
        return self.instance().remoting.invoke_future(addr, request, timeout)

    def coalesce(self, job: MessageJob) -> None:
        """Mark ``job`` to be coalesced with sends to the same queue, when auto-batch is on and the
        message can travel in a batch: not compressed, no delivery time and no transaction (a batch
        has one sys flag and the broker refuses timed messages in it), smaller than a batch."""
        co = self.coalescer
        if co is None:
            return
        p = job.prepared
        props = p.properties
        if p.needs_compress or p.sys_flag or may_be_timed_or_half(props):
            return
        size = item_bytes(len(p.body), len(props) if props.isascii() else len(props.encode()))
        if size <= co.batch_max_bytes:
            job.item_size = size  # encoded only if it travels in a batch (``Coalescer._request``)

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        """The topic's publish route: cached, fetched, or auto-created through TBW102's."""
        return await resolve_publish_info(self.instance(), topic, self.default_topic_queue_nums)

    def choose(self, tp: TopicPublishInfo, job: SendJob) -> MessageQueue:
        """The queue of ``job``'s next attempt: the user's selector, else the coalescer's queue still
        filling (a coalesced first attempt), else round robin avoiding unavailable brokers and the
        one that failed last."""
        if job.choice is None:
            co = self.coalescer
            if co is not None and job.item_size and job.last_broker is None:
                mq = co.filling(job.topic)  # join the batch still filling (one full request a tick)
                if mq is not None and (not self.fault.enabled or self.fault.is_available(mq.broker_name)):
                    return mq
            return select_queue(tp.message_queues, tp.index, self.fault, job.last_broker)
        return job.choice.select(list(tp.message_queues))

    def start(self, job: SendJob, remaining: float) -> SendJob | Coroutine[Any, Any, Any]:
        """Launch ``job`` with ``remaining`` seconds: its first attempt written now when the route is
        cached (the job is returned, to be finished by its response), else the coroutine of ``run``."""
        inst = self.instance()
        now = asyncio.get_running_loop().time()
        job.path, job.deadline = self, now + remaining
        tp = inst.publish_info(job.topic)
        if tp is None or not tp.message_queues or job.needs_compress:
            return self.run(job)
        mq = self.choose(tp, job)
        addr = inst.find_broker_addr(mq.broker_name)
        co = self.coalescer
        if addr is None or (co is not None and job.item_size and not co.has_room(job.item_size)):
            return self.run(job, mq)  # no address yet, or no room among coalesced sends: wait there
        self._attempt(inst, job, mq, addr, now, remaining)
        return job

    async def run(self, job: SendJob, mq: MessageQueue | None = None) -> Any:
        """The retry loop: attempts until one succeeds, a failure is not retriable, ``job.attempts``
        are made or ``job.deadline`` passes (``mq``: the queue already chosen for the next attempt).

        Raises:
            MQBrokerError: the broker refused the message (not retriable), or the only attempt failed so.
            MQClientError: no route, a client-side error, or every attempt failed (the last error is
                the cause).
        """
        if job.needs_compress:
            await job.compress(self.compress_level)
        inst = self.instance()
        loop = asyncio.get_running_loop()
        while job.tried < job.attempts and loop.time() < job.deadline:
            if job.refresh is not None:  # a failed attempt asked for the route: retry on the new one
                refresh, job.refresh = job.refresh, None
                await wait_done(asyncio.shield(refresh), job.deadline - loop.time())
            if mq is None:
                tp = inst.publish_info(job.topic)  # the cached route, without a coroutine when known
                if tp is None or not tp.message_queues:
                    try:
                        tp = await self.publish_info(job.topic)
                    except NoWritableQueueError as e:  # a master is being elected: wait, ask again
                        job.last_error = e
                        if job.deadline - loop.time() <= RETRY_BACKOFF_S:
                            raise
                        await asyncio.sleep(RETRY_BACKOFF_S)
                        continue
                mq = self.choose(tp, job)
                made = job.made
                # nowhere else, or past the attempts retry_times allows (refusals by brokers that
                # cannot write now: at least RETRY_BACKOFF_S apart, never a burst near the deadline)
                if made and (mq.broker_name == job.last_broker or made >= job.attempts):
                    cap = (job.deadline - loop.time()) / 4
                    if made >= job.attempts:
                        cap = max(cap, RETRY_BACKOFF_S)
                    await asyncio.sleep(min(RETRY_BACKOFF_S * made, cap))
            addr = inst.find_broker_addr(mq.broker_name) or await inst.queue_broker_addr(mq)
            co = self.coalescer
            if job.item_size and co is not None and not co.has_room(job.item_size):
                await co.wait_room(job.item_size, job.deadline)  # back-pressure (total_batch_max_bytes)
            now = loop.time()
            retry = job.made > 0
            if now >= job.deadline or (retry and job.deadline - now < MIN_RETRY_SECONDS):
                break
            response = self._attempt(inst, job, mq, addr, now, job.deadline - now)
            mq = None
            try:
                await response
            except RocketpyError:
                pass  # _settle reads the outcome from the future: raises it, or says retry
            result = self._settle(job, response)
            if result is not _RETRY:
                return result
        if job.last_result is not None:
            return job.last_result
        raise self._exhausted(job)

    async def oneway(self, job: SendJob, timeout: float) -> None:
        """One attempt without a response (best effort: no retry, no result)."""
        if job.needs_compress:
            await job.compress(self.compress_level)
        inst = self.instance()
        mq = self.choose(await self.publish_info(job.topic), job)
        addr = await inst.queue_broker_addr(mq)
        await inst.remoting.invoke_oneway(addr, job.request(self.group, mq), timeout)

    def _attempt(
        self, inst: MQClientInstance, job: SendJob, mq: MessageQueue, addr: str, now: float, remaining: float
    ) -> asyncio.Future[RemotingCommand]:
        """Write ``job``'s request to ``mq``'s broker at ``addr`` at loop time ``now``, waiting at most
        ``remaining`` seconds for the response; return (and keep) its response future."""
        job.tried += 1
        job.mq, job.addr, job.started = mq, addr, now
        co = self.coalescer
        if co is not None and job.item_size:  # only MessageJobs get an item (``coalesce``)
            job.future = response = co.add(cast("MessageJob", job), mq, addr)
        else:
            job.future = response = inst.remoting.invoke_future(addr, job.request(self.group, mq), remaining)
        return response

    def _settle(self, job: SendJob, done: asyncio.Future[RemotingCommand]) -> Any:
        """The result of ``job``'s completed attempt, or ``_RETRY`` after a retriable failure
        (recorded on the job); other failures are raised. Either way the broker's latency (or its
        isolation) is recorded for fault tolerance."""
        mq = job.mq
        try:
            result = job.results(done.result(), job.addr, mq)
        except RocketpyError as err:
            self.fault.update(mq.broker_name, 0, isolation=True)
            # its broker may have changed role (a new master in controller mode) or gone: ask the
            # NameServer now rather than at the next poll; the retry waits for the answer
            job.refresh = self.instance().refresh_route_soon(job.topic)
            if not err.retriable:
                raise
            if isinstance(err, ServiceNotAvailableError):  # see RETRY_BACKOFF_S: not an attempt used up
                job.tried -= 1
                job.unavailable += 1
            job.last_error, job.last_broker = err, mq.broker_name
            log.info("send to %s failed (attempt %d of %d): %s", mq, job.tried, job.attempts, err)
            return _RETRY
        self.fault.update(mq.broker_name, (done.get_loop().time() - job.started) * 1000.0)
        if self.retry_not_stored and job.tried < job.attempts and not _stored_ok(result):
            job.last_result, job.last_broker = result, mq.broker_name
            log.info("send to %s stored but not OK (attempt %d of %d); trying another broker", mq,
                     job.tried, job.attempts)  # fmt: skip
            return _RETRY
        return result

    @staticmethod
    def _exhausted(job: SendJob) -> RocketpyError:
        """The error of a send whose attempts or time ran out."""
        err = job.last_error
        made = job.made
        if isinstance(err, MQBrokerError) and made == 1:
            return err
        reason = f"last error: {err}" if err else "no attempt fitted in the time budget"
        out = MQClientError(
            f"send to topic {job.topic!r} failed after {made} attempt(s) within the send timeout"
            f" ({reason}): check that the brokers are running, or raise send_timeout / retry_times"
        )
        out.__cause__ = err
        return out


def _stored_ok(result: Any) -> bool:
    """SEND_OK for a result (a batch's list: its first)."""
    first = result[0] if isinstance(result, list) else result
    return bool(first.status is SendStatus.SEND_OK)
