"""NamesrvController: builds the NameServer (route table, KV store, RPC server) and runs its routines.

Lifecycle: ``start()`` loads the KV file (in a thread), registers the processors, binds the
server (and the ``/metrics`` endpoint when ``metricsPort`` is set) and starts the liveness scan;
``shutdown(timeout)`` stops the scan, the metrics endpoint and the server.
Liveness: every registration refreshes a broker; the scan runs every
``scanNotActiveBrokerInterval`` ms and evicts brokers silent for ``brokerChannelExpiredTime`` ms
(closing their connection); a broker whose connection closes is evicted at once.
"""

from __future__ import annotations

import asyncio
import logging
import time

from rocketpy.acl.guard import AclGuard
from rocketpy.acl.resources import NAMESRV_CHECKED_CODES
from rocketpy.config import NamesrvConfig, advertised_host
from rocketpy.metrics import MetricsServer
from rocketpy.nameserver.kv_config import KVConfigManager
from rocketpy.nameserver.metrics import NamesrvCollector
from rocketpy.nameserver.processors import NamesrvProcessors
from rocketpy.nameserver.route_info import RouteInfoManager
from rocketpy.remoting.server import Channel, RemotingServer

log = logging.getLogger("rocketpy.namesrv")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class NamesrvController:
    """One NameServer.

    Args:
        config: the NameServer settings.

    Attributes:
        route_info: the route tables.
        kv: the KV config store.
        server: the RPC server.
    """

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.route_info = RouteInfoManager(_now_ms)
        self.kv = KVConfigManager(config.kv_config_path)
        self.server = RemotingServer(
            config.bind_address, config.listen_port, name="namesrv", max_frame_bytes=config.max_frame_bytes
        )
        self._scan_task: asyncio.Task[None] | None = None
        self.metrics: MetricsServer | None = None
        if config.metrics_port:
            collector = NamesrvCollector(self.route_info, self.server)
            self.metrics = MetricsServer.for_daemon(
                collector, config.bind_address, config.metrics_port, "namesrv"
            )
        self.acl: AclGuard | None = None

    async def start(self) -> tuple[str, int]:
        """Load state, bind and start serving.

        Returns:
            (the host clients should use, the bound port).

        Raises:
            KVConfigError: the KV file is unreadable.
            RemotingBindError: the port cannot be bound.
            AclFileError: ``aclEnable`` and the ACL file is missing or malformed.
        """
        self.acl = await AclGuard.install(self.config, self.server, NAMESRV_CHECKED_CODES, "namesrv")
        await self.kv.load()
        NamesrvProcessors(self.route_info, self.kv, self.config).register_all(self.server)
        self.server.add_close_listener(self._on_channel_closed)
        host, port = await self.server.start()
        if self.metrics is not None:
            await self.metrics.start()
        self._scan_task = asyncio.create_task(self._scan_routine(), name="namesrv-scan-not-active-broker")
        self._scan_task.add_done_callback(self._scan_done)
        return advertised_host(host), port

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (staged stop budget)
        """Stop the scan and the server (waiting up to ``timeout`` s for requests in progress)."""
        if self._scan_task is not None:
            self._scan_task.cancel()
            await asyncio.gather(self._scan_task, return_exceptions=True)
            self._scan_task = None
        if self.metrics is not None:
            await self.metrics.shutdown()
        if self.acl is not None:
            await self.acl.stop()
        await self.server.shutdown(timeout)

    def _on_channel_closed(self, channel: Channel) -> None:
        self.route_info.on_channel_closed(channel)

    async def _scan_routine(self) -> None:
        interval_s = self.config.scan_not_active_broker_interval / 1000
        while True:
            await asyncio.sleep(interval_s)
            for info in self.route_info.scan_not_active_brokers(self.config.broker_channel_expired_time):
                if isinstance(info.channel, Channel) and not info.channel.closed:
                    info.channel.close(f"broker {info.broker_addr} expired: no registration in time")

    def _scan_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.critical("the broker liveness scan stopped", exc_info=task.exception())
