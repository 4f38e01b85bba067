"""Plain ACL (RocketMQ's ACL 1.0): request signing, the ``plain_acl.yml`` model and the access check.

Shared by the SDK (``RequestSigner``) and the daemons (``AclGuard``):

* ``signing``: the signed content and HmacSHA1 signature (``AccessKey``, ``Signature`` ext fields);
* ``rules``: ``plain_acl.yml`` parsed into ``AclRules`` (``AclFileError`` names FILE:LINE);
* ``address``: white-list patterns; ``permission``: DENY/PUB/SUB; ``resources``: what each code needs;
* ``validator``: the decision for one request; ``verdicts``: permission verdicts remembered per
  account and resources; ``guard``: the daemons' pre-dispatch hook and reload.
"""

from rocketpy.acl.rules import Account, AclFileError, AclRules, load_acl_file, parse_acl_text
from rocketpy.acl.signing import ACCESS_KEY, SIGNATURE, HmacKey, RequestSigner, sign, signed_content

__all__ = [
    "ACCESS_KEY",
    "SIGNATURE",
    "Account",
    "AclFileError",
    "AclRules",
    "HmacKey",
    "RequestSigner",
    "load_acl_file",
    "parse_acl_text",
    "sign",
    "signed_content",
]
