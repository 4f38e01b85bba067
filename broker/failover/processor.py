"""The controller-mode request codes a broker serves (``mqadmin getSyncStateSet``, ``getBrokerEpoch``,
``getControllerMetaData``, ``electMaster``, and the epoch entries a rejoining replica asks its master).

Each handler reads its header, asks the ``ReplicasManager`` and answers a map body (msgpack or JSON,
as the request came). A broker not in controller mode answers every code with a remark saying so;
etcd that does not answer is SYSTEM_ERROR with the reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from rocketpy.broker.failover.etcd import EtcdError, EtcdUnavailable
from rocketpy.broker.failover.replicas import ReplicasManager
from rocketpy.broker.processors.body import encode
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.controller import BrokerNameRequestHeader, ElectMasterRequestHeader
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel

OFF = "controller mode is off on this broker (enableControllerMode=false); ask a broker in controller mode"


class ControllerProcessor:
    """Handlers of the controller codes.

    Args:
        manager: the broker's ``ReplicasManager``, or None when controller mode is off.
    """

    def __init__(self, manager: ReplicasManager | None) -> None:
        self.manager = manager

    def _off(self, request: RemotingCommand) -> RemotingCommand | None:
        if self.manager is None:
            return RemotingCommand.response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, OFF)
        return None

    async def _answer(self, request: RemotingCommand, call: Callable[[], Awaitable[Any]]) -> RemotingCommand:
        try:
            doc = await call()
        except (EtcdUnavailable, EtcdError) as e:
            return RemotingCommand.response(request, ResponseCode.SYSTEM_ERROR, f"etcd: {e}")
        except ValueError as e:
            return RemotingCommand.response(request, ResponseCode.SYSTEM_ERROR, str(e))
        return RemotingCommand.response(request, body=encode(doc, request))

    def get_broker_epoch_cache(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE: this broker's epoch entries and log end."""
        off = self._off(request)
        if off is not None or self.manager is None:
            return off  # type: ignore[return-value]
        return RemotingCommand.response(request, body=encode(self.manager.epoch_cache(), request))

    async def get_sync_state_data(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """CONTROLLER_GET_SYNC_STATE_DATA: a group's master, epoch and SyncStateSet from etcd."""
        manager = self.manager
        if manager is None:
            return self._off(request)  # type: ignore[return-value]
        h = BrokerNameRequestHeader.from_ext(request.ext)
        return await self._answer(request, lambda: manager.group_state(h.broker_name))

    async def get_metadata(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """CONTROLLER_GET_METADATA_INFO: the etcd cluster behind controller mode."""
        manager = self.manager
        if manager is None:
            return self._off(request)  # type: ignore[return-value]
        return await self._answer(request, manager.controller_metadata)

    def notify_role_changed(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """NOTIFY_BROKER_ROLE_CHANGED: a master handed this group over; read etcd now."""
        if self.manager is None:
            return self._off(request)  # type: ignore[return-value]
        self.manager.role_changed()
        return RemotingCommand.response(request)

    async def elect_master(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """CONTROLLER_ELECT_MASTER: hand this broker's group to another replica (graceful switchover)."""
        manager = self.manager
        if manager is None:
            return self._off(request)  # type: ignore[return-value]
        h = ElectMasterRequestHeader.from_ext(request.ext)
        if h.broker_name != manager.broker_config.broker_name:
            return RemotingCommand.response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"this broker belongs to {manager.broker_config.broker_name}, not {h.broker_name}",
            )

        async def switch() -> dict[str, Any]:
            return {"result": await manager.switch_over(h.broker_id)}

        return await self._answer(request, switch)
