"""``mqadmin`` message commands: queryMsgById, queryMsgByKey, queryMsgByOffset, sendMessage, consumeMessage,
resendDlq.

Registered on the ``mqadmin`` group of ``rocketpy.admin_cli`` (which imports this module); output
follows the same rules (plain text, or one JSON document with ``--json``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from rocketpy.admin_cli import _admin_command, _emit
from rocketpy.errors import RocketpyError
from rocketpy.message import Message, MessageExt, MessageQueue
from rocketpy.subscription_group import TOOLS_CONSUMER


def message_doc(m: MessageExt) -> dict[str, Any]:
    """A stored message as a JSON-ready dict."""
    return {
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "topic": m.topic,
        "tags": m.tags,
        "keys": m.keys,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.commitlog_offset,
        "reconsumeTimes": m.reconsume_times,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "bornHost": f"{m.born_host[0]}:{m.born_host[1]}",
        "storeHost": f"{m.store_host[0]}:{m.store_host[1]}",
        "sysFlag": m.sys_flag,
        "properties": m.properties,
        "storeSize": m.store_size,
        "body": bytes(m.body).decode("utf-8", "replace"),
    }


def _print_messages(as_json: bool, msgs: list[MessageExt]) -> None:
    if as_json:
        _emit(True, {"messages": [message_doc(m) for m in msgs]})
        return
    for m in msgs:
        d = message_doc(m)
        click.echo("\n".join(f"{k + ':':<18}{v}" for k, v in d.items()))
        click.echo("")


@click.option("-i", "--msgId", "msg_id", required=True, help="Offset msg id (SendResult.offset_msg_id).")
@click.option("-g", "--consumerGroup", "group", help="With -d: consume the message directly on that client.")
@click.option("-d", "--clientId", "client_id")
@_admin_command("queryMsgById")
async def query_msg_by_id(
    admin: Any, as_json: bool, msg_id: str, group: str | None, client_id: str | None
) -> None:
    """Show the message with this offset msg id; with -g and -d, run it on that client's listener
    (CONSUME_MESSAGE_DIRECTLY) and print its result."""
    if group and client_id:
        result = await admin.consume_message_directly(group, client_id, msg_id)
        if as_json:
            _emit(True, result)
        else:
            click.echo("\n".join(f"{k}: {v}" for k, v in sorted(result.items())))
        return
    _print_messages(as_json, [await admin.query_msg_by_id(msg_id)])


@click.option("-t", "--topic", required=True)
@click.option("-k", "--msgKey", "key", required=True)
@_admin_command("queryMsgByKey")
async def query_msg_by_key(admin: Any, as_json: bool, topic: str, key: str) -> None:
    """Show the messages of a topic with this key (or unique id)."""
    msgs = await admin.query_msg_by_key(topic, key)
    if not msgs and not as_json:
        raise RocketpyError(f"no message with key {key!r} in topic {topic!r}")
    _print_messages(as_json, msgs)


@click.option("-t", "--topic", required=True)
@click.option("-b", "--brokerName", "broker_name", required=True)
@click.option("-i", "--queueId", "queue_id", type=int, required=True)
@click.option("-o", "--offset", type=int, required=True)
@_admin_command("queryMsgByOffset")
async def query_msg_by_offset(
    admin: Any, as_json: bool, topic: str, broker_name: str, queue_id: int, offset: int
) -> None:
    """Show the message at a queue offset."""
    _print_messages(as_json, [await admin.query_msg_by_offset(topic, broker_name, queue_id, offset)])


@click.option("-t", "--topic", required=True)
@click.option("-p", "--body", required=True, help="Message body (UTF-8).")
@click.option("-k", "--keys", help="Message keys (space-separated).")
@click.option("-c", "--tags", help="Message tag.")
@click.option("-b", "--brokerName", "broker_name", help="Send to this broker...")
@click.option("-i", "--qid", "queue_id", type=int, help="...and this queue.")
@_admin_command("sendMessage")
async def send_message(
    admin: Any,
    as_json: bool,
    topic: str,
    body: str,
    keys: str | None,
    tags: str | None,
    broker_name: str | None,
    queue_id: int | None,
) -> None:
    """Send one message and print the result."""
    from rocketpy.client.producer import Producer

    producer = Producer("TOOLS_PRODUCER", ";".join(admin.instance.namesrv_addrs))
    await producer.start()
    try:
        msg = Message(topic, body.encode(), tags=tags, keys=keys)
        if broker_name is None and queue_id is None:
            r = await producer.send(msg)
        else:
            r = await producer.send(msg, selector=_fixed_queue(broker_name, queue_id), arg=None)
    finally:
        await producer.shutdown()
    mq = r.message_queue
    _emit(
        as_json,
        {
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "sendStatus": r.status.name,
            "msgId": r.msg_id,
            "offsetMsgId": r.offset_msg_id,
            "queueOffset": r.queue_offset,
        },
        ["Broker Name", "QID", "Send Result", "MsgId", "Offset MsgId"],
        [[mq.broker_name, mq.queue_id, r.status.name, r.msg_id, r.offset_msg_id]],
    )


def _fixed_queue(broker_name: str | None, queue_id: int | None) -> Callable[..., MessageQueue]:
    def select(mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        for mq in mqs:
            if (broker_name is None or mq.broker_name == broker_name) and (
                queue_id is None or mq.queue_id == queue_id
            ):
                return mq
        raise RocketpyError(f"no writable queue broker={broker_name} qid={queue_id} in topic {msg.topic!r}")

    return select


@click.option("-t", "--topic", required=True)
@click.option("-b", "--brokerName", "broker_name", help="Only this broker.")
@click.option("-i", "--queueId", "queue_id", type=int, help="Only this queue.")
@click.option("-o", "--offset", type=int, help="Start offset (default: each queue's min offset).")
@click.option("-c", "--messageNumber", "count", type=int, default=128, show_default=True)
@click.option("-g", "--consumerGroup", "group", default=TOOLS_CONSUMER, show_default=True)
@_admin_command("consumeMessage")
async def consume_message(
    admin: Any,
    as_json: bool,
    topic: str,
    broker_name: str | None,
    queue_id: int | None,
    offset: int | None,
    count: int,
    group: str,
) -> None:
    """Read messages from a topic's queues without committing offsets."""
    from rocketpy.client.route import subscribe_queues

    route = await admin.topic_route(topic)
    mqs = [
        mq
        for mq in subscribe_queues(topic, route)
        if (broker_name is None or mq.broker_name == broker_name)
        and (queue_id is None or mq.queue_id == queue_id)
    ]
    out: list[MessageExt] = []
    for mq in mqs:
        start = offset if offset is not None else 0
        while len(out) < count:
            msgs, nxt, max_off = await admin.pull(mq, start, min(32, count - len(out)), group=group)
            out += msgs
            if not msgs or nxt >= max_off:
                break
            start = nxt
    _print_messages(as_json, out[:count])


@click.option("-g", "--consumerGroup", "group", required=True, help="Whose dead letters to resend.")
@click.option("-i", "--msgId", "msg_id", help="Only this message (its id or the dead letter's offset id).")
@_admin_command("resendDlq")
async def resend_dlq(admin: Any, as_json: bool, group: str, msg_id: str | None) -> None:
    """Put dead letters of a group back to its retry topic for another round of retries."""
    resent = await admin.resend_dlq(group, msg_id)
    fields = ("msgId", "brokerName", "dlqOffset", "retryQueueId", "retryQueueOffset")
    rows = [[r[f] for f in fields] for r in resent]
    _emit(
        as_json,
        {"group": group, "resent": resent},
        ["MsgId", "Broker Name", "DLQ Offset", "Retry QID", "Retry Offset"],
        rows,
    )
