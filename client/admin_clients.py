"""``Admin``'s calls that reach a group's live clients through the brokers (RocketMQ's Broker2Client).

Owns resetting a group's offsets while its consumers run (INVOKE_BROKER_TO_RESET_OFFSET on every
master of the topic: each tells the group's clients, RESET_CONSUMER_CLIENT_OFFSET, then commits),
the offsets the clients hold (INVOKE_BROKER_TO_GET_CONSUMER_STATUS), one client's running info
(GET_CONSUMER_RUNNING_INFO) and a stored message run on a chosen client (CONSUME_MESSAGE_DIRECTLY),
and a producer group's connections. Every client is reported: one that did not answer within the
call's budget as ``NO_ANSWER`` ("client did not answer"), the others with what they said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketpy.client.answers import check, unpack_body
from rocketpy.errors import MQBrokerError, MQClientError
from rocketpy.message import MessageQueue
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.clients import (
    MAX_CLIENT_CALL_TIMEOUT_MS,
    ConsumeMessageDirectlyRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    ProducerGroupRequestHeader,
    ResetOffsetRequestHeader,
    read_offset_rows,
)
from rocketpy.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rocketpy.client.admin import Admin

#: Of the admin's per-request timeout, what the broker keeps for itself (its answer must arrive).
BROKER_MARGIN_S = 1.0


def client_budget_ms(admin: Admin) -> int:
    """How long a broker may wait for the clients: the admin's timeout less the broker's margin."""
    return max(100, min(MAX_CLIENT_CALL_TIMEOUT_MS, int((admin.timeout - BROKER_MARGIN_S) * 1000)))


async def _masters_of(admin: Admin, topic: str) -> list[tuple[str, str]]:
    route = await admin.topic_route(topic)
    return sorted((bd.broker_name, a) for bd in route.broker_datas if (a := bd.master_addr()))


async def _call(admin: Admin, addr: str, code: int, ext: dict[str, Any]) -> Any:
    resp = await admin.instance.remoting.invoke(addr, RemotingCommand.request(code, ext), admin.timeout)
    return unpack_body(check(resp, addr)) or {}


async def reset_offset(
    admin: Admin, group: str, topic: str, timestamp_ms: int, *, force: bool = True
) -> dict[str, Any]:
    """Move ``group``'s offsets of ``topic`` to the first message stored at ``timestamp_ms`` (-1: each
    queue's end) on every master of the topic, live consumers included.

    Returns:
        ``{"offsets": [(MessageQueue, offset)], "clients": [{"clientId", "clientAddr", "broker",
        "result", ...}]}`` (``result`` "OK", ``NO_ANSWER`` or what went wrong).
    """
    ext = ResetOffsetRequestHeader(topic, group, timestamp_ms, force, client_budget_ms(admin)).to_ext()
    offsets: list[tuple[MessageQueue, int]] = []
    clients: list[dict[str, Any]] = []
    for name, addr in await _masters_of(admin, topic):
        body = await _call(admin, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
        try:
            offsets += sorted(read_offset_rows(body.get("offsetTable"), "offsetTable").items())
        except ValueError as e:
            raise MQClientError(f"the answer of {addr} to the reset is malformed: {e}") from None
        clients += [{**c, "broker": name} for c in body.get("clients") or ()]
    return {"offsets": offsets, "clients": clients}


async def consumer_status(
    admin: Admin, group: str, topic: str, client_id: str | None = None
) -> list[dict[str, Any]]:
    """The offsets each live client of ``group`` holds for ``topic``, per broker of the topic:
    ``[{"clientId", "broker", "result", "offsets": {MessageQueue: offset}}]``."""
    ext = GetConsumerStatusRequestHeader(topic, group, client_id, client_budget_ms(admin)).to_ext()
    out: list[dict[str, Any]] = []
    for name, addr in await _masters_of(admin, topic):
        body = await _call(admin, addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, ext)
        for row in body.get("consumerTable") or ():
            held = read_offset_rows(row.get("messageQueueTable") or [], "messageQueueTable")
            out.append({**{k: v for k, v in row.items() if k != "messageQueueTable"}, "broker": name,
                        "offsets": {mq: o for mq, o in held.items() if mq.broker_name == name}})  # fmt: skip
    return out


async def _client_brokers(admin: Admin, group: str, client_id: str) -> list[str]:
    """The brokers ``client_id`` of ``group`` is connected to (where to ask for it)."""
    from rocketpy.client.admin import _reader_addr

    conns = await admin.consumer_connections(group)
    info = await admin.cluster_info()
    for conn in conns:
        if conn["clientId"] == client_id:
            bds = (info.broker_addr_table.get(n) for n in conn["brokers"])
            return [a for bd in bds if bd is not None and (a := _reader_addr(bd.broker_addrs))]
    known = ", ".join(c["clientId"] for c in conns) or "none online"
    raise MQClientError(
        f"client {client_id!r} is not a live consumer of group {group!r} (its clients: {known})"
    )


async def consumer_running_info(
    admin: Admin, group: str, client_id: str, jstack: bool = False
) -> dict[str, Any]:
    """GET_CONSUMER_RUNNING_INFO of one client (RocketMQ's ConsumerRunningInfo, decoded).

    Raises:
        MQClientError: the client is not online, or did not answer.
    """
    ext = GetConsumerRunningInfoRequestHeader(group, client_id, jstack, client_budget_ms(admin)).to_ext()
    last: Exception | None = None
    for addr in await _client_brokers(admin, group, client_id):
        try:
            return dict(await _call(admin, addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext))
        except MQBrokerError as e:
            if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise MQClientError(str(e.remark or e)) from None
            last = e
    raise MQClientError(f"no broker reaches client {client_id} of group {group}: {last}")


async def _stored_id(admin: Admin, msg_id: str, topic: str | None) -> str:
    """The offset msg id of ``msg_id``: a unique key (``SendResult.msg_id``) of ``topic`` when one
    matches (both are 32 hex digits), else ``msg_id`` read as an offset msg id (RocketMQ's order)."""
    if topic:
        for m in await admin.query_msg_by_key(topic, msg_id):
            if m.unique_key == msg_id:
                return m.offset_msg_id
    try:
        decode_offset_msg_id(msg_id)
    except ValueError:
        where = f"in topic {topic!r}" if topic else "(give its topic to find it by its unique key)"
        raise MQClientError(f"no message with id {msg_id!r} {where}") from None
    return msg_id


async def consume_message_directly(
    admin: Admin, group: str, client_id: str, msg_id: str, topic: str | None = None
) -> dict[str, Any]:
    """Run one stored message through ``client_id``'s listener (CONSUME_MESSAGE_DIRECTLY); its
    ConsumeMessageDirectlyResult (``consumeResult``, ``remark``, ``spentTimeMills``)."""
    offset_id = await _stored_id(admin, msg_id, topic)
    ip, port, _ = decode_offset_msg_id(offset_id)
    ext = ConsumeMessageDirectlyRequestHeader(
        group, client_id, offset_id, topic=topic, timeout_ms=client_budget_ms(admin)
    ).to_ext()
    try:
        return dict(await _call(admin, f"{ip}:{port}", RequestCode.CONSUME_MESSAGE_DIRECTLY, ext))
    except MQBrokerError as e:
        raise MQClientError(str(e.remark or e)) from None


async def producer_connections(admin: Admin, group: str) -> list[dict[str, Any]]:
    """GET_PRODUCER_CONNECTION_LIST of every master: the group's live producers, one row per client
    id (``clientId``, ``clientAddr``, ``language``, ``versionDesc``, ``brokers``), sorted."""
    info = await admin.cluster_info()
    found: dict[str, dict[str, Any]] = {}
    for name, bd in sorted(info.broker_addr_table.items()):
        addr = bd.master_addr()
        if not addr:
            continue
        resp = await admin.instance.remoting.invoke(
            addr,
            RemotingCommand.request(
                RequestCode.GET_PRODUCER_CONNECTION_LIST, ProducerGroupRequestHeader(group).to_ext()
            ),
            admin.timeout,
        )
        if resp.code != ResponseCode.SUCCESS:
            continue  # no producer of the group there
        for c in (unpack_body(resp) or {}).get("connectionSet") or ():
            found.setdefault(str(c["clientId"]), {**c, "brokers": []})["brokers"].append(name)
    return [found[k] for k in sorted(found)]
