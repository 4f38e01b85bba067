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
from rocketpy.broker.schedule.delivery import DeliveryTimeService
from rocketpy.broker.store import BrokerMessage, PutMessageResult, Store
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.broker.transaction.check import TransactionCheckService
from rocketpy.broker.transaction.half import HALF_QUEUE_ID, HalfRecord, to_half
from rocketpy.broker.transaction.op_log import OFFSETS_PER_OP_RECORD, op_message, op_next_offset, replay
from rocketpy.broker.transaction.progress import TransactionProgress
from rocketpy.broker.transaction.window import RECENT_REPLAY, HalfWindow, Outcome
from rocketpy.config import BrokerConfig
from rocketpy.message_props import may_be_timed
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.transaction import EndTransactionRequestHeader, TransactionDecision
from rocketpy.topic import TRANS_HALF_TOPIC

log = logging.getLogger("rocketpy.broker.transaction")

PERSIST_INTERVAL_S = 1.0
#: Messages per append when many decisions are written at once (``end_transactions``).
PUT_BATCH = 256
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
        store: Store,
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
        return self.put_halves([msg], producer_group)

    def put_halves(
        self, msgs: list[BrokerMessage], producer_group: str
    ) -> Coroutine[Any, Any, PutMessageResult]:
        """Store a batch's messages as half messages of ``producer_group``, with one append (await it)."""
        return self.store.put_messages([to_half(m, producer_group) for m in msgs])

    async def end_transaction(self, h: EndTransactionRequestHeader) -> Answer:
        """Apply a producer's decision; the answer says what was done or why nothing was."""
        if h.decision is TransactionDecision.UNKNOW:
            return ResponseCode.SUCCESS, None  # left to the check service
        half = self._half_of(h.producer_group, h.commit_log_offset, h.tran_state_table_offset)
        if not isinstance(half, HalfRecord):
            return half
        return await self.decide(half, _OUTCOME_OF[h.decision])

    async def end_transactions(
        self, producer_group: str, decision: TransactionDecision, pairs: list[tuple[int, int]]
    ) -> list[Answer]:
        """END_TRANSACTION_BATCH: one decision on many half messages, given as (commitlog offset,
        half-queue offset) pairs, each checked as ``end_transaction`` checks it. The committed
        messages go out with one append per queue and the op records with one: that, not the
        request, is what a batch saves. Answers in the order of ``pairs``."""
        if decision is TransactionDecision.UNKNOW:
            return [(ResponseCode.SUCCESS, None)] * len(pairs)
        answers: list[Answer] = []
        halves: list[HalfRecord] = []
        where: list[int] = []
        for i, (commit_log_offset, half_offset) in enumerate(pairs):
            half = self._half_of(producer_group, commit_log_offset, half_offset)
            answers.append((ResponseCode.SUCCESS, None) if isinstance(half, HalfRecord) else half)
            if isinstance(half, HalfRecord):
                halves.append(half)
                where.append(i)
        for i, answer in zip(where, await self.decide_many(halves, _OUTCOME_OF[decision]), strict=True):
            answers[i] = answer
        return answers

    def _half_of(self, producer_group: str, commit_log_offset: int, half_offset: int) -> HalfRecord | Answer:
        """The half message a decision names, or the answer refusing it."""
        record = self.store.lookup_message_by_offset(commit_log_offset)
        if record is None:
            return ResponseCode.INVALID_PARAMETER, (
                f"no message is stored at commitlog offset {commit_log_offset}: pass the half "
                "message's commitLogOffset (from the send result's offset msg id)"
            )
        try:
            half = HalfRecord(record)
        except ValueError as e:
            return ResponseCode.INVALID_PARAMETER, (
                f"the message at commitlog offset {commit_log_offset} is not a half message ({e}); "
                "only messages sent in a transaction can be committed or rolled back"
            )
        if half.queue_offset != half_offset:
            return ResponseCode.INVALID_PARAMETER, (
                f"the half message at commitlog offset {commit_log_offset} has half-queue offset "
                f"{half.queue_offset}, not tranStateTableOffset {half_offset}"
            )
        if half.producer_group != producer_group:
            return ResponseCode.TRANSACTION_STATE_GROUP_WRONG, (
                f"producer group {producer_group!r} did not send the half message at half offset "
                f"{half.queue_offset}; its group is {half.producer_group!r}"
            )
        return half

    async def decide(self, half: HalfRecord, outcome: Outcome) -> Answer:
        """Commit or roll back ``half`` unless it is resolved already (then nothing is written)."""
        return (await self.decide_many([half], outcome))[0]

    async def decide_many(self, halves: list[HalfRecord], outcome: Outcome) -> list[Answer]:
        """Commit or roll back each of ``halves`` unless it is resolved already: claim, put the
        committed copies (``_put_committed``), write the op records (``_write_decisions``); answers
        in order. The one decision path of END_TRANSACTION and of its batch."""
        answers: list[Answer] = [(ResponseCode.SUCCESS, None)] * len(halves)
        op_next = op_next_offset(self.store)
        claimed: list[int] = []
        for i, half in enumerate(halves):
            if self.window.claim(half.queue_offset, outcome, op_next):
                claimed.append(i)
            else:
                answers[i] = self._already(half.queue_offset, outcome)
        try:
            if outcome is Outcome.COMMIT:
                claimed = await self._put_committed(halves, claimed, answers)
            await self._write_decisions([halves[i].queue_offset for i in claimed], outcome, claimed, answers)
        except BaseException:
            for i in claimed:
                self.window.release(halves[i].queue_offset)
            raise
        return answers

    async def _put_committed(
        self, halves: list[HalfRecord], claimed: list[int], answers: list[Answer]
    ) -> list[int]:
        """Put the committed copies of ``halves[claimed]``, one append per queue (timed ones alone);
        returns the indexes stored. A failed append releases its halves and answers why."""
        groups: dict[tuple[str, int], list[tuple[int, BrokerMessage]]] = {}
        stored: list[int] = []
        for i in claimed:
            committed = halves[i].committed()
            if may_be_timed(committed.properties):  # a foreign client's DELAY applies now
                result = await self.delivery.put(committed)
                self._note_put(result, halves[i], i, stored, answers)
            else:
                groups.setdefault((committed.topic, committed.queue_id), []).append((i, committed))
        for members in groups.values():
            for start in range(0, len(members), PUT_BATCH):
                part = members[start : start + PUT_BATCH]
                result = await self.store.put_messages([m for _, m in part])
                for i, _ in part:
                    self._note_put(result, halves[i], i, stored, answers)
        return sorted(stored)

    def _note_put(
        self, result: PutMessageResult, half: HalfRecord, i: int, stored: list[int], answers: list[Answer]
    ) -> None:
        if result.ok:
            stored.append(i)
            return
        self.window.release(half.queue_offset)
        answers[i] = (
            ResponseCode.SYSTEM_ERROR,
            (
                f"the committed message could not be stored ({result.status.name} {result.remark}); "
                "the transaction stays open and will be checked"
            ),
        )

    async def _write_decisions(
        self, offsets: list[int], outcome: Outcome, where: list[int], answers: list[Answer]
    ) -> None:
        """The op records of claimed decisions (``OFFSETS_PER_OP_RECORD`` offsets each, ``PUT_BATCH``
        records per append), then applied."""
        now = int(self.store.clock() * 1000)
        host = self.store.store_host
        per_put = PUT_BATCH * OFFSETS_PER_OP_RECORD
        for start in range(0, len(offsets), per_put):
            part = offsets[start : start + per_put]
            records = [
                op_message(part[i : i + OFFSETS_PER_OP_RECORD], outcome, host, now)
                for i in range(0, len(part), OFFSETS_PER_OP_RECORD)
            ]
            result = await self.store.put_messages(records)
            for k, offset in enumerate(part):
                if result.ok:
                    self.window.apply(offset, outcome, result.queue_offset + k // OFFSETS_PER_OP_RECORD)
                    log.debug("half offset %d %s", offset, _PAST[outcome])
                    continue
                self.window.release(offset)
                answers[where[start + k]] = (
                    ResponseCode.SYSTEM_ERROR,
                    (
                        f"the decision on half offset {offset} could not be recorded ({result.status.name}); "
                        "the transaction stays open and will be checked"
                    ),
                )

    async def write_decision(self, offset: int, outcome: Outcome) -> Answer:
        """Write the op record of a claimed decision and apply it."""
        answers: list[Answer] = [(ResponseCode.SUCCESS, None)]
        await self._write_decisions([offset], outcome, [0], answers)
        return answers[0]

    def _already(self, offset: int, wanted: Outcome) -> Answer:
        """The answer to a decision on a half message that is resolved or being resolved."""
        done = self.window.outcome(offset) or self.window.claimed(offset)
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
