"""ACL 2.0's decisions: who a request is (authentication) and what it may do (authorization).

The rules, in order:

1. authentication (``authenticationEnabled``): the request's ``AccessKey`` names a user, the user
   is enabled, and ``Signature`` is ``Base64(HmacSHA1(password, signed content))`` (the signature
   ACL 1.0 clients already send, ``signing.py``);
2. authorization (``authorizationEnabled``): a Super user may do everything; a Normal user needs,
   for every (resource, action) the request code declares (``resources.request_needs_v2``), an
   Allow entry and no Deny entry among the matching entries of its ACL — matching = resource
   pattern covers the resource, the entry's actions cover the action, and the source address is
   in the entry's ``sourceIps`` (or it has none). The Custom policy's entries are used; the Default
   policy's only when no Custom entry matches. The **most specific** matching entry decides
   (RocketMQ's ``AclAuthorizationHandler.comparePolicyEntries``): a typed resource before ``*``;
   within a type a literal name, then prefixes (the longer first), then ``Type:*``. Among entries
   of the same specificity **Deny wins** (RocketMQ 5.4's order, apache/rocketmq#9785); with none
   matching, the request is refused. So ``Allow Topic:orders`` punches through ``Deny Topic:*``,
   and ``Deny Topic:order*`` through ``Allow *``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping

from rocketpy.acl.auth_model import (
    ALLOW,
    ANY,
    CLUSTER,
    CUSTOM,
    DEFAULT,
    DENY,
    LITERAL,
    PREFIXED,
    SUPER,
    Acl,
    PolicyEntry,
    Resource,
    User,
)
from rocketpy.acl.resources import request_needs_v2
from rocketpy.acl.signing import ACCESS_KEY, SIGNATURE, HmacKey
from rocketpy.acl.validator import Refusal
from rocketpy.acl.verdicts import Verdicts
from rocketpy.protocol.codes import code_name
from rocketpy.remoting.command import RemotingCommand


class AclIndex:
    """An ACL's entries by policy type, then literal ``(type, name)`` or resource type for patterns,
    so a check reads only the entries that can match (not the whole ACL)."""

    __slots__ = ("_literal", "_wide")

    def __init__(self, acl: Acl) -> None:
        self._literal: dict[str, dict[tuple[str, str | None], list[PolicyEntry]]] = {}
        self._wide: dict[str, dict[str, list[PolicyEntry]]] = {}
        for ptype, entries in acl.policies.items():
            for e in entries:
                r = e.resource
                if r.pattern == LITERAL:
                    self._literal.setdefault(ptype, {}).setdefault((r.type, r.name), []).append(e)
                else:  # PREFIXED or ANY, under its type (ANY for ``*``)
                    self._wide.setdefault(ptype, {}).setdefault(r.type, []).append(e)

    def candidates(self, ptype: str, rtype: str, name: str) -> list[PolicyEntry]:
        """The entries of ``ptype`` that may match ``rtype``/``name`` (patterns still to check)."""
        wide = self._wide.get(ptype, {})
        return [
            *self._literal.get(ptype, {}).get((rtype, name), ()),
            *wide.get(rtype, ()),
            *wide.get(ANY, ()),
        ]


def specificity(resource: Resource) -> tuple[int, int, int]:
    """Sort key of a matching entry's resource, most specific first (RocketMQ's order): a typed
    resource before ``*``; a literal name, then a prefix (the longer first), then ``Type:*``."""
    if resource.type == ANY:
        return (1, 0, 0)
    if resource.pattern == LITERAL:
        return (0, 0, 0)
    if resource.pattern == PREFIXED:
        return (0, 1, -len(resource.name or ""))
    return (0, 2, 0)


def _decision(
    entries: Iterable[PolicyEntry], rtype: str, name: str, actions: tuple[str, ...], ip: str | None
) -> str | None:
    """The decision of the most specific matching entries (Deny when one of them denies), None
    when none matches. An entry matches when it covers one of ``actions`` (RocketMQ's
    ``isMatchAction``: QueryRoute asks for Pub or Sub)."""
    best: tuple[int, int, int] | None = None
    decisions: set[str] = set()
    for entry in entries:
        if not entry.resource.matches(rtype, name):
            continue
        if not any(entry.covers(a) for a in actions):
            continue
        applies = entry.from_address(ip)
        if applies is None:  # from some address only
            applies = entry.decision == ALLOW
        if not applies:
            continue
        rank = specificity(entry.resource)
        if best is None or rank < best:
            best, decisions = rank, {entry.decision}
        elif rank == best:
            decisions.add(entry.decision)
    if not decisions:
        return None
    return DENY if DENY in decisions else ALLOW


def decide(
    acl: Acl | None, rtype: str, name: str, action: str, ip: str | None, index: AclIndex | None = None
) -> bool:
    """True when ``acl`` allows ``action`` on ``rtype``/``name`` from ``ip``.

    ``ip=None`` asks "from some address": entries limited to source addresses count for an Allow
    and not for a Deny (used to tell whether a user can administer at all). ``index`` (``acl``'s)
    only makes it faster.
    """
    return decide_any(acl, rtype, name, (action,), ip, index)


def decide_any(
    acl: Acl | None,
    rtype: str,
    name: str,
    actions: tuple[str, ...],
    ip: str | None,
    index: AclIndex | None = None,
) -> bool:
    """``decide`` for a request that needs any one of ``actions`` (RocketMQ's contexts with
    several actions)."""
    if acl is None:
        return False
    for ptype in (CUSTOM, DEFAULT):
        entries = index.candidates(ptype, rtype, name) if index else acl.policies.get(ptype, ())
        decision = _decision(entries, rtype, name, actions, ip)
        if decision is not None:
            return decision == ALLOW
    return False


def is_admin(user: User, acl: Acl | None, cluster: str) -> bool:
    """True when ``user`` can administer users and ACLs: enabled, and Super or allowed Update on
    the cluster (from some address)."""
    if not user.enabled:
        return False
    return user.user_type == SUPER or decide(acl, CLUSTER, cluster, "Update", None)


def admins(users: Mapping[str, User], acls: Mapping[str, Acl], cluster: str) -> list[str]:
    """The names of the users who can administer (``is_admin``)."""
    return sorted(n for n, u in users.items() if is_admin(u, acls.get(n), cluster))


class AuthEvaluator:
    """Checks requests against one version of the users and ACLs (built again on every change).

    Args:
        users: name -> user.
        acls: user name -> its ACL.
        cluster: the broker's cluster (the resource of cluster-wide actions).
        authorization: False: authentication only (``authorizationEnabled=false``).
    """

    __slots__ = ("_indexes", "_keys", "_verdicts", "acls", "authorization", "cluster", "users")

    def __init__(
        self, users: Mapping[str, User], acls: Mapping[str, Acl], cluster: str, authorization: bool
    ) -> None:
        self.users = dict(users)
        self.acls = dict(acls)
        self.cluster = cluster
        self.authorization = authorization
        self._keys = {name: HmacKey(u.password) for name, u in self.users.items()}
        self._indexes = {name: AclIndex(acl) for name, acl in self.acls.items()}
        #: authorization verdicts by user, code, resources and source address (``verdicts``)
        self._verdicts = Verdicts()

    def check(self, ip: str, request: RemotingCommand) -> Refusal | None:
        """None when ``request`` from ``ip`` is allowed, else the Refusal."""
        ext = request.ext or {}
        name = ext.get(ACCESS_KEY)
        if not name:
            return Refusal(
                f"{code_name(request.code)} carries no AccessKey; sign requests as an ACL 2.0 user "
                "(SDK access_key/secret_key = username/password, mqadmin -a/-s)",
                "no-account",
            )
        name = str(name)
        user = self.users.get(name)
        if user is None:
            return Refusal(f"no user {name!r} (mqadmin createUser)", f"unknown:{name}")
        if not user.enabled:
            return Refusal(f"user {name!r} is disabled (mqadmin updateUser -s enable)", f"disabled:{name}")
        signature = ext.get(SIGNATURE)
        if signature is None or not self._keys[name].verify(ext, request.body, str(signature)):
            what = "carries no Signature" if signature is None else "has a wrong Signature"
            return Refusal(
                f"{code_name(request.code)} of user {name!r} {what} (check the password)", f"signature:{name}"
            )
        if not self.authorization or user.user_type == SUPER:
            return None
        return self._verdicts.decided(name, request, ip, self._authorize, name, ip)

    def _authorize(self, name: str, ip: str, request: RemotingCommand) -> Refusal | None:
        """``request``'s verdict by ``name``'s ACL (authentication passed, not a Super user)."""
        acl, index = self.acls.get(name), self._indexes.get(name)
        for rtype, resource, action in request_needs_v2(request, self.cluster):
            if not decide(acl, rtype, resource, action, ip, index):
                return Refusal(
                    f"user {name!r} may not {action} {rtype}:{resource} from {ip} "
                    f"({code_name(request.code)}); "
                    "no ACL entry allows it, or one denies it (mqadmin getAcl -s User:" + name + ")",
                    f"perm:{name}:{rtype}:{resource}:{action}",
                )
        return None

    def check_grpc(
        self,
        ip: str,
        username: str | None,
        signature: str | None,
        date_time: str,
        needs: Iterable[tuple[str, str, tuple[str, ...]]],
    ) -> Refusal | None:
        """A gRPC call (``rocketpy.grpc_api.auth``): ``username`` and ``signature`` (hex) from its
        ``authorization`` metadata must be an enabled user's ``hex(HmacSHA1(password, date_time))``;
        then every ``(type, name, actions)`` it needs must be allowed for one of the actions."""
        if not username:
            return Refusal(
                "the call carries no authorization credential; give the client the credentials of an "
                "ACL 2.0 user (access key = username, secret key = password)",
                "no-account",
            )
        user = self.users.get(username)
        if user is None:
            return Refusal(f"no user {username!r} (mqadmin createUser)", f"unknown:{username}")
        if not user.enabled:
            return Refusal(
                f"user {username!r} is disabled (mqadmin updateUser -s enable)", f"disabled:{username}"
            )
        expected = hmac.new(user.password.encode(), date_time.encode(), hashlib.sha1).hexdigest()
        if signature is None or not hmac.compare_digest(expected, signature.lower()):
            what = "carries no Signature" if signature is None else "has a wrong Signature"
            return Refusal(
                f"the call of user {username!r} {what} (check the password)", f"signature:{username}"
            )
        if not self.authorization or user.user_type == SUPER:
            return None
        acl, index = self.acls.get(username), self._indexes.get(username)
        for rtype, resource, actions in needs:
            if not decide_any(acl, rtype, resource, actions, ip, index):
                wanted = " or ".join(actions)
                return Refusal(
                    f"user {username!r} may not {wanted} {rtype}:{resource} from {ip}; no ACL entry "
                    f"allows it, or one denies it (mqadmin getAcl -s User:{username})",
                    f"perm:{username}:{rtype}:{resource}:{wanted}",
                )
        return None
