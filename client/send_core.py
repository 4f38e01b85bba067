"""The awaited send's hot path in few steps: the usual message's first attempt, a coalesced batch's
body, and its members' results (compiled twin in ``client/_speedups.pyx``).

Owns the shortcut ``Producer.send`` takes for the usual message — a ``Message`` with a ``bytes``
body no longer than ``compress_over_bytes``, at most tags (no keys, no properties, no delay), to a
topic already checked — and the two per-member loops of a coalesced request:

* ``start_usual``: check, wire form (UNIQ_KEY and properties string), job, queue choice and
  attempt in one call: the ``check_message`` + ``PreparedMessage`` + ``MessageJob`` +
  ``SendPath.start`` + ``Coalescer.add`` path for that message, with the same outcome (a send
  joins the batch still filling of its topic, or takes the round robin's next queue; with
  auto-batch off its request is written at once, as ``SendPath._attempt`` writes it). Anything
  else (not the usual message, no cached route, no broker address, no room among coalesced sends)
  is answered as before: None (the caller takes the general path) or the coroutine of
  ``SendPath.run``.
* ``batch_body``: RocketMQ's batch encoding of the members' prepared messages (``batch_item`` each).
* ``live_members`` / ``earliest_deadline``: which members of a leaving batch still wait, their
  latest deadline (the request's timeout), and the earliest one before it (its expiry timer).
* ``settle_stored``: one ``SendResult`` per member of a stored batch (its UNIQ_KEY, its offset id,
  the batch's base queue offset + its index), each member's future resolved with its own;
  ``quiet`` marks the members ``settled`` (nothing left for ``SendPath._settle`` to do: status
  SEND_OK and nothing for fault tolerance to record), so ``Producer.send`` returns the result as
  soon as it wakes.
* ``settle_lone``: the accumulator's part once a request written alone (``Coalescer._send_lone``)
  is answered (its member already has the outcome): the request and its bytes leave, what queued
  meanwhile leaves next, an idle accumulator may be dropped.
* ``finish_sent``: a sent attempt's outcome (``SendJob.finish``) once its response came; the
  compiled twin makes a SUCCESS answer's ``SendResult`` and the fault tolerance's record in one
  call (``SendPath._settle`` + ``send_result`` for it) and hands anything else to ``finish``.

The twins must answer alike (``tests/unit/test_send_core.py``); each reads the same attributes of
the same objects, so a change to ``PreparedMessage``, ``SendJob`` or the coalescer's accumulator is
made in both.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from rocketpy import msgid
from rocketpy._accel import twin
from rocketpy.client.message_check import PreparedMessage, _valid_topics, batch_item
from rocketpy.client.results import SendResult
from rocketpy.client.selector import select_queue
from rocketpy.message import Message
from rocketpy.message_props import may_be_timed_or_half
from rocketpy.record import BATCH_HEAD, MAX_PROPERTIES_BYTES

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from rocketpy.client.coalesce import Coalescer, _Pending
    from rocketpy.client.send_path import MessageJob, SendPath

#: the encoded size of a batch member beyond its body and properties (``item_bytes``)
ITEM_OVERHEAD = BATCH_HEAD.size + 2


@twin
def start_usual(
    path: SendPath,
    job_cls: type[MessageJob],
    msg: Any,
    max_bytes: int,
    compress_over_bytes: int,
    queue_nums: int,
    retry_times: int,
    remaining: float,
) -> MessageJob | Coroutine[Any, Any, Any] | None:
    """The first attempt of ``msg`` when it is the usual message (see the module docstring): its job
    (its ``future`` the member's own, or with auto-batch off its request's response future, as
    ``SendPath._attempt`` writes it), or ``SendPath.run``'s coroutine when the attempt must wait
    (no cached route, no broker address, no room), or None when ``msg`` is not the usual message
    (nothing done: the caller checks and sends it the general way).

    Raises:
        MQClientError: the producer is not started (``path.instance``).
    """
    inst = path.instance()
    co = path.coalescer
    if type(msg) is not Message:
        return None
    body = msg.body
    topic = msg.topic
    tags = msg.tags
    flag = msg.flag
    if (
        type(body) is not bytes
        or not 0 < len(body) <= max_bytes
        or len(body) > compress_over_bytes
        or msg.keys
        or msg.properties
        or type(msg.delay_level) is not int
        or msg.delay_level != 0
        or type(flag) is not int
        or not -(2**31) <= flag < 2**31
        or (tags is not None and (type(tags) is not str or tags == "" or "||" in tags))
        or topic not in _valid_topics
    ):
        return None
    now_ms = int(time.time() * 1000)
    gen = msgid._GEN
    stamp_ms, head = gen._stamp
    uniq = f"{head}{next(gen._counter) & 0xFFFF:04X}" if now_ms == stamp_ms else gen.next()
    if tags is None:
        props = f"UNIQ_KEY\x01{uniq}\x02"
        n_props = len(props)
    else:
        props = f"TAGS\x01{tags}\x02UNIQ_KEY\x01{uniq}\x02"
        n_props = len(props) if props.isascii() else len(props.encode())
        if n_props > MAX_PROPERTIES_BYTES or may_be_timed_or_half(props):
            return None
    size = ITEM_OVERHEAD + len(body) + n_props
    if co is not None and size > co.batch_max_bytes:
        return None
    p = PreparedMessage.__new__(PreparedMessage)
    p.body, p.born_ms, p.flag, p.needs_compress, p.properties = body, now_ms, flag, False, props
    p.queue_nums, p.sys_flag, p.topic, p.uniq_key = queue_nums, 0, topic, uniq
    job = job_cls.__new__(job_cls)
    job.prepared = p
    job.topic, job.attempts, job.choice, job.tried, job.unavailable = topic, 1 + retry_times, None, 0, 0
    job.last_broker = job.last_error = job.last_result = job.refresh = None
    job.needs_compress, job.settled, job.item_size = False, False, size if co is not None else 0
    loop = (co.loop if co is not None else None) or asyncio.get_running_loop()  # (``Coalescer.loop``)
    now = loop.time()
    job.path, job.deadline = path, now + remaining
    tp = inst.publish_info(topic)
    if tp is None or not tp.message_queues:
        return path.run(job)
    fault = path.fault
    if co is None:  # auto-batch off: ``SendPath.start``'s first attempt
        mq = select_queue(tp.message_queues, tp.index, fault, None)
        addr = inst.find_broker_addr(mq.broker_name)
        if addr is None:
            return path.run(job, mq)
        job.tried, job.mq, job.addr, job.started = 1, mq, addr, now
        job.future = inst.remoting.invoke_future(addr, job.request(path.group, mq), remaining)
        return job
    q: _Pending | None = co._filling.get(topic)
    if (
        q is not None
        and q.jobs
        and q.n_bytes < co.batch_max_bytes
        and (not fault.enabled or fault.is_available(q.mq.broker_name))
    ):
        mq = q.mq  # join the batch still filling (``Coalescer.filling``)
    else:
        q = None
        mq = select_queue(tp.message_queues, tp.index, fault, None)
    addr = inst.find_broker_addr(mq.broker_name)
    if addr is None or co._room_waiters or co.held_bytes + size > co.total_batch_max_bytes:
        return path.run(job, mq)
    job.tried, job.mq, job.addr, job.started = 1, mq, addr, now
    if q is not None and q.addr == addr and q.n_bytes + size <= co.batch_max_bytes:
        fut: asyncio.Future[Any] = loop.create_future()  # ``Coalescer.add`` to a batch still filling
        job.future = fut
        q.jobs.append(job)
        q.n_bytes += size
        co.held_bytes += size
        if q.in_flight == 0 and q.timer is None:
            _arm_flush(co, q, loop)
    else:
        job.future = co.add(job, mq, addr)
    return job


def _arm_flush(co: Coalescer, q: _Pending, loop: asyncio.AbstractEventLoop) -> None:
    if co.batch_max_delay > 0:
        q.timer = loop.call_later(co.batch_max_delay, co._flush, q)
    else:
        q.timer = loop.call_soon(co._flush, q)


@twin
def batch_body(jobs: list[MessageJob]) -> bytes:
    """The SEND_BATCH_MESSAGE body of ``jobs``' prepared messages, in order (``batch_item`` each)."""
    parts: list[bytes] = []
    for j in jobs:
        p = j.prepared
        parts += batch_item(p.body, p.flag, p.properties.encode())
    return b"".join(parts)


