"""CHECK_TRANSACTION_STATE on a client instance's connections: which producer answers.

Owns the dispatch of a broker's check (RocketMQ ``ClientRemotingProcessor.checkTransactionState``):
the body is the half message's record; its topic and queue are set back to the real ones
(``REAL_TOPIC`` / ``REAL_QID``) and it goes to a started producer of its group (``PGROUP``) in this
instance that answers checks (a ``TransactionProducer``). The request is oneway: nothing is sent
back here; the producer answers with END_TRANSACTION. A malformed request is logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from rocketpy.errors import HeaderError, RocketpyError
from rocketpy.message import MessageConst, MessageExt
from rocketpy.protocol.headers.transaction import CheckTransactionStateRequestHeader
from rocketpy.record import decode_record
from rocketpy.remoting.command import RemotingCommand

log = logging.getLogger("rocketpy.client.transaction")


def half_message(body: bytes) -> MessageExt:
    """The checked message from a CHECK_TRANSACTION_STATE body, in its real topic and queue."""
    msg = decode_record(body)
    real_topic = msg.properties.get(MessageConst.REAL_TOPIC)
    real_qid = msg.properties.get(MessageConst.REAL_QID, "")
    if real_topic:
        msg.topic = real_topic
    if real_qid.isdigit():
        msg.queue_id = int(real_qid)
    return msg


def dispatch_check(addr: str, cmd: RemotingCommand, producers: Mapping[tuple[str, str], Any]) -> None:
    """Hand a check from the broker at ``addr`` to a producer of the message's group in ``producers``
    (``(group, client id) -> producer``)."""
    try:
        header = CheckTransactionStateRequestHeader.from_ext(cmd.ext)
        msg = half_message(bytes(cmd.body))
    except (HeaderError, RocketpyError, ValueError, IndexError) as e:
        log.warning("malformed CHECK_TRANSACTION_STATE from %s dropped: %s", addr, e)
        return
    group = msg.properties.get(MessageConst.PGROUP, "")
    for (g, _cid), producer in list(producers.items()):
        answer = getattr(producer, "check_transaction_state", None)
        if g == group and answer is not None:
            answer(addr, header, msg)
            return
    log.warning(
        "CHECK_TRANSACTION_STATE from %s for group %r: no TransactionProducer of that group here; ignored",
        addr, group,
    )  # fmt: skip
