"""ACL 2.0: the allow/deny matrix against a plain model of the rules (hypothesis over policies and
requests), users and ACL documents (one clear error, nothing half-applied), the lockout rule and the
manager's changes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.acl.auth_eval import AclIndex, AuthEvaluator, admins, decide
from rocketpy.acl.auth_model import AuthDataError, User, parse_acl, parse_resource, parse_user
from rocketpy.acl.signing import RequestSigner
from rocketpy.broker.auth_metadata import AuthLockoutError, AuthMetadataManager
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.command import RemotingCommand

TYPES = ("Topic", "Group", "Cluster")
NAMES = ("orders", "order-eu", "pay", "DefaultCluster")
RESOURCES = ("*", "Topic:*", "Group:*", "Topic:orders", "Topic:order*", "Topic:pay", "Group:order*",
             "Group:pay", "Cluster:DefaultCluster", "Cluster:*")  # fmt: skip
ACTIONS = ("Pub", "Sub", "Create", "Update", "Delete", "Get", "List")
IPS = ("10.0.0.1", "10.0.0.2", "10.0.1.1")
SOURCES = ("10.0.0.1", "10.0.0.0/24", "10.0.1.1")

entry_st = st.fixed_dictionaries({
    "ptype": st.sampled_from(("Custom", "Default")),
    "resource": st.sampled_from(RESOURCES),
    "actions": st.sets(st.sampled_from((*ACTIONS, "All")), min_size=1, max_size=3),
    "ips": st.sets(st.sampled_from(SOURCES), max_size=2),
    "decision": st.sampled_from(("Allow", "Deny")),
})  # fmt: skip


# ---- the plain model --------------------------------------------------------------------------------


def model_matches(resource: str, rtype: str, name: str) -> bool:
    if resource == "*":
        return True
    kind, _, pattern = resource.partition(":")
    if kind != rtype:
        return False
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def model_from(ips: set[str], ip: str) -> bool:
    return not ips or ip in ips or ("10.0.0.0/24" in ips and ip.startswith("10.0.0."))


def model_order(resource: str, decision: str) -> tuple[int, int, int]:
    """RocketMQ's sort of matching entries: ``*`` after typed resources; a literal name, then a
    prefix (longer first), then ``Type:*``; at a tie Deny first."""
    deny_first = 0 if decision == "Deny" else 1
    if resource == "*":
        return (9, 0, deny_first)
    pattern = resource.partition(":")[2]
    if pattern == "*":
        return (3, 0, deny_first)
    if pattern.endswith("*"):
        return (2, -len(pattern), deny_first)
    return (1, 0, deny_first)


def model_allows(entries: list[dict[str, Any]], rtype: str, name: str, action: str, ip: str) -> bool:
    """Custom entries first (Default only when none matches); the first of the matching entries in
    RocketMQ's order decides; none: deny."""
    for ptype in ("Custom", "Default"):
        hits = [
            e
            for e in entries
            if e["ptype"] == ptype
            and model_matches(e["resource"], rtype, name)
            and (action in e["actions"] or "All" in e["actions"])
            and model_from(e["ips"], ip)
        ]
        if hits:
            first = min(hits, key=lambda e: model_order(e["resource"], e["decision"]))
            return bool(first["decision"] == "Allow")
    return False


def acl_doc(entries: list[dict[str, Any]], subject: str = "User:alice") -> dict[str, Any]:
    policies: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        policies.setdefault(e["ptype"], []).append(
            {
                "resource": e["resource"],
                "actions": sorted(e["actions"]),
                "sourceIps": sorted(e["ips"]),
                "decision": e["decision"],
            }
        )
    return {"subject": subject, "policies": [{"policyType": t, "entries": es} for t, es in policies.items()]}


