"""The broker's ACL 2.0 hook: authenticate (and authorize) every request before dispatch.

``AuthGuard`` is installed on the broker's ``RemotingServer`` with ``set_guard`` when
``authenticationEnabled=true`` (instead of the ACL 1.0 ``AclGuard``). It holds one
``AuthEvaluator`` built from the broker's users and ACLs; the broker's metadata manager calls
``use`` after every change (an mqadmin command, a slave's copy from its master), which swaps in a
new evaluator whole. A refusal is NO_PERMISSION with the reason, logged once per (client address,
user and resource) in a bounded set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rocketpy.acl.auth_eval import AuthEvaluator
from rocketpy.acl.auth_model import Acl, User
from rocketpy.acl.guard import judge

if TYPE_CHECKING:
    from rocketpy.remoting.command import RemotingCommand
    from rocketpy.remoting.connection import Channel


class AuthGuard:
    """ACL 2.0 for one broker.

    Args:
        cluster: the broker's cluster name (the resource of cluster-wide actions).
        authorization: ``authorizationEnabled`` (False: authentication only).
        owner: the daemon's name for log lines.
    """

    def __init__(self, cluster: str, authorization: bool, owner: str) -> None:
        self.cluster = cluster
        self.authorization = authorization
        self.owner = owner
        self.evaluator = AuthEvaluator({}, {}, cluster, authorization)
        self._logged: set[tuple[str, str]] = set()

    def use(self, users: Mapping[str, User], acls: Mapping[str, Acl]) -> None:
        """Check requests against these users and ACLs from now on."""
        self.evaluator = AuthEvaluator(users, acls, self.cluster, self.authorization)
        self._logged.clear()

    def __call__(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """The pre-dispatch check: None to go on, or the NO_PERMISSION answer."""
        return judge(self.evaluator.check, channel, request, self.owner, self._logged)
