"""Dead letters back into play: ``Admin.resend_dlq`` (``mqadmin resendDlq``, beyond RocketMQ).

Owns reading a group's ``%DLQ%{group}`` queues and sending their messages to ``%RETRY%{group}`` on
the same broker, as fresh retry messages (reconsume times 0, so the group gets a whole new round of
``max_reconsume_times``), keeping the body, tags, keys, message id and ``RETRY_TOPIC`` /
``ORIGIN_MESSAGE_ID`` (the consumer sees the message under its original topic and id again).

Without a message id every dead letter not resent before is resent; the progress is the committed
offset of the ``RESEND_DLQ_GROUP`` tool group on each DLQ queue, so a second run resends only what
arrived since. With a message id (the id the listener saw, or the dead letter's offset msg id)
only that message is resent, wherever it is, and the progress does not move.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rocketpy.client.producer import Producer
from rocketpy.client.route import subscribe_queues
from rocketpy.errors import MQClientError
from rocketpy.message import Message, MessageConst, MessageExt, MessageQueue
from rocketpy.subscription_group import RESEND_DLQ_GROUP
from rocketpy.topic import dlq_topic, retry_topic

if TYPE_CHECKING:
    from rocketpy.client.admin import Admin

#: Dead letters read per pull.
PULL_BATCH = 32
#: Properties of a dead letter that do not travel with the resent message.
_DROPPED = (
    MessageConst.DELAY,
    MessageConst.MAX_RECONSUME_TIMES,
    MessageConst.REAL_TOPIC,
    MessageConst.REAL_QID,
)


def _matches(msg: MessageExt, msg_id: str) -> bool:
    return msg_id in (msg.msg_id, msg.offset_msg_id, msg.properties.get(MessageConst.ORIGIN_MESSAGE_ID))


def retry_copy(group: str, dead: MessageExt) -> Message:
    """The message to send to the group's retry topic for dead letter ``dead``."""
    props = {k: v for k, v in dead.properties.items() if k not in _DROPPED}
    props.setdefault(MessageConst.UNIQ_KEY, dead.msg_id)
    return Message(retry_topic(group), bytes(dead.body), tags=dead.tags, keys=dead.keys, properties=props)


def _on_broker(broker_name: str) -> Callable[..., MessageQueue]:
    def select(mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        same = [mq for mq in mqs if mq.broker_name == broker_name]
        if not same:
            raise MQClientError(
                f"{msg.topic} has no writable queue on broker {broker_name}; "
                "start the group's consumer once (it creates the retry topic) and try again"
            )
        return same[hash(msg.properties.get(MessageConst.UNIQ_KEY, "")) % len(same)]

    return select


async def resend_dlq(admin: Admin, group: str, msg_id: str | None = None) -> list[dict[str, Any]]:
    """Send dead letters of ``group`` back to its retry topic (see the module docstring).

    Returns:
        One entry per resent message: msgId, brokerName, dlqOffset, retryQueueId, retryQueueOffset.

    Raises:
        MQClientError: the group has no dead-letter topic, or ``msg_id`` is not among its dead letters.
    """
    topic = dlq_topic(group)
    try:
        route = await admin.topic_route(topic)
    except MQClientError as e:
        raise MQClientError(f"group {group!r} has no dead letters ({topic} does not exist)") from e
    await admin.topic_route(retry_topic(group))
    resent: list[dict[str, Any]] = []
    settings = admin.settings  # the admin's account and encoding, so resends are signed alike
    producer = Producer(
        "TOOLS_RESEND_DLQ_PRODUCER",
        ";".join(admin.instance.namesrv_addrs),
        access_key=settings.access_key,
        secret_key=settings.secret_key,
        serialize_type=settings.serialize_type,
    )
    await producer.start()
    try:
        for mq in subscribe_queues(topic, route):
            resent += await _resend_queue(admin, producer, group, mq, msg_id)
    finally:
        await producer.shutdown()
    if msg_id is not None and not resent:
        raise MQClientError(f"no dead letter with id {msg_id!r} in {topic}")
    return resent


async def _resend_queue(
    admin: Admin, producer: Producer, group: str, mq: MessageQueue, msg_id: str | None
) -> list[dict[str, Any]]:
    """Resend the dead letters of one DLQ queue (all new ones, or the one with ``msg_id``)."""
    inst = admin.instance
    addr = await inst.queue_broker_addr(mq)
    if msg_id is None:
        stored = await inst.api.query_consumer_offset(addr, RESEND_DLQ_GROUP, mq.topic, mq.queue_id)
        offset = stored if stored is not None and stored >= 0 else 0
    else:
        offset = 0
    out: list[dict[str, Any]] = []
    while True:
        msgs, next_offset, max_offset = await admin.pull(mq, offset, PULL_BATCH)
        for dead in msgs:
            if msg_id is not None and not _matches(dead, msg_id):
                continue
            r = await producer.send(retry_copy(group, dead), selector=_on_broker(mq.broker_name))
            out.append(
                {
                    "msgId": dead.msg_id,
                    "brokerName": mq.broker_name,
                    "dlqOffset": dead.queue_offset,
                    "retryQueueId": r.message_queue.queue_id,
                    "retryQueueOffset": r.queue_offset,
                }
            )
        if not msgs or next_offset >= max_offset:
            offset = max(offset, next_offset)
            break
        offset = next_offset
    if msg_id is None:
        await inst.api.update_consumer_offset(
            addr, RESEND_DLQ_GROUP, mq.topic, mq.queue_id, offset, oneway=False
        )
    return out
