"""Controller mode for operators: ``Admin.get_sync_state_set``, ``get_broker_epoch``,
``get_controller_metadata`` and ``elect_master`` (``mqadmin getSyncStateSet``, ``getBrokerEpoch``,
``getControllerMetaData``, ``electMaster``).

Owns which broker each call goes to. The coordinator is etcd, which the SDK never talks to: the
brokers in controller mode read it for the caller. A group's SyncStateSet and the coordinator's
metadata come from the first broker (master first) that answers; a group's epochs come from each
of its brokers; a switchover goes to the group's current master, which hands over gracefully.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketpy.errors import MQBrokerError, MQClientError, RemotingConnectError, RemotingTimeoutError
from rocketpy.protocol.codes import RequestCode
from rocketpy.protocol.headers.controller import BrokerNameRequestHeader, ElectMasterRequestHeader

if TYPE_CHECKING:
    from rocketpy.client.admin import Admin

#: A switchover waits for the new master to catch up (the broker's own bound is 10 s).
ELECT_TIMEOUT_S = 15.0


async def group_members(admin: Admin, broker_name: str) -> dict[int, str]:
    """brokerId -> address of ``broker_name``'s brokers, from the NameServer.

    Raises:
        MQClientError: the NameServer knows no such broker group.
    """
    info = await admin.cluster_info()
    bd = info.broker_addr_table.get(broker_name)
    if bd is None or not bd.broker_addrs:
        known = ", ".join(sorted(info.broker_addr_table)) or "none"
        raise MQClientError(f"broker group {broker_name!r} not found; known: {known}")
    return dict(sorted(bd.broker_addrs.items()))


async def _first_answer(
    admin: Admin, addrs: list[str], code: int, ext: dict[str, Any] | None
) -> dict[str, Any]:
    errors: list[str] = []
    for addr in addrs:
        try:
            return await admin.call_map(addr, code, ext)
        except (MQBrokerError, RemotingConnectError, RemotingTimeoutError) as e:
            errors.append(f"{addr}: {e}")
    raise MQClientError(f"no broker answered: {'; '.join(errors) or 'no broker registered'}")


async def get_sync_state_set(admin: Admin, broker_name: str) -> dict[str, Any]:
    """A group's master, epoch, SyncStateSet and live replicas (as etcd holds them)."""
    members = await group_members(admin, broker_name)
    ext = BrokerNameRequestHeader(broker_name=broker_name).to_ext()
    return await _first_answer(admin, list(members.values()), RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, ext)


async def get_broker_epoch(admin: Admin, broker_name: str) -> list[dict[str, Any]]:
    """Each broker of the group: its role, epoch entries ``[[epoch, startOffset], ...]`` and log end."""
    out = []
    for broker_id, addr in (await group_members(admin, broker_name)).items():
        try:
            doc = await admin.call_map(addr, RequestCode.GET_BROKER_EPOCH_CACHE, None)
        except (MQBrokerError, RemotingConnectError, RemotingTimeoutError) as e:
            doc = {"error": str(e)}
        out.append({"addr": addr, "routeBrokerId": broker_id, **doc})
    return out


async def get_controller_metadata(admin: Admin) -> dict[str, Any]:
    """The etcd cluster behind controller mode, as the first broker in controller mode sees it."""
    info = await admin.cluster_info()
    addrs = [a for bd in info.broker_addr_table.values() for _, a in sorted(bd.broker_addrs.items())]
    return await _first_answer(admin, addrs, RequestCode.CONTROLLER_GET_METADATA_INFO, None)


async def elect_master(admin: Admin, broker_name: str, broker_id: int) -> dict[str, Any]:
    """Hand ``broker_name``'s group to ``broker_id`` (its controller-assigned id), gracefully.

    Raises:
        MQClientError: the group has no master now.
        MQBrokerError: the master refused (the remark says why: not in sync, not alive, ...).
    """
    master = (await group_members(admin, broker_name)).get(0)
    if master is None:
        raise MQClientError(f"broker group {broker_name!r} has no master now; it elects one by itself")
    ext = ElectMasterRequestHeader(broker_name=broker_name, broker_id=broker_id).to_ext()
    return await admin.call_map(master, RequestCode.CONTROLLER_ELECT_MASTER, ext, ELECT_TIMEOUT_S)
