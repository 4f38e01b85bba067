"""ACL 2.0 administration: the AUTH_* codes (users and ACLs), RocketMQ 5's names and bodies.

Each handler reads its header and body, makes one ``AuthMetadataManager`` call and answers: the
document (or list) for gets and lists, an empty SUCCESS for changes. A malformed document, an
unknown user or ACL, a change on a slave and a change that would lock every admin out are
INVALID_PARAMETER answers whose remark says what is wrong; nothing is applied then.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from rocketpy.acl.auth_model import AuthDataError
from rocketpy.broker.auth_metadata import AuthMetadataManager
from rocketpy.broker.processors.body import decode_map, encode
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.auth import (
    AclRequestHeader,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel


class AuthProcessor:
    """Handles AUTH_CREATE/UPDATE/DELETE/GET/LIST_USER and _ACL.

    Args:
        auth: the broker's users and ACLs.
    """

    def __init__(self, auth: AuthMetadataManager) -> None:
        self.auth = auth

    @staticmethod
    def _refused(request: RemotingCommand, e: AuthDataError) -> RemotingCommand:
        return RemotingCommand.response(request, ResponseCode.INVALID_PARAMETER, str(e))

    async def _change(self, request: RemotingCommand, change: Awaitable[Any]) -> RemotingCommand:
        try:
            await change
        except AuthDataError as e:
            return self._refused(request, e)
        return RemotingCommand.response(request)

    def _answer(self, request: RemotingCommand, doc: Any) -> RemotingCommand:
        return RemotingCommand.response(request, body=encode(doc, request))

    async def create_user(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """AUTH_CREATE_USER: header ``username``, body ``UserInfo``."""
        UserRequestHeader.from_ext(request.ext)
        return await self._change(request, self.auth.create_user(decode_map(request, "UserInfo")))

    async def update_user(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """AUTH_UPDATE_USER: the fields the ``UserInfo`` body gives."""
        UserRequestHeader.from_ext(request.ext)
        return await self._change(request, self.auth.update_user(decode_map(request, "UserInfo")))

    async def delete_user(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """AUTH_DELETE_USER: the user and its ACL."""
        h = UserRequestHeader.from_ext(request.ext)
        return await self._change(request, self.auth.delete_user(h.username))

    def get_user(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """AUTH_GET_USER: the ``UserInfo``."""
        h = UserRequestHeader.from_ext(request.ext)
        try:
            return self._answer(request, self.auth.get_user(h.username).to_wire())
        except AuthDataError as e:
            return self._refused(request, e)

    def list_users(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """AUTH_LIST_USER: ``UserInfo`` documents whose name contains ``filter``."""
        h = ListUsersRequestHeader.from_ext(request.ext)
        return self._answer(request, [u.to_wire() for u in self.auth.list_users(h.filter)])

    async def create_acl(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """AUTH_CREATE_ACL / AUTH_UPDATE_ACL: header ``subject``, body ``AclInfo`` (merged by resource)."""
        AclRequestHeader.from_ext(request.ext)
        return await self._change(request, self.auth.create_acl(decode_map(request, "AclInfo")))

    async def delete_acl(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """AUTH_DELETE_ACL: the whole ACL, or one resource's entry."""
        h = DeleteAclRequestHeader.from_ext(request.ext)
        return await self._change(request, self.auth.delete_acl(h.subject, h.policy_type, h.resource))

    def get_acl(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """AUTH_GET_ACL: the subject's ``AclInfo``."""
        h = AclRequestHeader.from_ext(request.ext)
        try:
            return self._answer(request, self.auth.get_acl(h.subject).to_wire())
        except AuthDataError as e:
            return self._refused(request, e)

    def list_acls(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """AUTH_LIST_ACL: ``AclInfo`` documents matching the filters."""
        h = ListAclsRequestHeader.from_ext(request.ext)
        return self._answer(
            request, [a.to_wire() for a in self.auth.list_acls(h.subject_filter, h.resource_filter)]
        )
