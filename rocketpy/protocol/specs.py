"""One spec per request code: its headers, its body, its ACL rule and who serves it.

``SPECS`` is the table every side reads: the daemons' processor tables refuse to register a code
without a spec (``ProcessorTable.register``), the ACL takes each code's rule and the wire names of
its topic and group fields from here (``rocketpy.acl.resources``), and the SDK builds its requests
and reads the answers with the header classes named here. ``tests/unit/test_protocol_specs.py``
fails when a served code has no spec, a spec is served by nobody, or a spec's ACL rule names a
field its header lacks.

Adding a request code: docs/design.md "Adding a request code".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rocketpy.protocol.access import ADMIN, GET, LIST, OPEN, SIGNED, Access
from rocketpy.protocol.codes import RequestCode as C
from rocketpy.protocol.codes import code_name
from rocketpy.protocol.header import Header
from rocketpy.protocol.headers import (
    admin,
    auth,
    client,
    clients,
    controller,
    namesrv,
    offset,
    pop,
    pull,
    query,
    send,
    send_back,
    transaction,
)
from rocketpy.protocol.shape import Shape

#: Who serves a code: a daemon, or the SDK (calls a broker makes on a client's connection).
Server = Literal["broker", "namesrv", "client"]


@dataclass(frozen=True)
class RequestSpec:
    """Everything declared about one request code.

    Attributes:
        code: the request code.
        served_by: who serves it.
        request: its request header class (None: it has no header fields).
        response: its answer's header class (None: the answer has no header fields).
        body: the declared shape of its structured request body (None: none, or raw bytes).
        access: its ACL rule.
        wire_names: request header attribute -> wire name (from ``request``).
    """

    code: C
    served_by: frozenset[Server]
    request: Any = None
    response: type[Header] | None = None
    body: Shape | None = None
    access: Access = SIGNED
    wire_names: Mapping[str, str] = field(default_factory=dict)

    @property
    def topic_field(self) -> str | None:
        """The wire name of the field holding the topic the ACL checks (None: none)."""
        return self.wire_names[self.access.topic] if self.access.topic else None

    @property
    def target_field(self) -> str | None:
        """ACL 2.0: the wire name of the field naming its action's resource (None: the cluster)."""
        return self.wire_names[self.access.target[1]] if self.access.target else None

    @property
    def group_field(self) -> str | None:
        """The wire name of the field holding the consumer group the ACL checks (None: none)."""
        return self.wire_names[self.access.group] if self.access.group else None


def _names(request: Any, names: Mapping[str, str] | None) -> Mapping[str, str]:
    if names is not None:
        return names
    if isinstance(request, type) and issubclass(request, Header):
        return {f.attr: f.wire for f in request.WIRE}
    return {}


def _spec(
    code: C,
    served_by: Server | tuple[Server, ...],
    request: Any = None,
    response: type[Header] | None = None,
    *,
    access: Access,
    body: Shape | None = None,
    names: Mapping[str, str] | None = None,
) -> RequestSpec:
    servers = frozenset((served_by,) if isinstance(served_by, str) else served_by)
    spec = RequestSpec(code, servers, request, response, body, access, _names(request, names))
    for attr in (access.topic, access.group, access.target[1] if access.target else None):
        if attr is not None and attr not in spec.wire_names:
            raise TypeError(f"{code.name}: its ACL rule names {attr!r}, which its request header lacks")
    return spec


_PUB_TOPIC = Access(topic="topic", topic_perm="PUB")
_CONSUMER = Access(topic="topic", group="group")
_V1 = send.SendMessageRequestHeader.wire_names(v2=False)
_V2 = send.SendMessageRequestHeader.wire_names(v2=True)
_SEND = send.SendMessageRequestHeader
_SEND_ANSWER = send.SendMessageResponseHeader

