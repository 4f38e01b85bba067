"""ACL 2.0 (RocketMQ 5's RIP-68): users, policies and their wire documents.

The wire documents are RocketMQ's ``UserInfo`` and ``AclInfo`` (JSON, or msgpack for rocketpy's
own clients)::

    UserInfo  {"username": "alice", "password": "...", "userType": "Super"|"Normal",
               "userStatus": "enable"|"disable"}
    AclInfo   {"subject": "User:alice", "policies": [{"policyType": "Custom"|"Default",
               "entries": [{"resource": "Topic:orders", "actions": ["Pub", "Sub"],
                            "sourceIps": ["10.0.0.0/8"], "decision": "Allow"|"Deny"}]}]}

A resource is ``Type:name`` (LITERAL), ``Type:prefix*`` (PREFIXED), ``Type:*`` (every name of the
type) or ``*`` (anything); types are Cluster, Topic and Group. Actions are Pub, Sub, Create,
Update, Delete, Get, List and All. Names are matched case-insensitively (as RocketMQ's enums are
parsed); the stored form is RocketMQ's spelling. Every parse error is one ``AuthDataError`` whose
message names the field and what is allowed; parsing builds new objects and changes nothing.
Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from rocketpy.errors import RocketpyError

SUPER, NORMAL = "Super", "Normal"
ENABLE, DISABLE = "enable", "disable"
CUSTOM, DEFAULT = "Custom", "Default"
ALLOW, DENY = "Allow", "Deny"
CLUSTER, TOPIC, GROUP, ANY = "Cluster", "Topic", "Group", "Any"
LITERAL, PREFIXED = "LITERAL", "PREFIXED"
ACTIONS = ("All", "Pub", "Sub", "Create", "Update", "Delete", "Get", "List")
RESOURCE_TYPES = (CLUSTER, TOPIC, GROUP)
USER_PREFIX = "User:"
#: Longest user name and password; most entries of one ACL (bounds on a stored table).
MAX_NAME_CHARS = 256
MAX_ENTRIES = 1024
MAX_SOURCE_IPS = 64

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AuthDataError(RocketpyError):
    """A user or ACL document is malformed: the message names the field and what is allowed."""


def _choice(value: Any, allowed: tuple[str, ...], what: str) -> str:
    if isinstance(value, str):
        for a in allowed:
            if value.strip().lower() == a.lower():
                return a
    raise AuthDataError(f"{what}={value!r} is not one of {', '.join(allowed)}")


def _text(value: Any, what: str, *, required: bool = True) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise AuthDataError(f"{what} is missing")
        return None
    if not isinstance(value, str):
        raise AuthDataError(f"{what} must be text, got {type(value).__name__}")
    value = value.strip()
    if len(value) > MAX_NAME_CHARS:
        raise AuthDataError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    return value


@dataclass(frozen=True)
class User:
    """One user: the ``AccessKey`` it signs with is its name, the HMAC key its password."""

    username: str
    password: str = field(repr=False)
    user_type: str = NORMAL
    status: str = ENABLE

    @property
    def enabled(self) -> bool:
        """False for a disabled user (its requests are refused)."""
        return self.status == ENABLE

    def to_wire(self) -> dict[str, str]:
        """RocketMQ's ``UserInfo``."""
        return {
            "username": self.username,
            "password": self.password,
            "userType": self.user_type,
            "userStatus": self.status,
        }


def parse_user(doc: Any, *, partial: User | None = None) -> User:
    """A ``UserInfo`` document as a User; with ``partial`` (an update) absent fields keep its values.

    Raises:
        AuthDataError: not a map, no or bad username/password, unknown userType/userStatus.
    """
    if not isinstance(doc, dict):
        raise AuthDataError(f"a user must be a map (UserInfo), got {type(doc).__name__}")
    name = _text(doc.get("username"), "username")
    assert name is not None
    if partial is not None and name != partial.username:
        raise AuthDataError(f"username {name!r} does not match the user being updated ({partial.username!r})")
    password = _text(doc.get("password"), "password", required=partial is None)
    raw_type, raw_status = doc.get("userType"), doc.get("userStatus")
    base = partial or User(name, "", NORMAL, ENABLE)
    return User(
        name,
        password if password is not None else base.password,
        _choice(raw_type, (SUPER, NORMAL), "userType") if raw_type not in (None, "") else base.user_type,
        _choice(raw_status, (ENABLE, DISABLE), "userStatus") if raw_status not in (None, "") else base.status,
    )


