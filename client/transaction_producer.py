"""TransactionProducer: ``send_in_transaction`` and the answers to the brokers' checks.

Owns the producer side of a transaction (RocketMQ ``TransactionMQProducer``), built on ``Producer``
and its one send path:

1. the message is marked (``TRAN_MSG=true``, ``PGROUP``, sys flag PREPARED) and sent as usual; the
   broker stores it as a half message, invisible to consumers;
2. the listener's ``execute_local_transaction(msg, arg)`` runs (``ListenerRunner``), unless the half
   message was not stored durably (then the state is ROLLBACK_MESSAGE, as in RocketMQ);
3. END_TRANSACTION tells the broker to commit, roll back or wait (UNKNOW). A failure here is logged,
   not raised: the broker will ask (CHECK_TRANSACTION_STATE) and the listener's
   ``check_local_transaction(msg)`` answers.

Checks arrive on the client instance's connections (``client.transaction_check`` dispatches them
here); at most ``max_pending_checks`` run at once, further ones are dropped (the broker asks again
next round). The first time a half message reaches a broker, the instance heartbeats at once so
that broker can find this producer for checks.
"""

# ruff: noqa: ASYNC109  (per-call timeouts in seconds are part of the documented API)

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from rocketpy.client.api import answer_header
from rocketpy.client.producer import Producer
from rocketpy.client.results import SendResult, SendStatus
from rocketpy.client.selector import QueueSelector, user_choice
from rocketpy.client.send_path import MessageJob
from rocketpy.client.transaction import (
    ListenerRunner,
    LocalTransactionState,
    TransactionSendResult,
    check_listener,
)
from rocketpy.errors import MQClientError, RocketpyError
from rocketpy.message import Message, MessageConst, MessageExt
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.transaction import (
    MAX_BATCH_DECISIONS,
    CheckTransactionStateRequestHeader,
    EndTransactionBatch,
    EndTransactionBatchResponseHeader,
    EndTransactionRequestHeader,
)
from rocketpy.record import TRANSACTION_PREPARED_TYPE
from rocketpy.remoting.command import RemotingCommand
from rocketpy.trace import TRANS_MSG_HALF

__all__ = ["LocalTransactionState", "TransactionProducer", "TransactionSendResult"]

log = logging.getLogger("rocketpy.client.transaction")

#: RocketMQ's check request queue size.
DEFAULT_MAX_PENDING_CHECKS = 2000


