"""ACL 2.0 on the gRPC endpoint (``rocketpy/grpc_api/auth.py``): reading the 5.x clients'
``authorization`` metadata, what each RPC's request needs (RocketMQ's proxy rules), and
``AuthEvaluator.check_grpc`` against users and ACLs."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from rocketpy.acl.auth_eval import AuthEvaluator
from rocketpy.acl.auth_model import User, parse_acl
from rocketpy.grpc_api.auth import Need, _peer_ip, needs_of, parse_authorization
from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb

DATE = "20261127T165800Z"


def _sig(password: str, date: str = DATE) -> str:
    return hmac.new(password.encode(), date.encode(), hashlib.sha1).hexdigest()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, Signature=AB12", ("alice", "AB12")),
        ("MQv2-HMAC-SHA1 Credential=alice/cn-hangzhou/rocketmq, Signature=ff", ("alice", "ff")),
        ("MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=ff", ("", "ff")),
        ("MQv2-HMAC-SHA1 Credential=bob", ("bob", None)),
        ("Basic YWxpY2U6c2VjcmV0", (None, None)),
        ("", (None, None)),
    ],
)
def test_parse_authorization(value: str, expected: tuple[str | None, str | None]) -> None:
    assert parse_authorization(value) == expected


def test_needs_follow_the_proxy() -> None:
    topic, group = pb.Resource(name="T"), pb.Resource(name="G")
    mq = pb.MessageQueue(topic=topic)
    sub = [Need("Group", "G", ("Sub",)), Need("Topic", "T", ("Sub",))]
    send = spb.SendMessageRequest(messages=[pb.Message(topic=topic)])
    assert needs_of("SendMessage", send) == [Need("Topic", "T", ("Pub",))]
    assert needs_of("SendMessage", spb.SendMessageRequest()) == []
    assert needs_of("QueryRoute", spb.QueryRouteRequest(topic=topic)) == [Need("Topic", "T", ("Pub", "Sub"))]
    assert needs_of("EndTransaction", spb.EndTransactionRequest(topic=topic)) == [
        Need("Topic", "T", ("Pub",))
    ]
    assert needs_of("ReceiveMessage", spb.ReceiveMessageRequest(group=group, message_queue=mq)) == sub
    assert needs_of("AckMessage", spb.AckMessageRequest(group=group, topic=topic)) == sub
    assert needs_of("QueryAssignment", spb.QueryAssignmentRequest(group=group, topic=topic)) == sub
    fwd = spb.ForwardMessageToDeadLetterQueueRequest(group=group, topic=topic)
    assert needs_of("ForwardMessageToDeadLetterQueue", fwd) == sub
    assert needs_of("ChangeInvisibleDuration", spb.ChangeInvisibleDurationRequest(group=group)) == [sub[0]]
    assert needs_of("NotifyClientTermination", spb.NotifyClientTerminationRequest(group=group)) == [sub[0]]
    consumer = spb.HeartbeatRequest(group=group, client_type=pb.PUSH_CONSUMER)
    assert needs_of("Heartbeat", consumer) == [sub[0]]
    assert needs_of("Heartbeat", spb.HeartbeatRequest(client_type=pb.PRODUCER)) == []
    update = spb.UpdateOffsetRequest(group=group, message_queue=mq)
    assert needs_of("UpdateOffset", update) == [
        Need("Group", "G", ("Sub", "Update")),
        Need("Topic", "T", ("Sub", "Update")),
    ]
    assert needs_of("Telemetry", None) == []
    assert needs_of("SendMessage", object()) == []  # not decoded: the endpoint answers BAD_REQUEST


def test_peer_ip() -> None:
    assert _peer_ip("ipv4:127.0.0.1:40123") == "127.0.0.1"
    assert _peer_ip("ipv6:[::1]:40123") == "::1"


def test_check_grpc() -> None:
    users = {
        "alice": User("alice", "alice-secret", "Normal"),
        "root": User("root", "root-secret", "Super"),
        "off": User("off", "off-secret", "Normal", "disable"),
    }
    acl = parse_acl({
        "subject": "User:alice",
        "policies": [{"entries": [
            {"resource": "Topic:*", "actions": ["Pub"], "decision": "Allow"},
            {"resource": "Topic:secret", "actions": ["All"], "decision": "Deny"},
        ]}],
    })  # fmt: skip
    ev = AuthEvaluator(users, {"alice": acl}, "DefaultCluster", authorization=True)
    pub = [Need("Topic", "orders", ("Pub",))]

    def check(user: str | None, sig: str | None, needs: list[Need] = pub) -> str | None:
        r = ev.check_grpc("10.0.0.1", user, sig, DATE, needs)
        return None if r is None else r.log_key

    assert check("alice", _sig("alice-secret")) is None
    assert check("alice", _sig("alice-secret").upper()) is None  # hex in any case
    assert check(None, None) == "no-account" and check("", _sig("")) == "no-account"
    assert check("mallory", _sig("x")) == "unknown:mallory"
    assert check("off", _sig("off-secret")) == "disabled:off"
    assert check("alice", _sig("wrong")) == "signature:alice" and check("alice", None) == "signature:alice"
    assert check("alice", _sig("alice-secret"), [Need("Topic", "secret", ("Pub",))]) == (
        "perm:alice:Topic:secret:Pub"
    )
    # QueryRoute: Pub or Sub; the more specific Deny of the secret topic decides
    assert check("alice", _sig("alice-secret"), [Need("Topic", "orders", ("Pub", "Sub"))]) is None
    assert check("alice", _sig("alice-secret"), [Need("Topic", "secret", ("Pub", "Sub"))]) is not None
    assert check("root", _sig("root-secret"), [Need("Topic", "secret", ("Pub",))]) is None
