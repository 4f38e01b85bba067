"""Consume retry on the consumer side: sending failed messages back, and reading them again.

Owns ``BrokerSendBack``, which hands a message the listener failed on back to the broker it came from
(CONSUMER_SEND_MSG_BACK; the broker redelivers it through ``%RETRY%{group}`` or dead-letters it in
``%DLQ%{group}``), and ``restore_retry_messages``, which gives a message read from the group's retry
topic back its original topic (``RETRY_TOPIC``) and id before the listener sees it (RocketMQ
``resetRetryAndNamespace``). A CLUSTERING push consumer subscribes to its retry topic itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from rocketpy.client.instance import MQClientInstance
from rocketpy.message import MessageConst, MessageExt, MessageQueue

log = logging.getLogger("rocketpy.client.consume")

#: RocketMQ's timeout of a send-back (``sendMessageBack``: 5 s).
SEND_BACK_TIMEOUT_S = 5.0
#: ``delay_level`` that sends a message to the dead-letter queue at once.
DLQ_DELAY_LEVEL = -1

#: ``async (msg, mq, delay_level) -> None``: hand ``msg`` (consumed from ``mq``) back to its broker;
#: raises ``RocketpyError`` when the broker did not take it.
SendBack = Callable[[MessageExt, MessageQueue, int], Awaitable[None]]


class BrokerSendBack:
    """Sends failed messages of one consumer group back to their brokers.

    Args:
        instance: the consumer's client instance (routes and the API).
        group: the consumer group.
        max_reconsume_times: the consumer's limit, sent with each message (the broker dead-letters
            a message whose reconsume times reached it).
    """

    def __init__(self, instance: MQClientInstance, group: str, max_reconsume_times: int) -> None:
        self.instance = instance
        self.group = group
        self.max_reconsume_times = max_reconsume_times

    async def __call__(self, msg: MessageExt, mq: MessageQueue, delay_level: int) -> None:
        """Send ``msg`` back to the broker of ``mq`` (the one that stored the record).

        Raises:
            RocketpyError: no route to the broker, a timeout, or the broker's refusal.
        """
        addr = await self.instance.queue_broker_addr(mq)
        await self.instance.api.consumer_send_msg_back(
            addr, msg, self.group, delay_level, self.max_reconsume_times, SEND_BACK_TIMEOUT_S
        )


def restore_retry_messages(msgs: list[MessageExt]) -> None:
    """Messages read from a retry topic get their original topic and message id back."""
    for msg in msgs:
        origin_topic = msg.properties.get(MessageConst.RETRY_TOPIC)
        if origin_topic:
            msg.topic = origin_topic
        if MessageConst.UNIQ_KEY not in msg.properties:
            origin_id = msg.properties.get(MessageConst.ORIGIN_MESSAGE_ID)
            if origin_id:
                msg.msg_id = origin_id
