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
   policy's only when no Custom entry matches. **Deny wins** among the matching entries; with
   none matching, the request is refused.

RocketMQ orders matching entries by how specific their resource is before looking at the decision
(a narrower Allow can override a wider Deny there); here any matching Deny wins, so a Deny can
never be punched through — write Allow entries narrowly instead (docs/design.md §6.4).
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketpy.acl.auth_model import ALLOW, CLUSTER, CUSTOM, DEFAULT, DENY, SUPER, Acl, User
from rocketpy.acl.resources import request_needs_v2
from rocketpy.acl.signing import ACCESS_KEY, SIGNATURE, HmacKey
from rocketpy.acl.validator import Refusal
from rocketpy.protocol.codes import code_name
from rocketpy.remoting.command import RemotingCommand


def decide(acl: Acl | None, rtype: str, name: str, action: str, ip: str | None) -> bool:
    """True when ``acl`` allows ``action`` on ``rtype``/``name`` from ``ip``.

    ``ip=None`` asks "from some address": entries limited to source addresses count for an Allow
    and not for a Deny (used to tell whether a user can administer at all).
    """
    if acl is None:
        return False
    for ptype in (CUSTOM, DEFAULT):
        decisions = set()
        for entry in acl.policies.get(ptype, ()):
            if not entry.resource.matches(rtype, name) or not entry.covers(action):
                continue
            applies = entry.from_address(ip)
            if applies is None:  # from some address only
                applies = entry.decision == ALLOW
            if applies:
                decisions.add(entry.decision)
        if decisions:
            return DENY not in decisions
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

    __slots__ = ("_keys", "acls", "authorization", "cluster", "users")

    def __init__(
        self, users: Mapping[str, User], acls: Mapping[str, Acl], cluster: str, authorization: bool
    ) -> None:
        self.users = dict(users)
        self.acls = dict(acls)
        self.cluster = cluster
        self.authorization = authorization
        self._keys = {name: HmacKey(u.password) for name, u in self.users.items()}

    def check(self, ip: str, request: RemotingCommand) -> Refusal | None:
        """None when ``request`` from ``ip`` is allowed, else the Refusal."""
        ext = request.ext or {}
        name = ext.get(ACCESS_KEY)
        code = code_name(request.code)
        if not name:
            return Refusal(
                f"{code} carries no AccessKey; sign requests as an ACL 2.0 user (SDK access_key/"
                "secret_key = username/password, mqadmin -a/-s)",
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
            return Refusal(f"{code} of user {name!r} {what} (check the password)", f"signature:{name}")
        if not self.authorization or user.user_type == SUPER:
            return None
        acl = self.acls.get(name)
        for rtype, resource, action in request_needs_v2(request, self.cluster):
            if not decide(acl, rtype, resource, action, ip):
                return Refusal(
                    f"user {name!r} may not {action} {rtype}:{resource} from {ip} ({code}); "
                    "no ACL entry allows it, or one denies it (mqadmin getAcl -s User:" + name + ")",
                    f"perm:{name}:{rtype}:{resource}:{action}",
                )
        return None
