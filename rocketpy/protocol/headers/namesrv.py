"""NameServer requests: broker registration (REGISTER_BROKER, UNREGISTER_BROKER, QUERY_DATA_VERSION),
broker write permission (WIPE/ADD_WRITE_PERM_OF_BROKER), topic deletion (DELETE_TOPIC_IN_NAMESRV)
and the KV config (PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE), RocketMQ's field names.
"""

from __future__ import annotations

from rocketpy.errors import HeaderError
from rocketpy.protocol.header import Header, wire


class BrokerIdentityHeader(Header):
    """Who a broker is: UNREGISTER_BROKER, QUERY_DATA_VERSION (and the start of REGISTER_BROKER's)."""

    cluster_name: str = wire("clusterName")
    broker_addr: str = wire("brokerAddr")
    broker_name: str = wire("brokerName")
    broker_id: int = wire("brokerId")
    ha_server_addr: str = wire("haServerAddr", default="")


class RegisterBrokerRequestHeader(Header):
    """REGISTER_BROKER: a broker's identity, and which part of its topic table the body holds.

    Attributes:
        cluster_name, broker_addr, broker_name, broker_id, ha_server_addr: the broker.
        grpc_server_addr: the broker's gRPC endpoint ``ip:port`` ("" when it serves none; a
            rocketpy extension RocketMQ's NameServer ignores).
        split_index, split_total: this request's part of a split table (RocketMQ 5's split
            registration); both None for a whole table (or none: liveness only).
    """

    cluster_name: str = wire("clusterName")
    broker_addr: str = wire("brokerAddr")
    broker_name: str = wire("brokerName")
    broker_id: int = wire("brokerId")
    ha_server_addr: str = wire("haServerAddr", default="")
    split_index: int | None = wire("splitIndex", default=None)
    split_total: int | None = wire("splitTotal", default=None)
    #: rocketpy's extension: the broker's RocketMQ 5 gRPC endpoint (``grpcServerPort``), "" when off
    grpc_server_addr: str = wire("grpcServerAddr", default="")

    def _validate(self) -> None:
        total, index = self.split_total, self.split_index
        if total is None:
            return
        if index is None:
            raise HeaderError("request header field 'splitIndex' is missing; a split registration sets it")
        if not 0 <= index < total:
            raise HeaderError(f"splitIndex {index} is outside 0..{total - 1} (splitTotal {total})")

    def split(self) -> tuple[int, int] | None:
        """``(split_index, split_total)`` of a split registration, None for a whole table."""
        if self.split_total is None:
            return None
        assert self.split_index is not None
        return self.split_index, self.split_total


class RegisterBrokerResponseHeader(Header):
    """REGISTER_BROKER's answer: a slave's master (its address and HA address), empty for a master."""

    master_addr: str | None = wire("masterAddr", default=None)
    ha_server_addr: str | None = wire("haServerAddr", default=None)


class QueryDataVersionResponseHeader(Header):
    """QUERY_DATA_VERSION's answer: has the broker's topic table changed since the NameServer's copy?"""

    changed: bool = wire("changed", default=True)


class BrokerNameRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER: every topic of one broker name."""

    broker_name: str = wire("brokerName")


class WipeWritePermResponseHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER's answer: how many topics became read-only."""

    wipe_topic_count: int = wire("wipeTopicCount", default=0)


class AddWritePermResponseHeader(Header):
    """ADD_WRITE_PERM_OF_BROKER's answer: how many topics got write permission back."""

    add_topic_count: int = wire("addTopicCount", default=0)


class DeleteTopicFromNamesrvRequestHeader(Header):
    """DELETE_TOPIC_IN_NAMESRV: drop a topic's routes (of one cluster when ``cluster_name`` is given)."""

    topic: str = wire("topic")
    cluster_name: str | None = wire("clusterName", default=None)


class KVConfigRequestHeader(Header):
    """GET_KV_CONFIG / DELETE_KV_CONFIG: one key of a namespace."""

    namespace: str = wire("namespace")
    key: str = wire("key")


class PutKVConfigRequestHeader(Header):
    """PUT_KV_CONFIG: store ``value`` under ``namespace`` / ``key``."""

    namespace: str = wire("namespace")
    key: str = wire("key")
    value: str = wire("value")


class KVConfigResponseHeader(Header):
    """GET_KV_CONFIG's answer."""

    value: str = wire("value", default="")


class NamespaceRequestHeader(Header):
    """GET_KVLIST_BY_NAMESPACE: every key of one namespace."""

    namespace: str = wire("namespace")
