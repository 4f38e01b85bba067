"""END_TRANSACTION: a producer commits or rolls back a half message (or says it does not know yet).

Owns the reading of the request and its answer; the decision itself is
``TransactionService.end_transaction``. RocketMQ's producers send the request oneway; rocketpy's
wait for the answer, whose remark says why a decision was refused (an offset holding no half
message, another producer group, a transaction already resolved the other way).
"""

from __future__ import annotations

import logging

from rocketpy.broker.transaction.service import TransactionService
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.transaction import (
    EndTransactionBatch,
    EndTransactionBatchResponseHeader,
    EndTransactionRequestHeader,
)
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel

log = logging.getLogger("rocketpy.broker.transaction")


class EndTransactionProcessor:
    """Handles END_TRANSACTION for one broker.

    Args:
        transactions: the broker's transaction service.
    """

    def __init__(self, transactions: TransactionService) -> None:
        self.transactions = transactions

    async def handle(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """Apply the decision; the response's remark explains a refusal."""
        header = EndTransactionRequestHeader.from_ext(request.ext)
        code, remark = await self.transactions.end_transaction(header)
        if code != ResponseCode.SUCCESS:
            log.info("END_TRANSACTION from %s refused: %s", channel.remote_addr, remark)
        return RemotingCommand.response(request, code, remark)

    async def handle_batch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """END_TRANSACTION_BATCH: apply one decision to each half message of the body; the answer
        counts the refused ones (``failed``) and its remark says why the first was refused."""
        batch = EndTransactionBatch.from_request(request.ext, request.body)
        answers = await self.transactions.end_transactions(batch.producer_group, batch.decision, batch.pairs)
        refused = [remark for code, remark in answers if code != ResponseCode.SUCCESS]
        if refused:
            log.info("END_TRANSACTION_BATCH from %s: %d of %d refused, first: %s",
                     channel.remote_addr, len(refused), len(answers), refused[0])  # fmt: skip
        remark = f"{len(refused)} of {len(answers)} refused; the first: {refused[0]}" if refused else None
        answer = EndTransactionBatchResponseHeader.pack(len(refused))
        return RemotingCommand.response(request, ResponseCode.SUCCESS, remark, answer)