@twin
def settle_stored(jobs: list[MessageJob], first: SendResult, quiet: bool) -> None:
    """Resolve each member's future (those not done yet) with its ``SendResult`` of a stored batch
    whose response maps to ``first`` (``send_result``): its UNIQ_KEY as msg id, the ``i``-th of
    ``first``'s comma-separated offset ids ("" past the last), queue offset ``first``'s + ``i``
    (``batch_results``). ``quiet``: mark them ``settled``."""
    offset_ids = first.offset_msg_id.split(",")
    n_ids = len(offset_ids)
    status, mq, base = first.status, first.message_queue, first.queue_offset
    for i, j in enumerate(jobs):
        result = SendResult(status, j.prepared.uniq_key, offset_ids[i] if i < n_ids else "", mq, base + i)
        fut = j.future
        if not fut.done():
            j.settled = quiet
            fut.set_result(result)


@twin
def live_members(jobs: list[MessageJob]) -> tuple[list[MessageJob], int, float]:
    """The members of a leaving batch whose future is not done yet (a cancelled send leaves
    nothing to send), in order; the bytes of the others; the latest deadline among the live
    (0.0 when none is)."""
    live: list[MessageJob] = []
    dropped = 0
    deadline = 0.0
    for j in jobs:
        if j.future.done():
            dropped += j.item_size
        else:
            if not live or j.deadline > deadline:
                deadline = j.deadline
            live.append(j)
    return live, dropped, deadline


