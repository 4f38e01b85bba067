"""The NameServer's request processors: decode a request, make one manager call, build the response.

Shapes are pinned in docs/wire.md. A missing or malformed header field raises ``HeaderError``
(answered as INVALID_PARAMETER by the processor table); so does an undecodable body. Processors
never touch files or sockets: KV persistence happens inside ``KVConfigManager`` (in a thread).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rocketpy.config import NamesrvConfig
from rocketpy.errors import HeaderError
from rocketpy.nameserver.config_processor import NamesrvConfigProcessor
from rocketpy.nameserver.kv_config import KVConfigError, KVConfigManager
from rocketpy.nameserver.register_steps import register_parts, register_parts_of_doc
from rocketpy.nameserver.route_info import RouteInfoManager
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.admin import TopicRequestHeader
from rocketpy.protocol.headers.namesrv import (
    AddWritePermResponseHeader,
    BrokerIdentityHeader,
    BrokerNameRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    KVConfigRequestHeader,
    KVConfigResponseHeader,
    NamespaceRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    WipeWritePermResponseHeader,
)
from rocketpy.protocol.specs import check_served
from rocketpy.remoting.body import decode_body, encode_body
from rocketpy.remoting.command import SERIALIZE_MSGPACK, RemotingCommand
from rocketpy.remoting.server import Channel, RemotingServer
from rocketpy.remoting.slices import decode_in_slices
from rocketpy.route import DataVersion, RegisterBrokerBody, TopicConfigSerializeWrapper

#: KV namespace holding per-topic order configuration (RocketMQ's NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG).
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"

_M = TypeVar("_M", bound=BaseModel)


def _pack(obj: Any, request: RemotingCommand) -> bytes:
    """An answer body in ``request``'s encoding (msgpack, or JSON for RocketMQ's clients)."""
    return encode_body(obj, request.serialize_type)


def _decode_body(request: RemotingCommand, model: type[_M]) -> _M | None:
    """Decode a body (in the request's encoding) into ``model``; None for an empty body."""
    if not request.body:
        return None
    doc = decode_body(request.body, request.serialize_type, model.__name__)
    try:
        return model.from_wire(doc)  # type: ignore[attr-defined, no-any-return]
    except (ValueError, TypeError, ValidationError) as e:
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise HeaderError(f"request body is not a valid {model.__name__}: {first}") from e


#: A registration of at least this many topics (whole or split) freezes the GC's view of the heap.
GC_FREEZE_MIN_TOPICS = 5_000


#: A whole-table REGISTER_BROKER body this large is decoded and merged in steps of this many topics.
LARGE_REGISTER_BODY_BYTES = 256 * 1024
REGISTER_STEP_TOPICS = 500


class NamesrvProcessors:
    """The handlers of every NameServer request code, over one route table and one KV store.

    Args:
        route_info: the route tables.
        kv: the KV config store.
        config: the NameServer settings (``orderMessageEnable``).
    """

    def __init__(self, route_info: RouteInfoManager, kv: KVConfigManager, config: NamesrvConfig) -> None:
        self.route_info = route_info
        self.kv = kv
        self.config = config
        self.config_codes = NamesrvConfigProcessor(config)
        self._register_locks: dict[str, asyncio.Lock] = {}  # broker addr -> its stepwise registration

    def table(self) -> dict[int, Callable[[Channel, RemotingCommand], Any]]:
        """Request code -> handler, for ``RemotingServer.register_processor``."""
        return {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_NAMESRV_CONFIG: self.config_codes.get_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.config_codes.update_config,
        }

    def register_all(self, server: RemotingServer) -> None:
        """Register every handler on ``server`` (each code's spec must name the NameServer)."""
        table = self.table()
        check_served("namesrv", table)
        for code, handler in table.items():
            server.register_processor(code, handler)

    # ---------------------------------------------------------------- brokers

    def register_broker(
        self, channel: Channel, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """REGISTER_BROKER: record the broker; a slave learns its master's addresses.

        A whole table in one large msgpack body is merged in steps (``_register_in_steps``).
        """
        h = RegisterBrokerRequestHeader.from_ext(request.ext)
        split = h.split()
        if split is None and len(request.body) >= LARGE_REGISTER_BODY_BYTES:
            return self._register_in_steps(channel, request, h)
        body = _decode_body(request, RegisterBrokerBody)
        topics = body.topic_config_serialize_wrapper if body is not None else None
        return self._register(channel, request, h, topics, split)

    def _register(
        self,
        channel: Channel,
        request: RemotingCommand,
        h: RegisterBrokerRequestHeader,
        topics: TopicConfigSerializeWrapper | None,
        split: tuple[int, int] | None,
    ) -> RemotingCommand:
        result = self.route_info.register_broker(
            cluster=h.cluster_name,
            broker_addr=h.broker_addr,
            broker_name=h.broker_name,
            broker_id=h.broker_id,
            ha_server_addr=h.ha_server_addr,
            grpc_addr=h.grpc_server_addr,
            topics=topics,
            channel=channel,
            split=split,
        )
        if (
            topics is not None
            and len(topics.topic_config_table) * (split[1] if split else 1) >= GC_FREEZE_MIN_TOPICS
        ):
            # A full GC pass walks every object: with 100,000 topics' route entries it stalls the
            # loop for most of a second, over and over. The tables are long-lived and free of
            # cycles (replaced entries go by reference counting), so they leave the GC's view.
            gc.freeze()
        answer = RegisterBrokerResponseHeader(
            master_addr=result.master_addr or None, ha_server_addr=result.ha_server_addr or None
        ).to_ext()
        return RemotingCommand.response(request, ext=answer or None)

    async def _register_in_steps(
        self, channel: Channel, request: RemotingCommand, h: RegisterBrokerRequestHeader
    ) -> RemotingCommand:
        """A large whole-table registration as parts of ``REGISTER_STEP_TOPICS``, the loop free between
        them (a JSON body is decoded in slices first); one at a time per broker address (so two
        rounds' parts never interleave)."""
        addr = h.broker_addr
        lock = self._register_locks.setdefault(addr, asyncio.Lock())
        try:
            async with lock:
                if request.serialize_type == SERIALIZE_MSGPACK:
                    parts = register_parts(request.body, REGISTER_STEP_TOPICS)
                else:
                    doc = await decode_in_slices(request.body, request.serialize_type, "RegisterBrokerBody")
                    parts = register_parts_of_doc(doc, REGISTER_STEP_TOPICS)
                answer = None
                for index, total, part in parts:
                    answer = self._register(channel, request, h, part, (index, total) if total > 1 else None)
                    await asyncio.sleep(0)
                assert answer is not None
                return answer
        finally:
            if not lock.locked():
                self._register_locks.pop(addr, None)

    def unregister_broker(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """UNREGISTER_BROKER: forget a broker that is shutting down."""
        h = BrokerIdentityHeader.from_ext(request.ext)
        self.route_info.unregister_broker(h.cluster_name, h.broker_addr, h.broker_name, h.broker_id)
        return RemotingCommand.response(request)

    def query_data_version(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """QUERY_DATA_VERSION: has the broker's topic table changed? (unchanged refreshes liveness)."""
        version = _decode_body(request, DataVersion) or DataVersion()
        broker_addr = BrokerIdentityHeader.from_ext(request.ext).broker_addr
        changed, known = self.route_info.query_data_version(broker_addr, version)
        body = _pack(known.to_wire(), request) if known is not None else b""
        return RemotingCommand.response(request, ext=QueryDataVersionResponseHeader.pack(changed), body=body)

    # ---------------------------------------------------------------- routes

    def get_route_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC: the topic's queues and brokers, or TOPIC_NOT_EXIST."""
        topic = TopicRequestHeader.from_ext(request.ext).topic
        route = self.route_info.topic_route(topic)
        if route is None:
            return RemotingCommand.response(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {topic}; create it with "
                f"'mqadmin updateTopic -t {topic} -c CLUSTER' "
                "or set autoCreateTopicEnable=true on the broker",
            )
        if self.config.order_message_enable:
            route.order_topic_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        return RemotingCommand.response(request, body=_pack(route.to_wire(), request))

    def get_cluster_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO: ``{"brokerAddrTable", "clusterAddrTable"}``."""
        return RemotingCommand.response(
            request, body=_pack(self.route_info.cluster_info().to_wire(), request)
        )

    def get_topic_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: ``{"topicList": [...]}``."""
        return RemotingCommand.response(
            request, body=_pack({"topicList": self.route_info.topic_list()}, request)
        )

    def delete_topic(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV: drop a topic's routes (of one cluster when clusterName is given)."""
        h = DeleteTopicFromNamesrvRequestHeader.from_ext(request.ext)
        self.route_info.delete_topic(h.topic, h.cluster_name or None)
        return RemotingCommand.response(request)

    def wipe_write_perm(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER: make every topic on a broker read-only (ext wipeTopicCount)."""
        count = self.route_info.wipe_write_perm(BrokerNameRequestHeader.from_ext(request.ext).broker_name)
        return RemotingCommand.response(request, ext=WipeWritePermResponseHeader.pack(count))

    def add_write_perm(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """ADD_WRITE_PERM_OF_BROKER: give a broker's topics write permission back (ext addTopicCount)."""
        count = self.route_info.add_write_perm(BrokerNameRequestHeader.from_ext(request.ext).broker_name)
        return RemotingCommand.response(request, ext=AddWritePermResponseHeader.pack(count))

    # ---------------------------------------------------------------- KV config

    def put_kv_config(self, channel: Channel, request: RemotingCommand) -> Awaitable[RemotingCommand]:
        """PUT_KV_CONFIG: store a value; answered once it is on disk."""
        h = PutKVConfigRequestHeader.from_ext(request.ext)
        return self._kv_change(request, self.kv.put(h.namespace, h.key, h.value))

    def delete_kv_config(self, channel: Channel, request: RemotingCommand) -> Awaitable[RemotingCommand]:
        """DELETE_KV_CONFIG: remove a value (absent is fine); answered once the file is updated."""
        h = KVConfigRequestHeader.from_ext(request.ext)
        return self._kv_change(request, self.kv.delete(h.namespace, h.key))

    async def _kv_change(self, request: RemotingCommand, change: Awaitable[Any]) -> RemotingCommand:
        try:
            await change
        except ValueError as e:
            return RemotingCommand.response(request, ResponseCode.INVALID_PARAMETER, str(e))
        except KVConfigError as e:
            return RemotingCommand.response(request, ResponseCode.SYSTEM_ERROR, str(e))
        return RemotingCommand.response(request)

    def get_kv_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_KV_CONFIG: ext value, or QUERY_NOT_FOUND."""
        h = KVConfigRequestHeader.from_ext(request.ext)
        namespace, key = h.namespace, h.key
        value = self.kv.get(namespace, key)
        if value is None:
            return RemotingCommand.response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {namespace} Key: {key}; set it with PUT_KV_CONFIG first",
            )
        return RemotingCommand.response(request, ext=KVConfigResponseHeader.pack(value))

    def get_kv_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_KVLIST_BY_NAMESPACE: body KVTable ``{"table": {key: value}}``, or QUERY_NOT_FOUND."""
        namespace = NamespaceRequestHeader.from_ext(request.ext).namespace
        table = self.kv.namespace(namespace)
        if not table:
            return RemotingCommand.response(
                request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}"
            )
        return RemotingCommand.response(request, body=_pack({"table": table}, request))
