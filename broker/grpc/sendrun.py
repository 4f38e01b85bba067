"""The plain sends of a few loop ticks stored together: one commitlog append per client and queue.

A 5.x producer sends one message per SendMessage call with many calls in flight. ``SendRuns.submit``
takes such a call's plain message (normal type: no message group, delivery time or transaction) as
its SEND_MESSAGE_V2 command and answers a future. A run stays open for ``WINDOW_TICKS`` loop ticks
(at most ``WINDOW_MAX_S``) from its first send (grpc.aio brings calls in flight together in over
several ticks); then each client's commands go to the send processor's run handler
(``SendMessageProcessor.handle_run``, what the remoting side runs for the sends of one read), which
checks and answers each as if alone
and stores the messages of one queue with one append (one SYNC_FLUSH wait, or one SYNC_MASTER
wait for the slaves). ``queue`` gives the plain messages of one topic in a
run one queue, so they meet in one group; runs spread over the topic's queues at random, as single
sends do.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable
from typing import Any

from rocketpy.broker.grpc.channel import GrpcChannel
from rocketpy.errors import RemotingConnectError
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.processor import RunHandler

log = logging.getLogger("rocketpy.broker.grpc")

#: Most commands of one client held for a tick: more go to the run handler at once.
MAX_RUN = 256
#: Loop ticks a run stays open from its first send: grpc.aio takes in one new call per tick or
#: fewer (its server loop awaits each call before asking for the next), so calls in flight together
#: arrive over several ticks; measured at 64 calls in flight, 32 ticks gather ~8 sends a run where
#: one tick gathers 1. A lone send waits these ticks (microseconds on an idle loop).
WINDOW_TICKS = 32
#: ... and at most this long (seconds): ticks that other clients' work makes long (a busy broker)
#: do not hold a run's first send for 32 of them.
WINDOW_MAX_S = 0.005


class SendRuns:
    """One tick's plain sends, per client, on their way to ``run`` (the send processor's run handler).

    Args:
        run: ``SendMessageProcessor.handle_run``.
    """

    def __init__(self, run: RunHandler) -> None:
        self._run = run
        self._pending: dict[GrpcChannel, list[tuple[RemotingCommand, asyncio.Future[RemotingCommand]]]] = {}
        self._queues: dict[str, int] = {}  # topic -> this tick's queue for its plain messages
        self._scheduled = False
        self._ticks = 0
        self._opened = 0.0  # loop time of the open run's first tick
        self._loop: asyncio.AbstractEventLoop | None = None

    def queue(self, topic: str, queue_count: int) -> int:
        """The queue of ``topic``'s plain messages in this tick (one of ``queue_count``, at random)."""
        q = self._queues.get(topic)
        if q is None or q >= queue_count:
            q = self._queues[topic] = random.randrange(queue_count)
            self._schedule()
        return q

    def submit(self, channel: GrpcChannel, request: RemotingCommand) -> asyncio.Future[RemotingCommand]:
        """``request``'s answer, once this tick's run of ``channel`` is stored (it fails with
        ``RemotingConnectError`` when the client is gone by then)."""
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        items = self._pending.get(channel)
        if items is None:
            items = self._pending[channel] = []
        items.append((request, fut))
        if len(items) >= MAX_RUN:
            del self._pending[channel]
            self._store(channel, items)
        else:
            self._schedule()
        return fut

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self._loop = loop = asyncio.get_running_loop()
            self._opened = loop.time()
            loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._ticks += 1
        loop = self._loop
        assert loop is not None
        if self._ticks < WINDOW_TICKS and self._pending and loop.time() - self._opened < WINDOW_MAX_S:
            loop.call_soon(self._flush)  # the run stays open one more tick
            return
        self._ticks = 0
        self._scheduled = False
        self._queues.clear()
        pending, self._pending = self._pending, {}
        for channel, items in pending.items():
            self._store(channel, items)

    def _store(self, channel: GrpcChannel, items: list[tuple[RemotingCommand, asyncio.Future[Any]]]) -> None:
        requests = [request for request, _ in items]
        try:
            results = channel.run(self._run, requests)
            for (_, fut), result in zip(items, results, strict=True):
                if type(result) is RemotingCommand:
                    if not fut.done():
                        fut.set_result(result)
                else:
                    _chain(result, fut)
        except Exception as exc:  # the run failed as a whole: each call still waiting fails with it
            if not isinstance(exc, RemotingConnectError):  # not the client gone: a fault
                log.exception("a run of %d gRPC sends failed", len(items))
            for _, fut in items:
                if not fut.done():
                    fut.set_exception(exc)


def _chain(result: Any, fut: asyncio.Future[Any]) -> None:
    """Settle ``fut`` with the outcome of ``result`` (an awaitable answer: a put that suspended)."""
    if result is None:
        if not fut.done():
            fut.set_exception(RuntimeError("the send processor held a send (it answers every send)"))
        return
    task = asyncio.ensure_future(_answer(result))

    def done(t: asyncio.Future[RemotingCommand]) -> None:
        if t.cancelled():
            if not fut.done():
                fut.cancel()
            return
        exc = t.exception()  # retrieved here even when the call is gone
        if fut.done():
            if exc is not None:
                log.debug("a send whose call is gone failed: %r", exc)
        elif exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(t.result())

    task.add_done_callback(done)


async def _answer(result: Awaitable[RemotingCommand | None]) -> RemotingCommand:
    answer = await result
    if answer is None:
        raise RuntimeError("the send processor answered a send with nothing")
    return answer