def dedupe(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """RocketMQ keeps one entry per (policy type, resource): the last one given."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for e in entries:
        out.pop((e["ptype"], e["resource"]), None)
        out[(e["ptype"], e["resource"])] = e
    return list(out.values())


# ---- the matrix -------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(
    entries=st.lists(entry_st, min_size=0, max_size=6),
    rtype=st.sampled_from(TYPES), name=st.sampled_from(NAMES),
    action=st.sampled_from(ACTIONS), ip=st.sampled_from(IPS),
)  # fmt: skip
def test_decide_matches_the_plain_model(
    entries: list[dict[str, Any]], rtype: str, name: str, action: str, ip: str
) -> None:
    entries = dedupe(entries)
    acl = parse_acl(acl_doc(entries)) if entries else None
    expected = model_allows(entries, rtype, name, action, ip)
    assert decide(acl, rtype, name, action, ip) == expected
    index = AclIndex(acl) if acl is not None else None
    assert decide(acl, rtype, name, action, ip, index) == expected  # the broker's indexed path


CODES = (RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE, RequestCode.UPDATE_AND_CREATE_TOPIC,
         RequestCode.GET_BROKER_RUNTIME_INFO)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(entry_st, min_size=1, max_size=5),
    requests=st.lists(
        st.tuples(st.sampled_from(CODES), st.sampled_from(("orders", "order-eu", "pay"))),
        min_size=1, max_size=6,
    ),
    super_user=st.booleans(),
)  # fmt: skip
def test_signed_requests_follow_the_model(
    entries: list[dict[str, Any]], requests: list[tuple[int, str]], super_user: bool
) -> None:
    """One evaluator checks a run of requests, each from every address and twice: verdicts it
    remembers (by user, code, resources and address) answer as the model does for every later
    request."""
    entries = dedupe(entries)
    user = User("alice", "alice-secret", "Super" if super_user else "Normal")
    ev = AuthEvaluator({"alice": user}, {"alice": parse_acl(acl_doc(entries))}, "DefaultCluster", True)
    for code, topic in requests:
        request, needs = _request(code, topic)
        for ip in (*IPS, *IPS):
            expected = super_user or all(model_allows(entries, t, n, a, ip) for t, n, a in needs)
            assert (ev.check(ip, request) is None) == expected, (code, topic, ip)


def _request(code: int, topic: str) -> tuple[RemotingCommand, list[tuple[str, str, str]]]:
    """A request of ``code`` naming ``topic``, signed by alice, and what it needs."""
    ext: dict[str, Any]
    if code == RequestCode.SEND_MESSAGE_V2:
        ext, needs = {"a": "pg", "b": topic, "c": "TBW102"}, [("Topic", topic, "Pub")]
    elif code == RequestCode.PULL_MESSAGE:
        ext = {"consumerGroup": "pay", "topic": topic, "queueId": 0, "queueOffset": 0, "maxMsgNums": 1,
               "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0, "subVersion": 0}  # fmt: skip
        needs = [("Topic", topic, "Sub"), ("Group", "pay", "Sub")]
    elif code == RequestCode.UPDATE_AND_CREATE_TOPIC:
        ext, needs = {"topic": topic}, [("Topic", topic, "Create")]
    else:
        ext, needs = {}, [("Cluster", "DefaultCluster", "Get")]
    request = RemotingCommand.request(code, ext)
    RequestSigner("alice", "alice-secret")(request)
    return request, needs


def test_authentication() -> None:
    users = {"bob": User("bob", "bob-secret"), "off": User("off", "off-secret", status="disable")}
    ev = AuthEvaluator(users, {}, "C", authorization=False)  # authentication only: any valid user passes

    def signed(ak: str, sk: str) -> RemotingCommand:
        r = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
        RequestSigner(ak, sk)(r)
        return r

    assert ev.check("1.2.3.4", signed("bob", "bob-secret")) is None
    refused = ev.check("1.2.3.4", signed("bob", "wrong"))
    assert refused is not None and "wrong Signature" in refused.remark
    refused = ev.check("1.2.3.4", signed("off", "off-secret"))
    assert refused is not None and "disabled" in refused.remark
    refused = ev.check("1.2.3.4", signed("eve", "x"))
    assert refused is not None and "no user 'eve'" in refused.remark
    refused = ev.check("1.2.3.4", RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
    assert refused is not None and "no AccessKey" in refused.remark


# ---- documents --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "must be a map"),
        ({"password": "x"}, "username is missing"),
        ({"username": "a"}, "password is missing"),
        (
            {"username": "a", "password": "p", "userType": "root"},
            "userType='root' is not one of Super, Normal",
        ),
        ({"username": "a", "password": "p", "userStatus": 1}, "userStatus=1 is not one of enable, disable"),
    ],
)
def test_bad_user_documents(doc: Any, message: str) -> None:
    with pytest.raises(AuthDataError, match=message):
        parse_user(doc)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"subject": "User:a"}, "policies must list"),
        ({"subject": "Group:a", "policies": []}, "use User:NAME"),
        ({"subject": "User:a", "policies": [{"entries": []}]}, r"entries must list"),
        ({"subject": "User:a", "policies": [{"entries": [{"resource": "Queue:x", "actions": ["Pub"],
                                                          "decision": "Allow"}]}]}, "is not one of Cluster"),
        ({"subject": "User:a", "policies": [{"entries": [{"resource": "Topic:a*b", "actions": ["Pub"],
                                                          "decision": "Allow"}]}]}, "may only end"),
        ({"subject": "User:a", "policies": [{"entries": [{"resource": "Topic:a", "actions": ["Publish"],
                                                          "decision": "Allow"}]}]}, "actions='Publish'"),
        ({"subject": "User:a", "policies": [{"entries": [{"resource": "Topic:a", "actions": ["Pub"],
                                                          "decision": "Maybe"}]}]}, "decision='Maybe'"),
        ({"subject": "User:a", "policies": [{"entries": [{"resource": "Topic:a", "actions": ["Pub"],
                                                          "sourceIps": ["10.0.0.300"],
                                                          "decision": "Allow"}]}]},
         "not an IP address"),
    ],
)  # fmt: skip
def test_bad_acl_documents(doc: Any, message: str) -> None:
    with pytest.raises(AuthDataError, match=message):
        parse_acl(doc)


def test_resource_forms() -> None:
    assert parse_resource("*").key() == "*"
    assert parse_resource("topic:orders").key() == "Topic:orders"
    assert parse_resource("Topic:ord*").key() == "Topic:ord*" and parse_resource("Topic:ord*").matches(
        "Topic", "orders"
    )
    assert parse_resource("Group:*").matches("Group", "x") and not parse_resource("Group:*").matches(
        "Topic", "x"
    )


# ---- the manager ------------------------------------------------------------------------------------


def _manager(tmp_path: Path) -> AuthMetadataManager:
    m = AuthMetadataManager(str(tmp_path / "auth.json"), "DefaultCluster")
    m.init_users('{"username": "root", "password": "root-secret"}', None)
    return m


async def test_lockout_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    await m.create_user({"username": "ops", "password": "ops-secret"})
    update = {
        "ptype": "Custom",
        "resource": "Cluster:*",
        "actions": {"Update"},
        "ips": set(),
        "decision": "Allow",
    }
    await m.create_acl(acl_doc([update], "User:ops"))
    assert admins(m.users, m.acls, "DefaultCluster") == ["ops", "root"]
    await m.delete_user("root")  # ops can still administer
    before = (dict(m.users), dict(m.acls))
    # a Deny as specific as the Allow (a literal name is more specific than Cluster:*)
    deny_cluster = {"ptype": "Custom", "resource": "Cluster:DefaultCluster", "actions": {"All"}, "ips": set(),
                    "decision": "Deny"}  # fmt: skip
    deny = acl_doc([deny_cluster], "User:ops")
    for change in (
        m.delete_user("ops"),
        m.update_user({"username": "ops", "userStatus": "disable"}),
        m.create_acl(deny),
        m.delete_acl("User:ops"),
    ):
        with pytest.raises(AuthLockoutError, match="no enabled user could administer"):
            await change
    assert (m.users, m.acls) == before
    # a wider Deny leaves the more specific Allow deciding (RocketMQ's order): allowed
    deny_all = {"ptype": "Custom", "resource": "*", "actions": {"All"}, "ips": set(), "decision": "Deny"}
    await m.create_acl(acl_doc([deny_all], "User:ops"))
    assert admins(m.users, m.acls, "DefaultCluster") == ["ops"]
    # a Deny limited to some addresses leaves ops able from the others: allowed
    await m.create_acl(acl_doc([{"ptype": "Custom", "resource": "*", "actions": {"All"}, "ips": {"10.0.1.1"},
                                 "decision": "Deny"}], "User:ops"))  # fmt: skip


async def test_changes_are_stored_and_merged(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    await m.create_user({"username": "app", "password": "app-secret"})
    with pytest.raises(AuthDataError, match="exists already"):
        await m.create_user({"username": "app", "password": "again"})
    one = {
        "ptype": "Custom",
        "resource": "Topic:orders",
        "actions": {"Pub"},
        "ips": set(),
        "decision": "Allow",
    }
    two = {**one, "resource": "Topic:pay", "actions": {"Sub"}}
    await m.create_acl(acl_doc([one, two], "User:app"))
    await m.create_acl(acl_doc([{**one, "decision": "Deny"}], "User:app"))  # replaces the orders entry
    entries = {e.resource.key(): e.decision for _, e in m.get_acl("User:app").entries()}
    assert entries == {"Topic:orders": "Deny", "Topic:pay": "Allow"}
    await m.delete_acl("User:app", "", "Topic:pay")
    assert [e.resource.key() for _, e in m.get_acl("User:app").entries()] == ["Topic:orders"]
    with pytest.raises(AuthDataError, match="no user 'ghost'"):
        await m.create_acl(acl_doc([one], "User:ghost"))
    await m.file.persist()
    again = AuthMetadataManager(str(tmp_path / "auth.json"), "DefaultCluster")
    await asyncio.to_thread(again.load)
    assert again.users == m.users and again.acls == m.acls
    assert [u.username for u in again.list_users("ap")] == ["app"]
    assert [a.subject for a in again.list_acls("", "orders")] == ["User:app"]
    m.read_only = True
    with pytest.raises(AuthDataError, match="is a slave"):
        await m.delete_user("app")
