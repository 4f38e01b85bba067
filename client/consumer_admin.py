"""What a consumer does when a broker calls it for the admin (``ConsumerBase`` delegates here).

Owns the consumer's side of RESET_CONSUMER_CLIENT_OFFSET (``reset_offset``: each held queue of the
topic restarts from its new offset), GET_CONSUMER_STATUS_FROM_CLIENT (``held_offsets``) and
GET_CONSUMER_RUNNING_INFO (``running_info``) and CONSUME_MESSAGE_DIRECTLY (``consume_directly``).

A reset holds the rebalancer's lock (no queue changes hands meanwhile) and, per queue: marks the old
context released (a listener call still running for it no longer moves the offset), stops its pull
loop and drops what it held, lets the consumer kind finish with it (``queue_stopped``: the push
consumer waits for listener calls of the queue, bounded; the lite consumer forgets what was polled
and not committed), sets the offset without the usual "only forward" rule, and starts a new context
there. Nothing of the old position is committed after that, so the consumer's next commit carries
the reset offset or one past it.
"""

from __future__ import annotations

import time
import traceback
from typing import TYPE_CHECKING, Any

from rocketpy.client.consumer_types import ConsumeOrderlyStatus, ConsumeStatus
from rocketpy.client.heartbeat import CLIENT_VERSION
from rocketpy.client.listener import ConsumeContext
from rocketpy.client.process_queue import ProcessQueue
from rocketpy.client.queue_context import QueueContext
from rocketpy.client.running_info import process_queue_info, stack_dump
from rocketpy.client.send_back import restore_retry_messages
from rocketpy.errors import MQClientError
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.topic import retry_topic

#: The most of a listener's traceback a CONSUME_MESSAGE_DIRECTLY answer carries.
MAX_REMARK_CHARS = 4096

if TYPE_CHECKING:
    from rocketpy.client.consumer_base import ConsumerBase
    from rocketpy.client.push_consumer import PushConsumer


async def reset_offset(
    consumer: ConsumerBase, topic: str, offsets: dict[MessageQueue, int]
) -> list[MessageQueue]:
    """RESET_CONSUMER_CLIENT_OFFSET: restart each held queue of ``topic`` named in ``offsets``
    from its new offset; returns the queues restarted."""
    rebalancer = consumer.rebalancer
    if rebalancer is None:
        return []
    restarted: list[MessageQueue] = []
    async with rebalancer.lock:
        for mq, offset in sorted(offsets.items()):
            ctx = rebalancer.table.get(mq)
            if mq.topic != topic or ctx is None:
                continue
            ctx.released = True
            await ctx.stop_pulling()
            await consumer.queue_stopped(ctx)
            consumer.offset_store.update(mq, offset, increase_only=False)
            fresh = QueueContext(
                mq, ctx.sub, offset, consumer.offset_store, consumer.fresh_process_queue(ctx.pq)
            )
            rebalancer.table[mq] = consumer.start_pulling(fresh, consumer.submit_target())
            restarted.append(mq)
    return restarted


def held_offsets(consumer: ConsumerBase, topic: str) -> dict[MessageQueue, int]:
    """GET_CONSUMER_STATUS_FROM_CLIENT: the offset this consumer holds for each of its queues of
    ``topic`` (what it would commit now; where it pulls next when it has consumed nothing yet)."""
    out: dict[MessageQueue, int] = {}
    for mq, ctx in consumer.queue_table.items():
        if mq.topic == topic:
            cached = consumer.offset_store.cached(mq)
            out[mq] = cached if cached is not None else ctx.next_offset
    return out


def running_info(consumer: ConsumerBase, jstack: bool = False) -> dict[str, Any]:
    """GET_CONSUMER_RUNNING_INFO: RocketMQ's ConsumerRunningInfo of this consumer."""
    table = consumer.queue_table
    return {
        "properties": _running_properties(consumer),
        "subscriptionSet": [sd.to_wire() for _t, sd in sorted(consumer.subscription_table.items())],
        "mqTable": [
            {"mq": mq.to_dict(), "info": process_queue_info(ctx.pq, consumer.offset_store.cached(mq))}
            for mq, ctx in sorted(table.items())
        ],
        "statusTable": {topic: consumer.stats.status(topic) for topic in sorted(consumer.subscription_table)},
        "jstack": stack_dump() if jstack else None,
    }


def _running_properties(consumer: ConsumerBase) -> dict[str, str]:
    """RocketMQ's ``PROP_*`` keys, then the consumer's options under their RocketMQ names."""
    props = {
        "PROP_NAMESERVER_ADDR": str(consumer.namesrv_addr),
        "PROP_THREADPOOL_CORE_SIZE": str(getattr(consumer, "consume_thread_min", -1)),
        "PROP_CONSUMEORDERLY": str(consumer.orderly).lower(),
        "PROP_CONSUME_TYPE": consumer.consume_type,
        "PROP_CLIENT_VERSION": CLIENT_VERSION,
        "PROP_CONSUMER_START_TIMESTAMP": str(consumer.start_timestamp_ms),
        "clientId": consumer.client_id,
        "consumerGroup": consumer.group,
        "messageModel": str(consumer.message_model),
        "consumeFromWhere": str(consumer.consume_from_where),
        "allocateMessageQueueStrategy": str(consumer.allocate_strategy),
        "pullBatchSize": str(consumer.pull_batch_size),
        "pullThresholdForQueue": str(consumer.pull_threshold_for_queue),
        "pullThresholdSizeForQueue": str(consumer.pull_threshold_size_for_queue),
    }
    options = (
        ("consume_thread_max", "consumeThreadMax"),
        ("max_reconsume_times", "maxReconsumeTimes"),
        ("consume_message_batch_max_size", "consumeMessageBatchMaxSize"),
    )
    for name, key in options:
        if hasattr(consumer, name):
            props[key] = str(getattr(consumer, name))
    return props


async def consume_directly(consumer: PushConsumer, msg: MessageExt, broker_name: str) -> dict[str, Any]:
    """CONSUME_MESSAGE_DIRECTLY on a push consumer: its listener runs once on ``msg``; the result
    as RocketMQ's ConsumeMessageDirectlyResult (``consumeResult`` CR_SUCCESS, CR_LATER,
    CR_RETURN_NULL or CR_THROW_EXCEPTION, ``remark``, ``spentTimeMills``)."""
    runner = consumer.listener_runner
    if runner is None:
        raise MQClientError(f"consumer {consumer.client_id} is not running: nothing to consume with")
    if msg.topic == retry_topic(consumer.group):
        restore_retry_messages([msg])
    started = time.monotonic()
    [result] = await runner.run([[msg]], [ConsumeContext(MessageQueue(msg.topic, broker_name, msg.queue_id))],
                                ProcessQueue())  # fmt: skip
    spent_ms = int((time.monotonic() - started) * 1000)
    if result in (ConsumeStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS):
        outcome, remark = "CR_SUCCESS", ""
    elif result in (ConsumeStatus.RECONSUME_LATER, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT):
        outcome, remark = "CR_LATER", ""
    elif isinstance(result, BaseException):
        outcome = "CR_THROW_EXCEPTION"
        remark = "".join(traceback.format_exception(result))[-MAX_REMARK_CHARS:]
    else:
        outcome, remark = "CR_RETURN_NULL", f"the listener returned {result!r}"
    return {"order": consumer.orderly, "autoCommit": True, "consumeResult": outcome, "remark": remark,
            "spentTimeMills": spent_ms}  # fmt: skip


def now_ms() -> int:
    """Wall-clock milliseconds (a consumer's start time)."""
    return int(time.time() * 1000)
