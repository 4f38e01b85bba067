"""ACL 2.0's users and ACLs on a broker (``config/auth.json``), and the changes mqadmin asks for.

Owns the two tables (user name -> ``User``, user name -> ``Acl``), kept in one JSON file so a change
of both (deleting a user deletes its ACL) is written at once: atomically (temp + rename, ``.bak``
kept, in a thread; ``broker/persistence.py``). Every change is checked in full before anything
moves: its document parses (``AuthDataError``), its subject exists, and it leaves at least one user
who can administer when there was one (``auth_eval.admins``: an enabled Super user, or a Normal user
allowed Update on the cluster) — a change that would lock every admin out is refused with
``AuthLockoutError``. Then the new tables replace the old ones, are persisted, and the listeners
(the ``AuthGuard``) get them; if the write fails, the old tables come back.

At start a master creates ``initAuthenticationUser`` and the ``innerClientAuthenticationCredentials``
user as Super users when absent (RocketMQ's ``initUser``). A slave copies the master's tables
(``replace_all``, from ``broker/ha/metadata.py``) and refuses changes of its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from rocketpy.acl.auth_eval import admins
from rocketpy.acl.auth_model import (
    CUSTOM,
    DEFAULT,
    SUPER,
    USER_PREFIX,
    Acl,
    AuthDataError,
    User,
    parse_acl,
    parse_resource,
    parse_subject,
    parse_user,
)
from rocketpy.broker.persistence import JsonTable

log = logging.getLogger("rocketpy.broker.auth")

#: Users and ACLs one broker keeps at most.
MAX_USERS = 10_000

Listener = Callable[[Mapping[str, User], Mapping[str, Acl]], None]


class AuthLockoutError(AuthDataError):
    """The change would leave no user able to administer users and ACLs."""


class AuthNotFoundError(AuthDataError):
    """The user or ACL named does not exist."""


def _credentials(text: str | None, name_key: str, secret_key: str) -> tuple[str, str] | None:
    if not text:
        return None
    try:
        doc = json.loads(text)
        return str(doc[name_key]), str(doc[secret_key])
    except (ValueError, KeyError, TypeError):
        raise AuthDataError(f'{text!r}: write {{"{name_key}": "...", "{secret_key}": "..."}}') from None


class AuthMetadataManager:
    """The users and ACLs of one broker.

    Args:
        path: ``{storePathRootDir}/config/auth.json``.
        cluster: the broker's cluster (the resource of Update, for the lockout check).
    """

    def __init__(self, path: str, cluster: str) -> None:
        self.cluster = cluster
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        self.file = JsonTable(path, self.snapshot)
        self.read_only = False  # a slave: changes come from its master only
        self._listeners: list[Listener] = []

    # -- load / persist ------------------------------------------------------------------------

    def load(self) -> None:
        """Read auth.json (sync: before the loop serves, or in a thread)."""
        doc = self.file.load()
        if doc:
            self.users, self.acls = self._tables(doc)

    @staticmethod
    def _tables(doc: Mapping[str, Any]) -> tuple[dict[str, User], dict[str, Acl]]:
        users = {u.username: u for u in (parse_user(d) for d in doc.get("users") or [])}
        acls = {a.username: a for a in (parse_acl(d) for d in doc.get("acls") or [])}
        return users, acls

    def snapshot(self) -> dict[str, Any]:
        """The auth.json document (also what a slave copies)."""
        return {
            "users": [u.to_wire() for u in self.users.values()],
            "acls": [a.to_wire() for a in self.acls.values()],
        }

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(users, acls)`` now and after every change."""
        self._listeners.append(fn)
        fn(self.users, self.acls)

    def init_users(self, init_user: str | None, inner_credentials: str | None) -> list[str]:
        """Create the configured Super users that do not exist yet; their names.

        Raises:
            AuthDataError: a malformed ``initAuthenticationUser`` / ``innerClientAuthenticationCredentials``.
        """
        made = []
        for creds in (
            _credentials(init_user, "username", "password"),
            _credentials(inner_credentials, "accessKey", "secretKey"),
        ):
            if creds is not None and creds[0] not in self.users:
                self.users[creds[0]] = User(creds[0], creds[1], SUPER)
                made.append(creds[0])
        if made:
            self.file.mark_dirty()
            self._notify()
        return made

    def _notify(self) -> None:
        for fn in self._listeners:
            fn(self.users, self.acls)

    async def _commit(self, users: dict[str, User], acls: dict[str, Acl]) -> None:
        """Check the lockout rule, swap in the new tables, persist; the old ones come back on failure."""
        if self.read_only:
            raise AuthDataError(
                "this broker is a slave: its users and ACLs are copied from its master; change them there"
            )
        if len(users) > MAX_USERS:
            raise AuthDataError(f"a broker keeps at most {MAX_USERS} users")
        if admins(self.users, self.acls, self.cluster) and not admins(users, acls, self.cluster):
            raise AuthLockoutError(
                "refused: after this change no enabled user could administer users and ACLs (a Super "
                f"user, or one allowed Update on Cluster:{self.cluster}); keep or create one first"
            )
        old = self.users, self.acls
        self.users, self.acls = users, acls
        self.file.mark_dirty()
        try:
            await self.file.persist()
        except OSError as e:
            self.users, self.acls = old
            raise AuthDataError(f"the change was not stored ({e}); nothing changed") from e
        self._notify()

    def replace_all(self, doc: Mapping[str, Any]) -> bool:
        """A slave: take the master's tables (the auth.json document); True when they changed.

        Raises:
            AuthDataError: the document is malformed (the current tables are kept).
        """
        users, acls = self._tables(doc)
        if users == self.users and acls == self.acls:
            return False
        self.users, self.acls = users, acls
        self.file.mark_dirty()
        self._notify()
        return True

    # -- users -----------------------------------------------------------------------------------

    def _user(self, name: str) -> User:
        user = self.users.get(name)
        if user is None:
            raise AuthNotFoundError(f"no user {name!r}")
        return user

    async def create_user(self, doc: Any) -> User:
        """AUTH_CREATE_USER (a ``UserInfo`` document)."""
        user = parse_user(doc)
        if user.username in self.users:
            raise AuthDataError(f"user {user.username!r} exists already; use updateUser")
        await self._commit({**self.users, user.username: user}, dict(self.acls))
        return user

    async def update_user(self, doc: Any) -> User:
        """AUTH_UPDATE_USER: the fields the document gives change; the others stay."""
        name = doc.get("username") if isinstance(doc, dict) else None
        user = parse_user(doc, partial=self._user(str(name)) if name else None)
        await self._commit({**self.users, user.username: user}, dict(self.acls))
        return user

    async def delete_user(self, name: str) -> None:
        """AUTH_DELETE_USER: the user and its ACL."""
        self._user(name)
        users = {n: u for n, u in self.users.items() if n != name}
        await self._commit(users, {n: a for n, a in self.acls.items() if n != name})

    def get_user(self, name: str) -> User:
        """AUTH_GET_USER."""
        return self._user(name)

    def list_users(self, name_filter: str = "") -> list[User]:
        """AUTH_LIST_USER: users whose name contains ``name_filter``."""
        return [u for n, u in sorted(self.users.items()) if name_filter in n]

    # -- ACLs ------------------------------------------------------------------------------------

    async def create_acl(self, doc: Any) -> Acl:
        """AUTH_CREATE_ACL / AUTH_UPDATE_ACL (RocketMQ treats both alike): the document's entries
        replace the subject's entries for the same resources, or are added."""
        acl = parse_acl(doc)
        self._user(acl.username)
        current = self.acls.get(acl.username)
        merged = current.merged(acl) if current is not None else acl
        await self._commit(dict(self.users), {**self.acls, acl.username: merged})
        return merged

    async def delete_acl(self, subject: str, policy_type: str = "", resource: str = "") -> None:
        """AUTH_DELETE_ACL: the subject's whole ACL, or its entry for ``resource`` (in ``policy_type``,
        Custom by default)."""
        name = parse_subject(subject)[len(USER_PREFIX) :]
        acl = self.get_acl(subject)
        ptype = DEFAULT if policy_type.strip().lower() == "default" else CUSTOM
        if policy_type.strip() and policy_type.strip().lower() not in ("custom", "default"):
            raise AuthDataError(f"policyType={policy_type!r} is not one of Custom, Default")
        kept = acl.without(ptype, parse_resource(resource)) if resource.strip() else None
        acls = {n: a for n, a in self.acls.items() if n != name}
        if kept is not None:
            acls[name] = kept
        await self._commit(dict(self.users), acls)

    def get_acl(self, subject: str) -> Acl:
        """AUTH_GET_ACL."""
        name = parse_subject(subject)[len(USER_PREFIX) :]
        self._user(name)
        acl = self.acls.get(name)
        if acl is None:
            raise AuthNotFoundError(f"user {name!r} has no ACL")
        return acl

    def list_acls(self, subject_filter: str = "", resource_filter: str = "") -> list[Acl]:
        """AUTH_LIST_ACL: ACLs whose subject contains ``subject_filter`` and that have an entry whose
        resource contains ``resource_filter``."""
        return [
            a
            for _, a in sorted(self.acls.items())
            if subject_filter in a.subject
            and (not resource_filter or any(resource_filter in e.resource.key() for _, e in a.entries()))
        ]
