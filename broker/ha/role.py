"""What a broker's ``brokerRole`` adds to it: the replication side of one broker, in one object.

Owns the role-specific wiring the controller asks for, so the controller stays role-free:
- a master (ASYNC_MASTER / SYNC_MASTER) runs the ``HAService`` on ``haListenPort`` (default
  listenPort + 1; 0 picks a free port, logged as ``HA service ... listening on HOST:PORT``),
  registers its HA address with the NameServers, and answers GET_ALL_CONSUMER_OFFSET /
  GET_ALL_DELAY_OFFSET for its slaves;
- a SYNC_MASTER send (``replica_future``) is acknowledged only once a slave reported its bytes:
  SLAVE_NOT_AVAILABLE when no slave is connected within ``haMaxGapNotInSync``, FLUSH_SLAVE_TIMEOUT
  after ``syncFlushTimeout`` (both: the message is stored on the master);
- a SLAVE refuses sends (SERVICE_NOT_AVAILABLE with a remark), runs the ``HAClient`` towards the
  master's HA address (``haMasterAddress`` or the NameServer's answer) and ``SlaveSynchronize``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from rocketpy.broker.ha.client import HAClient
from rocketpy.broker.ha.metadata import MetadataProcessor, SlaveSynchronize
from rocketpy.broker.ha.reads import physical_memory_bytes, slave_read_rule
from rocketpy.broker.ha.service import HAService
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.schedule.offsets import DelayOffsetTable
from rocketpy.broker.store import PutMessageResult, PutMessageStatus, Store
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig, BrokerRole, StoreConfig
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.namesrv import RegisterBrokerResponseHeader
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import Handler

log = logging.getLogger("rocketpy.broker.ha")

SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


class Replication:
    """The replication side of one broker (master or slave).

    Args:
        broker_config, store_config: the broker's settings.
        store: its store.
        client: its RemotingClient (slave sync calls).
        topics, offsets, delay_offsets, groups: its tables (a slave's are overwritten from the master).
    """

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
        self.broker_config = broker_config
        self.store_config = store_config
        self.store = store
        self.is_slave = store_config.broker_role is BrokerRole.SLAVE
        self.is_sync_master = store_config.broker_role is BrokerRole.SYNC_MASTER
        self.metadata = MetadataProcessor(offsets, delay_offsets)
        self.service: HAService | None = None
        self.client: HAClient | None = None
        self.sync: SlaveSynchronize | None = None
        self.ha_addr = ""
        # what the NameServers answered REGISTER_BROKER (set by the controller's registrar hook)
        self.master_addr: str | None = None
        self.master_ha_addr: str | None = None
        if self.is_slave:
            self.client = HAClient(store, store_config, broker_config.broker_name, broker_config.broker_id,
                                   self._master_ha_address)  # fmt: skip
            self.sync = SlaveSynchronize(
                client, lambda: self.master_addr, topics, offsets, delay_offsets, groups
            )
        else:
            self.service = HAService(store, store_config, broker_config.broker_name)

    def _master_ha_address(self) -> str | None:
        return self.store_config.ha_master_address or self.master_ha_addr

    def update_handlers(self, table: dict[RequestCode, Handler]) -> None:
        """Add the role's request handlers to the broker's table (a slave refuses sends)."""
        table[RequestCode.GET_ALL_CONSUMER_OFFSET] = self.metadata.get_all_consumer_offset
        table[RequestCode.GET_ALL_DELAY_OFFSET] = self.metadata.get_all_delay_offset
        if self.is_slave:
            for code in SEND_CODES:
                table[code] = self.refuse_send

    def pull_suggestion(self) -> Callable[[str, int, int], int] | None:
        """The suggestWhichBrokerId rule for pulls (None: always the master, the pull's default)."""
        if not self.broker_config.slave_read_enable:
            return None
        ratio = self.broker_config.access_message_in_memory_max_ratio
        return slave_read_rule(self.store, ratio, physical_memory_bytes())

    def refuse_send(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """A slave's answer to a send."""
        bc = self.broker_config
        return RemotingCommand.response(
            request,
            ResponseCode.SERVICE_NOT_AVAILABLE,
            f"the broker[{bc.broker_name}] is a slave (brokerId {bc.broker_id}) and does not accept "
            "messages; send to its master (brokerId 0)",
        )

    async def start(self, bind_address: str, advertised_ip: str, listen_port: int) -> str:
        """Start the HA port (master) and return its advertised address ("" for a slave)."""
        if self.service is None:
            return ""
        port = self.store_config.ha_listen_port
        if port is None:
            port = listen_port + 1 if self.broker_config.listen_port else 0
        bound = await self.service.start(bind_address, port)
        self.ha_addr = f"{advertised_ip}:{bound}"
        return self.ha_addr

    def routines(self) -> list[Coroutine[Any, Any, None]]:
        """The background loops of the role (the slave's replication and table sync)."""
        if self.client is None or self.sync is None:
            return []
        interval: Callable[[], int] = lambda: self.broker_config.slave_sync_interval  # noqa: E731
        return [self.client.run_routine(), self.sync.run_routine(interval)]

    def on_registered(self, answer: RegisterBrokerResponseHeader) -> None:
        """Learn the master's addresses from a REGISTER_BROKER answer (wakes the HA client)."""
        master, ha = answer.master_addr or None, answer.ha_server_addr or None
        changed = (master, ha) != (self.master_addr, self.master_ha_addr)
        if master:
            self.master_addr = master
        if ha:
            self.master_ha_addr = ha
        if changed and self.client is not None and ha:
            self.client.wake.set()

    def replica_future(self, result: PutMessageResult, wait: bool) -> asyncio.Future[bool] | None:
        """SYNC_MASTER: a future of a slave holding a stored send's bytes (False: timed out), or None
        when there is nothing to wait for (the status says SLAVE_NOT_AVAILABLE when no slave is)."""
        svc = self.service
        if svc is None or not wait or result.status is not PutMessageStatus.PUT_OK:
            return None
        end = result.wrote_offset + result.wrote_bytes
        if not svc.is_slave_ok(end):
            result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            return None
        return svc.slave_future(end, self.store_config.sync_flush_timeout / 1000.0)

    def runtime_info(self) -> dict[str, str]:
        """Replication figures for GET_BROKER_RUNTIME_INFO (``haStatus`` is JSON)."""
        info = {"brokerRole": self.store_config.broker_role.value}
        if self.service is not None:
            info["haServerAddr"] = self.ha_addr
            info["haStatus"] = json.dumps(self.service.status())
        if self.client is not None:
            info["masterAddr"] = self.master_addr or ""
            info["haStatus"] = json.dumps(self.client.status())
        return info

    async def shutdown(self) -> None:
        """Close the HA port and its sessions (routines are cancelled by the controller)."""
        if self.service is not None:
            await self.service.shutdown()
