"""The coalescing producer (RocketMQ 5's autoBatch, done the asyncio way).

Owns the per-queue accumulators of ``Producer(auto_batch=True)``: sends to the same queue (same
broker address) that arrive while a request to that queue is in flight, or within the same loop
tick, leave as one SEND_BATCH_MESSAGE request; a lone send leaves as its own SEND_MESSAGE_V2.

When a batch leaves (``_flush``):

* nothing to that queue in flight: at the end of the tick the first send arrived in
  (``call_soon``; or ``batch_max_delay`` seconds later when that is > 0, to wait for company) —
  except a send that finds the producer idle (nothing held, nothing in flight) right after a
  request that carried one message: it leaves at once. That is a sequential sender (each send
  awaited before the next), whom the end of the tick would only cost a loop turn of latency per
  send; the sends that come after it within the tick coalesce as usual, and a producer whose last
  request was a batch (concurrent senders) keeps waiting for the tick, so its batches stay whole;
* a request to that queue in flight: when its response arrives (sends queue behind it, as Nagle);
* at once when adding a send would take the batch past ``batch_max_bytes``.

Each member keeps its own future (``job.future``), resolved exactly once with its own outcome: its
``SendResult`` (its UNIQ_KEY as msg id, its offset id and queue offset from the batch response), or
its own copy of the error. A batch the broker refuses for a per-message cause (MESSAGE_ILLEGAL: a
body past the broker's maxMessageSize, a delivery time) is split and every member is sent again
alone, so the refused message fails alone and the others are stored (the batch wire answers one
code per request: it cannot say which message was at fault). Whole-batch refusals (no permission,
no topic, a busy or failing broker) are what each message would have got alone: every member gets
it, and ``SendPath`` retries each retriable member on another broker under its own deadline, where
the retried members coalesce again.

Bounds: ``batch_max_bytes`` per request; ``total_batch_max_bytes`` of members accepted and not
settled yet (held here or in flight); a send beyond it waits for room (``wait_room``, bounded by its
deadline). The request's timeout is the latest member deadline; a member whose own deadline comes
earlier is failed then (one timer per request at its earliest such deadline, re-armed for the next;
cancelled when the batch settles).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from rocketpy.client.fault import LatencyFaultTolerance
from rocketpy.client.message_check import batch_ext
from rocketpy.client.results import SEND_STATUS_BY_CODE, SendStatus, send_result
from rocketpy.client.send_core import batch_body, earliest_deadline, live_members, settle_lone, settle_stored
from rocketpy.errors import MQClientError, RemotingTimeoutError, RocketpyError, broker_error
from rocketpy.message import MessageQueue
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rocketpy.client.send_path import MessageJob

#: ``(addr, request, timeout seconds) -> response future`` (``RemotingClient.invoke_future``).
Invoke = Callable[[str, RemotingCommand, float], "asyncio.Future[RemotingCommand]"]

#: Most sends waiting for room at once (each is a caller's send, already bounded by
#: ``max_async_pending`` or by the caller's tasks; this bounds the waiter deque itself).
MAX_ROOM_WAITERS = 1_000_000
#: Idle accumulators kept (``Coalescer._maybe_forget``): past this many in the table, one is dropped
#: once idle. Below it a queue's stays, so a sequential sender does not make one per send.
KEPT_ACCUMULATORS = 256


class CoalesceStats:
    """What the coalescer sent: ``requests`` written (batches and lone sends), ``messages`` in them,
    ``batches`` (requests of more than one message) and ``splits`` (batches refused for a
    per-message cause and sent again one by one)."""

    __slots__ = ("batches", "messages", "requests", "splits")

    def __init__(self) -> None:
        self.requests = self.messages = self.batches = self.splits = 0

    def __repr__(self) -> str:
        return (
            f"CoalesceStats(requests={self.requests}, messages={self.messages}, batches={self.batches},"
            f" splits={self.splits})"
        )


class _Pending:
    """One queue's accumulator: the members waiting, their bytes, and its requests in flight."""

    __slots__ = ("addr", "in_flight", "jobs", "key", "mq", "n_bytes", "timer")

    def __init__(self, addr: str, mq: MessageQueue, key: tuple[str, str, str, int]) -> None:
        self.addr, self.mq, self.key = addr, mq, key  # key: its entry in ``Coalescer._queues``
        self.jobs: list[MessageJob] = []
        self.n_bytes = 0
        self.in_flight = 0
        self.timer: asyncio.Handle | None = None


