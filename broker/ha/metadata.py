"""Broker tables a slave copies from its master (RocketMQ's ``SlaveSynchronize``), both ends.

Master end: GET_ALL_CONSUMER_OFFSET and GET_ALL_DELAY_OFFSET answers (the topic and subscription
group tables already have GET_ALL_TOPIC_CONFIG / GET_ALL_SUBSCRIPTIONGROUP_CONFIG). Slave end: every
``slaveSyncInterval`` ms (10 s by default) the four tables are fetched over the normal RPC from the
master's remoting address and replace the slave's own (then persisted), so a slave knows the
master's topics, consumer offsets, delay progress and groups: it can answer routes, offsets and
admin queries when the master is gone. A failed fetch is logged and retried at the next interval.
With ``auth`` set (ACL 2.0's users and ACLs, ``broker/auth_metadata.py``) the slave also copies
them (AUTH_LIST_USER and AUTH_LIST_ACL, signed as its inner-client user) and uses them at once, so a
slave authenticates the same users as its master.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from rocketpy.acl.auth_model import AuthDataError
from rocketpy.broker.auth_metadata import AuthMetadataManager
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.processors.body import decode_map, encode
from rocketpy.broker.schedule.offsets import DelayOffsetTable
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.errors import RemotingConnectError, RemotingTimeoutError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.body import decode_body
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.route import TopicConfig
from rocketpy.subscription_group import SubscriptionGroupConfig

log = logging.getLogger("rocketpy.broker.ha")

SYNC_CALL_TIMEOUT_S = 5.0


class MetadataProcessor:
    """The master's answers for the tables a slave copies."""

    def __init__(self, offsets: ConsumerOffsetManager, delay_offsets: DelayOffsetTable) -> None:
        self.offsets = offsets
        self.delay_offsets = delay_offsets

    def get_all_consumer_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_CONSUMER_OFFSET: the consumerOffset.json document."""
        return RemotingCommand.response(request, body=encode(self.offsets.snapshot(), request))

    def get_all_delay_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET: the delayOffset.json document."""
        return RemotingCommand.response(request, body=encode(self.delay_offsets.snapshot(), request))


class SlaveSynchronize:
    """Copies the master's tables into a slave's.

    Args:
        client: the broker's RemotingClient.
        master_addr: returns the master's remoting address when known.
        topics, offsets, delay_offsets, groups: the slave's tables.
    """

    def __init__(
        self,
        client: RemotingClient,
        master_addr: Callable[[], str | None],
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        delay_offsets: DelayOffsetTable,
        groups: SubscriptionGroupManager,
    ) -> None:
        self._client = client
        self._master_addr = master_addr
        self.topics = topics
        self.offsets = offsets
        self.delay_offsets = delay_offsets
        self.groups = groups
        self.last_sync_ok = False
        #: ACL 2.0's tables, copied too when set
        self.auth: AuthMetadataManager | None = None

    async def run_routine(self, interval_ms: Callable[[], int]) -> None:
        """Sync at once, then every ``interval_ms()`` until cancelled."""
        while True:
            await self.sync_all()
            await asyncio.sleep(interval_ms() / 1000.0)

    async def sync_all(self) -> bool:
        """Fetch and apply the four tables; False (logged) when the master is unknown or failed."""
        addr = self._master_addr()
        if not addr:
            return False
        try:
            topics = await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
            offsets = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
            delays = await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET)
            groups = await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        except (RemotingConnectError, RemotingTimeoutError, ValueError) as e:
            if self.last_sync_ok:
                log.warning("slave sync from master %s failed: %s", addr, e)
            self.last_sync_ok = False
            return False
        self._apply(topics, offsets, delays, groups)
        for table in (self.topics.file, self.offsets.file, self.delay_offsets.file, self.groups.file):
            await table.persist()
        if self.auth is not None:
            await self._sync_auth(addr, self.auth)
        self.last_sync_ok = True
        return True

    async def _sync_auth(self, addr: str, auth: AuthMetadataManager) -> None:
        """Copy the master's users and ACLs (a refusal or a bad document keeps the slave's own)."""
        try:
            users = await self._fetch_list(addr, RequestCode.AUTH_LIST_USER)
            acls = await self._fetch_list(addr, RequestCode.AUTH_LIST_ACL)
            if auth.replace_all({"users": users, "acls": acls}):
                await auth.file.persist()
        except (RemotingConnectError, RemotingTimeoutError, ValueError, AuthDataError) as e:
            log.warning("slave sync of users and ACLs from master %s failed: %s", addr, e)

    async def _fetch_list(self, addr: str, code: RequestCode) -> list[Any]:
        response = await self._client.invoke(addr, RemotingCommand.request(code), SYNC_CALL_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise ValueError(f"{code.name} answered {response.code}: {response.remark}")
        doc = decode_body(response.body, response.serialize_type, code.name) if response.body else []
        if not isinstance(doc, list):
            raise ValueError(f"{code.name} answered a {type(doc).__name__}, not a list")
        return doc

    async def _fetch(self, addr: str, code: RequestCode) -> dict[str, Any]:
        response = await self._client.invoke(addr, RemotingCommand.request(code), SYNC_CALL_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise ValueError(f"{code.name} answered {response.code}: {response.remark}")
        return decode_map(response, code.name)

    def _apply(self, topics: dict[str, Any], offsets: dict[str, Any], delays: dict[str, Any],
               groups: dict[str, Any]) -> None:  # fmt: skip
        table: dict[str, TopicConfig] = {}
        for name, d in (topics.get("topicConfigTable") or {}).items():
            tc = TopicConfig.from_wire(d)
            tc.topic_name = name
            table[name] = tc
        if table:
            self.topics.table = table
            self.topics.data_version = dict(topics.get("dataVersion") or self.topics.data_version)
            self.topics.file.mark_dirty()
        self.offsets.table = {
            key: {int(q): int(o) for q, o in queues.items()}
            for key, queues in (offsets.get("offsetTable") or {}).items()
        }
        self.offsets.file.mark_dirty()
        self.delay_offsets.table = {int(k): int(v) for k, v in (delays.get("offsetTable") or {}).items()}
        self.delay_offsets.file.mark_dirty()
        group_table = {
            name: SubscriptionGroupConfig.from_wire({**d, "groupName": name})
            for name, d in (groups.get("subscriptionGroupTable") or {}).items()
        }
        if group_table:
            self.groups.table = group_table
            self.groups.data_version = dict(groups.get("dataVersion") or self.groups.data_version)
            self.groups.file.mark_dirty()