_ALL: tuple[RequestSpec, ...] = (
    # -- broker: messages ------------------------------------------------------------------------
    _spec(C.SEND_MESSAGE, "broker", _SEND, _SEND_ANSWER, access=_PUB_TOPIC, names=_V1),
    _spec(C.SEND_MESSAGE_V2, "broker", _SEND, _SEND_ANSWER, access=_PUB_TOPIC, names=_V2),
    _spec(C.SEND_BATCH_MESSAGE, "broker", _SEND, _SEND_ANSWER, access=_PUB_TOPIC, names=_V2),
    _spec(
        C.CONSUMER_SEND_MSG_BACK,
        "broker",
        send_back.ConsumerSendMsgBackRequestHeader,
        access=Access(group="group"),
    ),
    _spec(
        C.PULL_MESSAGE,
        "broker",
        pull.PullMessageRequestHeader,
        pull.PullMessageResponseHeader,
        access=_CONSUMER,
    ),
    _spec(
        C.LITE_PULL_MESSAGE,
        "broker",
        pull.PullMessageRequestHeader,
        pull.PullMessageResponseHeader,
        access=_CONSUMER,
    ),
    _spec(C.END_TRANSACTION, "broker", transaction.EndTransactionRequestHeader, access=SIGNED),
    # -- broker: POP consumption (rocketpy.broker.pop) -------------------------------------------
    _spec(
        C.POP_MESSAGE,
        "broker",
        pop.PopMessageRequestHeader,
        pop.PopMessageResponseHeader,
        access=_CONSUMER,
    ),
    _spec(C.ACK_MESSAGE, "broker", pop.AckMessageRequestHeader, access=_CONSUMER),
    _spec(
        C.BATCH_ACK_MESSAGE,
        "broker",
        body=pop.BATCH_ACK_BODY,
        access=Access(body=pop.batch_ack_resources),
    ),
    _spec(
        C.CHANGE_MESSAGE_INVISIBLETIME,
        "broker",
        pop.ChangeInvisibleTimeRequestHeader,
        pop.ChangeInvisibleTimeResponseHeader,
        access=_CONSUMER,
    ),
    _spec(
        C.PEEK_MESSAGE,
        "broker",
        pop.PeekMessageRequestHeader,
        pop.PopMessageResponseHeader,
        access=_CONSUMER,
    ),
    _spec(
        C.NOTIFICATION,
        "broker",
        pop.NotificationRequestHeader,
        pop.NotificationResponseHeader,
        access=_CONSUMER,
    ),
    _spec(
        C.POLLING_INFO,
        "broker",
        pop.PollingInfoRequestHeader,
        pop.PollingInfoResponseHeader,
        access=_CONSUMER,
    ),
    _spec(
        C.QUERY_ASSIGNMENT,
        "broker",
        body=pop.QUERY_ASSIGNMENT_BODY,
        access=Access(body=pop.assignment_resources),
    ),
    _spec(C.SET_MESSAGE_REQUEST_MODE, "broker", body=pop.SET_MODE_BODY, access=ADMIN),
    _spec(
        C.END_TRANSACTION_BATCH,
        "broker",
        transaction.EndTransactionBatchRequestHeader,
        transaction.EndTransactionBatchResponseHeader,
        access=SIGNED,
    ),
    # -- broker: queries -------------------------------------------------------------------------
    _spec(C.GET_MAX_OFFSET, "broker", offset.QueueRequestHeader, offset.OffsetResponseHeader, access=SIGNED),
    _spec(C.GET_MIN_OFFSET, "broker", offset.QueueRequestHeader, offset.OffsetResponseHeader, access=SIGNED),
    _spec(
        C.SEARCH_OFFSET_BY_TIMESTAMP,
        "broker",
        offset.SearchOffsetRequestHeader,
        offset.OffsetResponseHeader,
        access=SIGNED,
    ),
    _spec(
        C.GET_EARLIEST_MSG_STORETIME,
        "broker",
        offset.QueueRequestHeader,
        offset.StoreTimeResponseHeader,
        access=SIGNED,
    ),
    _spec(
        C.QUERY_MESSAGE,
        "broker",
        query.QueryMessageRequestHeader,
        query.QueryMessageResponseHeader,
        access=Access(topic="topic"),
    ),
    _spec(C.VIEW_MESSAGE_BY_ID, "broker", query.ViewMessageRequestHeader, access=SIGNED),
    # -- broker: clients and groups --------------------------------------------------------------
    _spec(C.HEART_BEAT, "broker", body=client.HEARTBEAT_DATA, access=Access(body=client.heartbeat_resources)),
    _spec(
        C.UNREGISTER_CLIENT,
        "broker",
        client.UnregisterClientRequestHeader,
        access=Access(group="consumer_group"),
    ),
    _spec(
        C.GET_CONSUMER_LIST_BY_GROUP,
        "broker",
        client.ConsumerGroupRequestHeader,
        access=Access(group="group"),
    ),
    _spec(
        C.QUERY_CONSUMER_OFFSET,
        "broker",
        offset.QueryConsumerOffsetRequestHeader,
        offset.OffsetResponseHeader,
        access=_CONSUMER,
    ),
    _spec(C.UPDATE_CONSUMER_OFFSET, "broker", offset.UpdateConsumerOffsetRequestHeader, access=_CONSUMER),
    _spec(C.LOCK_BATCH_MQ, "broker", body=client.LOCK_BATCH_BODY, access=SIGNED),
    _spec(C.UNLOCK_BATCH_MQ, "broker", body=client.LOCK_BATCH_BODY, access=SIGNED),
    # -- broker: administration ------------------------------------------------------------------
    _spec(
        C.UPDATE_AND_CREATE_TOPIC,
        "broker",
        admin.CreateTopicRequestHeader,
        access=Access(admin=True, action="Create", target=("Topic", "topic")),
    ),
    _spec(
        C.DELETE_TOPIC_IN_BROKER,
        "broker",
        admin.TopicRequestHeader,
        access=Access(admin=True, action="Delete", target=("Topic", "topic")),
    ),
    _spec(C.GET_ALL_TOPIC_CONFIG, "broker", access=LIST),
    _spec(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, "broker", access=ADMIN),
    _spec(C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "broker", access=LIST),
    _spec(C.DELETE_SUBSCRIPTIONGROUP, "broker", admin.DeleteSubscriptionGroupRequestHeader, access=ADMIN),
    _spec(C.GET_BROKER_CONFIG, "broker", access=GET),
    _spec(C.UPDATE_BROKER_CONFIG, "broker", access=ADMIN),
    _spec(C.GET_BROKER_RUNTIME_INFO, "broker", access=GET),
    _spec(C.GET_CONSUME_STATS, "broker", admin.GetConsumeStatsRequestHeader, access=GET),
    _spec(C.GET_TOPIC_STATS_INFO, "broker", admin.TopicRequestHeader, access=GET),
    _spec(C.GET_CONSUMER_CONNECTION_LIST, "broker", client.ConsumerGroupRequestHeader, access=GET),
    _spec(C.VIEW_BROKER_STATS_DATA, "broker", admin.ViewBrokerStatsDataRequestHeader, access=GET),
    _spec(C.GET_BROKER_CONSUME_STATS, "broker", admin.GetConsumeStatsInBrokerHeader, access=GET),
    _spec(C.CLEAN_EXPIRED_CONSUMEQUEUE, "broker", access=ADMIN),
    _spec(C.CLEAN_UNUSED_TOPIC, "broker", access=ADMIN),
    _spec(C.DELETE_EXPIRED_COMMITLOG, "broker", access=ADMIN),
    _spec(C.QUERY_CONSUME_QUEUE, "broker", admin.QueryConsumeQueueRequestHeader, access=GET),
    # what a slave copies from its master (with GET_ALL_TOPIC_CONFIG and GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    _spec(C.GET_ALL_CONSUMER_OFFSET, "broker", access=GET),
    _spec(C.GET_ALL_DELAY_OFFSET, "broker", access=GET),
    # controller mode (answered "controller mode is off" by other brokers)
    _spec(C.CONTROLLER_GET_SYNC_STATE_DATA, "broker", controller.BrokerNameRequestHeader, access=SIGNED),
    _spec(C.GET_BROKER_EPOCH_CACHE, "broker", access=SIGNED),
    _spec(C.NOTIFY_BROKER_ROLE_CHANGED, "broker", access=SIGNED),
    _spec(C.CONTROLLER_GET_METADATA_INFO, "broker", access=SIGNED),
    _spec(C.CONTROLLER_ELECT_MASTER, "broker", controller.ElectMasterRequestHeader, access=ADMIN),
    # ACL 2.0: users and ACLs (broker/auth/); changes need Update on the cluster (a Super user)
    _spec(C.AUTH_CREATE_USER, "broker", auth.UserRequestHeader, access=ADMIN),
    _spec(C.AUTH_UPDATE_USER, "broker", auth.UserRequestHeader, access=ADMIN),
    _spec(C.AUTH_DELETE_USER, "broker", auth.UserRequestHeader, access=ADMIN),
    _spec(C.AUTH_GET_USER, "broker", auth.UserRequestHeader, access=Access(admin=True, action="Get")),
    _spec(C.AUTH_LIST_USER, "broker", auth.ListUsersRequestHeader, access=Access(admin=True, action="List")),
    _spec(C.AUTH_CREATE_ACL, "broker", auth.AclRequestHeader, access=ADMIN),
    _spec(C.AUTH_UPDATE_ACL, "broker", auth.AclRequestHeader, access=ADMIN),
    _spec(C.AUTH_DELETE_ACL, "broker", auth.DeleteAclRequestHeader, access=ADMIN),
    _spec(C.AUTH_GET_ACL, "broker", auth.AclRequestHeader, access=Access(admin=True, action="Get")),
    _spec(C.AUTH_LIST_ACL, "broker", auth.ListAclsRequestHeader, access=Access(admin=True, action="List")),
    # -- broker: a group's live clients (the broker calls them on their own connection) -----------
    _spec(C.INVOKE_BROKER_TO_RESET_OFFSET, "broker", clients.ResetOffsetRequestHeader, access=ADMIN),
    _spec(
        C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
        "broker",
        clients.GetConsumerStatusRequestHeader,
        access=SIGNED,
    ),
    _spec(C.GET_PRODUCER_CONNECTION_LIST, "broker", clients.ProducerGroupRequestHeader, access=SIGNED),
    # served by both: the admin asks a broker, which forwards the call to the named client
    _spec(
        C.GET_CONSUMER_RUNNING_INFO,
        ("broker", "client"),
        clients.GetConsumerRunningInfoRequestHeader,
        access=Access(group="group"),
    ),
    _spec(
        C.CONSUME_MESSAGE_DIRECTLY,
        ("broker", "client"),
        clients.ConsumeMessageDirectlyRequestHeader,
        access=ADMIN,
    ),
    # -- NameServer ------------------------------------------------------------------------------
    _spec(
        C.REGISTER_BROKER,
        "namesrv",
        namesrv.RegisterBrokerRequestHeader,
        namesrv.RegisterBrokerResponseHeader,
        access=ADMIN,
    ),
    _spec(C.UNREGISTER_BROKER, "namesrv", namesrv.BrokerIdentityHeader, access=ADMIN),
    _spec(
        C.QUERY_DATA_VERSION,
        "namesrv",
        namesrv.BrokerIdentityHeader,
        namesrv.QueryDataVersionResponseHeader,
        access=OPEN,
    ),
    _spec(C.GET_ROUTEINFO_BY_TOPIC, "namesrv", admin.TopicRequestHeader, access=OPEN),
    _spec(C.GET_BROKER_CLUSTER_INFO, "namesrv", access=OPEN),
    _spec(C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, "namesrv", access=OPEN),
    _spec(C.DELETE_TOPIC_IN_NAMESRV, "namesrv", namesrv.DeleteTopicFromNamesrvRequestHeader, access=ADMIN),
    _spec(
        C.WIPE_WRITE_PERM_OF_BROKER,
        "namesrv",
        namesrv.BrokerNameRequestHeader,
        namesrv.WipeWritePermResponseHeader,
        access=ADMIN,
    ),
    _spec(
        C.ADD_WRITE_PERM_OF_BROKER,
        "namesrv",
        namesrv.BrokerNameRequestHeader,
        namesrv.AddWritePermResponseHeader,
        access=ADMIN,
    ),
    _spec(C.PUT_KV_CONFIG, "namesrv", namesrv.PutKVConfigRequestHeader, access=ADMIN),
    _spec(
        C.GET_KV_CONFIG, "namesrv", namesrv.KVConfigRequestHeader, namesrv.KVConfigResponseHeader, access=OPEN
    ),
    _spec(C.DELETE_KV_CONFIG, "namesrv", namesrv.KVConfigRequestHeader, access=ADMIN),
    _spec(C.GET_KVLIST_BY_NAMESPACE, "namesrv", namesrv.NamespaceRequestHeader, access=OPEN),
    _spec(C.GET_NAMESRV_CONFIG, "namesrv", access=SIGNED),
    _spec(C.UPDATE_NAMESRV_CONFIG, "namesrv", access=ADMIN),
    # -- the SDK: what a broker calls on a client's connection -----------------------------------
    _spec(C.NOTIFY_CONSUMER_IDS_CHANGED, "client", client.ConsumerGroupRequestHeader, access=OPEN),
    _spec(C.CHECK_TRANSACTION_STATE, "client", transaction.CheckTransactionStateRequestHeader, access=OPEN),
    _spec(C.RESET_CONSUMER_CLIENT_OFFSET, "client", clients.ResetOffsetRequestHeader, access=OPEN),
    _spec(C.GET_CONSUMER_STATUS_FROM_CLIENT, "client", clients.GetConsumerStatusRequestHeader, access=OPEN),
)

#: Request code -> its spec.
SPECS: dict[int, RequestSpec] = {int(s.code): s for s in _ALL}
assert len(SPECS) == len(_ALL), "a request code has two specs"


def spec_of(code: int) -> RequestSpec | None:
    """The spec of request ``code`` (None: no spec, so nobody serves it)."""
    return SPECS.get(code)


def codes_served_by(server: Server) -> frozenset[int]:
    """Every request code ``server`` serves."""
    return frozenset(code for code, s in SPECS.items() if server in s.served_by)


def check_served(server: Server, codes: Iterable[int]) -> None:
    """Check that ``server`` serves exactly the codes whose specs name it (a daemon's start calls this).

    Raises:
        RuntimeError: a code has no spec naming ``server``, or such a spec has no handler.
    """
    served = {int(c) for c in codes}
    declared = codes_served_by(server)
    problems = [f"{code_name(c)} is served but no spec names {server}" for c in sorted(served - declared)]
    problems += [f"{code_name(c)}'s spec names {server}, which lacks it" for c in sorted(declared - served)]
    if problems:
        raise RuntimeError("; ".join(problems) + " (rocketpy/protocol/specs.py)")
