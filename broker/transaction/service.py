"""TransactionService: half messages in, decisions out, for one broker.

Owns the transaction state of the broker (``HalfWindow``), its resume point
(``config/transactionOffset.json``, persisted every second when changed, in a thread) and the two
writes of a transaction:

* ``put_half`` (the send path): the message is stored as a half message (``half.to_half``).
* ``end_transaction`` (END_TRANSACTION, and the check service after a crash): a commit puts the
  real message (through the delivery service, so a DELAY set by a foreign client still applies)
  and then an op record; a rollback writes the op record only. The half offset is claimed before
  anything is written, so a second decision (the producer's and a check's answer racing, a
  duplicate, a commit after a rollback) writes nothing and gets a remark saying what happened.

Start: load the resume point (thread), drop what cleanup removed, replay the op queue, then run the
check service (``check.TransactionCheckService``) and the persistence routine on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Coroutine
from typing import Any

from rocketpy.broker.consumer_manager import ConsumerManager
from rocketpy.broker.schedule.delivery import DeliveryTimeService, may_be_timed
from rocketpy.broker.store import BrokerMessage, MessageStore, PutMessageResult
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.broker.transaction.check import TransactionCheckService
from rocketpy.broker.transaction.half import HALF_QUEUE_ID, HalfRecord, to_half
from rocketpy.broker.transaction.op_log import op_message, op_next_offset, replay
from rocketpy.broker.transaction.progress import TransactionProgress
from rocketpy.broker.transaction.window import RECENT_REPLAY, HalfWindow, Outcome
from rocketpy.config import BrokerConfig
from rocketpy.header.transaction import EndTransactionRequestHeader, TransactionDecision
from rocketpy.remoting.codes import ResponseCode
from rocketpy.topic import TRANS_HALF_TOPIC

log = logging.getLogger("rocketpy.broker.transaction")

PERSIST_INTERVAL_S = 1.0
_OUTCOME_OF = {TransactionDecision.COMMIT: Outcome.COMMIT, TransactionDecision.ROLLBACK: Outcome.ROLLBACK}
#: The answer to a decision on a half message already resolved otherwise.
_CONFLICT_CODE = {
    Outcome.COMMIT: ResponseCode.TRANSACTION_SHOULD_COMMIT,
    Outcome.ROLLBACK: ResponseCode.TRANSACTION_SHOULD_ROLLBACK,
    Outcome.DISCARD: ResponseCode.TRANSACTION_FAILED,
}
_PAST = {Outcome.COMMIT: "committed", Outcome.ROLLBACK: "rolled back", Outcome.DISCARD: "discarded"}

#: ``end_transaction``'s answer: a response code and a remark (None for a plain success).
Answer = tuple[int, str | None]


class TransactionService:
    """Transactions of one broker (see the module docstring).

    Args:
        broker_config: ``transactionTimeOut``, ``transactionCheckMax``, ``transactionCheckInterval``
            (read live).
        store: the started message store.
        delivery: where a committed message is put.
        topic_config: where the discard topic is created on first use.
        consumer_manager: the producer groups' live channels (for checks).
        config_dir: the broker's ``config`` directory.
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        store: MessageStore,
        delivery: DeliveryTimeService,
        topic_config: TopicConfigManager,
        consumer_manager: ConsumerManager,
        config_dir: str,
    ) -> None:
        self.store = store
        self.delivery = delivery
        self.window = HalfWindow()
        self.progress = TransactionProgress(
            os.path.join(config_dir, "transactionOffset.json"), self.window, lambda: op_next_offset(store)
        )
        self.checker = TransactionCheckService(self, broker_config, store, topic_config, consumer_manager)
        self._tasks: list[asyncio.Task[None]] = []
        self._last_snapshot: dict[str, Any] | None = None

    async def start(self) -> None:
        """Rebuild the state from the resume point and the op queue, then start checking."""
        half_offset, op_offset = await asyncio.to_thread(self.progress.load)
        self.window.progress = half_offset
        self.window.skip_to(self.store.get_min_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID))
        replayed = await replay(self.store, self.window, max(0, op_offset - RECENT_REPLAY))
        pending = self.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID) - self.window.progress
        log.info(
            "transactions: resumed at half offset %d (%d op records replayed, %d half messages after it)",
            self.window.progress, replayed, pending,
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._persist_routine()), loop.create_task(self.checker.run())]

    async def shutdown(self) -> None:
        """Stop checking and persist the resume point (call before the store stops)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.progress.file.persist(force=True)

    async def _persist_routine(self) -> None:
        while True:
            await asyncio.sleep(PERSIST_INTERVAL_S)
            snapshot = self.progress.snapshot()
            if snapshot != self._last_snapshot:
                self._last_snapshot = snapshot
                self.progress.file.mark_dirty()
                await self.progress.file.persist()

    # -- writes --------------------------------------------------------------------------------------

    def put_half(self, msg: BrokerMessage, producer_group: str) -> Coroutine[Any, Any, PutMessageResult]:
        """Store ``msg`` as a half message of ``producer_group`` (await it)."""
        return self.store.put_message(to_half(msg, producer_group))

    async def end_transaction(self, h: EndTransactionRequestHeader) -> Answer:
        """Apply a producer's decision; the answer says what was done or why nothing was."""
        if h.decision is TransactionDecision.UNKNOW:
            return ResponseCode.SUCCESS, None  # left to the check service
        record = self.store.lookup_message_by_offset(h.commit_log_offset)
        if record is None:
            return ResponseCode.INVALID_PARAMETER, (
                f"no message is stored at commitlog offset {h.commit_log_offset}: pass the half "
                "message's commitLogOffset (from the send result's offset msg id)"
            )
        try:
            half = HalfRecord(record)
        except ValueError as e:
            return ResponseCode.INVALID_PARAMETER, (
                f"the message at commitlog offset {h.commit_log_offset} is not a half message ({e}); "
                "only messages sent in a transaction can be committed or rolled back"
            )
        if half.queue_offset != h.tran_state_table_offset:
            return ResponseCode.INVALID_PARAMETER, (
                f"the half message at commitlog offset {h.commit_log_offset} has half-queue offset "
                f"{half.queue_offset}, not tranStateTableOffset {h.tran_state_table_offset}"
            )
        if half.producer_group != h.producer_group:
            return ResponseCode.TRANSACTION_STATE_GROUP_WRONG, (
                f"producer group {h.producer_group!r} did not send the half message at half offset "
                f"{half.queue_offset}; its group is {half.producer_group!r}"
            )
        return await self.decide(half, _OUTCOME_OF[h.decision])

    async def decide(self, half: HalfRecord, outcome: Outcome) -> Answer:
        """Commit or roll back ``half`` unless it is resolved already (then nothing is written)."""
        offset = half.queue_offset
        if not self.window.claim(offset, outcome, op_next_offset(self.store)):
            return self._already(offset, outcome)
        try:
            if outcome is Outcome.COMMIT:
                committed = half.committed()
                timed = may_be_timed(committed.properties)  # a foreign client's DELAY applies now
                result = await (self.delivery.put(committed) if timed else self.store.put_message(committed))
                if not result.ok:
                    self.window.release(offset)
                    return ResponseCode.SYSTEM_ERROR, (
                        f"the committed message could not be stored ({result.status.name} {result.remark}); "
                        "the transaction stays open and will be checked"
                    )
            return await self.write_decision(offset, outcome)
        except BaseException:
            self.window.release(offset)
            raise

    async def write_decision(self, offset: int, outcome: Outcome) -> Answer:
        """Write the op record of a claimed decision and apply it."""
        result = await self.store.put_message(
            op_message(offset, outcome, self.store.store_host, int(self.store.clock() * 1000))
        )
        if not result.ok:
            self.window.release(offset)
            return ResponseCode.SYSTEM_ERROR, (
                f"the decision on half offset {offset} could not be recorded ({result.status.name}); "
                "the transaction stays open and will be checked"
            )
        self.window.apply(offset, outcome, result.queue_offset)
        log.debug("half offset %d %s", offset, _PAST[outcome])
        return ResponseCode.SUCCESS, None

    def _already(self, offset: int, wanted: Outcome) -> Answer:
        """The answer to a decision on a half message that is resolved or being resolved."""
        done = self.window.outcome(offset)
        if done is None:
            entry = self.window.entries.get(offset)
            if entry is not None and entry.claimed is not None:
                done = entry.claimed
        if done is None:
            return ResponseCode.TRANSACTION_FAILED, (
                f"the transaction at half offset {offset} was resolved long ago; nothing was done"
            )
        if done is wanted:
            return ResponseCode.SUCCESS, f"the transaction at half offset {offset} is already {_PAST[done]}"
        return _CONFLICT_CODE[done], (
            f"the transaction at half offset {offset} was already {_PAST[done]}; it cannot be "
            f"{_PAST[wanted]} now and nothing was written"
        )
