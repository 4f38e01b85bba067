"""Reading one queue range ``[start, end)`` with the SDK's pull call, pipelined, in offset order.

Owns the read loop of a Spark task. Without a tag filter, offsets of a queue are dense, so the
range is cut into windows of ``pullBatchSize`` offsets and up to ``PIPELINE_DEPTH`` pulls are in
flight on one connection; a window answered short (the broker's per-pull count or byte cap) is
completed by a pull of its rest before anything later is handed on, and the window shrinks to
the most the broker answered at once (its per-pull cap); the rest of a window answered short is
pulled in windows of that size, pipelined too. With a tag filter the broker skips
offsets, so pulls are sequential from each answer's ``nextBeginOffset`` (the exact tag check is
the caller's, on the decoded columns: the broker filters by hash); an ``sqlFilter`` goes as an SQL92
subscription the same way (the broker tests each record's properties exactly). When the broker does
not answer (its master died mid-read), the reader moves on to the next member of that broker the
route lists (its slave), from the first offset not yet handed on: the read goes on, in order, with
nothing read twice. Answers stay undecoded: the records of several pulls are handed on together, as
the list of their bodies, for one columnar decode that reads each body where it is
(``rocketpy.spark.convert``: no join, no copy of the chunk). Offsets removed by cleanup (the broker
answers OFFSET_ILLEGAL with a larger min offset) fail the read with ``DataLossError`` naming the
queue and offsets, or are skipped and logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable

from rocketpy.client.api import MQClientAPI, PullResult, PullStatus
from rocketpy.errors import MQClientError, RemotingConnectError, RemotingTimeoutError
from rocketpy.record import POS_QUEUE_OFFSET, Q64, U32
from rocketpy.record_columns import Buffer
from rocketpy.remoting.command import RemotingCommand
from rocketpy.spark.brokers import BrokerUnavailableError
from rocketpy.spark.filters import pull_header
from rocketpy.spark.offsets import QueueRange, queue_name
from rocketpy.spark.options import ReadOptions
from rocketpy.subscription import SubscriptionData

log = logging.getLogger("rocketpy.spark")

PIPELINE_DEPTH = 16
#: Moves to another member of the broker within one range (then the task fails, retriable).
MAX_FAILOVERS = 4
#: Pause before trying the members again when none answered (doubles up to 2 s).
FAILOVER_PAUSE_S = 0.25
#: Rows handed on at once (one Arrow batch), and a bound on their bytes.
CHUNK_ROWS = 4096
CHUNK_BYTES = 64 << 20


class DataLossError(MQClientError):
    """Offsets a read was planned to return are gone from the broker (removed by cleanup)."""


class _Window:
    """One pull in flight: offsets ``[start, stop)``."""

    __slots__ = ("future", "start", "stop")

    def __init__(self, start: int, stop: int, future: asyncio.Future[RemotingCommand]) -> None:
        self.start, self.stop, self.future = start, stop, future


#: The members of the range's broker, master first (``fresh``: ask the NameServer again).
Locate = Callable[[bool], Awaitable[list[str]]]


class RangeReader:
    """Reads one ``QueueRange`` from the members ``locate`` gives (use ``chunks()`` once)."""

    def __init__(self, api: MQClientAPI, locate: Locate, r: QueueRange, opts: ReadOptions) -> None:
        self.api, self.locate, self.range, self.opts = api, locate, r, opts
        self.addr = ""  # the member pulled from (set by chunks())
        self.filtered = opts.filtered
        tagged = opts.sql_filter is None and self.filtered
        sub = SubscriptionData.of_tags(r.topic, opts.tags, 0) if tagged else None
        #: The tags a row must have (the broker's filter is by hash); None: every row.
        self.tags: frozenset[str] | None = sub.tags_set if sub is not None and sub.tags_set else None
        self.window = opts.pull_batch_size
        self._largest = 0  # most offsets one answer covered
        self._pending: deque[_Window] = deque()
        self._failovers = 0

    def _launch(self, start: int, stop: int) -> _Window:
        # a future, not a task: a reader keeps PIPELINE_DEPTH pulls in flight, and a task each cost
        # about a fifth of the read's CPU
        ext = pull_header(self.opts, self.range.queue, start, stop - start).to_ext()
        return _Window(start, stop, self.api.pull_future(self.addr, ext, self.opts.timeout_s))

    async def _drop_pending(self) -> None:
        for w in self._pending:
            w.future.cancel()
        await asyncio.gather(*(w.future for w in self._pending), return_exceptions=True)
        self._pending.clear()

    async def _failover(self, error: MQClientError) -> None:
        """The member pulled from did not answer: go on with the next one the route lists."""
        self._failovers += 1
        q = queue_name(self.range.queue)
        if self._failovers > MAX_FAILOVERS:
            raise BrokerUnavailableError(
                f"{q}: no member of broker {self.range.broker_name} answers ({error})"
            )
        await self._drop_pending()
        members = await self.locate(True)
        others = [a for a in members if a != self.addr]
        if not others:  # the route still names only this one: wait, then try it again
            await asyncio.sleep(min(2.0, FAILOVER_PAUSE_S * 2 ** (self._failovers - 1)))
            others = members
        log.warning("%s: %s did not answer (%s); reading on from %s", q, self.addr, error, others[0])
        self.addr = others[0]

    def _fill(self, next_start: int) -> int:
        depth = 1 if self.filtered else PIPELINE_DEPTH
        end = self.range.end
        while next_start < end and len(self._pending) < depth:
            stop = end if self.filtered else min(next_start + self.window, end)
            self._pending.append(self._launch(next_start, stop))
            next_start = stop
        return next_start

    def _relaunch(self, start: int, stop: int) -> None:
        """Pull the rest ``[start, stop)`` of a window answered short again, ahead of the later
        windows: in windows of the current size, pipelined (at most ``PIPELINE_DEPTH`` of them, the
        last taking what is left), not one pull after the other when the first windows were larger
        than the broker's cap."""
        rest: list[_Window] = []
        while start < stop:
            end = stop if len(rest) == PIPELINE_DEPTH - 1 else min(start + self.window, stop)
            rest.append(self._launch(start, end))
            start = end
        self._pending.extendleft(reversed(rest))

    def _lost(self, w: _Window, result: PullResult) -> int:
        """Where to go on after an OFFSET_ILLEGAL answer to ``w`` (or raise DataLossError)."""
        q = queue_name(self.range.queue)
        if result.min_offset <= w.start:
            raise DataLossError(
                f"{q}: offset {w.start} is beyond the queue's max offset {result.max_offset}"
                " (were messages lost by the broker?)"
            )
        lost_to = min(result.min_offset, self.range.end)
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                f"{q}: offsets [{w.start}, {lost_to}) were removed by the broker's cleanup before they"
                " were read; set failOnDataLoss=false to skip them"
            )
        log.warning("%s: skipping offsets [%d, %d) removed by cleanup", q, w.start, lost_to)
        return lost_to

    def _accept(self, w: _Window, result: PullResult) -> tuple[bytes, int, int]:
        """The records of ``w`` in ``result`` (undecoded), how many, and the offset read up to."""
        if result.status is PullStatus.OFFSET_ILLEGAL:
            return b"", 0, self._lost(w, result)
        if result.status is PullStatus.NO_NEW_MSG:
            if self._failovers:  # a slave behind its dead master: the master may come back (retry)
                raise BrokerUnavailableError(
                    f"{queue_name(self.range.queue)}: {self.addr} holds offsets up to {result.max_offset}"
                    f" only, below the planned end {self.range.end} (a slave behind its master)"
                )
            raise DataLossError(
                f"{queue_name(self.range.queue)}: no message at offset {w.start}, below the planned end"
                f" {self.range.end} (queue max offset {result.max_offset})"
            )
        limit = min(w.stop, self.range.end)
        reached = min(result.next_begin_offset, limit)
        got = reached - w.start
        if got <= 0:
            raise MQClientError(f"{queue_name(self.range.queue)}: the broker made no progress at {w.start}")
        if self.filtered or result.next_begin_offset > limit:  # offsets may run past the range
            body, count = records_before(result.body, limit)
        else:  # dense offsets, all below the limit: one record per offset
            body, count = result.body, (got if result.body else 0)
        self._largest = max(self._largest, got)
        if not self.filtered and count and reached < w.stop:
            # the broker caps a pull's count (or cut it at a commitlog file's end): windows shrink
            # to the most it ever answered at once, not to this answer, so one cut is not forever
            self.window = max(1, min(self.window, self._largest))
        return body, count, reached

    async def _answer(self, w: _Window) -> PullResult | None:
        """``w``'s answer, or None after a failover (the windows are launched again from ``w``)."""
        try:
            return self.api.pull_result(await w.future, self.addr, raw=True)
        except (RemotingConnectError, RemotingTimeoutError) as e:
            self._pending.appendleft(w)  # dropped with the rest, relaunched from w.start
            await self._failover(e)
            return None

    async def chunks(self) -> AsyncGenerator[list[Buffer], None]:
        """The range's records in offset order, about ``CHUNK_ROWS`` at a time: each chunk the bodies
        of its pulls (records back to back in each, in offset order across them)."""
        out: list[Buffer] = []
        rows = size = 0
        self.addr = (await self.locate(False))[0]
        next_start = self._fill(self.range.start)
        try:
            while self._pending:
                w = self._pending.popleft()
                result = await self._answer(w)
                if result is None:
                    next_start = self._fill(w.start)
                    continue
                body, count, reached = self._accept(w, result)
                out.append(body)
                rows, size = rows + count, size + len(body)
                if reached < w.stop and reached < self.range.end and not self.filtered:
                    self._relaunch(reached, w.stop)
                elif self.filtered:
                    next_start = reached
                next_start = self._fill(next_start)
                if rows >= CHUNK_ROWS or size >= CHUNK_BYTES:
                    yield out
                    out, rows, size = [], 0, 0
            if rows:
                yield out
        finally:
            await self._drop_pending()


def records_before(body: bytes, limit: int) -> tuple[bytes, int]:
    """The leading records of ``body`` whose queue offset is below ``limit``, and how many.

    Reads only each record's size and queue offset; a malformed record ends the scan there and is
    kept, so the decoder reports it.
    """
    pos = count = 0
    end = len(body)
    while pos + POS_QUEUE_OFFSET + 8 <= end:
        if Q64.unpack_from(body, pos + POS_QUEUE_OFFSET)[0] >= limit:
            return body[:pos], count
        size = U32.unpack_from(body, pos)[0]
        if size <= 0:
            break
        pos += size
        count += 1
    if pos < end:  # a truncated or malformed tail: keep it for the decoder's error
        return body, count + 1
    return body, count