@dataclass(frozen=True)
class Resource:
    """A resource pattern: ``type`` (ANY for ``*``), ``name`` (a prefix for PREFIXED), ``pattern``."""

    type: str
    name: str | None
    pattern: str

    def matches(self, rtype: str, name: str) -> bool:
        """True when this pattern covers the resource ``rtype``/``name``."""
        if self.type == ANY:
            return True
        if self.type != rtype:
            return False
        if self.pattern == ANY:
            return True
        assert self.name is not None
        return name == self.name if self.pattern == LITERAL else name.startswith(self.name)

    def key(self) -> str:
        """RocketMQ's resource key (``Topic:orders``, ``Topic:ord*``, ``Topic:*``, ``*``)."""
        if self.type == ANY:
            return "*"
        if self.pattern == ANY:
            return f"{self.type}:*"
        return f"{self.type}:{self.name}{'*' if self.pattern == PREFIXED else ''}"


def parse_resource(text: Any) -> Resource:
    """``Type:name``, ``Type:prefix*``, ``Type:*`` or ``*``.

    Raises:
        AuthDataError: anything else (the message lists the forms).
    """
    if not isinstance(text, str) or not text.strip():
        raise AuthDataError(
            f"resource {text!r}: use Topic:NAME, Topic:PREFIX*, Topic:*, Group:..., Cluster:... or *"
        )
    text = text.strip()
    if text == "*":
        return Resource(ANY, None, ANY)
    kind, sep, name = text.partition(":")
    if not sep or not name:
        raise AuthDataError(
            f"resource {text!r}: use TYPE:NAME with TYPE one of {', '.join(RESOURCE_TYPES)}, or *"
        )
    rtype = _choice(kind, RESOURCE_TYPES, f"the type of resource {text!r}")
    if name == "*":
        return Resource(rtype, None, ANY)
    if "*" in name[:-1]:
        raise AuthDataError(f"resource {text!r}: '*' may only end a name (a prefix)")
    if name.endswith("*"):
        return Resource(rtype, name[:-1], PREFIXED)
    return Resource(rtype, name, LITERAL)


def parse_source_ip(text: Any) -> Network:
    """An address or CIDR block (``10.1.2.3``, ``10.0.0.0/8``, ``::1``).

    Raises:
        AuthDataError: not an address or CIDR block.
    """
    try:
        return ipaddress.ip_network(str(text).strip(), strict=False)
    except ValueError:
        raise AuthDataError(f"sourceIp {text!r} is not an IP address or CIDR block (10.0.0.0/8)") from None


@dataclass(frozen=True)
class PolicyEntry:
    """One rule: a resource pattern, the actions it covers, its source addresses and its decision."""

    resource: Resource
    actions: frozenset[str]
    source_ips: tuple[Network, ...]
    decision: str

    def covers(self, action: str) -> bool:
        """True when ``action`` is one of the entry's actions (``All`` covers every one)."""
        return "All" in self.actions or action in self.actions

    def from_address(self, ip: str | None) -> bool | None:
        """Whether the entry applies to requests from ``ip`` (None for ``ip=None``: it depends on it)."""
        if not self.source_ips:
            return True
        if ip is None:
            return None
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return any(addr in net for net in self.source_ips)

    def to_wire(self) -> dict[str, Any]:
        """RocketMQ's ``PolicyEntryInfo``."""
        return {
            "resource": self.resource.key(),
            "actions": [a for a in ACTIONS if a in self.actions],
            "sourceIps": [str(n) if n.num_addresses > 1 else str(n.network_address) for n in self.source_ips],
            "decision": self.decision,
        }


