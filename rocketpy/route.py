"""Route models of the control plane: TopicConfig, QueueData, BrokerData, TopicRouteData, DataVersion.

``TopicConfig`` is the one topic record of the project: the broker's topic table holds it, persists
it to topics.json and sends it in REGISTER_BROKER, and the NameServer reads it from there.

These are pydantic models (control plane only: registrations, route lookups, admin calls; never per
message). Field names are snake_case; aliases are RocketMQ's camelCase names, which is what travels
on the wire (docs/wire.md) as msgpack maps with str keys. ``to_wire()`` gives that map,
``from_wire(d)`` reads one (RocketMQ's JSON clients send numbers as strings; pydantic's lax mode
accepts both). ``BrokerData.broker_addrs`` is keyed by ``int`` brokerId in Python and by its
decimal string on the wire (``{"0": "ip:port"}``).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
)

from rocketpy.message import MessageQueue
from rocketpy.perm import PERM_READ, PERM_RW
from rocketpy.topic import SINGLE_TAG

#: brokerId of a master; slaves have brokerId >= 1.
MASTER_ID = 0


class _WireModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    def to_wire(self) -> dict[str, Any]:
        """This object as the msgpack-ready dict of docs/wire.md (RocketMQ field names)."""
        return self.model_dump(by_alias=True, mode="json")

    @classmethod
    def from_wire(cls, d: Any) -> Self:
        """Build from the wire dict (raises ``pydantic.ValidationError`` on a malformed one)."""
        return cls.model_validate(d)


class DataVersion(_WireModel):
    """Version of a broker's topic table: changes whenever a topic is created, updated or deleted."""

    timestamp: int = 0
    counter: int = 0

    def same_as(self, other: DataVersion | None) -> bool:
        """True when ``other`` is the same version (RocketMQ's DataVersion.equals)."""
        return other is not None and (self.timestamp, self.counter) == (other.timestamp, other.counter)


class TopicConfig(_WireModel):
    """One topic (RocketMQ's TopicConfig): the broker's table entry, topics.json and REGISTER_BROKER.

    ``perm`` holds ``rocketpy.perm`` bits. The broker reads the fields per send and pull (plain
    attribute reads) and builds new configs only on topic changes.
    """

    topic_name: str = Field(alias="topicName")
    read_queue_nums: int = Field(16, alias="readQueueNums", ge=0)
    write_queue_nums: int = Field(16, alias="writeQueueNums", ge=0)
    perm: int = Field(PERM_RW, ge=0, le=15)
    topic_filter_type: str = Field(SINGLE_TAG, alias="topicFilterType")
    topic_sys_flag: int = Field(0, alias="topicSysFlag")
    order: bool = False
    #: RocketMQ 5's topic attributes, e.g. ``{"message.type": "FIFO"}`` (absent on the wire when empty)
    attributes: dict[str, str] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _without_empty_attributes(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        doc: dict[str, Any] = handler(self)
        if not self.attributes:
            doc.pop("attributes", None)
        return doc

    def to_wire(self) -> dict[str, Any]:
        """The wire map, as ``model_dump(by_alias=True)`` gives it, built directly: a broker's
        topics.json and registration carry every topic it holds (up to ``MAX_TOPICS``)."""
        doc: dict[str, Any] = {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }
        if self.attributes:
            doc["attributes"] = dict(self.attributes)
        return doc


class QueueData(_WireModel):
    """The queues one broker (by name) holds for a topic."""

    broker_name: str = Field(alias="brokerName")
    read_queue_nums: int = Field(alias="readQueueNums", ge=0)
    write_queue_nums: int = Field(alias="writeQueueNums", ge=0)
    perm: int = Field(ge=0, le=15)
    topic_sys_flag: int = Field(0, alias="topicSysFlag")


class BrokerData(_WireModel):
    """One broker name: its cluster and the address of each member (brokerId 0 = master)."""

    cluster: str
    broker_name: str = Field(alias="brokerName")
    broker_addrs: dict[int, str] = Field(default_factory=dict, alias="brokerAddrs")
    #: each member's RocketMQ 5 gRPC endpoint (``grpcServerPort``), a rocketpy extension: absent on
    #: the wire when no member serves gRPC, so RocketMQ's own clients see the 4.x shape
    grpc_addrs: dict[int, str] = Field(default_factory=dict, alias="grpcAddrs")

    @field_serializer("broker_addrs", "grpc_addrs")
    def _addrs_with_str_keys(self, addrs: dict[int, str]) -> dict[str, str]:
        return {str(k): v for k, v in sorted(addrs.items())}

    @model_serializer(mode="wrap")
    def _without_empty_grpc(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        doc: dict[str, Any] = handler(self)
        if not self.grpc_addrs:
            doc.pop("grpcAddrs", None)
            doc.pop("grpc_addrs", None)
        return doc

    def master_addr(self) -> str | None:
        """The master's address, or None when the master is not registered."""
        return self.broker_addrs.get(MASTER_ID)


class TopicRouteData(_WireModel):
    """Where a topic lives: the queue data per broker name and those brokers' addresses."""

    order_topic_conf: str | None = Field(None, alias="orderTopicConf")
    queue_datas: list[QueueData] = Field(default_factory=list, alias="queueDatas")
    broker_datas: list[BrokerData] = Field(default_factory=list, alias="brokerDatas")
    filter_server_table: dict[str, list[str]] = Field(default_factory=dict, alias="filterServerTable")


class ClusterInfo(_WireModel):
    """GET_BROKER_CLUSTER_INFO's body: every broker name and the broker names of each cluster."""

    broker_addr_table: dict[str, BrokerData] = Field(default_factory=dict, alias="brokerAddrTable")
    cluster_addr_table: dict[str, list[str]] = Field(default_factory=dict, alias="clusterAddrTable")


class TopicConfigSerializeWrapper(_WireModel):
    """A broker's topic table with its version (inside REGISTER_BROKER's body, and topics.json)."""

    topic_config_table: dict[str, TopicConfig] = Field(default_factory=dict, alias="topicConfigTable")
    data_version: DataVersion = Field(default_factory=DataVersion, alias="dataVersion")


class RegisterBrokerBody(_WireModel):
    """REGISTER_BROKER's body: ``{"topicConfigSerializeWrapper": {...}, "filterServerList": []}``."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = Field(
        default_factory=TopicConfigSerializeWrapper, alias="topicConfigSerializeWrapper"
    )
    filter_server_list: list[str] = Field(default_factory=list, alias="filterServerList")


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Readable queues of ``topic`` (ids 0..readQueueNums-1 of readable brokers), sorted by
    (broker_name, queue_id): what consumers read, and the broker's QUERY_ASSIGNMENT allocates."""
    queues: list[MessageQueue] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_READ:
            queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return queues