class Coalescer:
    """Per-queue accumulators of one producer.

    Args:
        invoke: writes a request and returns its response future.
        group: the producer group written in every request.
        batch_max_bytes: most encoded bytes in one batch request.
        batch_max_delay: seconds a first send waits for company (0: only what the tick queued).
        total_batch_max_bytes: most bytes of members accepted and not settled yet.
    """

    def __init__(
        self,
        invoke: Invoke,
        group: str,
        batch_max_bytes: int,
        batch_max_delay: float,
        total_batch_max_bytes: int,
    ) -> None:
        self.invoke = invoke
        self.group = group
        self.batch_max_bytes = batch_max_bytes
        self.batch_max_delay = batch_max_delay
        self.total_batch_max_bytes = total_batch_max_bytes
        #: the producer's fault tolerance, when its sends record latencies (``SendPath`` sets it):
        #: a stored batch whose latency it would not record settles its members at once
        self.fault: LatencyFaultTolerance | None = None
        #: the loop of the producer's started client instance (``Producer.start`` sets it, ``shutdown``
        #: clears it): what the awaited send's shortcut makes its future on, instead of asking
        #: ``asyncio.get_running_loop`` per message (None: it asks)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.held_bytes = 0
        #: the last request written carried one message (``add`` sends at once after it when idle)
        self.last_lone = False
        self.stats = CoalesceStats()
        #: by (broker address, topic, broker name, queue id): a key of plain values hashes in C
        #: (a MessageQueue's hash is a Python method, and each send looks its key up four times)
        self._queues: dict[tuple[str, str, str, int], _Pending] = {}
        self._room_waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        #: per topic, the accumulator the last send was added to (``filling``)
        self._filling: dict[str, _Pending] = {}

    def filling(self, topic: str) -> MessageQueue | None:
        """The queue of ``topic`` whose batch is still filling (members added, not left yet), or None.

        A send with no queue of its own joins it rather than the next queue of the round robin
        (``SendPath.choose``): the sends of one tick then leave as one full request instead of one
        thin request per queue, however many queues (and brokers) the topic spreads over. The round
        robin moves on per batch instead of per message (as Kafka's sticky partitioner).
        """
        q = self._filling.get(topic)
        if q is None or not q.jobs or q.n_bytes >= self.batch_max_bytes:
            return None
        return q.mq

    # -- back-pressure ---------------------------------------------------------------------------
    def has_room(self, size: int) -> bool:
        """True when a member of ``size`` bytes may be added now (nobody waits before it)."""
        return not self._room_waiters and self.held_bytes + size <= self.total_batch_max_bytes

    async def wait_room(self, size: int, deadline: float) -> None:
        """Wait (FIFO) until a member of ``size`` bytes fits in ``total_batch_max_bytes``.

        Raises:
            MQClientError: no room before ``deadline`` (loop time).
        """
        if self.has_room(size):
            return
        loop = asyncio.get_running_loop()
        if len(self._room_waiters) >= MAX_ROOM_WAITERS:
            raise MQClientError(f"{MAX_ROOM_WAITERS} sends already wait for room: send less at once")
        fut: asyncio.Future[None] = loop.create_future()
        item = (size, fut)
        self._room_waiters.append(item)
        try:
            async with asyncio.timeout(max(deadline - loop.time(), 0.0)):
                await fut
        except TimeoutError:
            raise MQClientError(
                f"send waited its whole timeout for room among {self.held_bytes} bytes of unfinished"
                f" sends (total_batch_max_bytes={self.total_batch_max_bytes}): send less at once, raise"
                " total_batch_max_bytes or send_timeout"
            ) from None
        finally:
            if not fut.done() or fut.cancelled():
                self._remove_waiter(item)

    def _remove_waiter(self, item: tuple[int, asyncio.Future[None]]) -> None:
        try:
            self._room_waiters.remove(item)
        except ValueError:
            pass  # already woken
        self._wake_room()

    def _release(self, n_bytes: int) -> None:
        self.held_bytes -= n_bytes
        if self._room_waiters:
            self._wake_room()

    def _wake_room(self) -> None:
        """Admit waiters in order while they fit (their bytes are taken when they are added)."""
        waiters = self._room_waiters
        room = self.total_batch_max_bytes - self.held_bytes
        while waiters and waiters[0][0] <= room:
            size, fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                room -= size

    # -- adding ----------------------------------------------------------------------------------
    def add(self, job: MessageJob, mq: MessageQueue, addr: str) -> asyncio.Future[Any]:
        """Queue ``job`` for ``mq`` at ``addr``; return its own future (a response or a SendResult)."""
        key = (addr, mq.topic, mq.broker_name, mq.queue_id)
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = _Pending(addr, mq, key)
        size = job.item_size
        if q.jobs and q.n_bytes + size > self.batch_max_bytes:
            self._flush(q)  # full: it leaves now, even with a request in flight
            self._queues[key] = q  # (a flush that sent nothing forgets the accumulator)
        if (
            self.last_lone and not self.held_bytes and q.in_flight == 0 and q.timer is None
            and self.batch_max_delay <= 0
        ):  # fmt: skip
            return self._send_lone(q, job, size)  # idle after a lone send: a sequential sender
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        job.future = fut
        q.jobs.append(job)
        q.n_bytes += size
        self.held_bytes += size
        self._filling[mq.topic] = q
        if q.in_flight == 0 and q.timer is None:
            if self.batch_max_delay > 0:
                q.timer = loop.call_later(self.batch_max_delay, self._flush, q)
            else:
                q.timer = loop.call_soon(self._flush, q)
        return fut

    def _send_lone(self, q: _Pending, job: MessageJob, size: int) -> asyncio.Future[Any]:
        """Write ``job`` now as its own request (``_flush`` of one member) whose response future is
        the job's future: the sender wakes one loop iteration sooner than through a member's future
        set by ``_settle``. ``q`` (empty, nothing in flight) settles by a callback registered before
        the sender awaits, so it runs first: sends made when the sender wakes see it idle again."""
        now = (self.loop or asyncio.get_running_loop()).time()
        if job.deadline <= now:
            late = RemotingTimeoutError("send timed out before it left: raise send_timeout")
            return self._failed(job, late)
        try:
            response = self.invoke(q.addr, job.request(self.group, q.mq), job.deadline - now)
        except RocketpyError as err:  # refused at once (too many pending requests)
            self._maybe_forget(q)
            return self._failed(job, err)
        stats = self.stats
        stats.requests += 1
        stats.messages += 1
        q.in_flight += 1
        self.held_bytes += size
        job.future = response
        response.add_done_callback(partial(settle_lone, self, q, size))
        return response

    def _failed(self, job: MessageJob, err: BaseException) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = (self.loop or asyncio.get_running_loop()).create_future()
        fut.set_exception(err)
        job.future = fut
        return fut

    # -- sending ---------------------------------------------------------------------------------
    def _flush(self, q: _Pending) -> None:
        """Write what ``q`` holds as one request (a lone member as SEND_MESSAGE_V2)."""
        if q.timer is not None:
            q.timer.cancel()
            q.timer = None
        jobs, n_bytes = q.jobs, q.n_bytes
        q.jobs, q.n_bytes = [], 0
        live, dropped, deadline = live_members(jobs)  # a cancelled send leaves nothing to send
        if dropped:
            self._release(dropped)
            n_bytes -= dropped
        if not live:
            self._maybe_forget(q)
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if deadline <= now:
            self._release(n_bytes)
            for j in live:
                _fail(j, RemotingTimeoutError("send timed out before its batch left: raise send_timeout"))
            self._maybe_forget(q)
            return
        request = self._request(q.mq, live)
        try:
            response = self.invoke(q.addr, request, deadline - now)
        except RocketpyError as err:  # refused at once (too many pending requests)
            self._release(n_bytes)
            for j in live:
                _fail(j, _copy_error(err))
            self._maybe_forget(q)
            return
        stats = self.stats
        stats.requests += 1
        stats.messages += len(live)
        self.last_lone = len(live) == 1
        if not self.last_lone:
            stats.batches += 1
        q.in_flight += 1
        timers: list[asyncio.TimerHandle] = []
        _arm_expiry(loop, live, deadline, timers)
        response.add_done_callback(lambda done: self._settle(q, live, n_bytes, timers, done))

    def _request(self, mq: MessageQueue, jobs: list[MessageJob]) -> RemotingCommand:
        if len(jobs) == 1:
            return jobs[0].request(self.group, mq)
        ext = batch_ext(self.group, mq.topic, jobs[0].prepared.queue_nums, mq)
        return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, batch_body(jobs))

    def _settle(
        self,
        q: _Pending,
        jobs: list[MessageJob],
        n_bytes: int,
        timers: list[asyncio.TimerHandle],
        done: asyncio.Future[RemotingCommand],
    ) -> None:
        """A request of ``q`` finished: give each member its outcome, then send what waited."""
        for t in timers:
            t.cancel()
        q.in_flight -= 1
        self._release(n_bytes)
        if done.cancelled():
            for j in jobs:
                j.future.cancel()
        elif (err := done.exception()) is not None:
            for j in jobs:
                _fail(j, _copy_error(err))
        elif len(jobs) == 1:
            _resolve(jobs[0], done.result())
        else:
            self._batch_outcome(q, jobs, done.result())
        if q.jobs and q.timer is None:
            self._flush(q)
        else:
            self._maybe_forget(q)

    def _batch_outcome(self, q: _Pending, jobs: list[MessageJob], resp: RemotingCommand) -> None:
        """Each member's outcome from a batch response (stored, refused per message, or refused)."""
        if resp.code in SEND_STATUS_BY_CODE:
            first = send_result(resp, q.addr, q.mq, "")
            # members whose ``SendPath._settle`` would only return the result (SEND_OK, a latency
            # fault tolerance does not record: that of the earliest member, jobs[0]) are settled
            fault = self.fault
            latency_ms = (asyncio.get_running_loop().time() - jobs[0].started) * 1000.0
            quiet = (
                first.status is SendStatus.SEND_OK
                and fault is not None
                and fault.quiet(q.mq.broker_name, latency_ms)
            )
            settle_stored(jobs, first, quiet)
            return
        if resp.code == ResponseCode.MESSAGE_ILLEGAL:  # one message's fault: each goes alone
            self.stats.splits += 1
            now = asyncio.get_running_loop().time()
            for j in jobs:
                self._send_alone(q, j, now)
            return
        for j in jobs:
            _fail(j, broker_error(resp.code, resp.remark, q.addr))

    def _send_alone(self, q: _Pending, job: MessageJob, now: float) -> None:
        """Send a member of a split batch as its own SEND_MESSAGE_V2 (same attempt, same queue)."""
        if job.future.done():
            return
        if job.deadline <= now:
            _fail(job, RemotingTimeoutError("send timed out while its refused batch was split"))
            return
        try:
            response = self.invoke(q.addr, job.request(self.group, q.mq), job.deadline - now)
        except RocketpyError as err:
            _fail(job, err)
            return
        self.stats.requests += 1
        self.stats.messages += 1
        response.add_done_callback(lambda done: _chain(job, done))

    def _maybe_forget(self, q: _Pending) -> None:
        """Drop an idle accumulator when the table holds more than ``KEPT_ACCUMULATORS`` (queues
        come and go with routes; the table stays small)."""
        if len(self._queues) <= KEPT_ACCUMULATORS:
            return
        if not q.jobs and q.in_flight == 0 and q.timer is None and self._queues.get(q.key) is q:
            del self._queues[q.key]
            if self._filling.get(q.mq.topic) is q:
                del self._filling[q.mq.topic]


