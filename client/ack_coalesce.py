"""Acks of one POP consumer coalesced per broker: the batch acks handed in within one loop tick, or
while an ack request to that broker is in flight, leave as one BATCH_ACK_MESSAGE.

Owns ``AckCoalescer``. Concurrent receive loops each ack their own batch; alone, every batch costs
the broker one request and one revive-log record. Held together (as Nagle holds small writes
behind an unanswered one), a burst of acks costs one of each. The delay this adds to an ack is at
most one ack round trip, small beside any invisible time.

Each ``add`` returns its own future, resolved once the request carrying its acks is answered: None,
or the request's error (a batch ack fails as a whole — a store that refused the record, a broker
gone — which is what each ack alone would have got; an ack the broker skips because the message is
no longer in flight is not an error). The acks are checked before they are added (``batch_acks``),
so one caller's malformed handle never fails another's acks. A cancelled caller's acks still go
out (an ack is idempotent).

Bounds: a request carries at most ``MAX_ACKS_PER_REQUEST`` BatchAck entries, unless one caller
alone brought more (its list goes as it is, as it would have alone); what is held waits for at most
one request per broker, and each caller awaits its future, so what is held is bounded by the
callers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from rocketpy.protocol.headers.pop import BatchAck

#: Most BatchAck entries coalesced into one request (one entry per pop and queue acked).
MAX_ACKS_PER_REQUEST = 1024

#: ``(broker addr, broker name, acks) -> awaitable`` sending one BATCH_ACK_MESSAGE.
Send = Callable[[str, str, list[BatchAck]], Awaitable[object]]


class _Broker:
    """What is held for one broker, and whether a request to it is in flight."""

    __slots__ = ("acks", "addr", "futures", "in_flight", "name", "scheduled")

    def __init__(self, name: str, addr: str) -> None:
        self.name, self.addr = name, addr
        self.acks: list[list[BatchAck]] = []  # one list per caller
        self.futures: list[asyncio.Future[None]] = []
        self.in_flight = False
        self.scheduled = False


class AckCoalescer:
    """Per-broker ack accumulators of one consumer.

    Args:
        send: sends one BATCH_ACK_MESSAGE (raises on a refusal).
    """

    def __init__(self, send: Send) -> None:
        self._send = send
        self._brokers: dict[str, _Broker] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.requests = 0

    def add(self, addr: str, broker_name: str, acks: list[BatchAck]) -> asyncio.Future[None]:
        """Hold ``acks`` for ``broker_name`` at ``addr``; the future resolves when they were answered."""
        loop = asyncio.get_running_loop()
        b = self._brokers.get(broker_name)
        if b is None:
            b = self._brokers[broker_name] = _Broker(broker_name, addr)
        b.addr = addr
        fut: asyncio.Future[None] = loop.create_future()
        b.acks.append(acks)
        b.futures.append(fut)
        if not b.in_flight and not b.scheduled:
            b.scheduled = True
            loop.call_soon(self._flush, b)
        return fut

    def _flush(self, b: _Broker) -> None:
        """Send what ``b`` holds (up to the request bound) unless a request to it is in flight."""
        b.scheduled = False
        if b.in_flight or not b.futures:
            return
        n = taken = 0
        while taken < len(b.acks) and (taken == 0 or n + len(b.acks[taken]) <= MAX_ACKS_PER_REQUEST):
            n += len(b.acks[taken])
            taken += 1
        acks = [a for part in b.acks[:taken] for a in part]
        futures = b.futures[:taken]
        del b.acks[:taken], b.futures[:taken]
        b.in_flight = True
        self.requests += 1
        task = asyncio.ensure_future(self._request(b, acks, futures))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _request(self, b: _Broker, acks: list[BatchAck], futures: list[asyncio.Future[None]]) -> None:
        try:
            await self._send(b.addr, b.name, acks)
        except asyncio.CancelledError:
            for f in futures:
                f.cancel()
            raise
        except Exception as e:
            for f in futures:
                if not f.done():
                    f.set_exception(e)
        else:
            for f in futures:
                if not f.done():
                    f.set_result(None)
        finally:
            b.in_flight = False
            if b.futures:
                self._flush(b)

    async def close(self) -> None:
        """Send everything held and wait for the answers (errors stay with their callers)."""
        for b in self._brokers.values():
            if b.futures and not b.in_flight:
                self._flush(b)
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
