"""ACL 2.0 against real daemons: a NameServer, a master with authenticationEnabled and
authorizationEnabled, and its slave (one daemon set for the module, as CI's budget asks).

Users and ACLs are made with ``mqadmin``; a producer and a consumer signing as a Normal user are
allowed or refused as its ACL says (a Deny beats a wider Allow); the Super user may do anything;
the slave copies the users and ACLs; a restarted master still has them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rocketpy import LitePullConsumer, Message, Producer
from rocketpy.errors import AccessDeniedError
from rocketpy.message import MessageQueue
from tests.conftest import DaemonPool
from tests.waiting import wait_until, wait_until_async

ROOT = ("root", "rootSecret1")
INNER = ("inner", "innerSecret1")
ALICE = ("alice", "aliceSecret1")
#: mqadmin's table forms (golden; the JSON forms are checked by their fields)
GET_ACL_TABLE = """\
#Subject    #PolicyType  #Resource           #Actions  #SourceIp  #Decision
User:alice  Custom       Topic:Orders*       Pub,Sub   -          Allow
User:alice  Custom       Group:gAlice        Pub,Sub   -          Allow
User:alice  Custom       Topic:OrdersSecret  All       -          Deny
"""
LIST_USER_TABLE = """\
#UserName  #Password  #UserType  #UserStatus
alice      ******     Normal     enable
"""
SYNC_FAST = {"slaveSyncInterval": 300, "haSendHeartbeatInterval": 200, "registerNameServerPeriod": 1000}
AUTH = {
    "authenticationEnabled": True,
    "authorizationEnabled": True,
    "initAuthenticationUser": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
    "innerClientAuthenticationCredentials": json.dumps({"accessKey": INNER[0], "secretKey": INNER[1]}),
    "mappedFileSizeCommitLog": 1 << 20,
    **SYNC_FAST,
}


class Cluster:
    """The module's daemons and the master's properties (to start it again on the same store)."""

    def __init__(self, pool: DaemonPool, store: Path) -> None:
        self.pool = pool
        self.ns = pool.namesrv().addr
        self.master_props = {"brokerName": "broker-a", "storePathRootDir": store, **AUTH}
        self.master = pool.broker(self.ns, **self.master_props)
        self.slave = pool.broker(self.ns, brokerName="broker-a", brokerId=1, brokerRole="SLAVE", **AUTH)

    def restart_master(self) -> None:
        self.master.terminate()  # a clean stop; auth.json was written at each change anyway
        self.master = self.pool.broker(self.ns, **self.master_props)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("acl2")
    pool = DaemonPool(tmp)
    try:
        yield Cluster(pool, tmp / "master-store")
    finally:
        pool.stop_all()


def mqadmin(keys: tuple[str, str] | None, *args: str) -> Any:
    """Run one mqadmin command in-process, signed with ``keys``."""
    from rocketpy.cli import admin_group

    creds = ["-a", keys[0], "-s", keys[1]] if keys else []
    return CliRunner().invoke(admin_group, [*creds, *args])


def ok(keys: tuple[str, str] | None, *args: str) -> str:
    result = mqadmin(keys, *args)
    assert result.exit_code == 0, f"{args}: {result.output} {result.exception!r}"
    return str(result.output)


async def send_as(ns: str, topic: str, keys: tuple[str, str] | None) -> Any:
    creds = {"access_key": keys[0], "secret_key": keys[1]} if keys else {}
    async with Producer("Acl2Producer", ns, retry_times=0, **creds) as producer:  # type: ignore[arg-type]
        return await producer.send(Message(topic, b"hello acl2"))


async def poll_as(ns: str, group: str, topic: str, keys: tuple[str, str]) -> list[Any]:
    consumer = LitePullConsumer(group, ns, access_key=keys[0], secret_key=keys[1])
    consumer.assign([MessageQueue(topic, "broker-a", 0)])
    await consumer.start()
    got: list[Any] = []
    try:

        async def polled() -> bool:
            got.extend(await consumer.poll(0.2))
            return bool(got)

        await wait_until_async(polled, 15.0, message=f"{group} polled nothing from {topic}")
        await consumer.commit_sync()
    finally:
        await consumer.shutdown()
    return got


def refused(ns: str, topic: str, keys: tuple[str, str] | None) -> str:
    with pytest.raises(AccessDeniedError) as ei:
        asyncio.run(send_as(ns, topic, keys))
    assert not ei.value.retriable
    return str(ei.value)


def test_users_and_acls_decide_requests(cluster: Cluster) -> None:
    ns, where = cluster.ns, ["-n", cluster.ns, "-b", cluster.master.addr]
    for topic in ("OrdersEU", "OrdersSecret", "Payments"):  # the Super user may create topics
        ok(ROOT, "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", topic, "-r", "1", "-w", "1")
    ok(ROOT, "createUser", *where, "-u", ALICE[0], "-p", ALICE[1])
    ok(ROOT, "createAcl", *where, "-s", "User:alice", "-r", "Topic:Orders*,Group:gAlice", "-a", "Pub,Sub",
       "-d", "Allow")  # fmt: skip
    ok(ROOT, "createAcl", *where, "-s", "User:alice", "-r", "Topic:OrdersSecret", "-a", "All", "-d", "Deny")
    assert ok(ROOT, "getAcl", *where, "-s", "User:alice") == GET_ACL_TABLE
    assert ok(ROOT, "listUser", *where, "-f", "ali") == LIST_USER_TABLE
    doc = json.loads(ok(ROOT, "listUser", *where, "--json"))
    assert [b["broker"] for b in doc["brokers"]] == [cluster.master.addr]
    users = {u["username"]: u for u in doc["brokers"][0]["users"]}
    assert set(users) == {"alice", "inner", "root"}
    assert users["alice"] == {"username": "alice", "password": ALICE[1], "userType": "Normal",
                              "userStatus": "enable"}  # fmt: skip

    assert asyncio.run(send_as(ns, "OrdersEU", ALICE)).msg_id  # Topic:Orders* Pub Allow
    assert "may not Pub Topic:OrdersSecret" in refused(ns, "OrdersSecret", ALICE)  # literal Deny first
    assert "may not Pub Topic:Payments" in refused(ns, "Payments", ALICE)  # nothing allows it
    assert "no AccessKey" in refused(ns, "OrdersEU", None)
    assert "wrong Signature" in refused(ns, "OrdersEU", (ALICE[0], "not-her-password"))
    assert "no user 'mallory'" in refused(ns, "OrdersEU", ("mallory", "whatever1"))
    got = asyncio.run(poll_as(ns, "gAlice", "OrdersEU", ALICE))
    assert got[0].body == b"hello acl2"
    # a Normal user may not administer; the Super user may do anything
    denied = mqadmin(ALICE, "createUser", *where, "-u", "bob", "-p", "bobSecret1")
    assert denied.exit_code != 0 and "may not Update Cluster:DefaultCluster" in str(denied.exception)
    assert asyncio.run(send_as(ns, "Payments", ROOT)).msg_id
    assert asyncio.run(poll_as(ns, "AnyGroup", "Payments", ROOT))[0].body == b"hello acl2"
    # disabling alice refuses her at once
    ok(ROOT, "updateUser", *where, "-u", "alice", "-s", "disable")
    assert "is disabled" in refused(ns, "OrdersEU", ALICE)
    ok(ROOT, "updateUser", *where, "-u", "alice", "-s", "enable")


def test_the_slave_copies_users_and_acls(cluster: Cluster) -> None:
    where = ["-n", cluster.ns, "-b", cluster.slave.addr]

    def copied() -> bool:
        result = mqadmin(ROOT, "getAcl", *where, "-s", "User:alice", "--json")
        return result.exit_code == 0 and "Topic:OrdersSecret" in result.output

    wait_until(copied, 20.0, message="the slave never copied alice's ACL")
    # a slave refuses changes of its own: they are made on the master
    result = mqadmin(ROOT, "createUser", *where, "-u", "carol", "-p", "carolSecret1")
    assert result.exit_code != 0 and "slave" in str(result.exception)


def test_users_and_acls_survive_a_restart(cluster: Cluster) -> None:
    cluster.restart_master()
    ns = cluster.ns

    async def routed() -> bool:
        try:
            await send_as(ns, "OrdersEU", ALICE)
        except Exception:  # the route or the broker is not back yet
            return False
        return True

    asyncio.run(wait_until_async(routed, 30.0, message="alice could not send after the restart"))
    assert "may not Pub Topic:OrdersSecret" in refused(ns, "OrdersSecret", ALICE)
    out = ok(ROOT, "getUser", "-n", ns, "-b", cluster.master.addr, "-u", "alice", "--json")
    assert "Normal" in out and "enable" in out


def test_copy_user_and_acl_to_another_master(cluster: Cluster) -> None:
    """copyUser / copyAcl: a second master (its own broker name) gets the first's user and ACL;
    a second copy updates what it has; a name the source lacks copies nothing."""
    ns, source = cluster.ns, cluster.master.addr
    other = cluster.pool.broker(ns, brokerName="broker-copy", **AUTH)
    try:
        target = other.addr
        ok(ROOT, "createUser", "-n", ns, "-b", source, "-u", "dave", "-p", "daveSecret1")
        ok(ROOT, "createAcl", "-n", ns, "-b", source, "-s", "User:dave", "-r", "Topic:Dave*", "-a", "Pub",
           "-d", "Allow")  # fmt: skip
        assert "no user" in str(mqadmin(ROOT, "getUser", "-n", ns, "-b", target, "-u", "dave").exception)

        out = ok(ROOT, "copyUser", "-n", ns, "-f", source, "-t", target, "-u", "dave")
        assert out == f"copy user of dave from {source} to {target} success.\n"
        out = ok(ROOT, "copyAcl", "-n", ns, "-f", source, "-t", target, "-s", "User:dave")
        assert out == f"copy acl of User:dave from {source} to {target} success.\n"

        def user_at(addr: str) -> Any:
            doc = json.loads(ok(ROOT, "getUser", "-n", ns, "-b", addr, "-u", "dave", "--json"))
            return doc["brokers"][0]["user"]

        def acl_at(addr: str) -> Any:
            return json.loads(ok(ROOT, "getAcl", "-n", ns, "-b", addr, "-s", "User:dave", "--json"))[
                "brokers"
            ][0]

        assert user_at(target) == user_at(source)
        assert acl_at(target)["acl"] == acl_at(source)["acl"]

        # the second copy updates: a new password and a wider ACL reach the target
        ok(ROOT, "updateUser", "-n", ns, "-b", source, "-u", "dave", "-p", "daveSecret2", "-s", "disable")
        ok(ROOT, "createAcl", "-n", ns, "-b", source, "-s", "User:dave", "-r", "Group:gDave", "-a", "Sub",
           "-d", "Allow")  # fmt: skip
        doc = json.loads(ok(ROOT, "copyUser", "-n", ns, "-f", source, "-t", target, "--json"))
        assert "dave" in doc["copied"] and {"root", "inner"} <= set(doc["copied"])
        ok(ROOT, "copyAcl", "-n", ns, "-f", source, "-t", target)
        assert user_at(target)["password"] == "daveSecret2" and user_at(target)["userStatus"] == "disable"
        assert acl_at(target)["acl"] == acl_at(source)["acl"]

        missing = mqadmin(ROOT, "copyUser", "-n", ns, "-f", source, "-t", target, "-u", "dave,nobody")
        assert missing.exit_code != 0 and "no user nobody" in str(missing.exception)
    finally:
        other.terminate()
