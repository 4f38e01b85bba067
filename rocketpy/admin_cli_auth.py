"""``mqadmin`` ACL 2.0 commands: createUser, updateUser, deleteUser, getUser, listUser, createAcl,
updateAcl, deleteAcl, getAcl, listAcl (RocketMQ 5's names and options; ``-c`` every master of a
cluster, or ``-b`` one broker), and copyUser, copyAcl (``-f`` one broker to ``-t`` another).

Registered on the ``mqadmin`` group of ``rocketpy.admin_cli`` (which imports this module); output
follows the same rules (a plain table, or one JSON document with ``--json``). Changes print
RocketMQ's ``create user to ADDR success.`` lines. Passwords are shown as ``******`` in tables
(RocketMQ prints them); ``--json`` carries them, for scripts that copy users.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from rocketpy.admin_cli import _admin_command, _emit

USER_HEADERS = ["UserName", "Password", "UserType", "UserStatus"]
ACL_HEADERS = ["Subject", "PolicyType", "Resource", "Actions", "SourceIp", "Decision"]


def _where(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("-b", "--brokerAddr", "broker_addr", help="One broker (host:port).")(fn)
    return click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")(fn)


def _done(as_json: bool, what: str, addrs: list[str]) -> None:
    if as_json:
        _emit(True, {"result": "success", "brokers": addrs})
        return
    for addr in addrs:
        click.echo(f"{what} to {addr} success.")


def user_rows(docs: list[dict[str, Any]]) -> list[list[Any]]:
    """Table rows of UserInfo documents (password hidden)."""
    return [[d.get("username"), "******", d.get("userType"), d.get("userStatus")] for d in docs]


def acl_rows(docs: list[dict[str, Any]]) -> list[list[Any]]:
    """Table rows of AclInfo documents: one per entry (RocketMQ's getAcl layout)."""
    rows = []
    for acl in docs:
        for policy in acl.get("policies") or []:
            for e in policy.get("entries") or []:
                rows.append(
                    [
                        acl.get("subject"),
                        policy.get("policyType"),
                        e.get("resource"),
                        ",".join(e.get("actions") or []),
                        ",".join(e.get("sourceIps") or []) or None,
                        e.get("decision"),
                    ]
                )
    return rows


# ---- users ----------------------------------------------------------------------------------------


@_where
@click.option("-u", "--username", required=True, help="The user's name (its AccessKey).")
@click.option("-p", "--password", required=True, help="The user's password (its SecretKey).")
@click.option("-t", "--userType", "user_type", default=None, help="Super or Normal (default Normal).")
@_admin_command("createUser")
async def create_user(
    admin: Any,
    as_json: bool,
    cluster: str | None,
    broker_addr: str | None,
    username: str,
    password: str,
    user_type: str | None,
) -> None:
    """Create a user (ACL 2.0)."""
    addrs = await admin.auth.create_user(
        username, password, user_type, cluster=cluster, broker_addr=broker_addr
    )
    _done(as_json, "create user", addrs)


@_where
@click.option("-u", "--username", required=True, help="The user to change.")
@click.option("-p", "--password", default=None, help="A new password.")
@click.option("-t", "--userType", "user_type", default=None, help="Super or Normal.")
@click.option("-s", "--userStatus", "user_status", default=None, help="enable or disable.")
@_admin_command("updateUser")
async def update_user(
    admin: Any,
    as_json: bool,
    cluster: str | None,
    broker_addr: str | None,
    username: str,
    password: str | None,
    user_type: str | None,
    user_status: str | None,
) -> None:
    """Change a user's password, type or status (ACL 2.0)."""
    addrs = await admin.auth.update_user(
        username, password, user_type, user_status, cluster=cluster, broker_addr=broker_addr
    )
    _done(as_json, "update user", addrs)


@_where
@click.option("-u", "--username", required=True, help="The user to delete (its ACL goes too).")
@_admin_command("deleteUser")
async def delete_user(
    admin: Any, as_json: bool, cluster: str | None, broker_addr: str | None, username: str
) -> None:
    """Delete a user and its ACL (ACL 2.0)."""
    _done(
        as_json,
        "delete user",
        await admin.auth.delete_user(username, cluster=cluster, broker_addr=broker_addr),
    )


@_where
@click.option("-u", "--username", required=True, help="The user to show.")
@_admin_command("getUser")
async def get_user(
    admin: Any, as_json: bool, cluster: str | None, broker_addr: str | None, username: str
) -> None:
    """Show a user (ACL 2.0)."""
    found = await admin.auth.get_user(username, cluster=cluster, broker_addr=broker_addr)
    _emit(
        as_json,
        {"brokers": [{"broker": a, "user": d} for a, d in found]},
        USER_HEADERS,
        user_rows([d for _, d in found[:1]]),
    )


@_where
@click.option("-f", "--filter", "name_filter", default="", help="Only users whose name contains this.")
@_admin_command("listUser")
async def list_user(
    admin: Any, as_json: bool, cluster: str | None, broker_addr: str | None, name_filter: str
) -> None:
    """List users (ACL 2.0)."""
    found = await admin.auth.list_users(name_filter, cluster=cluster, broker_addr=broker_addr)
    _emit(
        as_json,
        {"brokers": [{"broker": a, "users": d} for a, d in found]},
        USER_HEADERS,
        user_rows(found[0][1] if found else []),
    )


# ---- ACLs -----------------------------------------------------------------------------------------


def _acl_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("-d", "--decision", required=True, help="Allow or Deny.")(fn)
    fn = click.option(
        "-i", "--sourceIp", "source_ips", default=None, help="Source addresses or CIDR blocks, ','-separated."
    )(fn)
    fn = click.option(
        "-a",
        "--actions",
        required=True,
        help="Pub, Sub, Create, Update, Delete, Get, List or All, ','-separated.",
    )(fn)
    fn = click.option(
        "-r",
        "--resources",
        required=True,
        help="Topic:NAME, Topic:PREFIX*, Group:..., Cluster:..., or *; ','-separated.",
    )(fn)
    return click.option("-s", "--subject", required=True, help="User:NAME.")(fn)


@_where
@_acl_options
@_admin_command("createAcl")
async def create_acl(
    admin: Any,
    as_json: bool,
    cluster: str | None,
    broker_addr: str | None,
    subject: str,
    resources: str,
    actions: str,
    source_ips: str | None,
    decision: str,
) -> None:
    """Add ACL entries to a user (ACL 2.0); an entry for the same resource is replaced."""
    addrs = await admin.auth.create_acl(
        subject, resources, actions, decision, source_ips, cluster=cluster, broker_addr=broker_addr
    )
    _done(as_json, "create acl", addrs)


@_where
@_acl_options
@_admin_command("updateAcl")
async def update_acl(
    admin: Any,
    as_json: bool,
    cluster: str | None,
    broker_addr: str | None,
    subject: str,
    resources: str,
    actions: str,
    source_ips: str | None,
    decision: str,
) -> None:
    """Change a user's ACL entries for these resources (ACL 2.0)."""
    addrs = await admin.auth.create_acl(
        subject,
        resources,
        actions,
        decision,
        source_ips,
        update=True,
        cluster=cluster,
        broker_addr=broker_addr,
    )
    _done(as_json, "update acl", addrs)


@_where
@click.option("-s", "--subject", required=True, help="User:NAME.")
@click.option("-r", "--resources", "resource", default=None, help="Only this resource's entry.")
@click.option("-t", "--policyType", "policy_type", default=None, help="Custom (default) or Default.")
@_admin_command("deleteAcl")
async def delete_acl(
    admin: Any,
    as_json: bool,
    cluster: str | None,
    broker_addr: str | None,
    subject: str,
    resource: str | None,
    policy_type: str | None,
) -> None:
    """Delete a user's ACL, or its entry for one resource (ACL 2.0)."""
    addrs = await admin.auth.delete_acl(
        subject, resource, policy_type, cluster=cluster, broker_addr=broker_addr
    )
    _done(as_json, "delete acl", addrs)


@_where
@click.option("-s", "--subject", required=True, help="User:NAME.")
@_admin_command("getAcl")
async def get_acl(
    admin: Any, as_json: bool, cluster: str | None, broker_addr: str | None, subject: str
) -> None:
    """Show a user's ACL (ACL 2.0)."""
    found = await admin.auth.get_acl(subject, cluster=cluster, broker_addr=broker_addr)
    _emit(
        as_json,
        {"brokers": [{"broker": a, "acl": d} for a, d in found]},
        ACL_HEADERS,
        acl_rows([d for _, d in found[:1]]),
    )


@_where
@click.option("-s", "--subject", "subject_filter", default="", help="Only subjects containing this.")
@click.option(
    "-r", "--resource", "resource_filter", default="", help="Only ACLs with a resource containing this."
)
@_admin_command("listAcl")
async def list_acl(
    admin: Any,
    as_json: bool,
    cluster: str | None,
    broker_addr: str | None,
    subject_filter: str,
    resource_filter: str,
) -> None:
    """List ACLs (ACL 2.0)."""
    found = await admin.auth.list_acls(
        subject_filter, resource_filter, cluster=cluster, broker_addr=broker_addr
    )
    _emit(
        as_json,
        {"brokers": [{"broker": a, "acls": d} for a, d in found]},
        ACL_HEADERS,
        acl_rows(found[0][1] if found else []),
    )


# ---- copies between brokers -----------------------------------------------------------------------


def _copied(as_json: bool, what: str, names: list[str], source: str, target: str) -> None:
    if as_json:
        _emit(True, {"result": "success", "from": source, "to": target, "copied": names})
        return
    for name in names:
        click.echo(f"copy {what} of {name} from {source} to {target} success.")


@click.option("-f", "--fromBroker", "source", required=True, help="The broker the users are copied from.")
@click.option("-t", "--toBroker", "target", required=True, help="The broker they are copied to.")
@click.option("-u", "--username", "usernames", default=None, help="Only these users (','-separated).")
@_admin_command("copyUser")
async def copy_user(admin: Any, as_json: bool, source: str, target: str, usernames: str | None) -> None:
    """Copy users (ACL 2.0) from one broker to another: created there, or updated when present."""
    _copied(as_json, "user", await admin.auth.copy_users(source, target, usernames), source, target)


@click.option("-f", "--fromBroker", "source", required=True, help="The broker the ACLs are copied from.")
@click.option("-t", "--toBroker", "target", required=True, help="The broker they are copied to.")
@click.option("-s", "--subjects", default=None, help="Only these subjects (User:NAME, ','-separated).")
@_admin_command("copyAcl")
async def copy_acl(admin: Any, as_json: bool, source: str, target: str, subjects: str | None) -> None:
    """Copy ACLs (ACL 2.0) from one broker to another: created there, or merged by resource."""
    _copied(as_json, "acl", await admin.auth.copy_acls(source, target, subjects), source, target)
