"""Auto-renew: the messages a PushConsumer is still working on stay invisible while it lives.

A PushConsumer receives with ``auto_renew`` and no invisible time (RocketMQ's proxy,
``DefaultReceiptHandleManager``): its messages are popped invisible for
``defaultInvisibleTimeMills`` and held here per client and group, by message id. Every
``renewSchedulePeriodMillis`` the routine renews each held message that would show again within
``renewAheadTimeMillis``: an invisible-time change of 1 min, then 3, 5, 10, 30 min, 1 h (the
proxy's ``RenewStrategyPolicy``), each giving the message a new handle, kept here. Renewal stops

* when the client acks the message, changes its invisible time or forwards it to the DLQ: those
  RPCs ``take`` the held entry and use its current handle (the client still holds the first one);
* after ``renewMaxTimeMillis`` (3 h): the message is left invisible for its next retry delay and
  then redelivered, as a failed consumption would be;
* when the client's session ended (NotifyClientTermination, idle expiry): each of its messages is
  made visible again ``invisibleTimeMillisWhenClear`` (1 s) later, so another consumer gets it;
* when the message is no longer in flight, or ``maxRenewRetryTimes`` renewals in a row failed.

A renewal and a ``take`` of the same entry do not interleave: ``take`` waits for the renewal in
progress and answers its new handle. The table holds at most ``MAX_HELD`` messages (beyond: not
renewed, so redelivered after ``defaultInvisibleTimeMills``). Everything runs on the event loop;
times are wall-clock milliseconds, as handles carry them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketpy.broker.pop.service import PopService, wall_ms
from rocketpy.broker.pop.types import PopError
from rocketpy.config import BrokerConfig
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.receipt import ReceiptHandle

log = logging.getLogger("rocketpy.broker.grpc")

#: Invisible time of the n-th renewal (RocketMQ proxy's ``RenewStrategyPolicy``), ms.
RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
#: Messages held for renewal on one broker at most.
MAX_HELD = 100_000
#: Renewals in flight at once.
RENEW_CONCURRENCY = 64
#: A full table is logged at most this often.
LOG_EVERY_S = 10.0


@dataclass(slots=True)
class Held:
    """One message a client works on.

    Attributes:
        group, topic: the consumer group and the topic it subscribed to.
        original: the handle the client received (the one it will send back).
        handle: the current handle (after renewals).
        received_ms: when the client got it (renewal stops ``renewMaxTimeMillis`` later).
        reconsume_times: deliveries before this one (the retry delay when renewal stops).
        renewals: renewals so far; failures: failed renewals in a row.
        busy: set while a renewal is in progress.
    """

    group: str
    topic: str
    original: str
    handle: ReceiptHandle
    received_ms: int
    reconsume_times: int
    renewals: int = 0
    failures: int = 0
    busy: asyncio.Future[None] | None = None

    def stored_topic(self) -> str:
        """The topic the message is stored in (its POP retry topic when redelivered)."""
        return self.handle.stored_topic(self.topic, self.group)


def retry_delay_ms(levels: list[int], reconsume_times: int) -> int:
    """The group's retry delay after ``reconsume_times`` deliveries: ``messageDelayLevel`` level
    3 + reconsume_times (``levels`` in ms, level 1 first), the last level beyond it."""
    return levels[min(2 + max(reconsume_times, 0), len(levels) - 1)]


class RenewTable:
    """The held messages of one broker's gRPC clients (see the module docstring).

    Args:
        config: the broker's settings (the renew keys, live).
        pop: the broker's POP service (invisible-time changes).
        alive: whether a client id still has a session.
        delay_levels: the ``messageDelayLevel`` delays, ms.
        clock_ms: wall-clock milliseconds.
    """

    def __init__(
        self,
        config: BrokerConfig,
        pop: PopService,
        alive: Callable[[str], bool],
        delay_levels: list[int],
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self.config = config
        self.pop = pop
        self.alive = alive
        self.delay_levels = delay_levels
        self.clock_ms = clock_ms
        self._by_client: dict[str, dict[tuple[str, str], Held]] = {}
        self.count = 0
        self.renewed_total = 0
        self._last_log = 0.0

    # -- the RPCs' side -------------------------------------------------------------------------

    def hold(self, client_id: str, message_id: str, held: Held) -> bool:
        """Keep ``held`` renewed for ``client_id``; False when the table is full."""
        table = self._by_client.setdefault(client_id, {})
        key = (held.group, message_id)
        if key not in table:
            if self.count >= MAX_HELD:
                self._log_full()
                return False
            self.count += 1
        table[key] = held
        return True

    def holding(self, client_id: str) -> bool:
        """Whether any message of ``client_id`` is held (acks of other clients skip ``take``)."""
        return client_id in self._by_client

    def current(self, client_id: str, group: str, message_id: str) -> ReceiptHandle | None:
        """The current handle of a held message, None when it is not held."""
        held = self._by_client.get(client_id, {}).get((group, message_id))
        return held.handle if held is not None else None

    async def take(self, client_id: str, group: str, message_id: str, text: str) -> str:
        """Stop renewing the message ``text`` names; returns the handle to use for it now.

        The held entry is taken when ``text`` is the handle the client received (or the current
        one); else ``text`` is answered as it is (the message is not held, or another delivery
        of it is).
        """
        table = self._by_client.get(client_id)
        held = table.get((group, message_id)) if table else None
        if held is None or (text != held.original and text != held.handle.encode()):
            return text
        while held.busy is not None:
            await asyncio.shield(held.busy)
        self._drop(client_id, (group, message_id), held)
        return held.handle.encode()

    # -- the routine ----------------------------------------------------------------------------

    async def routine(self) -> None:
        """Renew (or let go of) what is due, every ``renewSchedulePeriodMillis``."""
        while True:
            await asyncio.sleep(self.config.renew_schedule_period_millis / 1000)
            await self.renew_due()

    async def renew_due(self) -> int:
        """One scan: returns how many held messages it changed."""
        now = self.clock_ms()
        ahead = self.config.renew_ahead_time_millis
        work: list[tuple[str, tuple[str, str], Held, int]] = []
        for client_id, table in list(self._by_client.items()):
            gone = not self.alive(client_id)
            for key, held in list(table.items()):
                h = held.handle
                if held.busy is not None or (not gone and h.pop_time + h.invisible_time - now > ahead):
                    continue
                work.append((client_id, key, held, self._next_invisible(held, now, gone)))
        for i in range(0, len(work), RENEW_CONCURRENCY):
            await asyncio.gather(*(self._renew(*w) for w in work[i : i + RENEW_CONCURRENCY]))
        return len(work)

    def _next_invisible(self, held: Held, now: int, gone: bool) -> int:
        """The invisible time to give ``held`` now; negative: change it, then let it go."""
        c = self.config
        if gone:
            return -c.invisible_time_millis_when_clear
        if now - held.received_ms >= c.renew_max_time_millis:
            return -retry_delay_ms(self.delay_levels, held.reconsume_times)
        return RENEW_STEPS_MS[min(held.renewals, len(RENEW_STEPS_MS) - 1)]

    async def _renew(self, client_id: str, key: tuple[str, str], held: Held, invisible_ms: int) -> None:
        h = held.handle
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        held.busy = done
        try:
            result = await self.pop.change_invisible(
                held.group, held.stored_topic(), h.queue_id, h.queue_offset, h.encode(), abs(invisible_ms)
            )
        except PopError as e:
            held.failures += 1
            if e.code == ResponseCode.NO_MESSAGE or held.failures > self.config.max_renew_retry_times:
                self._drop(client_id, key, held)  # acked or redelivered meanwhile, or the store refuses
            return
        finally:
            held.busy = None
            done.set_result(None)
        held.handle = h._replace(
            pop_time=result.pop_time, invisible_time=result.invisible_ms, revive_qid=result.revive_qid
        )
        held.renewals += 1
        held.failures = 0
        self.renewed_total += 1
        if invisible_ms < 0:
            self._drop(client_id, key, held)

    # -- helpers --------------------------------------------------------------------------------

    def _drop(self, client_id: str, key: tuple[str, str], held: Held) -> None:
        table = self._by_client.get(client_id)
        if table is None or table.get(key) is not held:
            return
        del table[key]
        self.count -= 1
        if not table:
            del self._by_client[client_id]

    def _log_full(self) -> None:
        if time.monotonic() - self._last_log > LOG_EVERY_S:
            self._last_log = time.monotonic()
            log.warning(
                "auto-renew holds %d messages already: newer ones are redelivered after "
                "defaultInvisibleTimeMills unless acked first",
                MAX_HELD,
            )
