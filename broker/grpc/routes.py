"""QueryRoute and QueryAssignment: a topic's queues as the 5.x clients see them.

The route comes from the NameServers (GET_ROUTEINFO_BY_TOPIC through the broker's own remoting
client, trying each NameServer in turn), so any broker's endpoint answers for every topic of the
cluster. Each queue names its broker's own gRPC endpoint, which brokers register with the
NameServers (``BrokerData.grpc_addrs``); brokers without one (gRPC off, or RocketMQ's brokers) are
left out. Queue ids are the brokers' real ids: below min(read, write) a queue is READ_WRITE,
above it READ or WRITE. Only masters (broker id 0) are listed, as the clients only use those.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from rocketpy.broker.grpc.status import Code, RpcError
from rocketpy.broker.topic_route import ask_topic_route
from rocketpy.errors import RemotingConnectError, RemotingTimeoutError
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.perm import is_readable, is_writeable
from rocketpy.protocol.codes import ResponseCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.route import QueueData, TopicRouteData

MASTER_ID = 0
#: Message types a queue accepts, by the topic's ``message.type`` attribute (None: unset = all).
AcceptTypes = Callable[[str], list[int]]


def endpoints_of(addr: str) -> pb.Endpoints:
    """``Endpoints`` for ``host:port`` (IPv4, IPv6 or a domain name)."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    try:
        scheme = pb.AddressScheme.IPv4 if ipaddress.ip_address(host).version == 4 else pb.AddressScheme.IPv6
    except ValueError:
        scheme = pb.AddressScheme.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=int(port))])


def _permission(perm: int, queue_id: int, qd: QueueData) -> int:
    readable = is_readable(perm) and queue_id < qd.read_queue_nums
    writable = is_writeable(perm) and queue_id < qd.write_queue_nums
    if readable and writable:
        return pb.Permission.READ_WRITE
    return pb.Permission.READ if readable else pb.Permission.WRITE if writable else pb.Permission.NONE


def message_queues(topic: str, route: TopicRouteData, accept: list[int]) -> list[pb.MessageQueue]:
    """The queues of ``route`` on brokers that serve gRPC, sorted by broker name and queue id."""
    grpc_addr = {bd.broker_name: bd.grpc_addrs.get(MASTER_ID) for bd in route.broker_datas}
    out = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        addr = grpc_addr.get(qd.broker_name)
        if not addr:
            continue
        broker = pb.Broker(name=qd.broker_name, id=MASTER_ID, endpoints=endpoints_of(addr))
        for queue_id in range(max(qd.read_queue_nums, qd.write_queue_nums)):
            permission = _permission(qd.perm, queue_id, qd)
            if permission == pb.Permission.NONE:
                continue
            out.append(
                pb.MessageQueue(
                    topic=pb.Resource(name=topic),
                    id=queue_id,
                    permission=permission,  # type: ignore[arg-type]
                    broker=broker,
                    accept_message_types=accept,  # type: ignore[arg-type]
                )
            )
    return out


class RouteSource:
    """Topic routes from the NameServers.

    Args:
        client: the broker's remoting client.
        namesrv_addrs: the NameServers, tried in order (the one that answered first next time).
        timeout_s: per NameServer call.
    """

    def __init__(self, client: RemotingClient, namesrv_addrs: list[str], timeout_s: float = 3.0) -> None:
        self._client = client
        self._addrs = list(namesrv_addrs)
        self._timeout_s = timeout_s

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route.

        Raises:
            RpcError: TOPIC_NOT_FOUND, or INTERNAL_SERVER_ERROR when no NameServer answered.
        """
        if not self._addrs:
            raise RpcError(Code.INTERNAL_SERVER_ERROR, "this broker has no NameServer (namesrvAddr) to ask")
        errors = []
        for i, addr in enumerate(list(self._addrs)):
            try:
                resp, route = await ask_topic_route(self._client, addr, topic, self._timeout_s)
            except (RemotingConnectError, RemotingTimeoutError) as e:
                errors.append(f"{addr}: {e}")
                continue
            if i:
                self._addrs.insert(0, self._addrs.pop(i))
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                raise RpcError(
                    Code.TOPIC_NOT_FOUND,
                    f"topic {topic!r} does not exist; "
                    f"create it with mqadmin updateTopic -t {topic} -c CLUSTER",
                )
            if route is None:
                raise RpcError(Code.INTERNAL_SERVER_ERROR, f"NameServer {addr}: {resp.remark}")
            return route
        raise RpcError(Code.INTERNAL_SERVER_ERROR, "no NameServer answered: " + "; ".join(errors))