class TransactionProducer(Producer):
    """A producer whose messages are committed or rolled back by a local transaction.

    Args:
        group: the producer group (the brokers check any live producer of it).
        namesrv_addr: as for ``Producer``.
        listener: an object with ``execute_local_transaction(msg, arg)`` and
            ``check_local_transaction(msg)``, each returning a ``LocalTransactionState``; either may be
            ``async def``; plain ones run in ``listener_threads`` worker threads.
        listener_threads: worker threads for plain listener methods.
        max_pending_checks: bound on broker checks being answered at once.
        **options: every other ``Producer`` option.
    """

    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv_addr: str | None = None,
        *,
        listener: Any = None,
        listener_threads: int = 4,
        max_pending_checks: int = DEFAULT_MAX_PENDING_CHECKS,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        check_listener(listener)
        if not isinstance(listener_threads, int) or listener_threads <= 0:
            raise MQClientError(f"listener_threads={listener_threads!r} must be a positive int (default 4)")
        if not isinstance(max_pending_checks, int) or max_pending_checks <= 0:
            raise MQClientError(f"max_pending_checks={max_pending_checks!r} must be a positive int")
        self.listener = listener
        self.max_pending_checks = max_pending_checks
        self._runner = ListenerRunner(listener_threads, f"rocketpy-txn-{group}")
        self._checks: set[asyncio.Task[None]] = set()
        self._announced: set[str] = set()

    async def shutdown(self) -> None:
        """Finish the checks being answered (up to ``send_timeout``), then shut down as ``Producer``."""
        if self._checks:
            await asyncio.wait(list(self._checks), timeout=self.send_timeout)
        for task in list(self._checks):
            task.cancel()
        await super().shutdown()
        self._runner.shutdown()

    async def send_in_transaction(
        self, msg: Message, arg: Any = None, *, timeout: float | None = None
    ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, and commit or roll back.

        ``msg`` gains the ``TRAN_MSG``, ``PGROUP`` and ``UNIQ_KEY`` properties (as in RocketMQ); its
        ``unique_key`` is the transaction id.

        Raises:
            MQClientError: a bad or delayed message, producer not started, or the half send failed.
            MQBrokerError: the broker refused the half message.
        """
        result = await self.send_half(msg, timeout=timeout)
        if result.status is SendStatus.SEND_OK:
            state = await self._runner.run(self.listener.execute_local_transaction, msg, arg)
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        addr = await self.broker_addr_of(result)
        _, _, commitlog_offset = decode_offset_msg_id(result.offset_msg_id)
        await self.end_transaction(
            addr,
            commitlog_offset,
            result.queue_offset,
            state,
            msg_id=result.msg_id,
            transaction_id=result.msg_id,
        )
        if self._tracer is not None:
            self._tracer.end_transaction(msg, result.msg_id, result.msg_id, state.name, False, addr)
        return TransactionSendResult(result, state)

    async def send_half(
        self,
        msg: Message,
        *,
        timeout: float | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Send ``msg`` as a half message only (invisible until ``end_transaction`` commits it).

        The first half message to a broker makes the instance heartbeat at once, so that broker can
        check this producer's group. ``selector``/``arg`` pick the queue as for ``Producer.send``.

        Raises:
            as ``send_in_transaction``.
        """
        if isinstance(msg, Message) and (msg.delay_level or MessageConst.TIMER_DELIVER_MS in msg.properties
                                         or MessageConst.TIMER_DELAY_SEC in msg.properties):  # fmt: skip
            raise MQClientError(
                "a transactional message cannot have a delivery time (delay_level, deliver_time_ms or "
                "delay_seconds): send it without one"
            )
        if isinstance(msg, Message):
            msg.properties[MessageConst.TRAN_MSG] = "true"
            msg.properties[MessageConst.PGROUP] = self.group
        prepared = self._prepare(msg)
        prepared.sys_flag |= TRANSACTION_PREPARED_TYPE
        msg.properties[MessageConst.UNIQ_KEY] = prepared.uniq_key
        deadline = asyncio.get_running_loop().time() + (timeout or self.send_timeout)
        begin = time.time()
        result = await self._path.run(
            MessageJob(prepared, self.retry_times, deadline, user_choice(selector, msg, arg))
        )
        if self._tracer is not None:
            cost_ms = int((time.time() - begin) * 1000)
            self._tracer.pub(msg, result, int(begin * 1000), cost_ms, TRANS_MSG_HALF)
        await self._announce(await self.broker_addr_of(result))
        return result

    async def send_half_batch(
        self,
        msgs: Sequence[Message],
        *,
        timeout: float | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> list[SendResult]:
        """Send messages of one topic as half messages in batch requests (a rocketpy extension:
        RocketMQ's brokers refuse transactional batches). One SendResult per message, in order;
        each is decided by ``end_transaction`` like a ``send_half`` result. ``selector``/``arg`` as
        for ``send_batch``.

        Raises:
            as ``Producer.send_batch``.
        """
        marks = {MessageConst.TRAN_MSG: "true", MessageConst.PGROUP: self.group}
        results = await self._send_batches(msgs, timeout, TRANSACTION_PREPARED_TYPE, selector, arg, marks)
        for mq in {r.message_queue for r in results}:  # each broker hears of this group at once
            await self._announce(await self._inst().queue_broker_addr(mq))
        return results

    async def broker_addr_of(self, result: SendResult) -> str:
        """The address of the broker that stored ``result``'s half message (END_TRANSACTION goes there)."""
        return await self._inst().queue_broker_addr(result.message_queue)

    async def end_transaction(
        self,
        addr: str,
        commit_log_offset: int,
        tran_state_table_offset: int,
        state: LocalTransactionState,
        *,
        msg_id: str = "",
        transaction_id: str = "",
    ) -> bool:
        """Commit, roll back or leave open (UNKNOW) the half message at ``commit_log_offset`` of the
        broker at ``addr`` (its half-queue offset is the send result's ``queue_offset``). Any live
        producer of the group that sent it may decide. True when the broker applied it (or it was
        decided so already); a failure or refusal is logged and False (the broker will check)."""
        header = EndTransactionRequestHeader(
            self.group,
            tran_state_table_offset,
            commit_log_offset,
            state.decision,
            False,
            msg_id,
            transaction_id,
        )
        return await self._end_transaction(addr, header)

    async def end_transactions(
        self, addr: str, pairs: Sequence[tuple[int, int]], state: LocalTransactionState
    ) -> int:
        """``end_transaction`` for many half messages of the broker at ``addr``, given as
        (commitlog offset, half-queue offset) pairs, in END_TRANSACTION_BATCH requests of at most
        ``MAX_BATCH_DECISIONS`` (a rocketpy extension). Returns how many were not applied (a failed
        request counts all of its pairs; refusals are logged, the broker checks those later)."""
        failed = 0
        for start in range(0, len(pairs), MAX_BATCH_DECISIONS):
            part = list(pairs[start : start + MAX_BATCH_DECISIONS])
            batch = EndTransactionBatch(self.group, state.decision, part)
            cmd = RemotingCommand.request(RequestCode.END_TRANSACTION_BATCH, batch.to_ext(), batch.to_body())
            what = f"END_TRANSACTION_BATCH ({state.name}) of {len(part)}"
            resp = await self._decision_request(addr, cmd, what)
            refused = (
                len(part)
                if resp is None
                else answer_header(resp, addr, EndTransactionBatchResponseHeader).failed
            )
            if resp is not None and refused:
                log.warning("%s to %s: %s", what, addr, resp.remark)
            failed += refused
        return failed

    async def _announce(self, addr: str) -> None:
        """Heartbeat at once the first time a half message goes to the broker at ``addr``."""
        if addr in self._announced:
            return
        self._announced.add(addr)
        await self._inst().send_heartbeat_to_all_brokers()

    async def _end_transaction(self, addr: str, header: EndTransactionRequestHeader) -> bool:
        """Send END_TRANSACTION; a failure or refusal is logged (the broker's check follows up)."""
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext())
        what = f"END_TRANSACTION ({header.decision.name}) of {header.transaction_id}"
        return await self._decision_request(addr, cmd, what) is not None

    async def _decision_request(self, addr: str, cmd: RemotingCommand, what: str) -> RemotingCommand | None:
        """Send a decision request; its response, or None after logging why it failed or was refused
        (the broker's check follows up on undecided halves)."""
        try:
            resp = await self._inst().remoting.invoke(addr, cmd, self.send_timeout)
        except RocketpyError as e:
            log.warning("%s to %s failed: %s; the broker will check the transaction", what, addr, e)
            return None
        if resp.code != ResponseCode.SUCCESS:
            log.warning("%s refused by %s: %s", what, addr, resp.remark)
            return None
        return resp

    # ---- checks from brokers ---------------------------------------------------------------------

    def check_transaction_state(
        self, addr: str, header: CheckTransactionStateRequestHeader, msg: MessageExt
    ) -> None:
        """A broker at ``addr`` asks for the state of ``msg``'s transaction: answer in a task."""
        if self._instance is None:
            return
        if len(self._checks) >= self.max_pending_checks:
            log.warning(
                "check of %s from %s dropped: %d checks pending (max_pending_checks); the broker asks again",
                header.transaction_id, addr, len(self._checks),
            )  # fmt: skip
            return
        task = asyncio.get_running_loop().create_task(self._answer_check(addr, header, msg))
        self._checks.add(task)
        task.add_done_callback(self._check_done)

    def _check_done(self, task: asyncio.Task[None]) -> None:
        self._checks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("answering a transaction check failed", exc_info=task.exception())

    async def _answer_check(
        self, addr: str, header: CheckTransactionStateRequestHeader, msg: MessageExt
    ) -> None:
        state = await self._runner.run(self.listener.check_local_transaction, msg)
        if self._instance is None:
            return
        end = EndTransactionRequestHeader(
            self.group, header.tran_state_table_offset, header.commit_log_offset, state.decision, True,
            header.msg_id, header.transaction_id,
        )  # fmt: skip
        await self._end_transaction(addr, end)
        if self._tracer is not None:
            self._tracer.end_transaction(msg, header.msg_id, header.transaction_id, state.name, True, addr)
