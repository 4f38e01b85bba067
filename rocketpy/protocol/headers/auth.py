"""ACL 2.0 administration (RocketMQ 5's AUTH_* codes): the users and ACLs a broker keeps.

Request headers name the user or subject; bodies are RocketMQ's ``UserInfo`` and ``AclInfo``
documents (``rocketpy.acl.auth_model``), in the request's encoding. Answers of the get and list
codes carry the document (or a list of them) as their body.
"""

from __future__ import annotations

from rocketpy.protocol.header import Header, wire


class UserRequestHeader(Header):
    """AUTH_CREATE_USER, AUTH_UPDATE_USER (with a UserInfo body), AUTH_DELETE_USER, AUTH_GET_USER."""

    username: str = wire("username", nonempty=True)


class ListUsersRequestHeader(Header):
    """AUTH_LIST_USER: users whose name contains ``filter`` (all when empty)."""

    filter: str = wire("filter", default="")


class AclRequestHeader(Header):
    """AUTH_CREATE_ACL, AUTH_UPDATE_ACL (with an AclInfo body), AUTH_GET_ACL: the subject (``User:name``)."""

    subject: str = wire("subject", nonempty=True)


class DeleteAclRequestHeader(Header):
    """AUTH_DELETE_ACL: the subject's whole ACL, or only its entry for ``resource`` in ``policy_type``."""

    subject: str = wire("subject", nonempty=True)
    policy_type: str = wire("policyType", default="")
    resource: str = wire("resource", default="")


class ListAclsRequestHeader(Header):
    """AUTH_LIST_ACL: ACLs whose subject contains ``subject_filter`` and with an entry whose resource
    contains ``resource_filter`` (all when empty)."""

    subject_filter: str = wire("subjectFilter", default="")
    resource_filter: str = wire("resourceFilter", default="")
