"""A broker's own question to one NameServer about a topic's route (GET_ROUTEINFO_BY_TOPIC).

Asked by the gRPC endpoint's routes (``grpc/routes.py``), POP's assignment (``pop/assignment.py``)
and a promoted replica taking over topics (``failover/routed_topics.py``); each decides what a
refusal or a silent NameServer means for it.
"""

from __future__ import annotations

from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.admin import TopicRequestHeader
from rocketpy.remoting.body import decode_body
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicRouteData


async def ask_topic_route(
    client: RemotingClient, addr: str, topic: str, timeout_s: float
) -> tuple[RemotingCommand, TopicRouteData | None]:
    """The NameServer ``addr``'s answer about ``topic``, and the route it holds when it is SUCCESS
    (None otherwise: TOPIC_NOT_EXIST or another refusal, told by the answer's code and remark).

    Raises:
        RocketpyError: the call failed (RemotingConnectError, RemotingTimeoutError, too many pending).
        HeaderError, ValueError: a SUCCESS answer whose body is not a TopicRouteData.
    """
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, TopicRequestHeader.pack(topic))
    resp = await client.invoke(addr, cmd, timeout_s)
    if resp.code != ResponseCode.SUCCESS:
        return resp, None
    return resp, TopicRouteData.from_wire(decode_body(resp.body, resp.serialize_type, "TopicRouteData"))
