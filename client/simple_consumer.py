"""SimpleConsumer: receive messages by POP, acknowledge each, as RocketMQ 5's SimpleConsumer.

Owns a POP consumer's subscriptions, its membership (heartbeats with ``CONSUME_POP``, so a broker's
QUERY_ASSIGNMENT knows the group consumes by POP) and its calls: ``receive`` pops from one broker
of one subscribed topic per call, rotating over topics and brokers, waiting up to
``await_duration`` seconds (the broker holds the request: long polling) and returning ``[]`` when
nothing came; each message is a ``MessageExt`` whose ``receipt_handle`` names its broker, queue,
offset and pop. ``ack`` sends it back to that broker (several at once: one BATCH_ACK_MESSAGE per
broker, shared with the acks of concurrent calls: ``client/ack_coalesce.py``);
``change_invisible_duration`` keeps it invisible longer and gives the message its new handle.
There is no client-side rebalance: the broker decides what each receive gets, so a group may have
more consumers than queues. Times are seconds, as in RocketMQ 5's Python client.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from rocketpy.client.ack_coalesce import AckCoalescer
from rocketpy.client.consumer_base import DEFAULT_NAMESRV
from rocketpy.client.consumer_types import (
    ConsumeFromWhere,
    MessageModel,
    MessageSelector,
    SubscriptionData,
    build_subscription,
    coerce_enum,
)
from rocketpy.client.instance import ClientSettings, MQClientInstance, new_client_id
from rocketpy.client.receipts import AckGroup, ack_groups, batch_acks, parse_handle
from rocketpy.errors import MQClientError
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.protocol.headers.pop import (
    MAX_INVISIBLE_TIME_MS,
    MAX_POP_MSGS,
    BatchAck,
    ConsumeInitMode,
    PopMessageRequestHeader,
)
from rocketpy.protocol.receipt import ReceiptHandle

log = logging.getLogger("rocketpy.client.consumer")

#: Added to ``await_duration`` for a receive's call timeout (the broker answers at its end).
RECEIVE_MARGIN_S = 3.0


def _invisible_ms(seconds: Any, name: str) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= 12 * 3600:
        raise MQClientError(
            f"{name}={seconds!r} must be a number of seconds above 0 and at most 43200 (12 hours)"
        )
    return max(1, min(MAX_INVISIBLE_TIME_MS, round(seconds * 1000)))


class SimpleConsumer:
    """A POP consumer (see the module docstring).

    Args:
        group: the consumer group.
        namesrv_addr: ``"host:port"`` or ``"h1:p1;h2:p2"``.
        subscriptions: topic -> tag expression (``"TagA || TagB"``, ``"*"``) or ``MessageSelector``.
        await_duration: seconds a receive waits for messages when there are none (long polling).
        orderly: pop in order: one batch per queue in flight until it is acked or expires.
        consume_from_where: where a group with no offset in a queue starts: LAST (a queue that
            still starts at offset 0 is read from its start, as RocketMQ does) or FIRST.
        request_timeout: seconds for acks, invisible-time changes and control calls.
        instance_name, access_key, secret_key, serialize_type, poll_name_server_interval,
        heartbeat_broker_interval: as for the other consumers (DESIGN §9).
    """

    consume_type = "CONSUME_POP"
    message_model = MessageModel.CLUSTERING

    def __init__(
        self,
        group: str,
        namesrv_addr: str = DEFAULT_NAMESRV,
        *,
        subscriptions: Mapping[str, str | MessageSelector] | None = None,
        await_duration: float = 10.0,
        orderly: bool = False,
        consume_from_where: ConsumeFromWhere | str = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        request_timeout: float = 3.0,
        instance_name: str = "DEFAULT",
        access_key: str | None = None,
        secret_key: str | None = None,
        serialize_type: str | None = None,
        poll_name_server_interval: float = 30.0,
        heartbeat_broker_interval: float = 30.0,
    ) -> None:
        if not isinstance(group, str) or not group.strip():
            raise MQClientError(f"consumer group must be a non-empty string, got {group!r}")
        if (
            isinstance(await_duration, bool)
            or not isinstance(await_duration, int | float)
            or await_duration < 0
        ):
            raise MQClientError(f"await_duration={await_duration!r} must be a number of seconds >= 0")
        self.group = group
        self.namesrv_addr = namesrv_addr
        self.await_duration = float(await_duration)
        self.orderly = bool(orderly)
        self.consume_from_where = coerce_enum(ConsumeFromWhere, consume_from_where, "consume_from_where")
        if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            raise MQClientError(
                "a SimpleConsumer starts from LAST or FIRST offset; CONSUME_FROM_TIMESTAMP is not supported"
            )
        self.request_timeout = float(request_timeout)
        self.settings = ClientSettings(
            instance_name=instance_name,
            poll_name_server_interval=poll_name_server_interval,
            heartbeat_broker_interval=heartbeat_broker_interval,
            access_key=access_key,
            secret_key=secret_key,
            serialize_type=serialize_type,
        )
        self.settings.check()
        self.client_id = new_client_id(instance_name)
        self.subscription_table: dict[str, SubscriptionData] = {}
        for topic, expression in (subscriptions or {}).items():
            self.subscription_table[topic] = build_subscription(topic, expression)
        self.instance: MQClientInstance | None = None
        self._rotor = itertools.count()
        self._state = "CREATED"
        self._acks = AckCoalescer(self._send_acks)

    # -- membership ----------------------------------------------------------------------------------
    def subscriptions(self) -> list[dict[str, Any]]:
        """SubscriptionData maps for heartbeats."""
        return [sd.to_wire() for sd in self.subscription_table.values()]

    async def on_consumer_ids_changed(self) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED: nothing to do (the broker assigns on every receive)."""

    async def start(self) -> None:
        """Join the group: fetch the subscribed topics' routes and announce this consumer.

        Raises:
            MQClientError: already started, or no NameServer reachable.
        """
        if self._state != "CREATED":
            raise MQClientError(f"SimpleConsumer {self.group} was already started; create a new one")
        self.instance = inst = await MQClientInstance.acquire(self.namesrv_addr, config=self.settings)
        try:
            for topic in self.subscription_table:
                if await inst.update_topic_route(topic) is None:
                    log.warning(
                        "topic %s does not exist yet; %s will receive it once created", topic, self.group
                    )
        except BaseException:
            await inst.release()
            raise
        inst.register_consumer(self.group, self.client_id, self)
        self._state = "RUNNING"
        await inst.send_heartbeat_to_all_brokers()

    async def shutdown(self) -> None:
        """Leave the group (unacked messages come back after their invisible time)."""
        if self._state != "RUNNING":
            return
        inst = self._client()
        self._state = "SHUTDOWN"
        try:
            await self._acks.close()
            await inst.unregister_consumer(self.group, self.client_id)
        finally:
            await inst.release()

    async def __aenter__(self) -> SimpleConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _client(self) -> MQClientInstance:
        if self.instance is None or self._state != "RUNNING":
            raise MQClientError(f"SimpleConsumer {self.group} is not running: call start() first")
        return self.instance

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Receive ``topic`` too (or with a new expression), from the next receive on.

        Raises:
            MQClientError: a bad topic or expression.
        """
        self.subscription_table[topic] = build_subscription(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving ``topic`` (messages received already can still be acked)."""
        self.subscription_table.pop(topic, None)

    # -- receive ------------------------------------------------------------------------------------
    def _targets(self, inst: MQClientInstance) -> list[tuple[str, str]]:
        """``(topic, broker_name)`` of every subscribed topic's readable brokers."""
        out = []
        for topic in sorted(self.subscription_table):
            names = sorted({mq.broker_name for mq in inst.subscribe_queues(topic)})
            out += [(topic, name) for name in names]
        return out

    async def receive(self, max_message_num: int = 32, invisible_duration: float = 30) -> list[MessageExt]:
        """Pop up to ``max_message_num`` (1..32) messages, each invisible to the group for
        ``invisible_duration`` seconds unless acked; waits up to ``await_duration`` for some.

        Returns:
            The messages (``[]`` when none came).

        Raises:
            MQClientError: bad arguments, no subscription, no route for the subscribed topics.
            MQBrokerError: the broker refused (no permission, bad subscription, ...).
        """
        if (
            isinstance(max_message_num, bool)
            or not isinstance(max_message_num, int)
            or not 0 < max_message_num <= MAX_POP_MSGS
        ):
            raise MQClientError(
                f"max_message_num={max_message_num!r} must be an integer from 1 to {MAX_POP_MSGS}"
            )
        invisible_ms = _invisible_ms(invisible_duration, "invisible_duration")
        inst = self._client()
        if not self.subscription_table:
            raise MQClientError(
                f"SimpleConsumer {self.group} subscribes to nothing: call subscribe(topic) first"
            )
        for topic in self.subscription_table:
            if inst.topic_route(topic) is None:  # subscribed since the last route refresh
                await inst.update_topic_route(topic)
        targets = self._targets(inst)
        if not targets:
            topics = ", ".join(sorted(self.subscription_table))
            raise MQClientError(f"no broker serves {topics}: create the topic with mqadmin updateTopic")
        topic, broker_name = targets[next(self._rotor) % len(targets)]
        addr = await inst.queue_broker_addr(MessageQueue(topic, broker_name, 0))
        sub = self.subscription_table[topic]
        header = PopMessageRequestHeader(
            self.group,
            topic,
            -1,
            max_message_num,
            invisible_ms,
            round(self.await_duration * 1000),
            int(time.time() * 1000),
            self._init_mode(),
            sub.expression_type.value,
            sub.sub_string,
            self.orderly,
        )
        result = await inst.api.pop_message(addr, broker_name, header, self.await_duration + RECEIVE_MARGIN_S)
        return result.messages

    def _init_mode(self) -> int:
        if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return ConsumeInitMode.MIN
        return ConsumeInitMode.MAX

    # -- ack -----------------------------------------------------------------------------------------------
    async def ack(self, message: MessageExt | Iterable[MessageExt]) -> None:
        """Acknowledge a received message (or several: one BATCH_ACK_MESSAGE per broker; the acks
        of concurrent calls made within one loop tick, or while an ack to that broker is in flight,
        share one request: ``client/ack_coalesce.py``).

        A message acked before, or delivered again since its invisible time passed, is not an error:
        the broker answers SUCCESS and changes nothing (RocketMQ's answer).

        Raises:
            MQClientError: a message without a (valid) receipt handle, or whose broker is unknown.
            MQBrokerError: the broker refused (e.g. it could not store the ack).
        """
        inst = self._client()
        if isinstance(message, MessageExt):
            h = parse_handle(message)
            addr = await self._broker_addr(inst, h, message.topic)
            topic = h.stored_topic(message.topic, self.group)
            await inst.api.ack_message(
                addr, self.group, topic, h.queue_id, h.queue_offset, h.encode(), self.request_timeout
            )
            return
        by_broker: dict[str, list[AckGroup]] = {}
        for g in ack_groups(message):
            by_broker.setdefault(g.handle.broker_name, []).append(g)
        pending = [
            (await self._broker_addr(inst, groups[0].handle, groups[0].topic), broker_name,
             batch_acks(self.group, groups))
            for broker_name, groups in by_broker.items()
        ]  # fmt: skip
        await asyncio.gather(*(self._acks.add(*p) for p in pending))

    async def _send_acks(self, addr: str, broker_name: str, acks: list[BatchAck]) -> None:
        assert self.instance is not None  # held acks are sent before shutdown releases it
        await self.instance.api.batch_ack_message(addr, broker_name, acks, self.request_timeout)

    async def change_invisible_duration(self, message: MessageExt, invisible_duration: float) -> None:
        """Keep ``message`` invisible ``invisible_duration`` seconds from now; it gets its new
        receipt handle (the old one no longer acks it).

        Raises:
            MQClientError: bad duration, no (valid) receipt handle, unknown broker.
            MQBrokerError: NO_MESSAGE when the message is no longer in flight (acked, or its
                invisible time passed and it was delivered again).
        """
        invisible_ms = _invisible_ms(invisible_duration, "invisible_duration")
        inst = self._client()
        h = parse_handle(message)
        addr = await self._broker_addr(inst, h, message.topic)
        topic = h.stored_topic(message.topic, self.group)
        answer = await inst.api.change_invisible_time(
            addr,
            self.group,
            topic,
            h.queue_id,
            h.queue_offset,
            h.encode(),
            invisible_ms,
            self.request_timeout,
        )
        message.receipt_handle = ReceiptHandle(
            h.queue_offset,
            answer.pop_time,
            answer.invisible_time,
            answer.revive_qid,
            h.kind,
            h.broker_name,
            h.queue_id,
            h.queue_offset,
        ).encode()

    async def _broker_addr(self, inst: MQClientInstance, h: ReceiptHandle, topic: str) -> str:
        addr = inst.find_broker_addr(h.broker_name)
        if addr is None:
            await inst.update_topic_route(topic)
            addr = inst.find_broker_addr(h.broker_name)
        if addr is None:
            raise MQClientError(
                f"broker {h.broker_name!r} of the receipt handle has no master in the route of "
                f"{topic}: is it running?"
            )
        return addr
