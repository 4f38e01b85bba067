"""``Admin``'s group operations behind mqadmin's consumerConnection, deleteSubGroup,
getConsumerConfig and cloneGroupOffset.

Owns merging a group's connections and settings across brokers (GET_CONSUMER_CONNECTION_LIST),
dropping a group's config (DELETE_SUBSCRIPTIONGROUP) and copying one group's committed offsets of a
topic to another (GET_CONSUME_STATS, then UPDATE_CONSUMER_OFFSET on each queue's master).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketpy.client.answers import check, unpack_body
from rocketpy.errors import MQClientError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.admin import DeleteSubscriptionGroupRequestHeader
from rocketpy.protocol.headers.client import ConsumerGroupRequestHeader
from rocketpy.protocol.headers.offset import UpdateConsumerOffsetRequestHeader
from rocketpy.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rocketpy.client.admin import Admin


async def consumer_connection(admin: Admin, group: str) -> dict[str, Any]:
    """The group's live clients and its settings as its brokers know them: ``connectionSet`` (one
    row per client id), ``subscriptionTable``, ``consumeType``, ``messageModel``, ``consumeFromWhere``.

    Raises:
        MQClientError: no consumer of the group is online anywhere.
    """
    from rocketpy.client.admin import _reader_addr

    info = await admin.cluster_info()
    merged: dict[str, Any] = {"connectionSet": {}, "subscriptionTable": {}}
    for _name, bd in sorted(info.broker_addr_table.items()):
        addr = _reader_addr(bd.broker_addrs)
        if not addr:
            continue
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_CONNECTION_LIST, ConsumerGroupRequestHeader.pack(group)
        )
        resp = await admin.instance.remoting.invoke(addr, request, admin.timeout)
        if resp.code == ResponseCode.CONSUMER_NOT_ONLINE:
            continue
        body = unpack_body(check(resp, addr)) or {}
        for c in body.get("connectionSet") or ():
            merged["connectionSet"].setdefault(str(c["clientId"]), c)
        merged["subscriptionTable"].update(body.get("subscriptionTable") or {})
        for key in ("consumeType", "messageModel", "consumeFromWhere"):
            merged.setdefault(key, body.get(key))
    if not merged["connectionSet"]:
        raise MQClientError(f"no consumer of group {group!r} is online (CONSUMER_NOT_ONLINE)")
    merged["connectionSet"] = [merged["connectionSet"][k] for k in sorted(merged["connectionSet"])]
    return merged


async def delete_subscription_group(
    admin: Admin, group: str, cluster: str | None, broker_addr: str | None, clean_offset: bool
) -> list[str]:
    """Drop ``group``'s config (and with ``clean_offset`` its committed offsets) on every master of
    ``cluster`` or on one broker; the addresses that did."""
    ext = DeleteSubscriptionGroupRequestHeader(group, clean_offset).to_ext()
    addrs = await admin._targets(cluster, broker_addr)
    for addr in addrs:
        await admin._invoke(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)
    return addrs


async def consumer_configs(admin: Admin, group: str) -> dict[str, dict[str, Any]]:
    """Each master's config of ``group`` (wire names): broker address -> config (brokers that do not
    know the group are left out)."""
    info = await admin.cluster_info()
    out: dict[str, dict[str, Any]] = {}
    for _name, bd in sorted(info.broker_addr_table.items()):
        addr = bd.master_addr()
        if not addr:
            continue
        body = unpack_body(await admin._invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)) or {}
        cfg = (body.get("subscriptionGroupTable") or {}).get(group)
        if cfg is not None:
            out[addr] = dict(cfg)
    return out


async def clone_group_offset(admin: Admin, src: str, dest: str, topic: str) -> list[dict[str, Any]]:
    """Give ``dest`` the committed offsets ``src`` has on every queue of ``topic``; the rows copied
    (``mq``, ``offset``). Queues ``src`` never committed are left as they are."""
    rows = await admin.consumer_progress(src, topic)
    route = await admin.topic_route(topic)
    masters = {bd.broker_name: bd.master_addr() for bd in route.broker_datas}
    copied = []
    for r in rows:
        mq, offset = r["mq"], r["consumer_offset"]
        addr = masters.get(mq.broker_name)
        if offset < 0 or not addr:
            continue
        ext = UpdateConsumerOffsetRequestHeader(dest, mq.topic, mq.queue_id, offset).to_ext()
        await admin._invoke(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
        copied.append({"mq": mq, "offset": offset})
    return copied


async def broker_name_of(admin: Admin, broker_addr: str) -> str:
    """The broker name whose member listens at ``broker_addr``.

    Raises:
        MQClientError: no broker of the cluster has that address.
    """
    info = await admin.cluster_info()
    for name, bd in info.broker_addr_table.items():
        if broker_addr in bd.broker_addrs.values():
            return name
    raise MQClientError(f"no broker listens at {broker_addr} (see mqadmin clusterList)")