@twin
def earliest_deadline(jobs: list[MessageJob], before: float) -> float:
    """The earliest deadline among ``jobs`` not done yet that comes before ``before``, else
    ``before`` (when the request's one expiry timer fires)."""
    earliest = before
    for j in jobs:
        if j.deadline < earliest and not j.future.done():
            earliest = j.deadline
    return earliest


@twin
def settle_lone(co: Coalescer, q: _Pending, size: int, _done: asyncio.Future[Any]) -> None:
    """``Coalescer._settle`` of a ``_send_lone`` request of ``size`` bytes on ``q``: its member
    already has the outcome (the response future is its own)."""
    q.in_flight -= 1
    co._release(size)
    if q.jobs and q.timer is None:
        co._flush(q)
    else:
        co._maybe_forget(q)


@twin
def finish_sent(job: MessageJob, done: asyncio.Future[Any]) -> Any:
    """``job.finish(done)``: the result of ``job``'s attempt whose response future ``done`` is done,
    or the coroutine of the remaining attempts after a retriable failure (a refusal raises)."""
    return job.finish(done)


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.client import _speedups

    same_signature(start_usual)(_speedups.start_usual)
    same_signature(_speedups.start_usual)(start_usual)
    same_signature(batch_body)(_speedups.batch_body)
    same_signature(_speedups.batch_body)(batch_body)
    same_signature(settle_stored)(_speedups.settle_stored)
    same_signature(_speedups.settle_stored)(settle_stored)
    same_signature(live_members)(_speedups.live_members)
    same_signature(_speedups.live_members)(live_members)
    same_signature(earliest_deadline)(_speedups.earliest_deadline)
    same_signature(_speedups.earliest_deadline)(earliest_deadline)
    same_signature(settle_lone)(_speedups.settle_lone)
    same_signature(_speedups.settle_lone)(settle_lone)
    same_signature(finish_sent)(_speedups.finish_sent)
    same_signature(_speedups.finish_sent)(finish_sent)
