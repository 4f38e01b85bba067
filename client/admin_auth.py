"""ACL 2.0 administration for operators: ``Admin.auth`` (``mqadmin createUser`` ... ``listAcl``).

Owns which brokers each call goes to and the request documents (RocketMQ's ``UserInfo`` /
``AclInfo``). Changes go to a broker (``broker_addr``) or to every master of a cluster (slaves copy
their master's users and ACLs); reads come from the same targets, one answer per broker. The
documents are checked by the broker (one INVALID_PARAMETER remark naming the field); only the
command-line splitting (``,``-separated lists) happens here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocketpy.client.answers import check, pack_body, unpack_body
from rocketpy.errors import MQClientError
from rocketpy.protocol.codes import RequestCode
from rocketpy.protocol.headers.auth import (
    AclRequestHeader,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)
from rocketpy.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rocketpy.client.admin import Admin


def split_list(text: str | Sequence[str] | None) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]`` (RocketMQ's option lists); a sequence is taken as it is."""
    if text is None:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    return [i.strip() for i in items if i and i.strip()]


class AuthAdmin:
    """The AUTH_* calls of one ``Admin`` (``admin.auth``)."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    async def targets(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        """The brokers a command goes to: ``broker_addr``, or every master of ``cluster``."""
        if broker_addr:
            return [broker_addr]
        if cluster:
            masters = await self.admin.cluster_masters(cluster)
            if not masters:
                raise MQClientError(f"cluster {cluster!r} has no master broker")
            return [addr for _, addr in masters]
        raise MQClientError("say where: give a cluster (-c CLUSTER) or a broker address (-b HOST:PORT)")

    async def _call(self, addr: str, code: RequestCode, ext: dict[str, Any], doc: Any = None) -> Any:
        body = pack_body(doc, self.admin.settings.serialize_code) if doc is not None else b""
        request = RemotingCommand.request(code, ext, body)
        resp = await self.admin.instance.remoting.invoke(addr, request, self.admin.timeout)
        return unpack_body(check(resp, addr))

    async def _each(
        self, addrs: list[str], code: RequestCode, ext: dict[str, Any], doc: Any = None
    ) -> list[Any]:
        return [await self._call(a, code, ext, doc) for a in addrs]

    # -- users -----------------------------------------------------------------------------------

    async def create_user(
        self,
        username: str,
        password: str,
        user_type: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """AUTH_CREATE_USER on each target; the addresses done."""
        addrs = await self.targets(cluster, broker_addr)
        doc = {"username": username, "password": password, "userType": user_type or "Normal"}
        await self._each(addrs, RequestCode.AUTH_CREATE_USER, UserRequestHeader(username).to_ext(), doc)
        return addrs

    async def update_user(
        self,
        username: str,
        password: str | None = None,
        user_type: str | None = None,
        user_status: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """AUTH_UPDATE_USER: the given fields change."""
        if password is None and user_type is None and user_status is None:
            raise MQClientError(
                "nothing to update: give a password (-p), a userType (-t) or a userStatus (-s)"
            )
        addrs = await self.targets(cluster, broker_addr)
        doc = {"username": username, "password": password, "userType": user_type, "userStatus": user_status}
        doc = {k: v for k, v in doc.items() if v is not None}
        await self._each(addrs, RequestCode.AUTH_UPDATE_USER, UserRequestHeader(username).to_ext(), doc)
        return addrs

    async def delete_user(
        self, username: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """AUTH_DELETE_USER (its ACL goes too)."""
        addrs = await self.targets(cluster, broker_addr)
        await self._each(addrs, RequestCode.AUTH_DELETE_USER, UserRequestHeader(username).to_ext())
        return addrs

    async def get_user(
        self, username: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """AUTH_GET_USER: ``(broker address, UserInfo)`` per target."""
        addrs = await self.targets(cluster, broker_addr)
        docs = await self._each(addrs, RequestCode.AUTH_GET_USER, UserRequestHeader(username).to_ext())
        return list(zip(addrs, docs, strict=True))

    async def list_users(
        self, name_filter: str = "", *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[tuple[str, list[dict[str, Any]]]]:
        """AUTH_LIST_USER: ``(broker address, [UserInfo])`` per target."""
        addrs = await self.targets(cluster, broker_addr)
        ext = ListUsersRequestHeader(name_filter).to_ext()
        docs = await self._each(addrs, RequestCode.AUTH_LIST_USER, ext)
        return [(a, list(d or [])) for a, d in zip(addrs, docs, strict=True)]

    # -- ACLs ------------------------------------------------------------------------------------

    async def create_acl(
        self,
        subject: str,
        resources: str | Sequence[str],
        actions: str | Sequence[str],
        decision: str,
        source_ips: str | Sequence[str] | None = None,
        *,
        update: bool = False,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """AUTH_CREATE_ACL (or AUTH_UPDATE_ACL): one entry per resource with these actions, source
        addresses and decision (RocketMQ's ``AclInfo.of``)."""
        addrs = await self.targets(cluster, broker_addr)
        entry = {"actions": split_list(actions), "sourceIps": split_list(source_ips), "decision": decision}
        doc = {
            "subject": subject,
            "policies": [
                {"policyType": "Custom", "entries": [{"resource": r, **entry} for r in split_list(resources)]}
            ],
        }
        code = RequestCode.AUTH_UPDATE_ACL if update else RequestCode.AUTH_CREATE_ACL
        await self._each(addrs, code, AclRequestHeader(subject).to_ext(), doc)
        return addrs

    async def delete_acl(
        self,
        subject: str,
        resource: str | None = None,
        policy_type: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """AUTH_DELETE_ACL: the subject's ACL, or its entry for ``resource``."""
        addrs = await self.targets(cluster, broker_addr)
        ext = DeleteAclRequestHeader(subject, policy_type or "", resource or "").to_ext()
        await self._each(addrs, RequestCode.AUTH_DELETE_ACL, ext)
        return addrs

    async def get_acl(
        self, subject: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """AUTH_GET_ACL: ``(broker address, AclInfo)`` per target."""
        addrs = await self.targets(cluster, broker_addr)
        docs = await self._each(addrs, RequestCode.AUTH_GET_ACL, AclRequestHeader(subject).to_ext())
        return list(zip(addrs, docs, strict=True))

    async def list_acls(
        self,
        subject_filter: str = "",
        resource_filter: str = "",
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[tuple[str, list[dict[str, Any]]]]:
        """AUTH_LIST_ACL: ``(broker address, [AclInfo])`` per target."""
        addrs = await self.targets(cluster, broker_addr)
        ext = ListAclsRequestHeader(subject_filter, resource_filter).to_ext()
        docs = await self._each(addrs, RequestCode.AUTH_LIST_ACL, ext)
        return [(a, list(d or [])) for a, d in zip(addrs, docs, strict=True)]

    # -- copies between brokers ------------------------------------------------------------------

    async def copy_users(
        self, from_addr: str, to_addr: str, usernames: str | Sequence[str] | None = None
    ) -> list[str]:
        """RocketMQ's ``copyUser``: the source broker's users (all, or those named) created on the
        target, or updated there when it has them (password, type and status as at the source).
        Returns the names copied.

        Raises:
            MQClientError: a named user is not on the source broker (nothing was copied).
        """
        return await self._copy(_USERS, from_addr, to_addr, split_list(usernames))

    async def copy_acls(
        self, from_addr: str, to_addr: str, subjects: str | Sequence[str] | None = None
    ) -> list[str]:
        """RocketMQ's ``copyAcl``: the source broker's ACLs (all, or those of the subjects named)
        created on the target, or merged into the target's ACL of the same subject (by resource).
        Returns the subjects copied.

        Raises:
            MQClientError: a named subject has no ACL on the source broker (nothing was copied).
        """
        return await self._copy(_ACLS, from_addr, to_addr, split_list(subjects))

    async def _copy(self, kind: _Copied, from_addr: str, to_addr: str, wanted: list[str]) -> list[str]:
        """Each document of ``kind`` on ``from_addr`` (or those ``wanted``, all checked first)
        created on ``to_addr``, or updated where it has one with the same key."""
        docs = await self._docs(from_addr, kind.list_code, kind.list_ext)
        if wanted:
            by_key = {d.get(kind.key): d for d in docs}
            missing = [w for w in wanted if w not in by_key]
            if missing:
                raise MQClientError(
                    f"no {kind.noun} {', '.join(missing)} on {from_addr}: nothing copied ({kind.hint} -b)"
                )
            docs = [by_key[w] for w in wanted]
        present = {d.get(kind.key) for d in await self._docs(to_addr, kind.list_code, kind.list_ext)}
        for doc in docs:
            key = str(doc.get(kind.key))
            code = kind.update_code if key in present else kind.create_code
            await self._call(to_addr, code, {kind.header_field: key}, doc)
        return [str(d.get(kind.key)) for d in docs]

    async def _docs(self, addr: str, code: RequestCode, ext: dict[str, Any]) -> list[dict[str, Any]]:
        """A list answer's documents (maps only)."""
        return [d for d in (await self._call(addr, code, ext) or []) if isinstance(d, dict)]


@dataclass(frozen=True)
class _Copied:
    """What ``copyUser`` / ``copyAcl`` copy: how to list them, their key, and the calls that make
    or change one (its key in the request header)."""

    list_code: RequestCode
    list_ext: dict[str, Any]
    key: str
    header_field: str
    create_code: RequestCode
    update_code: RequestCode
    noun: str
    hint: str


_USERS = _Copied(
    RequestCode.AUTH_LIST_USER, ListUsersRequestHeader("").to_ext(), "username",
    UserRequestHeader.wire_name("username"), RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_UPDATE_USER,
    "user", "listUser",
)  # fmt: skip
_ACLS = _Copied(
    RequestCode.AUTH_LIST_ACL, ListAclsRequestHeader("", "").to_ext(), "subject",
    AclRequestHeader.wire_name("subject"), RequestCode.AUTH_CREATE_ACL, RequestCode.AUTH_UPDATE_ACL,
    "ACL of", "listAcl",
)  # fmt: skip
