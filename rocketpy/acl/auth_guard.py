"""The broker's ACL 2.0 hook: authenticate (and authorize) every request before dispatch.

``AuthGuard`` is installed on the broker's ``RemotingServer`` with ``set_guard`` when
``authenticationEnabled=true`` (instead of the ACL 1.0 ``AclGuard``). It holds one
``AuthEvaluator`` built from the broker's users and ACLs; the broker's metadata manager calls
``use`` after every change (an mqadmin command, a slave's copy from its master), which swaps in a
new evaluator whole. A refusal is NO_PERMISSION with the reason, logged once per (client address,
user and resource) in a bounded set.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rocketpy.acl.auth_eval import AuthEvaluator
from rocketpy.acl.auth_model import Acl, User
from rocketpy.acl.guard import MAX_LOGGED_REFUSALS
from rocketpy.protocol.codes import ResponseCode
from rocketpy.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rocketpy.remoting.connection import Channel

log = logging.getLogger("rocketpy.acl")


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
        peer = channel.peer
        ip = peer[0] if peer is not None else channel.remote_addr.rpartition(":")[0]
        refusal = self.evaluator.check(ip, request)
        if refusal is None:
            return None
        key = (ip, refusal.log_key)
        if key not in self._logged:
            if len(self._logged) >= MAX_LOGGED_REFUSALS:
                self._logged.clear()
            self._logged.add(key)
            log.warning("%s: refused a request from %s: %s", self.owner, channel.remote_addr, refusal.remark)
        return RemotingCommand.response(request, ResponseCode.NO_PERMISSION, refusal.remark)
