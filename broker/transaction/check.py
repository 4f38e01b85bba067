"""TransactionCheckService: asks producers about half messages left undecided.

Owns the check round (RocketMQ ``TransactionalMessageCheckService``), run on the event loop every
``transactionCheckInterval``. A round walks the half queue from the window's progress offset,
skipping resolved offsets, and for each undecided half message older than ``transactionTimeOut``
(or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``):

* checked ``transactionCheckMax`` times already: moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` (kept for
  inspection) and resolved as DISCARD;
* its committed copy is in the real topic already (a commit whose op record a crash lost; found by
  UNIQ_KEY in the index, matched by prepared-transaction offset): resolved as COMMIT;
* else, when a producer of its group is live, a CHECK op record is written (the count survives
  restarts) and CHECK_TRANSACTION_STATE (oneway, body = the half record) goes to one live producer
  of the group, a different one on each check when there are several (so a producer that exited
  or does not answer is passed over); the producer answers with END_TRANSACTION. With no producer
  live nothing is counted: a broker restart or a producer restart does not use up the checks.
  Unless ``MAX_DECIDED_AHEAD`` decided half messages wait behind it: an undecided one keeps the
  window's progress in place, and the window holds every later decision in memory until it
  moves. A group that never returns would grow it until cleanup (72 h), so from that size on
  its checks are counted without a producer to ask (as RocketMQ always counts them), and after
  ``transactionCheckMax`` of them it is discarded like any other.

The walk stops at the first half message too young to check; one round examines at most
``CHECK_RECORDS_PER_ROUND`` half messages and yields to the loop between them, and every
``SKIPS_PER_YIELD`` resolved offsets it steps over (one old undecided half message keeps the
walk's start in place while any number of later ones are decided).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.store import Store
from rocketpy.broker.topic_config import TopicConfigManager, TopicLimitError
from rocketpy.broker.transaction.half import HALF_QUEUE_ID, HalfRecord
from rocketpy.broker.transaction.op_log import op_message, op_next_offset, read_records
from rocketpy.broker.transaction.window import Outcome
from rocketpy.config import BrokerConfig
from rocketpy.errors import RemotingConnectError
from rocketpy.msgid import create_offset_msg_id
from rocketpy.protocol.codes import RequestCode
from rocketpy.protocol.headers.transaction import CheckTransactionStateRequestHeader
from rocketpy.record import RECORD_HEAD
from rocketpy.remoting.command import RemotingCommand
from rocketpy.topic import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC

if TYPE_CHECKING:
    from rocketpy.broker.transaction.service import TransactionService

log = logging.getLogger("rocketpy.broker.transaction")

#: Half messages one round reads at most (resolved offsets skipped on the way do not count).
CHECK_RECORDS_PER_ROUND = 2000
#: Resolved offsets a round steps over between two yields to the loop (~1 ms of dict lookups).
SKIPS_PER_YIELD = 10_000
#: Decided half messages the window may hold behind an undecided one whose group has no live
#: producer before that one's checks are counted anyway (~100 B of memory each).
MAX_DECIDED_AHEAD = 1_000_000
#: Committed copies looked up per half message (the same UNIQ_KEY sent more than once).
_COPIES_LOOKED_UP = 32


class TransactionCheckService:
    """The periodic check of one broker's undecided half messages (see the module docstring)."""

    def __init__(
        self,
        service: TransactionService,
        broker_config: BrokerConfig,
        store: Store,
        topic_config: TopicConfigManager,
        consumer_manager: ConsumerManager,
    ) -> None:
        self.service = service
        self.broker_config = broker_config
        self.store = store
        self.topic_config = topic_config
        self.consumer_manager = consumer_manager
        self.checks_sent = 0
        self.discarded = 0
        self._unreachable: set[str] = set()  # groups without a live producer, logged once per round

    async def run(self) -> None:
        """Check every ``transactionCheckInterval`` until cancelled (a failed round is logged)."""
        while True:
            await asyncio.sleep(self.broker_config.transaction_check_interval / 1000.0)
            try:
                await self.check_round()
            except Exception:
                log.exception("transaction check round failed; the next round tries again")

    async def check_round(self) -> int:
        """One round; returns how many half messages it acted on (checked, discarded, found committed)."""
        window, store = self.service.window, self.store
        window.skip_to(store.get_min_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID))
        end = store.get_max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        offset, read, acted = window.progress, 0, 0
        self._unreachable.clear()
        while offset < end and read < CHECK_RECORDS_PER_ROUND:
            skipped = 0
            while offset < end and window.resolved(offset):
                offset += 1
                skipped += 1
                if skipped == SKIPS_PER_YIELD:
                    skipped = 0
                    await asyncio.sleep(0)
            if offset >= end:
                break
            read += 1
            action = await self._check_one(offset)
            if action is None:
                break  # too young: so are the ones after it
            acted += action
            offset += 1
            await asyncio.sleep(0)
        return acted

    async def _check_one(self, offset: int) -> int | None:
        """Act on the half message at ``offset``: 1 when acted on, 0 when skipped, None when too young."""
        half = await self._half_at(offset)
        if half is None:
            return 0
        now_ms = int(self.store.clock() * 1000)
        bc = self.broker_config
        if now_ms - half.store_timestamp < half.check_immunity_ms(bc.transaction_time_out):
            return None
        if self.service.window.resolved(offset):  # decided while this round waited
            return 0
        checks = self.service.window.checks(offset)
        if checks >= bc.transaction_check_max:
            await self._discard(half, checks)
        elif self._committed_before(half):
            log.warning("half offset %d was committed before a restart; recording the commit", offset)
            if self.service.window.claim(offset, Outcome.COMMIT, self._op_next()):
                await self.service.write_decision(offset, Outcome.COMMIT)
        else:
            await self._send_check(half, checks)
        return 1

    def _op_next(self) -> int:
        return op_next_offset(self.store)

    async def _half_at(self, offset: int) -> HalfRecord | None:
        async for _, record in read_records(self.store, TRANS_HALF_TOPIC, offset, offset + 1):
            try:
                return HalfRecord(record)
            except ValueError as e:
                log.warning("half offset %d is not a usable half message (%s); discarding it", offset, e)
                if self.service.window.claim(offset, Outcome.DISCARD, self._op_next()):
                    await self.service.write_decision(offset, Outcome.DISCARD)
        return None

    def _committed_before(self, half: HalfRecord) -> bool:
        """True when the real topic holds the committed copy of ``half``."""
        if not half.unique_key:
            return False
        now_ms = int(self.store.clock() * 1000)
        found = self.store.query_message(
            half.real_topic, half.unique_key, _COPIES_LOOKED_UP, half.store_timestamp, now_ms
        )
        # field 13 of the record head is PREPAREDTRANSACTIONOFFSET (rocketpy/record.py)
        return any(RECORD_HEAD.unpack_from(r, 0)[13] == half.commitlog_offset for r in found.buffers)

    async def _send_check(self, half: HalfRecord, checks: int) -> None:
        """Record the check, then ask one live producer of the half message's group (with none
        live, nothing is counted: the message waits for a producer of its group to come back)."""
        offset = half.queue_offset
        channels = [
            c for c in self.consumer_manager.producer_channels_of(half.producer_group) if not c.closed
        ]
        held = len(self.service.window.decided)
        if not channels and held < MAX_DECIDED_AHEAD:
            if half.producer_group in self._unreachable:
                return
            self._unreachable.add(half.producer_group)
            log.warning(
                "half offset %d (and maybe more): no live producer of group %s to check; waiting for one",
                offset, half.producer_group,
            )  # fmt: skip
            return
        op = op_message((offset,), None, self.store.store_host, int(self.store.clock() * 1000))
        result = await self.store.put_message(op)
        if not result.ok:
            log.warning("check of half offset %d not recorded (%s); not sent", offset, result.status.name)
            return
        self.service.window.note_check(offset, result.queue_offset)
        if not channels:
            log.warning(
                "half offset %d: no live producer of group %s, and %d decided half messages wait behind "
                "it; check %d of %d counted without asking (discarded after the last)",
                offset, half.producer_group, held, checks + 1, self.broker_config.transaction_check_max,
            )  # fmt: skip
            return
        channels.sort(key=lambda c: c.remote_addr)
        channel = channels[checks % len(channels)]
        header = CheckTransactionStateRequestHeader(
            half.real_topic, offset, half.commitlog_offset, half.unique_key, half.transaction_id,
            create_offset_msg_id(*self.store.store_host, half.commitlog_offset),
        )  # fmt: skip
        cmd = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), half.raw, oneway=True
        )
        try:
            channel.send_oneway(cmd)
            self.checks_sent += 1
        except RemotingConnectError as e:
            log.info("check of half offset %d to %s failed: %s", offset, channel.remote_addr, e)

    async def _discard(self, half: HalfRecord, checks: int) -> None:
        """Move ``half`` to the discard topic and resolve it as DISCARD."""
        offset = half.queue_offset
        window = self.service.window
        if not window.claim(offset, Outcome.DISCARD, self._op_next()):
            return
        try:
            self.topic_config.create_system_group_topic(TRANS_CHECK_MAX_TIME_TOPIC, 1)
        except TopicLimitError as e:
            window.release(offset)
            log.warning("half offset %d not discarded: %s", offset, e)
            return
        result = await self.store.put_message(half.discarded(checks))
        if not result.ok:
            window.release(offset)
            log.warning("half offset %d not discarded: %s %s", offset, result.status.name, result.remark)
            return
        await self.service.write_decision(offset, Outcome.DISCARD)
        self.discarded += 1
        log.warning(
            "half message %s of group %s (topic %s, half offset %d) was checked %d times without an "
            "answer; moved to %s",
            half.unique_key, half.producer_group, half.real_topic, offset, checks, TRANS_CHECK_MAX_TIME_TOPIC,
        )  # fmt: skip