def parse_entry(doc: Any, where: str) -> PolicyEntry:
    """A ``PolicyEntryInfo`` (``where`` names it in errors)."""
    if not isinstance(doc, dict):
        raise AuthDataError(f"{where} must be a map with resource, actions, sourceIps, decision")
    actions = doc.get("actions")
    if isinstance(actions, str):
        actions = [a for a in actions.split(",") if a.strip()]
    if not isinstance(actions, list) or not actions:
        raise AuthDataError(f"{where}.actions must list one or more of {', '.join(ACTIONS)}")
    ips = doc.get("sourceIps") or []
    if isinstance(ips, str):
        ips = [i for i in ips.split(",") if i.strip()]
    if not isinstance(ips, list) or len(ips) > MAX_SOURCE_IPS:
        raise AuthDataError(f"{where}.sourceIps must be a list of at most {MAX_SOURCE_IPS} addresses")
    return PolicyEntry(
        parse_resource(doc.get("resource")),
        frozenset(_choice(a, ACTIONS, f"{where}.actions") for a in actions),
        tuple(parse_source_ip(i) for i in ips),
        _choice(doc.get("decision"), (ALLOW, DENY), f"{where}.decision"),
    )


@dataclass(frozen=True)
class Acl:
    """The policies of one subject (``User:name``): policy type -> its entries, in order."""

    subject: str
    policies: dict[str, tuple[PolicyEntry, ...]]

    @property
    def username(self) -> str:
        """The user the subject names."""
        return self.subject[len(USER_PREFIX) :]

    def entries(self) -> list[tuple[str, PolicyEntry]]:
        """Every (policy type, entry)."""
        return [(t, e) for t, es in self.policies.items() for e in es]

    def merged(self, other: Acl) -> Acl:
        """RocketMQ's ``updatePolicy``: ``other``'s entries replace those with the same resource, or
        are added."""
        policies = dict(self.policies)
        for ptype, entries in other.policies.items():
            current = list(policies.get(ptype, ()))
            for e in entries:
                current = [c for c in current if c.resource != e.resource] + [e]
            policies[ptype] = tuple(current)
        return Acl(self.subject, policies)

    def without(self, policy_type: str, resource: Resource | None) -> Acl | None:
        """The ACL without ``resource``'s entry (None: it would have no entry left, or no resource)."""
        if resource is None:
            return None
        policies = {
            t: tuple(e for e in es if not (t == policy_type and e.resource == resource))
            for t, es in self.policies.items()
        }
        policies = {t: es for t, es in policies.items() if es}
        return Acl(self.subject, policies) if policies else None

    def to_wire(self) -> dict[str, Any]:
        """RocketMQ's ``AclInfo``."""
        return {
            "subject": self.subject,
            "policies": [
                {"policyType": t, "entries": [e.to_wire() for e in es]} for t, es in self.policies.items()
            ],
        }


def parse_subject(text: Any) -> str:
    """``User:name`` (the only subject type); a bare name is taken as a user's."""
    name = _text(text, "subject")
    assert name is not None
    if name.lower().startswith(USER_PREFIX.lower()):
        name = name[len(USER_PREFIX) :]
    if not name or ":" in name:
        raise AuthDataError(f"subject {text!r}: use User:NAME")
    return USER_PREFIX + name


def parse_acl(doc: Any) -> Acl:
    """An ``AclInfo`` document as an Acl.

    Raises:
        AuthDataError: not a map, a bad subject, no policies or entries, a bad entry.
    """
    if not isinstance(doc, dict):
        raise AuthDataError(f"an ACL must be a map (AclInfo: subject, policies), got {type(doc).__name__}")
    subject = parse_subject(doc.get("subject"))
    raw = doc.get("policies")
    if not isinstance(raw, list) or not raw:
        raise AuthDataError("policies must list one or more {policyType, entries} maps")
    policies: dict[str, list[PolicyEntry]] = {}
    count = 0
    for i, p in enumerate(raw):
        if not isinstance(p, dict):
            raise AuthDataError(f"policies[{i}] must be a map with policyType and entries")
        ptype = _choice(p.get("policyType") or CUSTOM, (CUSTOM, DEFAULT), f"policies[{i}].policyType")
        entries = p.get("entries")
        if not isinstance(entries, list) or not entries:
            raise AuthDataError(f"policies[{i}].entries must list one or more entries")
        for j, e in enumerate(entries):
            policies.setdefault(ptype, []).append(parse_entry(e, f"policies[{i}].entries[{j}]"))
            count += 1
    if count > MAX_ENTRIES:
        raise AuthDataError(f"an ACL holds at most {MAX_ENTRIES} entries, this one {count}")
    return Acl(subject, {t: tuple(es) for t, es in policies.items()}).merged(Acl(subject, {}))
