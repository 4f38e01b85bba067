"""Administration: topics, subscription groups and broker configuration.

Handles UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, GET_ALL_TOPIC_CONFIG,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, GET_ALL_SUBSCRIPTIONGROUP_CONFIG, DELETE_SUBSCRIPTIONGROUP,
GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG. Topic changes are persisted (in a thread) and
registered with the NameServers before the answer, so a route is visible when the call returns.
Only the keys in ``LIVE_BROKER_KEYS`` may change while the broker runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from pydantic import ValidationError

from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.processors.body import decode_map, encode
from rocketpy.broker.store import Store
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager, TopicLimitError, validate_topic_name
from rocketpy.config import BrokerConfig, StoreConfig, config_lines, config_update_entries
from rocketpy.errors import HeaderError
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.admin import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    TopicRequestHeader,
)
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.route import TopicConfig
from rocketpy.subscription_group import SubscriptionGroupConfig
from rocketpy.topic import AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC, apply_attributes

log = logging.getLogger("rocketpy.broker.admin")

#: RocketMQ key -> BrokerConfig field, for keys that take effect without a restart.
LIVE_BROKER_KEYS = {
    "brokerPermission": "broker_permission",
    "autoCreateTopicEnable": "auto_create_topic_enable",
    "autoCreateSubscriptionGroup": "auto_create_subscription_group",
    "defaultTopicQueueNums": "default_topic_queue_nums",
    "longPollingEnable": "long_polling_enable",
    "shortPollingTimeMills": "short_polling_time_mills",
    "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable",
    "registerNameServerPeriod": "register_name_server_period",
    "registerBrokerTimeoutMills": "register_broker_timeout_mills",
    "flushConsumerOffsetInterval": "flush_consumer_offset_interval",
    "channelExpiredTimeout": "channel_expired_timeout",
    # the send queue reads these per send (broker/send_queue.py)
    "waitTimeMillsInSendQueue": "wait_time_mills_in_send_queue",
    "sendThreadPoolQueueCapacity": "send_thread_pool_queue_capacity",
}

#: RocketMQ key -> StoreConfig field, for the store keys that take effect without a restart: the
#: cleanup reads them on each pass (``broker/store/cleanup.py``), so an operator can free a filling
#: disk now (with ``mqadmin deleteExpiredCommitLog``) without restarting the broker.
LIVE_STORE_KEYS = {
    "fileReservedTime": "file_reserved_time",
    "deleteWhen": "delete_when",
    "diskMaxUsedSpaceRatio": "disk_max_used_space_ratio",
    "diskSpaceCleanForciblyRatio": "disk_space_clean_forcibly_ratio",
    "diskSpaceWarningLevelRatio": "disk_space_warning_level_ratio",
    "destroyMapedFileIntervalForcibly": "destroy_mapped_file_interval_forcibly",
}


class AdminProcessor:
    """Handles topic, subscription-group and broker-config administration.

    Args:
        broker_config: the broker settings; live keys are changed here.
        store_config: the store settings (GET_BROKER_CONFIG).
        topic_config: the topic table.
        subscription_groups: the group table.
        offsets: the committed offsets (dropped with their topic or group).
        store: holds the consume queues of deleted topics.
        topics_changed: persists the topic table and registers it with the NameServers; awaited
            before a topic change is answered, so the route is visible when the call returns.
        broker_config_changed: applies live config changes (called with the changed keys).
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        topic_config: TopicConfigManager,
        subscription_groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        store: Store,
        topics_changed: Callable[[], Awaitable[None]],
        broker_config_changed: Callable[[set[str]], Awaitable[None]],
    ) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.topic_config = topic_config
        self.subscription_groups = subscription_groups
        self.offsets = offsets
        self.store = store
        self._topics_changed = topics_changed
        self._broker_config_changed = broker_config_changed

    def _topic_from_header(self, request: RemotingCommand) -> TopicConfig:
        h = CreateTopicRequestHeader.from_ext(request.ext)
        problem = validate_topic_name(h.topic)
        if problem:
            raise HeaderError(problem)
        if h.topic in (AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC, self.broker_config.broker_cluster_name):
            raise HeaderError(
                f"the topic name {h.topic} is a system topic of this broker; choose another name"
            )
        old = self.topic_config.get(h.topic)
        try:
            attributes = apply_attributes(old.attributes if old is not None else {}, h.attributes)
        except ValueError as e:
            raise HeaderError(str(e)) from None
        return TopicConfig(
            topic_name=h.topic,
            read_queue_nums=h.read_queue_nums,
            write_queue_nums=h.write_queue_nums,
            perm=h.perm,
            topic_filter_type=h.topic_filter_type,
            topic_sys_flag=h.topic_sys_flag,
            order=h.order,
            attributes=attributes,
        )

    async def update_and_create_topic(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC: create or change a topic, persist it and register it."""
        tc = self._topic_from_header(request)
        try:
            self.topic_config.update(tc)
        except TopicLimitError as e:
            return RemotingCommand.response(request, ResponseCode.SYSTEM_ERROR, str(e))
        await self._topics_changed()
        return RemotingCommand.response(request)

    async def delete_topic(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_BROKER: drop a topic's config, offsets and stored queues."""
        topic = TopicRequestHeader.from_ext(request.ext).topic
        if topic in (AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC):
            raise HeaderError(f"{topic} is a system topic and cannot be deleted")
        if not self.topic_config.delete(topic):
            return RemotingCommand.response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] does not exist on this broker"
            )
        self.offsets.remove_topic(topic)
        self.store.delete_topics({topic})
        await self._topics_changed()
        return RemotingCommand.response(request)

    def get_all_topic_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_TOPIC_CONFIG: the TopicConfigSerializeWrapper."""
        return RemotingCommand.response(request, body=encode(self.topic_config.snapshot(), request))

    async def update_and_create_subscription_group(
        self, channel: Channel, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: create or change a group (body SubscriptionGroupConfig)."""
        doc = decode_map(request, "SubscriptionGroupConfig")
        try:
            cfg = SubscriptionGroupConfig.from_wire(doc)
        except ValueError as e:
            raise HeaderError(f"bad SubscriptionGroupConfig: {e}") from e
        self.subscription_groups.update(cfg)
        await self.subscription_groups.file.persist()
        return RemotingCommand.response(request)

    def get_all_subscription_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every group's config and the table's data version."""
        return RemotingCommand.response(request, body=encode(self.subscription_groups.snapshot(), request))

    async def delete_subscription_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """DELETE_SUBSCRIPTIONGROUP: drop a group's config (and its offsets when cleanOffset=true)."""
        h = DeleteSubscriptionGroupRequestHeader.from_ext(request.ext)
        group = h.group
        if not self.subscription_groups.delete(group):
            return RemotingCommand.response(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist",
            )
        if h.clean_offset:
            self.offsets.remove_group(group)
        await self.subscription_groups.file.persist()
        return RemotingCommand.response(request)

    def get_broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONFIG: the effective configuration as ``key=value`` lines."""
        text = "\n".join(config_lines(self.broker_config, self.store_config)) + "\n"
        return RemotingCommand.response(request, body=text.encode())

    async def update_broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG: change live keys (all or nothing); others get a clear refusal."""
        entries = config_update_entries(request.body, "UPDATE_BROKER_CONFIG")
        fixed = [e.key for e in entries if e.key not in LIVE_BROKER_KEYS and e.key not in LIVE_STORE_KEYS]
        if fixed:
            live = sorted([*LIVE_BROKER_KEYS, *LIVE_STORE_KEYS])
            return RemotingCommand.response(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"cannot change {', '.join(fixed)} while the broker runs (edit the config file and restart); "
                f"keys that can change live: {', '.join(live)}",
            )
        updates = {e.key: e.value for e in entries}
        broker_updates = {k: v for k, v in updates.items() if k in LIVE_BROKER_KEYS}
        store_updates = {k: v for k, v in updates.items() if k in LIVE_STORE_KEYS}
        try:  # both checked before either changes: all or nothing
            broker = BrokerConfig.model_validate(
                {**self.broker_config.model_dump(by_alias=True), **broker_updates}
            )
            store = StoreConfig.model_validate(
                {**self.store_config.model_dump(by_alias=True), **store_updates}
            )
        except ValidationError as e:
            first = e.errors()[0]
            return RemotingCommand.response(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"bad value for {first['loc'][0] if first['loc'] else '?'}: {first['msg']}",
            )
        for key in broker_updates:
            field = LIVE_BROKER_KEYS[key]
            setattr(self.broker_config, field, getattr(broker, field))
        for key in store_updates:
            field = LIVE_STORE_KEYS[key]
            setattr(self.store_config, field, getattr(store, field))
        log.info("broker config updated live: %s", updates)
        await self._broker_config_changed(set(updates))
        return RemotingCommand.response(request)
