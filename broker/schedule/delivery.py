"""DeliveryTimeService: the broker's entry point for messages delivered later.

Owns the redirect on send (RocketMQ ``HookUtils.handleScheduleMessage``): a message whose ``DELAY``
level is above 0 is clamped to the highest level and stored in ``SCHEDULE_TOPIC_XXXX`` queue
``level - 1``; one with ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` goes to the timer
(``broker/timer``). Also owns the lifecycle of the schedule and timer services and the periodic
persistence of ``config/delayOffset.json``. ``put_delayed`` is the re-put path for any caller that
holds a ``BrokerMessage`` and a level (the consumer send-back).
"""

from __future__ import annotations

import asyncio
import logging
import os

from rocketpy.broker.schedule.offsets import DelayOffsetTable
from rocketpy.broker.schedule.records import to_waiting_topic
from rocketpy.broker.schedule.service import ScheduleMessageService
from rocketpy.broker.store import BrokerMessage, PutMessageResult, PutMessageStatus, Store
from rocketpy.broker.timer.service import TimerMessageService
from rocketpy.broker.topic_config import SCHEDULE_TOPIC
from rocketpy.config import StoreConfig, parse_delay_levels
from rocketpy.message import MessageConst, string_to_properties

log = logging.getLogger("rocketpy.broker.schedule")

#: Producers remembered as told about a clamped delay level (the set is cleared when full).
MAX_CLAMP_LOGGED = 4096


def asks_later_delivery(properties: str) -> bool:
    """True when a message's properties ask for a later delivery (a delay level > 0 or a timer time)."""
    props = string_to_properties(properties)
    level = props.get(MessageConst.DELAY, "")
    if level.isdigit() and int(level) > 0:
        return True
    return MessageConst.TIMER_DELIVER_MS in props or MessageConst.TIMER_DELAY_SEC in props


class DeliveryTimeService:
    """Delay levels and timer messages of one broker.

    Args:
        store: the started message store.
        config: store settings (``messageDelayLevel``, ``flushDelayOffsetInterval``, timer keys).
        config_dir: the broker's ``config`` directory (``delayOffset.json``).
    """

    def __init__(self, store: Store, config: StoreConfig, config_dir: str) -> None:
        self.store = store
        self.config = config
        self.levels_ms = parse_delay_levels(config.message_delay_level)
        self.offsets = DelayOffsetTable(os.path.join(config_dir, "delayOffset.json"))
        self.schedule = ScheduleMessageService(store, self.levels_ms, self.offsets, store.clock)
        self.timer: TimerMessageService | None = None
        if config.timer_wheel_enable:
            self.timer = TimerMessageService(store, config, config_dir)
        self._persist_task: asyncio.Task[None] | None = None
        self._clamp_logged: set[bytes] = set()

    async def start(self) -> None:
        """Load progress (threads) and start delivering."""
        await asyncio.to_thread(self.offsets.load)
        if self.timer is not None:
            await self.timer.start()
        self.schedule.start()
        self._persist_task = asyncio.get_running_loop().create_task(self._persist_routine())

    async def shutdown(self) -> None:
        """Stop delivering (between puts) and persist the progress (call before the store stops)."""
        if self._persist_task is not None:
            self._persist_task.cancel()
            await asyncio.gather(self._persist_task, return_exceptions=True)
        await self.schedule.shutdown()
        if self.timer is not None:
            await self.timer.shutdown()
        await self.offsets.file.persist(force=True)

    async def _persist_routine(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_delay_offset_interval / 1000.0)
            await self.offsets.file.persist()

    # -- send path ------------------------------------------------------------------------------
    async def put(self, msg: BrokerMessage) -> PutMessageResult:
        """Store ``msg``: in its waiting place when it asks for a later delivery, else as is."""
        props = string_to_properties(msg.properties)
        if MessageConst.TIMER_DELIVER_MS in props or MessageConst.TIMER_DELAY_SEC in props:
            if self.timer is None:
                return PutMessageResult(
                    PutMessageStatus.MESSAGE_ILLEGAL,
                    "timer messages are disabled on this broker (timerWheelEnable=false); "
                    "send without deliver_time_ms/delay_seconds or enable the timer",
                )
            return await self.timer.put(msg, props)
        level = props.get(MessageConst.DELAY, "")
        if level.isdigit() and int(level) > 0:
            if int(level) > len(self.levels_ms):
                self._note_clamp(msg, int(level))
            return await self._put_level(msg, props, int(level))
        return await self.store.put_message(msg)

    def _note_clamp(self, msg: BrokerMessage, level: int) -> None:
        """Log a clamped level once per producer (its address; a bounded set of them)."""
        producer = msg.born_host8
        if producer in self._clamp_logged:
            return
        if len(self._clamp_logged) >= MAX_CLAMP_LOGGED:
            self._clamp_logged.clear()
        self._clamp_logged.add(producer)
        host, port = msg.born_host
        log.warning(
            "producer %s:%d sent delay_level=%d to %s; this broker has %d levels (messageDelayLevel), "
            "so it is delivered at level %d (logged once per producer)",
            host, port, level, msg.topic, len(self.levels_ms), len(self.levels_ms),
        )  # fmt: skip

    async def put_delayed(self, msg: BrokerMessage, level: int) -> PutMessageResult:
        """Store ``msg`` (topic and queue = where it is to be delivered) at delay ``level`` (> 0)."""
        return await self._put_level(msg, string_to_properties(msg.properties), level)

    async def _put_level(self, msg: BrokerMessage, props: dict[str, str], level: int) -> PutMessageResult:
        level = min(level, len(self.levels_ms))  # RocketMQ clamps to the highest level
        props[MessageConst.DELAY] = str(level)
        result = await self.store.put_message(to_waiting_topic(msg, props, SCHEDULE_TOPIC, level - 1))
        if result.ok:
            self.schedule.wake(level)
        return result

    def timer_waiting(self) -> int:
        """How many timer messages wait for their time (0 when the timer is disabled)."""
        return self.timer.waiting if self.timer is not None else 0

    def delay_waiting(self) -> dict[int, int]:
        """Messages waiting per delay level (levels with none left out)."""
        counts = {level: self.schedule.waiting(level) for level in range(1, len(self.levels_ms) + 1)}
        return {k: v for k, v in counts.items() if v}
