"""Consumer and producer groups known to this broker, from heartbeats.

Owns group -> client id -> ``ClientChannelInfo`` (the client's connection and last heartbeat
time), each consumer group's subscriptions and consume settings, and the producer groups.
A membership or subscription change calls the ``on_ids_changed(group, channels)`` hook, which
the controller turns into oneway NOTIFY_CONSUMER_IDS_CHANGED requests. Clients leave on
UNREGISTER_CLIENT, when their connection closes, or after ``channelExpiredTimeout`` ms of silence.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketpy.remoting.connection import Channel
from rocketpy.subscription import SubscriptionData

log = logging.getLogger("rocketpy.broker.clients")

MAX_GROUPS = 100_000
#: The ``version`` rocketpy's SDK puts in its heartbeats (``rocketpy-0.1.0``).
ROCKETPY_VERSION_PREFIX = "rocketpy"
MAX_CLIENTS_PER_GROUP = 10_000


def wall_clock_ms() -> int:
    """Wall-clock milliseconds: the clock of heartbeat times (``last_update_ms``)."""
    return int(time.time() * 1000)


@dataclass(slots=True)
class ClientChannelInfo:
    """A client's connection within a group.

    Attributes:
        language: the client's language (RocketMQ's LanguageCode name; rocketpy's SDK says PYTHON).
        version: its version text (``rocketpy-0.1.0``; ``""``: it did not say).
    """

    channel: Channel
    client_id: str
    last_update_ms: int
    language: str = ""
    version: str = ""

    @property
    def answers_calls(self) -> bool:
        """True for rocketpy's SDK, which answers the broker's calls (RocketMQ's clients answer
        RESET_CONSUMER_CLIENT_OFFSET with nothing)."""
        return self.version.startswith(ROCKETPY_VERSION_PREFIX)


@dataclass(slots=True)
class ConsumerGroupInfo:
    """One consumer group: its clients, subscriptions and consume settings."""

    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[str, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_ms: int = 0

    def client_ids(self) -> list[str]:
        """The group's client ids, sorted (what rebalancing expects)."""
        return sorted(self.channels)


