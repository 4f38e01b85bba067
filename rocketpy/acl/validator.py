"""The plain ACL decision for one request (RocketMQ 4.x ``PlainPermissionManager.validate``).

In RocketMQ's order:

1. the remote address is in ``globalWhiteRemoteAddresses``: allowed, nothing else is checked;
2. no ``AccessKey`` ext field: refused; an access key with no account: refused;
3. the address is in the account's ``whiteRemoteAddress``: allowed (no signature or permission check);
4. the ``Signature`` must equal ``Base64(HmacSHA1(secretKey, content))`` (``signing.py``);
5. admin codes need ``admin: true``; every topic/group the code names needs its permission
   (listed in ``topicPerms``/``groupPerms``, else the account's default perm).

A refusal is the remark of the NO_PERMISSION answer (starting with ``ACCESS_DENIED_PREFIX``) with
what is missing; secrets and signatures never appear in it. RocketMQ 4.x checks no timestamp or
nonce, and neither does this (README "Access control").
"""

from __future__ import annotations

import hashlib
import hmac

from rocketpy.acl.permission import NAMES, allows
from rocketpy.acl.resources import ADMIN_CODES, request_needs
from rocketpy.acl.rules import Account, AclRules
from rocketpy.acl.signing import ACCESS_KEY, SIGNATURE, HmacKey
from rocketpy.acl.verdicts import Verdicts
from rocketpy.errors import ACCESS_DENIED_PREFIX
from rocketpy.protocol.codes import code_name
from rocketpy.remoting.command import RemotingCommand


class Refusal:
    """Why a request is refused: the remark, and the (account, resource) key its log line is kept by."""

    __slots__ = ("log_key", "remark")

    def __init__(self, remark: str, log_key: str) -> None:
        self.remark = ACCESS_DENIED_PREFIX + remark
        self.log_key = log_key


class AccessValidator:
    """Checks requests against one version of the rules; HMAC keys are built once per account, and
    permission verdicts are remembered per account and resources (``verdicts``)."""

    __slots__ = ("_keys", "_verdicts", "rules")

    def __init__(self, rules: AclRules) -> None:
        self.rules = rules
        self._keys = {ak: HmacKey(account.secret_key) for ak, account in rules.accounts.items()}
        self._verdicts = Verdicts()

    def check(self, ip: str, request: RemotingCommand) -> Refusal | None:
        """None when ``request`` from ``ip`` is allowed, else the ``Refusal``."""
        rules = self.rules
        if rules.global_white_list.matches(ip):
            return None
        ext = request.ext or {}
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            return Refusal(
                f"{code_name(request.code)} carries no AccessKey and {ip} is not in the global white list; "
                "sign requests with an account of the ACL file (SDK access_key/secret_key, mqadmin -a/-s, "
                "a broker's aclAccessKey/aclSecretKey)",
                "no-account",
            )
        access_key = str(access_key)
        account = rules.accounts.get(access_key)
        if account is None:
            return Refusal(f"no account {access_key!r} in the ACL file", f"unknown:{access_key}")
        if account.white_list.matches(ip):
            return None
        signature = ext.get(SIGNATURE)
        if signature is None or not self._keys[access_key].verify(ext, request.body, str(signature)):
            what = "carries no Signature" if signature is None else "has a wrong Signature"
            return Refusal(
                f"{code_name(request.code)} of account {access_key!r} {what} (check the secret key) "
                f"and {ip} is not in the account's white list",
                f"signature:{access_key}",
            )
        return self._verdicts.decided(access_key, request, None, self._permissions, account)

    def check_grpc(
        self,
        ip: str,
        access_key: str | None,
        signature: str | None,
        date_time: str,
        request: RemotingCommand | None,
    ) -> Refusal | None:
        """RocketMQ 5's gRPC check, in the same order and against the same accounts as ``check``.

        The ``authorization`` metadata's Signature is ``hex(HmacSHA1(secretKey, x-mq-date-time))``
        (any case); then the permissions of ``request``, the remoting command the call becomes
        (None: only the account and signature are checked, e.g. QueryRoute, Heartbeat, Telemetry).
        """
        rules = self.rules
        if rules.global_white_list.matches(ip):
            return None
        if not access_key:
            return Refusal(
                f"the call carries no authorization credential and {ip} is not in the global white list; "
                "give the client credentials of an account of the ACL file",
                "no-account",
            )
        account = rules.accounts.get(access_key)
        if account is None:
            return Refusal(f"no account {access_key!r} in the ACL file", f"unknown:{access_key}")
        if account.white_list.matches(ip):
            return None
        expected = hmac.new(account.secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()
        if signature is None or not hmac.compare_digest(expected, signature.lower()):
            what = "carries no Signature" if signature is None else "has a wrong Signature"
            return Refusal(
                f"the call of account {access_key!r} {what} (check the secret key) "
                f"and {ip} is not in the account's white list",
                f"signature:{access_key}",
            )
        return self._permissions(account, request) if request is not None else None

    @staticmethod
    def _permissions(account: Account, request: RemotingCommand) -> Refusal | None:
        if request.code in ADMIN_CODES and not account.admin:
            return Refusal(
                f"{code_name(request.code)} needs an admin account; account {account.access_key!r} "
                "is not admin (admin: true in the ACL file)",
                f"admin:{account.access_key}:{request.code}",
            )
        if account.admin and not account.explicit_perms:
            return None
        for kind, name, needed in request_needs(request):
            if kind == "topic":
                owned = account.topic_perms.get(name, account.default_topic_perm)
            else:
                owned = account.group_perms.get(name, account.default_group_perm)
            if not allows(needed, owned):
                return Refusal(
                    f"account {account.access_key!r} has no {NAMES.get(needed, needed)} permission on "
                    f"{kind} {name!r} (it has {NAMES.get(owned, owned)})",
                    f"perm:{account.access_key}:{kind}:{name}:{needed}",
                )
        return None