def _resolve(job: MessageJob, outcome: Any) -> None:
    if not job.future.done():
        job.future.set_result(outcome)


def _fail(job: MessageJob, err: BaseException) -> None:
    if not job.future.done():
        job.future.set_exception(err)


def _copy_error(err: BaseException) -> BaseException:
    """A copy of ``err`` for one member (an exception raised in several tasks would collect every
    task's traceback; ``copy.copy`` cannot rebuild errors whose ``__init__`` takes other arguments)."""
    out = err.__class__.__new__(err.__class__, *err.args)
    out.args = err.args
    out.__dict__.update(err.__dict__)
    out.__cause__ = err.__cause__
    return out


def _arm_expiry(
    loop: asyncio.AbstractEventLoop,
    jobs: list[MessageJob],
    deadline: float,
    timers: list[asyncio.TimerHandle],
) -> None:
    """Arm one timer (in ``timers``) at the earliest deadline among ``jobs`` that comes before the
    request's ``deadline``: one timer per request, not one per member."""
    earliest = earliest_deadline(jobs, deadline - 0.001)
    timers.clear()
    if earliest < deadline - 0.001:
        timers.append(loop.call_at(earliest, _expire_due, loop, jobs, deadline, earliest, timers))


def _expire_due(
    loop: asyncio.AbstractEventLoop,
    jobs: list[MessageJob],
    deadline: float,
    when: float,
    timers: list[asyncio.TimerHandle],
) -> None:
    """Fail the members whose deadline (at or before ``when``) passed; re-arm for the next one."""
    for j in jobs:
        if j.deadline <= when:
            _fail(j, RemotingTimeoutError("no response from the broker within the send timeout"))
    _arm_expiry(loop, jobs, deadline, timers)


def _chain(job: MessageJob, done: asyncio.Future[RemotingCommand]) -> None:
    if done.cancelled():
        job.future.cancel()
    elif done.exception() is not None:
        _fail(job, done.exception())  # type: ignore[arg-type]
    else:
        _resolve(job, done.result())
