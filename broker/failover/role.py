"""Replication in controller mode: the HA port always open, the HA client started and stopped by role.

Owns what ``broker/ha/role.py``'s ``Replication`` owns for a plain broker, but for a role that
changes at run time (``ReplicasManager`` decides): every broker listens on its HA port from boot
(its address is published in etcd), refusing slaves while it is not master; a follower runs an
``HAClient`` towards the master etcd names and copies the master's tables (``SlaveSynchronize``);
a replica that reconnects replaces its own stale session. SYNC waits and send refusals are the
manager's (``ack_future``, the send processor's gates), so ``is_sync_master`` stays False here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from rocketpy.broker.ha.client import HAClient
from rocketpy.broker.ha.metadata import SlaveSynchronize
from rocketpy.broker.ha.role import Replication
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.schedule.offsets import DelayOffsetTable
from rocketpy.broker.store import Store
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.protocol.headers.namesrv import RegisterBrokerResponseHeader
from rocketpy.remoting.client import RemotingClient

log = logging.getLogger("rocketpy.broker.failover")

NOT_MASTER = "this broker is not its group's master now (controller mode); the master is named in etcd"


class ControllerReplication(Replication):
    """The replication side of a broker in controller mode (same interface as ``Replication``)."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        store: Store,
        client: RemotingClient,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        delay_offsets: DelayOffsetTable,
        groups: SubscriptionGroupManager,
    ) -> None:
        super().__init__(broker_config, store_config, store, client, topics, offsets, delay_offsets, groups)
        assert self.service is not None
        self.is_sync_master = False
        self.serving = False
        self.service.refusal = lambda: None if self.serving else NOT_MASTER
        self.service.replace_same_id = True
        self._remoting = client
        self._tables = (topics, offsets, delay_offsets, groups)
        self._follow_tasks: list[asyncio.Task[None]] = []

    def routines(self) -> list[Coroutine[Any, Any, None]]:
        """None: the follower's loops are started and stopped by role (``follow``)."""
        return []

    def on_registered(self, answer: RegisterBrokerResponseHeader) -> None:
        """Ignored: the master's addresses come from etcd, not the NameServers."""

    def serve_as_master(self) -> None:
        """Accept slaves on the HA port."""
        self.serving = True

    def stop_serving(self) -> None:
        """Refuse slaves and drop the connected ones."""
        self.serving = False
        assert self.service is not None
        self.service.abort_sessions()

    def follow(self, broker_id: int, master_addr: str, master_ha_addr: str) -> None:
        """Replicate from ``master_ha_addr`` and copy the tables of ``master_addr``."""
        assert not self._follow_tasks, "stop following first"
        self.master_addr, self.master_ha_addr = master_addr, master_ha_addr
        self.client = HAClient(
            self.store,
            self.store_config,
            self.broker_config.broker_name,
            broker_id,
            lambda: self.master_ha_addr,
        )
        self.sync = SlaveSynchronize(self._remoting, lambda: self.master_addr, *self._tables)
        interval = self.broker_config.slave_sync_interval
        loop = asyncio.get_running_loop()
        self._follow_tasks = [
            loop.create_task(self.client.run_routine(), name="rocketpy-ha-follow"),
            loop.create_task(self.sync.run_routine(lambda: interval), name="rocketpy-slave-sync"),
        ]

    async def stop_following(self) -> None:
        """Stop replicating (an append in progress completes first: cancellation waits on it)."""
        tasks, self._follow_tasks = self._follow_tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.client = None
        self.sync = None

    def runtime_info(self) -> dict[str, str]:
        """As a plain broker's, with the role this broker has now."""
        info = super().runtime_info()
        info["brokerRole"] = "MASTER" if self.serving else "SLAVE"
        return info

    async def shutdown(self) -> None:
        """Stop following and close the HA port."""
        await self.stop_following()
        await super().shutdown()
