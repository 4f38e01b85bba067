"""HEART_BEAT and UNREGISTER_CLIENT: producers and consumers announcing themselves.

Owns the decoding of HeartbeatData; group membership itself lives in ``ConsumerManager``. A
clustering consumer group also gets its retry topic ``%RETRY%{group}`` here, as in RocketMQ.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rocketpy.broker.consumer_manager import ClientChannelInfo, ConsumerManager, wall_clock_ms
from rocketpy.broker.processors.body import decode_map
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager, TopicLimitError
from rocketpy.config import BrokerConfig
from rocketpy.errors import HeaderError
from rocketpy.heartbeat import SETTING_ORDINALS, setting_name
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.client import (
    HEARTBEAT_DATA,
    MAX_GROUPS_PER_HEARTBEAT,
    MAX_SUBSCRIPTIONS_PER_GROUP,
    UnregisterClientRequestHeader,
)
from rocketpy.remoting.command import SERIALIZE_MSGPACK, RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.subscription import SubscriptionData, SubscriptionParseError
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger("rocketpy.broker.clients")


def client_identity(doc: dict[str, Any], consumers: list[Any], serialize_type: int) -> tuple[str, str]:
    """``(language, version)`` of a heartbeat's client: what rocketpy's SDK says in the heartbeat
    (``language``, ``version``); else RocketMQ's C++ client (it alone writes the consumer enums as
    ordinals) or ``OTHER`` for JSON clients, ``PYTHON`` for a rocketpy (msgpack) client that did not say."""
    language, version = doc.get("language"), doc.get("version")
    if isinstance(language, str) and language and isinstance(version, str):
        return language[:32], version[:64]
    if serialize_type == SERIALIZE_MSGPACK:
        return "PYTHON", ""
    first = consumers[0] if consumers and isinstance(consumers[0], dict) else {}
    return ("CPP" if isinstance(first.get("messageModel"), int) else "OTHER"), ""


class ClientManageProcessor:
    """Handles heartbeats and client unregistration.

    Args:
        broker_config: whether consumers are told of membership changes (live).
        topic_config: where a clustering group's retry topic is created.
        subscription_groups: the group table (existence, retry queues, notification).
        consumer_manager: the group membership heartbeats update.
        clock_ms: wall-clock milliseconds (heartbeat times).
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        topic_config: TopicConfigManager,
        subscription_groups: SubscriptionGroupManager,
        consumer_manager: ConsumerManager,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.broker_config = broker_config
        self.topic_config = topic_config
        self.subscription_groups = subscription_groups
        self.consumer_manager = consumer_manager
        self.clock_ms = clock_ms

    def heart_beat(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """HEART_BEAT: register or refresh the client's producer and consumer groups."""
        doc = decode_map(request, "HeartbeatData", HEARTBEAT_DATA)
        client_id = doc.get("clientID")
        if not isinstance(client_id, str) or not client_id:
            raise HeaderError("HeartbeatData needs a non-empty 'clientID'")
        consumers = doc.get("consumerDataSet") or []
        producers = doc.get("producerDataSet") or []
        if not isinstance(consumers, list) or not isinstance(producers, list):
            raise HeaderError("HeartbeatData 'consumerDataSet' and 'producerDataSet' must be lists")
        if len(consumers) + len(producers) > MAX_GROUPS_PER_HEARTBEAT:
            raise HeaderError(f"HeartbeatData names more than {MAX_GROUPS_PER_HEARTBEAT} groups")
        now_ms = self.clock_ms()
        language, version = client_identity(doc, consumers, request.serialize_type)
        channel.attrs["client_id"] = client_id
        channel.serialize_type = request.serialize_type  # the broker's requests to it speak its encoding
        for data in consumers:
            info = ClientChannelInfo(channel, client_id, now_ms, language, version)
            error = self._consumer(request, info, data)
            if error is not None:
                return error
        for data in producers:
            group = data.get("groupName") if isinstance(data, dict) else None
            if not isinstance(group, str) or not group:
                raise HeaderError("every producerDataSet entry needs a 'groupName'")
            info = ClientChannelInfo(channel, client_id, now_ms, language, version)
            self.consumer_manager.register_producer(group, info)
        return RemotingCommand.response(request)

    def _consumer(
        self, request: RemotingCommand, client: ClientChannelInfo, data: Any
    ) -> RemotingCommand | None:
        if not isinstance(data, dict) or not isinstance(data.get("groupName"), str) or not data["groupName"]:
            raise HeaderError("every consumerDataSet entry needs a 'groupName'")
        group = data["groupName"]
        group_cfg = self.subscription_groups.find(group)
        if group_cfg is None:
            return RemotingCommand.response(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist on this broker; create it with "
                "mqadmin updateSubGroup or set autoCreateSubscriptionGroup=true",
            )
        raw_subs = data.get("subscriptionDataSet") or []
        if not isinstance(raw_subs, list) or len(raw_subs) > MAX_SUBSCRIPTIONS_PER_GROUP:
            raise HeaderError(
                f"'subscriptionDataSet' must be a list of at most {MAX_SUBSCRIPTIONS_PER_GROUP}"
            )
        try:
            subs = [SubscriptionData.from_wire(s) for s in raw_subs]
        except (SubscriptionParseError, TypeError, ValueError) as e:
            return RemotingCommand.response(
                request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"group [{group}]: bad subscription: {e}"
            )
        try:
            settings = {k: setting_name(k, data[k]) for k in SETTING_ORDINALS if data.get(k) is not None}
        except ValueError as e:
            raise HeaderError(f"group [{group}]: {e}") from None
        if settings.get("messageModel", "CLUSTERING") == "CLUSTERING":
            try:
                self.topic_config.create_system_group_topic(
                    RETRY_GROUP_TOPIC_PREFIX + group, group_cfg.retry_queue_nums
                )
            except TopicLimitError as e:
                return RemotingCommand.response(request, ResponseCode.SYSTEM_ERROR, str(e))
        notify = (
            self.broker_config.notify_consumer_ids_changed_enable
            and group_cfg.notify_consumer_ids_changed_enable
        )
        changed = self.consumer_manager.register_consumer(group, client, settings, subs, notify=notify)
        if changed:
            log.info("heartbeat from %s changed consumer group %s", client.client_id, group)
        return None

    def unregister_client(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """UNREGISTER_CLIENT: a client leaves its producer and/or consumer group."""
        h = UnregisterClientRequestHeader.from_ext(request.ext)
        if h.producer_group:
            self.consumer_manager.unregister_producer(h.producer_group, h.client_id)
        if h.consumer_group:
            self.consumer_manager.unregister_consumer(h.consumer_group, h.client_id)
        return RemotingCommand.response(request)
