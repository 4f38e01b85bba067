"""Admin (``rocketpy.Admin``): topic, group, broker and message administration over the RPC.

Owns the admin request codes of docs/wire.md (topic create/delete, stats, consume stats, broker
config and runtime info, subscription groups, message query by key / id / offset, write-permission
wipe) and the cluster-wide fan-out they need (a cluster name -> its broker masters, a topic -> the
brokers holding it). ``rocketpy.admin_cli`` (mqadmin) only formats what this returns.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from rocketpy.client.api import check, pack_body, unpack_body
from rocketpy.client.instance import ClientSettings, MQClientInstance
from rocketpy.config import parse_properties
from rocketpy.errors import MQBrokerError, MQClientError
from rocketpy.message import MessageExt, MessageQueue
from rocketpy.msgid import decode_offset_msg_id
from rocketpy.perm import PERM_RW
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.admin import (
    CreateTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    TopicRequestHeader,
)
from rocketpy.protocol.headers.client import ConsumerGroupRequestHeader
from rocketpy.protocol.headers.namesrv import (
    AddWritePermResponseHeader,
    BrokerNameRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    WipeWritePermResponseHeader,
)
from rocketpy.protocol.headers.pop import MessageRequestMode
from rocketpy.protocol.headers.pull import PullMessageRequestHeader
from rocketpy.protocol.headers.query import QueryMessageRequestHeader, ViewMessageRequestHeader
from rocketpy.record import decode_record, decode_records
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import MASTER_ID, ClusterInfo, TopicRouteData
from rocketpy.subscription_group import TOOLS_CONSUMER, WIRE_NAMES, SubscriptionGroupConfig
from rocketpy.sysflag import FLAG_SUBSCRIPTION

if TYPE_CHECKING:
    from rocketpy.client.admin_auth import AuthAdmin
    from rocketpy.client.admin_trace import MessageTrace


class Admin:
    """Administration client (``await admin.start()`` ... ``await admin.shutdown()``).

    Args:
        namesrv_addr: ``"host:port"`` or several separated by ``;`` (default: env NAMESRV_ADDR).
        timeout: seconds for each request.
        instance_name: part of the client id.
        access_key: ACL account to sign every request with (admin codes need an ``admin: true`` one).
        secret_key: that account's secret key.
        serialize_type: the wire encoding, ``"msgpack"`` (rocketpy's) or ``"json"`` (RocketMQ's JSON
            remoting, as RocketMQ's own clients speak it); None: ``$ROCKETPY_SERIALIZE_TYPE``, else msgpack.
    """

    def __init__(
        self,
        namesrv_addr: str | None = None,
        *,
        timeout: float = 5.0,
        instance_name: str = "DEFAULT",
        access_key: str | None = None,
        secret_key: str | None = None,
        serialize_type: str | None = None,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.timeout = timeout
        self.settings = ClientSettings(
            instance_name=instance_name,
            mq_client_api_timeout=timeout,
            access_key=access_key,
            secret_key=secret_key,
            serialize_type=serialize_type,
        )
        self._instance: MQClientInstance | None = None

    async def start(self) -> None:
        """Join the shared client instance."""
        if self._instance is None:
            self._instance = await MQClientInstance.acquire(self.namesrv_addr, config=self.settings)

    async def shutdown(self) -> None:
        """Leave the client instance (idempotent)."""
        inst, self._instance = self._instance, None
        if inst is not None:
            await inst.release()

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def instance(self) -> MQClientInstance:
        """The client instance (raises MQClientError before ``start``)."""
        if self._instance is None:
            raise MQClientError("admin is not started: call `await admin.start()` first")
        return self._instance

    async def _invoke(
        self, addr: str, code: int, ext: dict[str, Any] | None = None, body: bytes = b""
    ) -> Any:
        resp = await self.instance.remoting.invoke(
            addr, RemotingCommand.request(code, ext, body), self.timeout
        )
        return check(resp, addr)

    async def call_map(
        self, addr: str, code: int, ext: dict[str, Any] | None, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """``code`` to the broker at ``addr``; its map body (an error answer raises ``MQBrokerError``)."""
        request = RemotingCommand.request(code, ext, b"")
        resp = check(await self.instance.remoting.invoke(addr, request, timeout_s or self.timeout), addr)
        return dict(unpack_body(resp) or {})

    # ---- controller mode (client/admin_controller.py) ---------------------------------------------

    async def get_sync_state_set(self, broker_name: str) -> dict[str, Any]:
        """A group's master, epoch and SyncStateSet (``mqadmin getSyncStateSet -b``)."""
        from rocketpy.client import admin_controller

        return await admin_controller.get_sync_state_set(self, broker_name)

    async def get_broker_epoch(self, broker_name: str) -> list[dict[str, Any]]:
        """Each broker's epoch entries of a group (``mqadmin getBrokerEpoch -b``)."""
        from rocketpy.client import admin_controller

        return await admin_controller.get_broker_epoch(self, broker_name)

    async def get_controller_metadata(self) -> dict[str, Any]:
        """The coordinator (etcd) behind controller mode (``mqadmin getControllerMetaData``)."""
        from rocketpy.client import admin_controller

        return await admin_controller.get_controller_metadata(self)

    async def elect_master(self, broker_name: str, broker_id: int) -> dict[str, Any]:
        """Graceful switchover of a group to ``broker_id`` (``mqadmin electMaster -b -i``)."""
        from rocketpy.client import admin_controller

        return await admin_controller.elect_master(self, broker_name, broker_id)

    # ---- ACL 2.0 (client/admin_auth.py) --------------------------------------------------------------

    @property
    def auth(self) -> AuthAdmin:
        """ACL 2.0's users and ACLs on the brokers (``mqadmin createUser`` ... ``listAcl``)."""
        from rocketpy.client.admin_auth import AuthAdmin

        return AuthAdmin(self)

    # ---- message trace (client/admin_trace.py) ---------------------------------------------------

    async def query_msg_trace(
        self, msg_id: str, *, trace_topic: str | None = None, begin_ms: int = 0, end_ms: int | None = None
    ) -> MessageTrace:
        """A message's trace timeline: sent, stored, delivered, consumed, retried, dead-lettered
        (``mqadmin queryMsgTraceById``), over any time window."""
        from rocketpy.client import admin_trace

        return await admin_trace.query_msg_trace(
            self, msg_id, trace_topic=trace_topic, begin_ms=begin_ms, end_ms=end_ms
        )

    # ---- cluster and routes ------------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every broker name and each cluster's broker names."""
        return ClusterInfo.from_wire(await self.instance.api.get_broker_cluster_info(self.timeout))

    async def cluster_masters(self, cluster: str) -> list[tuple[str, str]]:
        """``(broker_name, master addr)`` of every broker of ``cluster``, sorted.

        Raises:
            MQClientError: the cluster is unknown (the message lists the known ones).
        """
        info = await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none: is a broker running?"
            raise MQClientError(f"cluster {cluster!r} not found; known clusters: {known}")
        out = []
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            addr = bd.master_addr() if bd else None
            if addr:
                out.append((name, addr))
        return out

    async def _targets(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        if broker_addr:
            return [broker_addr]
        if cluster:
            return [addr for _, addr in await self.cluster_masters(cluster)]
        raise MQClientError("say where: give a cluster (-c CLUSTER) or a broker address (-b HOST:PORT)")

    async def topic_list(self) -> list[str]:
        """Every topic the NameServer knows, sorted."""
        return sorted(await self.instance.api.get_topic_list(self.timeout))

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The route of ``topic``.

        Raises:
            MQClientError: the topic does not exist (says how to create it).
        """
        route = await self.instance.update_topic_route(topic)
        if route is None:
            raise MQClientError(
                f"topic {topic!r} does not exist: create it with `mqadmin updateTopic -t {topic} -c CLUSTER`"
            )
        return route

    # ---- topics ------------------------------------------------------------------------------------

    async def create_topic(
        self,
        topic: str,
        cluster: str | None = None,
        *,
        broker_addr: str | None = None,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = PERM_RW,
        order: bool = False,
        wait_route: float = 5.0,
        attributes: str = "",
    ) -> list[str]:
        """Create or update ``topic`` on every master of ``cluster`` (or on one broker).

        ``attributes`` are RocketMQ 5's topic attribute changes, e.g. ``+message.type=FIFO`` (the
        message types RocketMQ 5 clients may send: NORMAL, FIFO, DELAY, TRANSACTION or MIXED).

        Waits up to ``wait_route`` seconds until the NameServer's route shows the topic on them.

        Returns:
            The broker addresses that accepted it.
        """
        from rocketpy.client.message_check import check_topic_name

        check_topic_name(topic)
        if not 0 < read_queue_nums <= 1024 or not 0 < write_queue_nums <= 1024:
            raise MQClientError("read/write queue numbers must be between 1 and 1024")
        if not 0 <= perm <= 7:
            raise MQClientError(f"perm={perm} must be 2 (write), 4 (read) or 6 (read+write)")
        ext = CreateTopicRequestHeader(
            topic, read_queue_nums=read_queue_nums, write_queue_nums=write_queue_nums, perm=perm, order=order,
            attributes=attributes,
        ).to_ext()  # fmt: skip
        addrs = await self._targets(cluster, broker_addr)
        for addr in addrs:
            await self._invoke(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        await self._wait_route(topic, len(addrs), wait_route)
        return addrs

    async def _wait_route(self, topic: str, brokers: int, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            route = await self.instance.update_topic_route(topic)
            if route is not None and len(route.queue_datas) >= brokers:
                return
            if time.monotonic() >= deadline:
                return  # the broker registers on its own schedule; not an error
            await asyncio.sleep(0.05)

    async def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """Delete ``topic`` from the brokers holding it (or ``cluster``'s) and from every NameServer."""
        if cluster:
            addrs = [a for _, a in await self.cluster_masters(cluster)]
        else:
            route = await self.topic_route(topic)
            addrs = [a for bd in route.broker_datas if (a := bd.master_addr())]
        for addr in addrs:
            await self._invoke(addr, RequestCode.DELETE_TOPIC_IN_BROKER, TopicRequestHeader.pack(topic))
        ext = DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster or None).to_ext()
        await self.instance.api.invoke_all_namesrv(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext, self.timeout)

    async def topic_status(self, topic: str) -> list[dict[str, Any]]:
        """Per queue: ``{"mq", "min_offset", "max_offset", "last_update_timestamp"}``, sorted by queue."""
        route = await self.topic_route(topic)
        rows: list[dict[str, Any]] = []
        for bd in route.broker_datas:
            addr = bd.master_addr()
            if not addr:
                continue
            body = (
                unpack_body(
                    await self._invoke(addr, RequestCode.GET_TOPIC_STATS_INFO, TopicRequestHeader.pack(topic))
                )
                or {}
            )
            for e in body.get("offsetTable", []):
                rows.append(
                    {
                        "mq": MessageQueue.from_dict(e["mq"]),
                        "min_offset": int(e.get("minOffset", 0)),
                        "max_offset": int(e.get("maxOffset", 0)),
                        "last_update_timestamp": int(e.get("lastUpdateTimestamp", 0)),
                    }
                )
        return sorted(rows, key=lambda r: r["mq"])

    # ---- groups and offsets --------------------------------------------------------------------------

    async def consumer_progress(self, group: str, topic: str | None = None) -> list[dict[str, Any]]:
        """Per queue: broker offset, consumer offset, diff, last timestamp and ``lag_seconds`` (how long
        the oldest unconsumed message has waited), from GET_CONSUME_STATS.

        A queue the group consumes by POP also has ``pull_offset`` (the next offset to pop),
        ``inflight`` (popped, not yet acked) and ``oldest_inflight_timestamp`` (ms; 0: none)."""
        if topic:
            route = await self.topic_route(topic)
            addrs = [a for bd in route.broker_datas if (a := _reader_addr(bd.broker_addrs))]
        else:
            info = await self.cluster_info()
            addrs = [a for bd in info.broker_addr_table.values() if (a := _reader_addr(bd.broker_addrs))]
        ext = GetConsumeStatsRequestHeader(group=group, topic=topic or None).to_ext()
        rows: list[dict[str, Any]] = []
        for addr in sorted(set(addrs)):
            body = unpack_body(await self._invoke(addr, RequestCode.GET_CONSUME_STATS, ext)) or {}
            for e in body.get("offsetTable", []):
                b, c = int(e.get("brokerOffset", 0)), int(e.get("consumerOffset", 0))
                row: dict[str, Any] = {
                    "mq": MessageQueue.from_dict(e["mq"]),
                    "broker_offset": b,
                    "consumer_offset": c,
                    "diff": b - max(c, 0),
                    "last_timestamp": int(e.get("lastTimestamp", 0)),
                    # how long the oldest unconsumed message has waited (0: caught up)
                    "lag_seconds": int(e.get("lagLatencyMs", 0)) / 1000,
                }
                if "inflightCount" in e:
                    row["pull_offset"] = int(e.get("pullOffset", 0))
                    row["inflight"] = int(e["inflightCount"])
                    row["oldest_inflight_timestamp"] = int(e.get("oldestInflightTimestamp", 0))
                rows.append(row)
        return sorted(rows, key=lambda r: r["mq"])

    async def consumer_groups(self) -> dict[str, dict[str, Any]]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG of every broker: group name -> its config (wire names),
        sorted by name (a group configured on several brokers appears once)."""
        info = await self.cluster_info()
        addrs = {a for bd in info.broker_addr_table.values() if (a := _reader_addr(bd.broker_addrs))}
        groups: dict[str, dict[str, Any]] = {}
        for addr in sorted(addrs):
            body = unpack_body(await self._invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)) or {}
            for name, cfg in (body.get("subscriptionGroupTable") or {}).items():
                groups.setdefault(str(name), dict(cfg))
        return dict(sorted(groups.items()))

    async def consumer_connections(self, group: str) -> list[dict[str, Any]]:
        """GET_CONSUMER_CONNECTION_LIST of every broker: the group's live clients, one entry per client
        id (``clientId``, ``clientAddr``, ``language``, ``brokers``: where it is registered), sorted."""
        info = await self.cluster_info()
        clients: dict[str, dict[str, Any]] = {}
        for name, bd in sorted(info.broker_addr_table.items()):
            addr = _reader_addr(bd.broker_addrs)
            if not addr:
                continue
            resp = await self.instance.remoting.invoke(
                addr,
                RemotingCommand.request(
                    RequestCode.GET_CONSUMER_CONNECTION_LIST, ConsumerGroupRequestHeader.pack(group)
                ),
                self.timeout,
            )
            if resp.code == ResponseCode.CONSUMER_NOT_ONLINE:
                continue
            body = unpack_body(check(resp, addr)) or {}
            for c in body.get("connectionSet") or []:
                entry = clients.setdefault(str(c["clientId"]), {**c, "brokers": []})
                entry["brokers"].append(name)
        return [clients[k] for k in sorted(clients)]

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int
    ) -> list[tuple[MessageQueue, int]]:
        """Set ``group``'s offset of every queue of ``topic`` to the first message stored at/after the
        time, live consumers included (``reset_offset``); the new offsets."""
        return list((await self.reset_offset(group, topic, timestamp_ms))["offsets"])

    # ---- a group's live clients, through the brokers (client/admin_clients.py) --------------------

    async def reset_offset(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[str, Any]:
        """Reset ``group``'s offsets of ``topic`` to ``timestamp_ms`` (-1: the end) while its
        consumers run: ``{"offsets": [(mq, offset)], "clients": [per-client outcome]}``."""
        from rocketpy.client import admin_clients

        return await admin_clients.reset_offset(self, group, topic, timestamp_ms, force=force)

    async def consumer_status(
        self, group: str, topic: str, client_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The offsets each live client of ``group`` holds for ``topic``."""
        from rocketpy.client import admin_clients

        return await admin_clients.consumer_status(self, group, topic, client_id)

    async def consumer_running_info(self, group: str, client_id: str, jstack: bool = False) -> dict[str, Any]:
        """One client's ConsumerRunningInfo (subscriptions, queues, rates, thread pool, version)."""
        from rocketpy.client import admin_clients

        return await admin_clients.consumer_running_info(self, group, client_id, jstack)

    async def consume_message_directly(
        self, group: str, client_id: str, msg_id: str, topic: str | None = None
    ) -> dict[str, Any]:
        """Run one stored message through a chosen client's listener; its result."""
        from rocketpy.client import admin_clients

        return await admin_clients.consume_message_directly(self, group, client_id, msg_id, topic)

    async def producer_connections(self, group: str) -> list[dict[str, Any]]:
        """A producer group's live clients."""
        from rocketpy.client import admin_clients

        return await admin_clients.producer_connections(self, group)

    async def update_subscription_group(
        self, group: str, cluster: str | None = None, *, broker_addr: str | None = None, **options: Any
    ) -> list[str]:
        """Create or update a subscription group; ``options`` are ``SubscriptionGroupConfig`` fields
        (consume_enable, consume_from_min_enable, consume_broadcast_enable, retry_queue_nums,
        retry_max_times, broker_id, which_broker_when_consume_slowly, notify_consumer_ids_changed_enable)."""
        known = set(WIRE_NAMES) - {"group_name"}
        unknown = set(options) - known
        if unknown:
            raise MQClientError(
                f"unknown subscription group option(s) {sorted(unknown)}; known: {sorted(known)}"
            )
        body = SubscriptionGroupConfig(group, **options).to_wire()
        addrs = await self._targets(cluster, broker_addr)
        for addr in addrs:
            await self._invoke(
                addr,
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                None,
                pack_body(body, self.settings.serialize_code),
            )
        return addrs

    async def set_message_request_mode(
        self,
        topic: str,
        group: str,
        mode: MessageRequestMode | str,
        pop_share_queue_num: int = 0,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """SET_MESSAGE_REQUEST_MODE (``mqadmin setConsumeMode``) on one broker, a cluster's masters
        or (neither given) every master of the topic's route; the addresses set.

        Raises:
            MQClientError: an unknown mode, or no such topic.
        """
        try:
            wanted = MessageRequestMode(str(mode).upper())
        except ValueError:
            raise MQClientError(f"mode {mode!r} is not PULL or POP") from None
        if broker_addr or cluster:
            addrs = await self._targets(cluster, broker_addr)
        else:
            route = await self.topic_route(topic)
            addrs = sorted(a for bd in route.broker_datas if (a := bd.master_addr()))
        for addr in addrs:
            await self.instance.api.set_message_request_mode(
                addr, topic, group, wanted, pop_share_queue_num, self.timeout
            )
        return addrs

    # ---- brokers -----------------------------------------------------------------------------------

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's KV table of runtime figures."""
        body = unpack_body(await self._invoke(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)) or {}
        return {str(k): str(v) for k, v in (body.get("table") or {}).items()}

    async def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's effective config as key -> value (RocketMQ key names)."""
        resp = await self._invoke(broker_addr, RequestCode.GET_BROKER_CONFIG)
        text = bytes(resp.body).decode()
        return {p.key: p.value for p in parse_properties(text, f"config of {broker_addr}")}

    async def update_broker_config(
        self, key: str, value: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """UPDATE_BROKER_CONFIG ``key=value`` on one broker or every master of a cluster."""
        body = f"{key}={value}\n".encode()
        addrs = await self._targets(cluster, broker_addr)
        for addr in addrs:
            await self._invoke(addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)
        return addrs

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Remove write permission of ``broker_name`` on every NameServer.

        Returns:
            NameServer address -> number of topics changed.
        """
        out = await self.instance.api.invoke_all_namesrv(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER, BrokerNameRequestHeader.pack(broker_name), self.timeout
        )
        return {
            a: WipeWritePermResponseHeader.from_ext(v).wipe_topic_count
            for a, v in out.items()
            if isinstance(v, dict)
        }

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Restore write permission of ``broker_name`` on every NameServer."""
        out = await self.instance.api.invoke_all_namesrv(
            RequestCode.ADD_WRITE_PERM_OF_BROKER, BrokerNameRequestHeader.pack(broker_name), self.timeout
        )
        return {
            a: AddWritePermResponseHeader.from_ext(v).add_topic_count
            for a, v in out.items()
            if isinstance(v, dict)
        }

    async def update_kv_config(self, namespace: str, key: str, value: str) -> None:
        """Set ``namespace``/``key`` in every NameServer's KV table (PUT_KV_CONFIG)."""
        await self.instance.api.put_kv_config(namespace, key, value, self.timeout)

    async def get_kv_config(self, namespace: str, key: str) -> dict[str, str | None]:
        """``namespace``/``key`` of every NameServer that answers: address -> value (None: unset)."""
        return await self.instance.api.get_kv_config(namespace, key, self.timeout)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """Remove ``namespace``/``key`` from every NameServer's KV table (DELETE_KV_CONFIG)."""
        await self.instance.api.delete_kv_config(namespace, key, self.timeout)

    # ---- messages ----------------------------------------------------------------------------------

    async def query_msg_by_id(self, offset_msg_id: str, broker_addr: str | None = None) -> MessageExt:
        """VIEW_MESSAGE_BY_ID of an offset msg id (``SendResult.offset_msg_id``).

        The id names the master that stored it; ``broker_addr`` asks another member (its slave).
        """
        try:
            ip, port, offset = decode_offset_msg_id(offset_msg_id)
        except ValueError as e:
            raise MQClientError(
                f"{offset_msg_id!r} is not an offset msg id (32 hex chars from SendResult.offset_msg_id)"
            ) from e
        addr = broker_addr or f"{ip}:{port}"
        resp = await self._invoke(addr, RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader.pack(offset))
        return decode_record(resp.body)

    async def query_msg_by_key(
        self, topic: str, key: str, *, max_num: int = 64, begin_ms: int = 0, end_ms: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS (or unique id) equal ``key``, from every broker's index."""
        route = await self.topic_route(topic)
        end = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
        ext = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin_ms, end_timestamp=end
        ).to_ext()
        found: list[MessageExt] = []
        for bd in route.broker_datas:
            addr = bd.master_addr()
            if not addr:
                continue
            resp = await self.instance.remoting.invoke(
                addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext), self.timeout
            )
            if resp.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            found += [
                m for m in decode_records(check(resp, addr).body) if key in m.keys or m.unique_key == key
            ]
        return sorted(found, key=lambda m: m.store_timestamp)[:max_num]

    async def resend_dlq(self, group: str, msg_id: str | None = None) -> list[dict[str, Any]]:
        """Put ``group``'s dead letters (all not resent before, or the one with ``msg_id``) back to its
        retry topic for another round (``client/admin_dlq.py``)."""
        from rocketpy.client.admin_dlq import resend_dlq

        return await resend_dlq(self, group, msg_id)

    async def pull(
        self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str = TOOLS_CONSUMER
    ) -> tuple[list[MessageExt], int, int]:
        """Read up to ``max_nums`` messages from ``offset`` without waiting (no offset is committed).

        Returns:
            (messages, next offset, queue max offset)
        """
        addr = await self.instance.queue_broker_addr(mq)
        header = PullMessageRequestHeader(
            group, mq.topic, mq.queue_id, offset, max_nums, sys_flag=FLAG_SUBSCRIPTION
        )
        ext = header.to_ext()
        r = await self.instance.api.pull_message(addr, ext, self.timeout)
        return r.messages, r.next_begin_offset, r.max_offset

    async def query_msg_by_offset(
        self, topic: str, broker_name: str, queue_id: int, offset: int
    ) -> MessageExt:
        """The message at ``offset`` of one queue."""
        await self.topic_route(topic)
        msgs, _, max_offset = await self.pull(MessageQueue(topic, broker_name, queue_id), offset, 1)
        if not msgs:
            raise MQClientError(
                f"no message at offset {offset} of {topic}/{broker_name}/{queue_id}"
                f" (queue max offset {max_offset})"
            )
        return msgs[0]


__all__ = ["TOOLS_CONSUMER", "Admin", "MQBrokerError"]


def _reader_addr(members: dict[int, str]) -> str | None:
    """The member that answers reads: the master, else (master down) the lowest-id slave."""
    if not members:
        return None
    return members.get(MASTER_ID) or members[min(members)]