class ConsumerManager:
    """Consumer groups (and producer groups) with liveness.

    Args:
        on_ids_changed: called with (group, list of channels) after the group's membership or
            subscriptions changed.
        channel_expired_timeout_ms: a client silent this long is removed.
    """

    def __init__(
        self,
        on_ids_changed: Callable[[str, list[Channel]], None],
        channel_expired_timeout_ms: int,
    ) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.producers: dict[str, dict[str, ClientChannelInfo]] = {}
        self._on_ids_changed = on_ids_changed
        self.channel_expired_timeout_ms = channel_expired_timeout_ms

    def _notify(self, info: ConsumerGroupInfo) -> None:
        self._on_ids_changed(info.group, [c.channel for c in info.channels.values()])

    def register_consumer(
        self,
        group: str,
        client: ClientChannelInfo,
        settings: dict[str, str],
        subscriptions: list[SubscriptionData],
        notify: bool = True,
    ) -> bool:
        """Add or refresh a consumer from a heartbeat; True when the group changed.

        ``settings`` holds consumeType, messageModel and consumeFromWhere (RocketMQ names). The
        group's channels are notified of a change unless ``notify`` is False.
        """
        info = self.groups.get(group)
        if info is None:
            if len(self.groups) >= MAX_GROUPS:
                raise OverflowError(f"this broker already tracks {MAX_GROUPS} consumer groups")
            info = self.groups[group] = ConsumerGroupInfo(group)
        info.consume_type = settings.get("consumeType", info.consume_type)
        info.message_model = settings.get("messageModel", info.message_model)
        info.consume_from_where = settings.get("consumeFromWhere", info.consume_from_where)
        info.last_update_ms = client.last_update_ms
        members_changed = self._update_channel(info, client)
        subs_changed = self._update_subscriptions(info, subscriptions)
        if members_changed or subs_changed:
            log.info("consumer group %s changed: clients=%s", group, info.client_ids())
            if notify:
                self._notify(info)
            return True
        return False

    @staticmethod
    def _update_channel(info: ConsumerGroupInfo, client: ClientChannelInfo) -> bool:
        old = info.channels.get(client.client_id)
        if old is None:
            if len(info.channels) >= MAX_CLIENTS_PER_GROUP:
                raise OverflowError(f"group {info.group} already has {MAX_CLIENTS_PER_GROUP} clients")
            info.channels[client.client_id] = client
            return True
        if old.channel is not client.channel:
            old.channel = client.channel
        old.last_update_ms = client.last_update_ms
        old.language, old.version = client.language, client.version
        return False

    @staticmethod
    def _update_subscriptions(info: ConsumerGroupInfo, subs: list[SubscriptionData]) -> bool:
        new = {s.topic: s for s in subs}
        changed = set(new) != set(info.subscriptions)
        for topic, sd in new.items():
            old = info.subscriptions.get(topic)
            if old is None or not old.same_as(sd):
                changed = True
                info.subscriptions[topic] = sd
            elif sd.sub_version > old.sub_version:
                old.sub_version = sd.sub_version
        for topic in set(info.subscriptions) - set(new):
            del info.subscriptions[topic]
        return changed

    def register_producer(self, group: str, client: ClientChannelInfo) -> None:
        """Add or refresh a producer from a heartbeat."""
        members = self.producers.setdefault(group, {})
        old = members.get(client.client_id)
        if old is None:
            if len(members) >= MAX_CLIENTS_PER_GROUP:
                raise OverflowError(f"producer group {group} already has {MAX_CLIENTS_PER_GROUP} clients")
            members[client.client_id] = client
        else:
            old.channel = client.channel
            old.last_update_ms = client.last_update_ms
            old.language, old.version = client.language, client.version

    def unregister_consumer(self, group: str, client_id: str) -> bool:
        """Remove a consumer (UNREGISTER_CLIENT); True when it was a member."""
        info = self.groups.get(group)
        if info is None or info.channels.pop(client_id, None) is None:
            return False
        self._after_removal(info)
        return True

    def unregister_producer(self, group: str, client_id: str) -> None:
        """Remove a producer (UNREGISTER_CLIENT)."""
        members = self.producers.get(group)
        if members is not None:
            members.pop(client_id, None)
            if not members:
                del self.producers[group]

    def _after_removal(self, info: ConsumerGroupInfo) -> None:
        log.info("consumer group %s lost a client: clients=%s", info.group, info.client_ids())
        if not info.channels:
            del self.groups[info.group]
        else:
            self._notify(info)

    def do_channel_close(self, channel: Channel) -> None:
        """Remove every client that used ``channel`` (connection closed)."""
        for info in list(self.groups.values()):
            gone = [cid for cid, c in info.channels.items() if c.channel is channel]
            for cid in gone:
                del info.channels[cid]
            if gone:
                self._after_removal(info)
        for group, members in list(self.producers.items()):
            for cid in [cid for cid, c in members.items() if c.channel is channel]:
                del members[cid]
            if not members:
                del self.producers[group]

    def scan_not_active(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove clients silent longer than the expiry; returns the removed (group, client id)."""
        removed: list[tuple[str, str]] = []
        deadline = now_ms - self.channel_expired_timeout_ms
        for info in list(self.groups.values()):
            gone = [cid for cid, c in info.channels.items() if c.last_update_ms < deadline]
            for cid in gone:
                del info.channels[cid]
                removed.append((info.group, cid))
            if gone:
                log.warning("consumer group %s: expired silent clients %s", info.group, gone)
                self._after_removal(info)
        for group, members in list(self.producers.items()):
            for cid in [cid for cid, c in members.items() if c.last_update_ms < deadline]:
                del members[cid]
            if not members:
                del self.producers[group]
        return removed

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        """The group's current subscription of ``topic`` from heartbeats, if any."""
        info = self.groups.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def client_ids(self, group: str) -> list[str] | None:
        """Sorted client ids of a group, or None when the group has no live consumer."""
        info = self.groups.get(group)
        return info.client_ids() if info is not None else None

    def clients_of(self, group: str) -> list[ClientChannelInfo]:
        """The live clients of a consumer group, by client id."""
        info = self.groups.get(group)
        return [info.channels[cid] for cid in sorted(info.channels)] if info is not None else []

    def channels_of(self, group: str) -> list[Channel]:
        """The live channels of a consumer group."""
        info = self.groups.get(group)
        return [c.channel for c in info.channels.values()] if info is not None else []

    def producer_channels_of(self, group: str) -> list[Channel]:
        """The live channels of a producer group (for transaction checks)."""
        return [c.channel for c in self.producers.get(group, {}).values()]
